"""Throughput of the record codec: BatchBuilder append+build and decoding.

Decoding is measured twice: ``iter_records`` (core ``Record`` tuples) and the
consumer's path, the fetcher turning a Fetch response's records into
``ConsumerRecord`` objects (``CompletedFetch.take``).

Run with ``python benchmarks/records.py``; prints records/s, median of 5 runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

# Runnable from a checkout without installing slog.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from slog.client.fetcher import CompletedFetch
from slog.client.subscription import PartitionState
from slog.client.types import TopicPartition
from slog.core import compression
from slog.core.records import BatchBuilder, iter_records

VALUE_SIZE = 100


def _median_rate(run: Callable[[], int], repeats: int) -> float:
    """Median records/s of ``repeats`` runs of ``run`` (which returns its record count)."""
    run()  # warm-up: the first pass pays for allocator growth and cold caches
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        count = run()
        rates.append(count / (time.perf_counter() - start))
    return statistics.median(rates)


def encode_run(codec: int, batches: int, per_batch: int, value: bytes) -> Callable[[], int]:
    def run() -> int:
        for _ in range(batches):
            builder = BatchBuilder(compression=codec)
            append = builder.append
            for _ in range(per_batch):
                append(None, value)
            builder.build()
        return batches * per_batch

    return run


def decode_run(data: bytes, count: int) -> Callable[[], int]:
    def run() -> int:
        n = 0
        for _ in iter_records(data):
            n += 1
        assert n == count
        return n

    return run


def fetch_run(data: bytes, count: int) -> Callable[[], int]:
    """The consumer's decode path: one CompletedFetch drained as poll() would."""
    tp = TopicPartition("bench", 0)

    def run() -> int:
        state = PartitionState()
        state.position = 0
        fetch = CompletedFetch(tp, 0, data)
        out: list[object] = []
        n = 0
        while not fetch.exhausted:
            n += fetch.take(out, 10_000, state)  # type: ignore[arg-type]
            out.clear()
        assert n == count and state.position == count
        return n

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=200_000, help="records per run")
    parser.add_argument("--per-batch", type=int, default=1000, help="records per batch")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    batches = max(1, args.records // args.per_batch)
    total = batches * args.per_batch
    value = bytes(range(VALUE_SIZE))  # compressible only across records, like real payloads

    print(f"{total} records of {VALUE_SIZE}-byte values, null keys, {args.per_batch} per batch")
    for codec in (compression.NONE, compression.LZ4):
        name = compression.codec_name(codec)
        rate = _median_rate(encode_run(codec, batches, args.per_batch, value), args.repeats)
        print(f"encode  {name:<6} append+build  {rate:>12,.0f} records/s")

        builder_data = []
        offset = 0
        for _ in range(batches):
            builder = BatchBuilder(compression=codec)
            for _ in range(args.per_batch):
                builder.append(None, value)
            builder_data.append(builder.build(offset))
            offset += args.per_batch
        data = b"".join(builder_data)
        rate = _median_rate(decode_run(data, total), args.repeats)
        print(f"decode  {name:<6} iter_records  {rate:>12,.0f} records/s")
        rate = _median_rate(fetch_run(data, total), args.repeats)
        print(f"decode  {name:<6} consumer      {rate:>12,.0f} records/s")


if __name__ == "__main__":
    main()
