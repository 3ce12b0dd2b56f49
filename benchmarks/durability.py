"""Durability benchmark: what durable acknowledgements (``write.caching=false``) cost.

Three brokers on this machine sharing one temp data dir (``slog cluster up``),
default settings. In the same run, on the same disk:

* **produce**: librdkafka (confluent-kafka) producing 100 B and 1 KiB records at
  acks=all into topics of 3 partitions, RF 3, min.insync.replicas 2, one with
  ``write.caching=false`` (the default: acknowledged once every ISR replica
  fsynced) and one with ``write.caching=true`` (Kafka's behaviour). Producer
  settings as ``benchmarks/cluster.py`` (linger 5 ms, 1 MB batches). Two rates:
  as fast as the producer can (records/s, MB/s), and paced at 1,000 records/s.
  Latency is ``produce()`` to the delivery report, p50 and p99. During each
  run the brokers' group-commit counters (SIGUSR1: ``fsyncs``,
  ``fsynced_records``, summed over the 3 brokers) give fsyncs per second and
  records per fsync. Target: write.caching=false >= 0.5x write.caching=true in
  records/s at 1 KiB, maximum rate.
* **plain disk**: ``dd oflag=dsync`` (1 KiB writes, each synced) and
  ``fio --fdatasync=1`` (1 KiB sequential writes, fdatasync after each) in the
  same temp dir: what one synchronous writer gets from this disk, the ceiling
  for fsyncs per second without group commit. fio is skipped, with a note,
  when it is not installed.

The whole benchmark stops after ``--timeout`` seconds; every broker it started
is stopped and the temp dir removed, also on errors and Ctrl-C.

Usage::

    python benchmarks/durability.py [--quick] [--records N] [--paced-s S] [--timeout S]
        [--dir PARENT] [--base-port PORT]
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_support as bench  # noqa: E402
import cluster as bench_cluster  # noqa: E402
from cluster import BROKERS, PRODUCER_CONFIG, Cluster, percentile, running  # noqa: E402

SIZES = (100, 1024)
PARTITIONS = 3
PACED_RATE = 1000  # records/s
TARGET_RATIO = 0.5  # write.caching=false vs true, 1 KiB, maximum rate
DISK_WRITES = 2000  # dd and fio: 1 KiB synced writes


@dataclass
class Run:
    caching: bool
    size: int
    paced: bool
    records: int = 0
    seconds: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    fsyncs: int = 0
    fsynced_records: int = 0

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0

    def describe(self) -> str:
        lat = self.latencies_ms
        p50 = statistics.median(lat) if lat else float("nan")
        p99 = percentile(lat, 0.99) if lat else float("nan")
        per_fsync = self.fsynced_records / self.fsyncs if self.fsyncs else 0.0
        fsyncs_s = self.fsyncs / self.seconds if self.seconds else 0.0
        return (f"write.caching={str(self.caching).lower():<5} {self.size:>5} B "
                f"{'1000/s' if self.paced else 'max':>6}: {self.rate:>9,.0f} rec/s "
                f"({self.rate * self.size / 1e6:6.1f} MB/s)  p50 {p50:7.1f} ms  "
                f"p99 {p99:7.1f} ms  {fsyncs_s:6.0f} fsyncs/s  "
                f"{per_fsync:7.1f} records/fsync")


@dataclass
class Results:
    runs: list[Run] = field(default_factory=list)
    dd_writes_s: float | None = None
    fio_fdatasyncs_s: float | None = None
    notes: list[str] = field(default_factory=list)


# ------------------------------------------------------------------ broker counters


def group_commits(cluster: Cluster) -> tuple[int, int]:
    """(fsyncs, fsynced records) summed over the brokers, from their SIGUSR1 stats."""
    stats = cluster.counters()
    return stats.get("fsyncs", 0), stats.get("fsynced_records", 0)


# ------------------------------------------------------------------ produce


def produce(cluster: Cluster, topic: str, run: Run, count: int, deadline: bench.Deadline) -> None:
    from confluent_kafka import Producer

    producer = Producer({**PRODUCER_CONFIG, "bootstrap.servers": cluster.bootstrap,
                         "acks": "all"})
    value = os.urandom(run.size)
    latencies = run.latencies_ms
    errors: list[str] = []
    lock = threading.Lock()

    def delivered(sent_at: float) -> Callable[[Any, Any], None]:
        def report(error: Any, _message: Any) -> None:
            if error is not None:
                errors.append(str(error))
            else:
                with lock:
                    latencies.append((time.perf_counter() - sent_at) * 1000)
        return report

    fsyncs0, records0 = group_commits(cluster)
    started = time.perf_counter()
    for n in range(count):
        if run.paced:
            due = started + n / PACED_RATE
            while (wait := due - time.perf_counter()) > 0:
                producer.poll(min(wait, 0.01))
        while True:
            try:
                producer.produce(topic, value, partition=n % PARTITIONS,
                                 on_delivery=delivered(time.perf_counter()))
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
        if n % 10_000 == 0:
            deadline.check()
    left = producer.flush(deadline.left())
    run.seconds = time.perf_counter() - started
    fsyncs1, records1 = group_commits(cluster)
    if left or errors:
        raise RuntimeError(f"{topic}: {left} undelivered, errors: {errors[:3]}")
    run.records = count
    run.fsyncs, run.fsynced_records = fsyncs1 - fsyncs0, records1 - records0


def measure_produce(cluster: Cluster, records: int, paced_s: float, results: Results,
                    deadline: bench.Deadline) -> None:
    from slog.client import Admin, NewTopic

    cases = [(caching, size, paced) for size in SIZES for paced in (False, True)
             for caching in (False, True)]
    for caching, size, paced in cases:
        mode = "cached" if caching else "synced"
        topic = f"durability-{mode}-{size}-{'paced' if paced else 'max'}"
        with Admin(cluster.bootstrap) as admin:
            admin.create_topics([NewTopic(topic, PARTITIONS, BROKERS, {
                "min.insync.replicas": "2", "write.caching": str(caching).lower()})])
        bench.wait_until(lambda t=topic: cluster.in_sync(t), deadline, f"topic {topic}")
        run = Run(caching, size, paced)
        count = int(paced_s * PACED_RATE) if paced else records
        produce(cluster, topic, run, count, deadline)
        results.runs.append(run)
        print(f"  {run.describe()}", flush=True)
        with Admin(cluster.bootstrap) as admin:  # its dirty pages must not slow the next
            admin.delete_topics([topic])


# ------------------------------------------------------------------ plain disk


def measure_disk(directory: Path, results: Results, deadline: bench.Deadline) -> None:
    target = directory / "dd.bin"
    started = time.perf_counter()
    subprocess.run(["dd", "if=/dev/zero", f"of={target}", "bs=1k", f"count={DISK_WRITES}",
                    "oflag=dsync"], capture_output=True, check=True, timeout=deadline.left())
    results.dd_writes_s = DISK_WRITES / (time.perf_counter() - started)
    target.unlink(missing_ok=True)
    print(f"  dd oflag=dsync, 1 KiB writes: {results.dd_writes_s:,.0f} writes/s", flush=True)
    if shutil.which("fio") is None:
        results.notes.append("fio is not installed (apt-get install fio): skipped")
        print(f"  {results.notes[-1]}", flush=True)
        return
    done = subprocess.run(
        ["fio", "--name=fdatasync", f"--filename={directory / 'fio.bin'}", "--rw=write",
         "--bs=1k", f"--size={DISK_WRITES}k", "--fdatasync=1", "--ioengine=sync",
         "--output-format=json"], capture_output=True, text=True, check=True,
        timeout=deadline.left())
    (directory / "fio.bin").unlink(missing_ok=True)
    job = json.loads(done.stdout)["jobs"][0]
    syncs = job.get("sync", {}).get("total_ios", 0) or job["write"]["total_ios"]
    seconds = job["job_runtime"] / 1000 if job.get("job_runtime") else job["elapsed"]
    results.fio_fdatasyncs_s = syncs / seconds if seconds else None
    print(f"  fio --fdatasync=1, 1 KiB writes: {results.fio_fdatasyncs_s or 0:,.0f} "
          "fdatasyncs/s", flush=True)


# ------------------------------------------------------------------ report


def report(results: Results) -> bool:
    print("\nresults")
    for run in results.runs:
        print(f"  {run.describe()}")
    if results.dd_writes_s is not None:
        print(f"  dd oflag=dsync: {results.dd_writes_s:,.0f} synced 1 KiB writes/s")
    if results.fio_fdatasyncs_s is not None:
        print(f"  fio --fdatasync=1: {results.fio_fdatasyncs_s:,.0f} fdatasyncs/s")
    for note in results.notes:
        print(f"  note: {note}")
    rates = {(r.caching, r.size): r.rate for r in results.runs if not r.paced}
    if (False, 1024) not in rates or (True, 1024) not in rates:
        return False
    ratio = rates[(False, 1024)] / rates[(True, 1024)]
    ok = ratio >= TARGET_RATIO
    print(f"  1 KiB, maximum rate: write.caching=false is {ratio:.2f}x write.caching=true "
          f"(target >= {TARGET_RATIO}x): {'ok' if ok else 'MISSED'}")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = bench.common_parser(__doc__, "a tenth of the records, 3 s paced runs", 1200, 300)
    parser.add_argument("--records", type=int, default=None,
                        help="records per maximum-rate run (default 200,000; quick 20,000)")
    parser.add_argument("--paced-s", type=float, default=None,
                        help="seconds per 1,000 records/s run (default 15; quick 3)")
    bench_cluster.add_base_port_option(parser)
    args = parser.parse_args(argv)
    records = args.records or (20_000 if args.quick else 200_000)
    paced_s = args.paced_s or (3.0 if args.quick else 15.0)
    deadline, root = bench.start_run(args, "slog-durability-bench-")
    results = Results()
    print(f"durability benchmark: {BROKERS} brokers, {records:,} records per maximum-rate "
          f"run, {paced_s:g} s at {PACED_RATE}/s; temp dir {root}", flush=True)

    def measure() -> None:
        measure_disk(root, results, deadline)
        cluster = bench_cluster.cluster_in(root / "cluster", args.base_port)
        with contextlib.ExitStack() as stack:
            stack.enter_context(running(cluster))
            cluster.up(deadline)
            measure_produce(cluster, records, paced_s, results, deadline)

    return bench.measure_and_report(measure, lambda: report(results), root,
                                    stops=(bench.BenchTimeout, RuntimeError))


if __name__ == "__main__":
    sys.exit(main())
