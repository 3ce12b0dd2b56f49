"""Cluster benchmark: `slog cluster up`, leader failover time, and the cost of replication.

Three brokers on this machine sharing one temp data dir, default settings.

* **cluster up**: the wall time of ``slog cluster up --brokers 3`` in a fresh
  data dir, from the command's start until it exits 0 (it waits until a
  controller is elected and every broker is registered), then ``slog cluster
  down``. Median of 3 (``--quick``: 1). Target < 3 s. The last cluster
  started this way stays up for the two measurements below.
* **failover**: a topic with one partition, RF=3, min.insync.replicas=2. A
  warm slog ``Producer`` (acks=all, idempotent, linger 0, retry backoff 5 ms)
  is connected to the leader. ``kill -9`` the leader, then send one record
  and wait for its acknowledgement: the figure is the time from the kill to
  the acknowledgement (``time.monotonic``), which includes the controller
  seeing the dead lock, electing, the new leader reading the metadata, the
  producer's reconnects and metadata refreshes, and the commit of the record
  on the two survivors. Also shown: the election alone (the ``ts`` of the
  metadata record that names the new leader, minus the wall time of the
  kill). The killed broker is restarted and the test waits until it is back
  in the ISR before the next kill. 20 kills (``--quick``: 5); median, p95
  and max. Kills that hit the controller too (so a new controller must take
  over first) are counted separately as well. Target: median < 1 s.
* **replication cost**: librdkafka's producer (``kcat -P -l FILE``, 1 KiB
  records, the producer settings of ``benchmarks/broker.py``) into a topic
  with RF=1 and acks=1, and into one with RF=3 and acks=all
  (min.insync.replicas=2), 3 partitions each so every broker leads one. The
  two alternate (3 times each, ``--quick`` once, after one untimed RF=3
  warm-up run) and the figure is the ratio
  of the median records/s (each back-to-back pair's ratio is shown too).
  Every record is checked to be there (sum of the high watermarks), then the
  topic is deleted, so that its dirty pages do not slow the next
  measurements. Target: RF=3 acks=all >= 0.5x RF=1 acks=1.

The whole benchmark stops after ``--timeout`` seconds. Every broker it
started (and only those: the pids in its own temp data dir) is stopped and
the temp dir removed, also on errors and Ctrl-C.

Usage::

    python benchmarks/cluster.py [--quick] [--timeout S] [--dir PARENT]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_support import (  # noqa: E402
    Deadline,
    common_parser,
    measure_and_report,
    start_run,
    wait_until,
)

from slog.broker.daemon import is_running, start_daemon, stop_daemon  # noqa: E402
from slog.core.datadir import known_broker_ids, read_broker_info  # noqa: E402
from slog.core.metadata import MetadataImage  # noqa: E402
from slog.core.metadata_log import MetadataLogReader  # noqa: E402
from slog.core.names import DataDirLayout  # noqa: E402
from tests.brokers import free_port_range  # noqa: E402

BROKERS = 3
UP_TARGET_S = 3.0
FAILOVER_TARGET_S = 1.0
REPLICATION_TARGET = 0.5
VALUE_SIZE = 1024
PRODUCER_CONFIG = {  # as benchmarks/broker.py, with acks set per topic
    "linger.ms": "5",
    "batch.size": "1000000",
    "compression.type": "none",
    "queue.buffering.max.messages": "2000000",
    "queue.buffering.max.kbytes": "2097151",
}






def cli(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "slog.cli", *args], capture_output=True,
                          text=True, timeout=timeout, check=False)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


# ------------------------------------------------------------------ the cluster


class Cluster:
    """Brokers 1..3 on one data dir, started by ``slog cluster up``."""

    def __init__(self, root: Path):
        self.root = root
        self.layout = DataDirLayout(root)
        self.base_port = free_port_range(BROKERS)
        self._reader = MetadataLogReader(self.layout.metadata_dir)
        self._image = MetadataImage()
        self.records: list[dict] = []  # every metadata record seen, in order
        self.settings: dict[str, str] = {}  # broker settings (``cluster up -c``)

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.base_port + b - 1}" for b in range(1, BROKERS + 1))

    def up(self, deadline: Deadline) -> float:
        started = time.monotonic()
        done = cli("cluster", "up", "--brokers", str(BROKERS), "--data-dir", str(self.root),
                   "--base-port", str(self.base_port), "--timeout", "30",
                   *(f"--config={key}={value}" for key, value in self.settings.items()),
                   timeout=min(60.0, deadline.left()))
        elapsed = time.monotonic() - started
        if done.returncode != 0:
            raise RuntimeError(f"slog cluster up failed:\n{done.stdout}\n{done.stderr}")
        return elapsed

    def down(self) -> None:
        """Stop every broker of this data dir: SIGTERM, then SIGKILL for stragglers."""
        for broker_id in known_broker_ids(self.layout):
            with contextlib.suppress(Exception):
                stop_daemon(broker_id, self.root, timeout_s=20)
            info = read_broker_info(self.layout, broker_id)
            if info is not None and is_running(self.layout, broker_id):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(info.pid, signal.SIGKILL)

    def image(self) -> MetadataImage:
        for offset, record in self._reader.poll():
            self._image.apply(record, offset)
            self.records.append(record)
        return self._image

    def pid(self, broker_id: int) -> int:
        info = read_broker_info(self.layout, broker_id)
        if info is None:
            raise RuntimeError(f"broker {broker_id} has no broker.json")
        return info.pid

    def kill(self, broker_id: int) -> float:
        """kill -9; returns the monotonic time of the kill."""
        pid = self.pid(broker_id)
        at = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        return at

    def restart(self, broker_id: int, deadline: Deadline) -> None:
        wait_until(lambda: not is_running(self.layout, broker_id), deadline, "the lock release")
        start_daemon(broker_id, self.root, f"127.0.0.1:{self.base_port + broker_id - 1}",
                     timeout_s=min(30.0, deadline.left()))

    def counters(self) -> dict[str, int]:
        """The brokers' SIGUSR1 stats (requests per API, fsyncs, ...), summed."""
        total: dict[str, int] = {}
        for broker_id in range(1, BROKERS + 1):
            log = self.layout.broker(broker_id).log
            before = log.read_text(errors="replace").count(" stats: ")
            os.kill(self.pid(broker_id), signal.SIGUSR1)
            end = time.monotonic() + 10
            while log.read_text(errors="replace").count(" stats: ") <= before:
                if time.monotonic() > end:
                    raise RuntimeError(f"broker {broker_id} did not log its stats")
                time.sleep(0.01)
            line = log.read_text(errors="replace").rsplit(" stats: ", 1)[1].splitlines()[0]
            for key, value in re.findall(r"(\w+)=(\d+)", line):
                total[key] = total.get(key, 0) + int(value)
        return total

    def in_sync(self, topic: str) -> bool:
        image = self.image()
        t = image.topics.get(topic)
        live = {b.broker_id for b in image.live_brokers()}
        return t is not None and all(
            p.leader > 0 and set(p.isr) == set(p.replicas) and set(p.replicas) <= live
            for p in t.partitions.values())


def add_base_port_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base-port", type=int, default=None,
                        help="first of the brokers' 3 ports (default: any free ones)")


def cluster_in(root: Path, base_port: int | None) -> Cluster:
    """A :class:`Cluster` in ``root`` on ``--base-port`` when given, else on free ports."""
    cluster = Cluster(root)
    if base_port is not None:
        cluster.base_port = base_port
    return cluster


@contextlib.contextmanager
def running(cluster: Cluster) -> Iterator[Cluster]:
    try:
        yield cluster
    finally:
        cluster.down()


# ------------------------------------------------------------------ measurements


@dataclass
class Kill:
    seconds: float  # kill -9 → the probe record acknowledged
    election_s: float  # kill -9 → the metadata record naming the new leader
    controller: bool  # the killed leader was the controller too


@dataclass
class Results:
    up_s: list[float] = field(default_factory=list)
    kills: list[Kill] = field(default_factory=list)
    rf1_rate: list[float] = field(default_factory=list)
    rf3_rate: list[float] = field(default_factory=list)


def measure_failover(cluster: Cluster, kills: int, results: Results, deadline: Deadline) -> None:
    from slog.client import Admin, NewTopic, Producer

    topic = "failover"
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 3, {"min.insync.replicas": "2"})])
    wait_until(lambda: cluster.in_sync(topic), deadline, "the failover topic")
    producer = Producer(cluster.bootstrap, acks="all", linger_ms=0, retry_backoff_ms=5,
                        request_timeout_ms=2_000, delivery_timeout_ms=30_000)
    try:
        producer.send(topic, b"warm-up", partition=0).result(timeout=30)
        for n in range(kills):
            image = cluster.image()
            state = image.partition(topic, 0)
            assert state is not None
            victim, epoch = state.leader, state.leader_epoch
            was_controller = victim == image.controller_id
            seen = len(cluster.records)
            wall = time.time()
            killed_at = cluster.kill(victim)
            producer.send(topic, f"probe-{n}".encode(), partition=0).result(
                timeout=min(30.0, deadline.left()))
            acked_s = time.monotonic() - killed_at
            cluster.image()
            elected = next((r for r in cluster.records[seen:] if r["type"] == "partition"
                            and r["topic"] == topic and r["leader_epoch"] > epoch
                            and r["leader"] not in (victim, -1)), None)
            election_s = (elected["ts"] / 1000 - wall) if elected else float("nan")
            results.kills.append(Kill(acked_s, election_s, was_controller))
            print(f"  kill {n + 1:>2}: broker {victim}{' (controller)' if was_controller else ''}"
                  f" -> acked after {acked_s * 1000:6.0f} ms"
                  f" (elected after {election_s * 1000:5.0f} ms)", flush=True)
            cluster.restart(victim, deadline)
            wait_until(lambda: cluster.in_sync(topic), deadline, "the ISR to be full again")
    finally:
        producer.close(5)


def write_values(path: Path, count: int) -> None:
    line = (b"0123456789abcdef" * (VALUE_SIZE // 16 + 1))[:VALUE_SIZE] + b"\n"
    chunk = line * 1024
    with open(path, "wb") as f:
        for _ in range(count // 1024):
            f.write(chunk)
        f.write(line * (count % 1024))


def stored(cluster: Cluster, topic: str, partitions: int) -> int:
    from slog.client import Admin, TopicPartition

    with Admin(cluster.bootstrap) as admin:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        return sum(r.offset for r in admin.list_offsets(dict.fromkeys(tps, "latest")).values())


def measure_replication(cluster: Cluster, records: int, reps: int, values: Path,
                        results: Results, deadline: Deadline) -> None:
    from slog.client import Admin, NewTopic

    partitions = 3
    cases = [("warm-up", 3, "all", [])]  # untimed: the first produce of a run is slower
    for rep in range(reps):
        cases += [(f"rf1-{rep}", 1, "1", results.rf1_rate),
                  (f"rf3-{rep}", 3, "all", results.rf3_rate)]
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions, rf, {"min.insync.replicas":
                                                              "2" if rf == 3 else "1"})
                             for name, rf, _, _ in cases])
    for name, _, _, _ in cases:
        wait_until(lambda n=name: cluster.in_sync(n), deadline, f"topic {name}")
    for name, rf, acks, rates in cases:
        config = {**PRODUCER_CONFIG, "acks": acks}
        cmd = ["kcat", "-P", "-b", cluster.bootstrap, "-t", name, "-l", str(values),
               *[a for k, v in config.items() for a in ("-X", f"{k}={v}")]]
        started = time.perf_counter()
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              timeout=deadline.left(), check=False)
        elapsed = time.perf_counter() - started
        if done.returncode != 0:
            raise RuntimeError(f"kcat -P failed: {done.stderr.decode(errors='replace')[-2000:]}")
        count = stored(cluster, name, partitions)
        if count != records:
            raise RuntimeError(f"{name}: {count} records stored, expected {records}")
        rates.append(records / elapsed)
        if name != "warm-up":
            print(f"  RF={rf} acks={acks:<3} {records:,} x 1 KiB: {records / elapsed:>9,.0f} "
                  f"rec/s ({records * VALUE_SIZE / elapsed / 1e6:6.1f} MB/s)", flush=True)
        # Deleted before the next topic: its dirty pages are dropped instead of
        # piling up into a writeback that would slow every later measurement.
        with Admin(cluster.bootstrap) as admin:
            admin.delete_topics([name])
        wait_until(lambda n=name: not any(any(cluster.layout.logs_dir(b).glob(f"{n}-*"))
                                          for b in range(1, BROKERS + 1)),
                   deadline, f"{name}'s files to be deleted")


# ------------------------------------------------------------------ report


def report(results: Results) -> bool:
    ok = True
    print("\nresults")
    if results.up_s:
        up = statistics.median(results.up_s)
        passed = up < UP_TARGET_S
        ok &= passed
        print(f"  slog cluster up (3 brokers, to healthy): median {up:.2f} s of "
              f"{len(results.up_s)} ({', '.join(f'{s:.2f}' for s in results.up_s)})"
              f"   target < {UP_TARGET_S:g} s: {'PASS' if passed else 'FAIL'}")
    if results.kills:
        times = [k.seconds for k in results.kills]
        elections = [k.election_s for k in results.kills if k.election_s == k.election_s]
        median = statistics.median(times)
        passed = median < FAILOVER_TARGET_S
        ok &= passed
        print(f"  failover, kill -9 -> acks=all ack: median {median * 1000:.0f} ms, "
              f"p95 {percentile(times, 0.95) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms "
              f"over {len(times)} kills   target median < {FAILOVER_TARGET_S:g} s: "
              f"{'PASS' if passed else 'FAIL'}")
        if elections:
            print(f"    of which the election (metadata record): median "
                  f"{statistics.median(elections) * 1000:.0f} ms, p95 "
                  f"{percentile(elections, 0.95) * 1000:.0f} ms")
        for label, group in (("leader only", [k.seconds for k in results.kills
                                              if not k.controller]),
                             ("leader and controller", [k.seconds for k in results.kills
                                                        if k.controller])):
            if group:
                print(f"    {label}: {len(group)} kill(s), median "
                      f"{statistics.median(group) * 1000:.0f} ms, max {max(group) * 1000:.0f} ms")
    if results.rf1_rate and results.rf3_rate:
        rf1, rf3 = statistics.median(results.rf1_rate), statistics.median(results.rf3_rate)
        ratio = rf3 / rf1
        passed = ratio >= REPLICATION_TARGET
        ok &= passed
        print(f"  replication cost (kcat -P, 1 KiB, 3 partitions): RF=1 acks=1 {rf1:,.0f} rec/s,"
              f" RF=3 acks=all {rf3:,.0f} rec/s: {ratio:.2f}x   target >= "
              f"{REPLICATION_TARGET:g}x: {'PASS' if passed else 'FAIL'}")
        pairs = [b / a for a, b in zip(results.rf1_rate, results.rf3_rate, strict=False)]
        print(f"    ratio of each back-to-back pair: {', '.join(f'{r:.2f}x' for r in pairs)}")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = common_parser(__doc__, "1 cluster up, 5 kills, a tenth of the records, one "
                           "repetition", 900, 240)
    args = parser.parse_args(argv)
    if shutil.which("kcat") is None:
        parser.error("kcat is not installed")
    ups, kills = (1, 5) if args.quick else (3, 20)
    records, reps = (20_000, 1) if args.quick else (200_000, 3)
    deadline, root = start_run(args, "slog-cluster-bench-")
    results = Results()
    print(f"cluster benchmark: {BROKERS} brokers, {ups} cluster up, {kills} kills, "
          f"{reps} x {records:,} records per topic; temp dir {root}", flush=True)
    def measure() -> None:
        for n in range(ups):
            cluster = Cluster(root / f"cluster-{n}")
            with contextlib.ExitStack() as stack:
                stack.enter_context(running(cluster))
                results.up_s.append(cluster.up(deadline))
                print(f"  slog cluster up: {results.up_s[-1]:.2f} s", flush=True)
                if n == ups - 1:  # the last cluster stays up for the rest
                    measure_failover(cluster, kills, results, deadline)
                    values = root / "values.txt"
                    write_values(values, records)
                    measure_replication(cluster, records, reps, values, results, deadline)
            shutil.rmtree(cluster.root, ignore_errors=True)

    return measure_and_report(measure, lambda: report(results), root)

if __name__ == "__main__":
    sys.exit(main())
