"""Storage engine throughput: PartitionLog.append and .read against plain file writes.

For each record size (100 B, 1 KiB) and batch size (16 KiB, 256 KiB, 1 MiB) it
writes about ``--total-mib`` of identical batches three ways and keeps the
median of ``--runs`` runs:

* plain: ``os.write`` of the batch bytes to one file, one fsync at the end;
* append: ``PartitionLog.append`` (validation, offset assignment, indexing,
  segment rolls with their fsync), one ``flush()`` at the end;
* read: ``PartitionLog.read`` over the whole log in 1 MiB fetches, once only
  touching the views (the zero-copy path a socket writer takes) and once
  copying the bytes out.

Targets: append >= 0.5x plain for batches of 256 KiB and more; read >= 1 GB/s
from the page cache. Usage::

    python benchmarks/storage.py [--dir DIR] [--total-mib 256] [--runs 3] [--quick]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from slog.core.log import PartitionLog  # noqa: E402
from slog.core.log_config import LogConfig  # noqa: E402
from slog.core.records import BatchBuilder  # noqa: E402

KIB = 1024
MIB = 1024 * 1024
FETCH_BYTES = 1 * MIB  # Kafka's default max.partition.fetch.bytes
APPEND_TARGET = 0.5
READ_TARGET_BYTES_PER_S = 1e9


@dataclass
class Case:
    record_size: int
    batch_size: int

    @property
    def name(self) -> str:
        return f"{_fmt_size(self.record_size)} rec / {_fmt_size(self.batch_size)} batch"


@dataclass
class Result:
    case: Case
    records: int  # appended in total
    total_bytes: int
    plain_s: float
    append_s: float
    read_view_s: float
    read_copy_s: float

    @property
    def ratio(self) -> float:
        return self.plain_s / self.append_s


def _fmt_size(n: int) -> str:
    if n >= MIB:
        return f"{n // MIB} MiB"
    if n >= KIB:
        return f"{n // KIB} KiB"
    return f"{n} B"


def make_batch(case: Case) -> tuple[bytes, int]:
    """One uncompressed batch of about ``batch_size`` bytes of random-value records."""
    builder = BatchBuilder()
    value = os.urandom(case.record_size)
    timestamp = int(time.time() * 1000)
    while builder.size_estimate() + case.record_size + 16 <= case.batch_size:
        builder.append(None, value, timestamp=timestamp)
    return builder.build(), builder.record_count


def run_plain(directory: Path, batch: bytes, count: int) -> float:
    path = directory / "plain.bin"
    start = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for _ in range(count):
            os.write(fd, batch)
        os.fsync(fd)
    finally:
        os.close(fd)
    elapsed = time.perf_counter() - start
    path.unlink()
    return elapsed


def run_append(directory: Path, batch: bytes, count: int) -> tuple[float, PartitionLog]:
    log_dir = directory / "bench-0"
    start = time.perf_counter()
    log = PartitionLog.open(log_dir, LogConfig(max_message_bytes=2 * MIB))
    append = log.append
    for _ in range(count):
        append(batch)
    log.flush()
    return time.perf_counter() - start, log


def run_read(log: PartitionLog, consume: Callable[[memoryview], int]) -> tuple[float, int]:
    start = time.perf_counter()
    offset, end, total = log.log_start_offset, log.log_end_offset, 0
    read = log.read
    while offset < end:
        fetched = read(offset, FETCH_BYTES)
        for view in fetched.views:
            total += consume(view)
        offset = fetched.next_offset
    return time.perf_counter() - start, total


def touch(view: memoryview) -> int:
    return len(view)


def copy_out(view: memoryview) -> int:
    return len(view.tobytes())


def run_case(case: Case, root: Path, total_bytes: int, runs: int) -> Result:
    batch, records = make_batch(case)
    count = max(1, total_bytes // len(batch))
    plain, append, read_view, read_copy = [], [], [], []
    for _ in range(runs):
        directory = Path(tempfile.mkdtemp(dir=root))
        try:
            plain.append(run_plain(directory, batch, count))
            elapsed, log = run_append(directory, batch, count)
            append.append(elapsed)
            for times, consume in ((read_view, touch), (read_copy, copy_out)):
                elapsed, seen = run_read(log, consume)
                assert seen == len(batch) * count, (seen, len(batch) * count)
                times.append(elapsed)
            log.close()
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    return Result(
        case,
        records * count,
        len(batch) * count,
        statistics.median(plain),
        statistics.median(append),
        statistics.median(read_view),
        statistics.median(read_copy),
    )


def print_table(results: list[Result], runs: int) -> bool:
    header = (
        f"{'case':<22} {'plain MB/s':>10} {'append MB/s':>11} {'append rec/s':>13} "
        f"{'ratio':>6} {'read MB/s':>10} {'read+copy MB/s':>14}"
    )
    print(f"\nmedian of {runs} run(s); MB = 10^6 bytes; reads from the page cache")
    print(header)
    print("-" * len(header))
    ok = True
    for r in results:
        mb = r.total_bytes / 1e6
        print(
            f"{r.case.name:<22} {mb / r.plain_s:>10.0f} {mb / r.append_s:>11.0f} "
            f"{r.records / r.append_s:>13,.0f} {r.ratio:>6.2f} {mb / r.read_view_s:>10.0f} "
            f"{mb / r.read_copy_s:>14.0f}"
        )
        if r.case.batch_size >= 256 * KIB and r.ratio < APPEND_TARGET:
            ok = False
        if r.total_bytes / r.read_view_s < READ_TARGET_BYTES_PER_S:
            ok = False
    print(
        f"\ntargets: append >= {APPEND_TARGET}x plain for batches >= 256 KiB, "
        f"read >= {READ_TARGET_BYTES_PER_S / 1e9:.0f} GB/s: {'PASS' if ok else 'FAIL'}"
    )
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", type=Path, default=REPO, help="where temp dirs go (same disk)")
    parser.add_argument("--total-mib", type=int, default=256, help="data written per case")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="32 MiB per case, one run")
    args = parser.parse_args(argv)
    total = (32 if args.quick else args.total_mib) * MIB
    runs = 1 if args.quick else args.runs
    root = Path(tempfile.mkdtemp(prefix=".slog-bench-", dir=args.dir))
    print(f"storage benchmark in {root}: {total // MIB} MiB per case, {runs} run(s)")
    results = []
    try:
        for record_size in (100, KIB):
            for batch_size in (16 * KIB, 256 * KIB, MIB):
                case = Case(record_size, batch_size)
                results.append(run_case(case, root, total, runs))
                r = results[-1]
                print(f"  {case.name}: append {r.ratio:.2f}x plain", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0 if print_table(results, runs) else 1


if __name__ == "__main__":
    sys.exit(main())
