"""Plant huge declared lengths at every offset of valid requests; run under an address-space cap.

Run as a script (tests/fuzz/test_untrusted_lengths.py starts it): it caps its
own address space at what it already uses plus ``--headroom-mb`` before the
sweep, so any allocation sized by an untrusted length (a Vec::with_capacity in
kio's native reader, a bytearray(n) in Python) fails, and a failed native
allocation aborts the process. A clean exit with the printed counts means
every hostile length was checked against the frame before anything was
allocated for it.

``--raw`` skips slog's guard and calls kio's reader directly: the control that
shows the cap catches what the guard prevents (that run must die).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import struct
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kio.serial import entity_reader

from slog.core.batch import compute_crc
from slog.core.errors import CorruptRecordError
from slog.core.records import BatchBuilder, decode_records
from slog.protocol.apis import request_class
from slog.protocol.codec import decode_request, encode_request
from slog.protocol.errors import ProtocolError
from slog.protocol.headers import parse_request_header
from tests.unit.test_protocol_support import ALL_CASES, random_entity

# int32 lengths and compact (uvarint) lengths: 2**31 - 1, 2**24 (in range of a
# Python allocation that would succeed without the cap), and a little over.
HUGE = [b"\x7f\xff\xff\xff", b"\x01\x00\x00\x00", b"\x00\x10\x00\x00",
        b"\xff\xff\xff\xff\x0f", b"\x81\x80\x80\x08", b"\x80\x80\x80\x01"]


def _vm_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize")


def _items(value: Any) -> int:
    """Total elements of every array in a decoded entity."""
    if isinstance(value, tuple):
        return len(value) + sum(_items(v) for v in value)
    fields = getattr(value, "__dataclass_fields__", None)
    return sum(_items(getattr(value, name)) for name in fields) if fields else 0


def sweep_requests(raw: bool, bodies_per_case: int) -> Counter[str]:
    rng = random.Random(7)
    counts: Counter[str] = Counter()
    for api_key, version in ALL_CASES:  # every API the codec decodes, a superset of the broker's
        cls = request_class(api_key, version)
        read = entity_reader(cls)
        for _ in range(bodies_per_case):
            frame = encode_request(random_entity(cls, rng, full=True), correlation_id=1,
                                   client_id="sweep")[4:]
            header, offset = parse_request_header(frame)
            for pos in range(offset, len(frame)):
                for chunk in HUGE:
                    bad = frame[:pos] + chunk + frame[pos + len(chunk):]
                    counts["cases"] += 1
                    try:
                        if raw:
                            read(bad, offset)
                            continue
                        decoded = decode_request(header, bad, offset)
                    except ProtocolError:
                        counts["refused"] += 1
                        continue
                    except Exception as exc:
                        if raw:
                            continue
                        raise AssertionError(f"{api_key} v{version} @ {pos}: {exc!r}") from exc
                    # What did decode holds no more elements than the frame has bytes.
                    assert _items(decoded) <= len(bad), (api_key, version, pos, chunk)
                    counts["decoded"] += 1
    return counts


def sweep_batches() -> Counter[str]:
    builder = BatchBuilder()
    builder.append(b"key", b"value", (("h", b"v"),), 1_700_000_000_000)
    builder.append(None, b"v2", (), 1_700_000_000_001)
    batch = builder.build()
    counts: Counter[str] = Counter()
    for pos in range(len(batch)):
        for chunk in HUGE:
            bad = bytearray(batch[:pos] + chunk + batch[pos + len(chunk):])
            if pos >= 21:  # inside the CRC'd part: fix the CRC so the records get parsed
                struct.pack_into(">I", bad, 17, compute_crc(bad, 0, len(bad)))
            counts["batch cases"] += 1
            try:
                decode_records(bytes(bad))
            except CorruptRecordError:
                counts["batch refused"] += 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--headroom-mb", type=int, default=256)
    parser.add_argument("--bodies", type=int, default=2)
    parser.add_argument("--raw", action="store_true")
    args = parser.parse_args()
    limit = _vm_bytes() + args.headroom_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    counts = sweep_requests(args.raw, args.bodies)
    if not args.raw:
        counts.update(sweep_batches())
    print(json.dumps(dict(counts)))


if __name__ == "__main__":
    main()
