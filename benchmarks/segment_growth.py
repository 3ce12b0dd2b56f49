"""Segment growth: what a partition's first appends cost, by first allocation size.

Without ``log.preallocate`` a segment's file grows in ``posix_fallocate``d
steps (so a full disk fails an append cleanly), doubling from a first
allocation; each growth is an fallocate and a new read-only map. A producer
writing to many partitions at once makes every one of them take its first
steps. This opens ``--logs`` fresh logs per variant, appends ``--appends``
batches of ``--batch-kib`` to each (round robin, as librdkafka's one-partition
requests arrive) and reports the process CPU per append, the median of
``--runs`` runs, for first allocations of 64 KiB, 256 KiB (slog's) and 1 MiB,
in one run, on each ``--dir`` given (e.g. a disk and a tmpfs, where an
allocation is zeroed memory). Usage::

    python benchmarks/segment_growth.py [--dir DIR ...] [--logs 1000] [--appends 3]
        [--batch-kib 55] [--runs 3]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import slog.core.segment as segment_module  # noqa: E402
from slog.core.log import PartitionLog  # noqa: E402
from slog.core.log_config import LogConfig  # noqa: E402
from slog.core.records import build_batch  # noqa: E402

KIB = 1024
FIRST_ALLOCATIONS = (64 * KIB, 256 * KIB, 1024 * KIB)
RECORD_BYTES = 100


def cpu_per_append(parent: Path, first: int, logs: int, appends: int, batch: bytes) -> float:
    """Microseconds of process CPU per append into ``logs`` new logs."""
    segment_module._FIRST_ALLOCATION = first  # the variant under test
    root = Path(tempfile.mkdtemp(prefix="slog-growth-", dir=parent))
    try:
        opened = [PartitionLog.open(root / f"t-{i}", LogConfig(write_caching=True))
                  for i in range(logs)]
        started = time.process_time()
        for _ in range(appends):
            for plog in opened:
                plog.append(batch)
        spent = time.process_time() - started
        for plog in opened:
            plog.close()
        return spent * 1e6 / (logs * appends)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", type=Path, action="append",
                        help="parent of the temp dirs (repeatable; default: the temp dir)")
    parser.add_argument("--logs", type=int, default=1000)
    parser.add_argument("--appends", type=int, default=3, help="appends per log")
    parser.add_argument("--batch-kib", type=int, default=55)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    if args.logs < 1 or args.appends < 1 or args.batch_kib < 1 or args.runs < 1:
        parser.error("--logs, --appends, --batch-kib and --runs take positive integers")
    parents = args.dir or [Path(tempfile.gettempdir())]
    records = max(1, args.batch_kib * KIB // (RECORD_BYTES + 10))
    batch = build_batch([(None, b"x" * RECORD_BYTES, (), None)] * records)
    shipped = segment_module._FIRST_ALLOCATION
    print(f"{args.logs} logs x {args.appends} appends of {len(batch):,} B; "
          f"CPU us per append, median of {args.runs} (variants alternate within each run)")
    try:
        for parent in parents:
            spent: dict[int, list[float]] = {first: [] for first in FIRST_ALLOCATIONS}
            for _ in range(args.runs):
                for first in FIRST_ALLOCATIONS:
                    spent[first].append(cpu_per_append(parent, first, args.logs,
                                                       args.appends, batch))
            medians = {first: statistics.median(v) for first, v in spent.items()}
            line = "  ".join(f"{first // KIB:5d} KiB {medians[first]:6.1f}"
                             + (" (slog)" if first == shipped else "")
                             for first in FIRST_ALLOCATIONS)
            ratios = "  ".join(f"slog / {first // KIB} KiB {medians[shipped] / medians[first]:.2f}x"
                               for first in FIRST_ALLOCATIONS if first != shipped)
            print(f"{parent!s:20s} {line}   {ratios}")
    finally:
        segment_module._FIRST_ALLOCATION = shipped
    return 0


if __name__ == "__main__":
    sys.exit(main())
