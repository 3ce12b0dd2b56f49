"""Dashboard benchmark: the cost of one refresh, and the CPU of a running dashboard.

A 3-broker cluster (``slog cluster up``) with 50 topics of 6 partitions (RF 3,
a few records in every partition) and 20 consumer groups (committed offsets
on 3 topics each; 2 of them with a live member).

* **refresh**: wall time of ``Collector.refresh()`` (slog/tui/collect.py),
  the whole snapshot the dashboard draws: Metadata, ListOffsets x3 and
  DescribeLogDirs and ListGroups per broker, DescribeGroups and OffsetFetch
  per coordinator. 2 untimed, then 30 timed (``--quick``: 10); median and
  p95. Target: median < 300 ms. The client's own CPU time per refresh and
  the load average are printed too: on a busy machine the wall time is
  mostly the brokers waiting for a core.
* **overhead**: the real ``slog dashboard --refresh 1s`` in a 100x30 tmux
  terminal; after 5 s of warm-up, its process CPU time (user + system, all
  threads, from /proc) over 30 s (``--quick``: 10 s), as a percentage of one
  core. Target < 10 %.

Prints the figures and exits 1 if a target is missed. Everything it starts
(the brokers of its temp data dir, the tmux session) is stopped at the end,
also on errors and Ctrl-C; ``--timeout`` bounds the whole run.

Usage::

    python benchmarks/dashboard.py [--quick] [--timeout S]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_support import BenchTimeout, Deadline, cpu_seconds  # noqa: E402

from slog.client import Admin, Consumer, NewTopic, Producer, TopicPartition  # noqa: E402
from slog.client.errors import KafkaError  # noqa: E402
from slog.client.group_admin import GroupAdmin  # noqa: E402
from tests.brokers import free_port_range  # noqa: E402

BROKERS, TOPICS, PARTITIONS, GROUPS, LIVE_GROUPS = 3, 50, 6, 20, 2
REFRESH_TARGET_MS, CPU_TARGET_PCT = 300.0, 10.0


def cli(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "slog.cli", *args], capture_output=True,
                          text=True, timeout=timeout, check=False)


def populate(bootstrap: str, deadline: Deadline) -> list[Consumer]:
    names = [f"bench-{i:02d}" for i in range(TOPICS)]
    with Admin(bootstrap, request_timeout_ms=30_000) as admin:
        admin.create_topics([NewTopic(n, PARTITIONS, BROKERS) for n in names])
        while len([t for t in admin.describe_topics(names)
                   if all(p.leader >= 0 for p in t.partitions)]) < TOPICS:
            deadline.check()
            time.sleep(0.2)
        producer = Producer(bootstrap, acks="all")
        for name in names:
            for p in range(PARTITIONS):
                for i in range(5):
                    producer.send(name, value=b"r%d" % i, partition=p)
        producer.flush()
        producer.close()
        groups = GroupAdmin(admin.cluster)
        for g in range(GROUPS - LIVE_GROUPS):
            topics = names[g % TOPICS:g % TOPICS + 3]
            offsets = {TopicPartition(t, p): 2 for t in topics for p in range(PARTITIONS)}
            while True:  # the first commits wait for __consumer_offsets to get leaders
                try:
                    groups.alter_offsets(f"group-{g:02d}", offsets)
                    break
                except KafkaError as exc:
                    if not exc.retriable:
                        raise
                    deadline.check()
                    time.sleep(0.2)
    consumers = []
    for g in range(GROUPS - LIVE_GROUPS, GROUPS):
        consumer = Consumer(bootstrap, group_id=f"group-{g:02d}", auto_offset_reset="earliest")
        consumer.subscribe(names[:3])
        while not consumer.assignment():
            deadline.check()
            consumer.poll(100)
        consumers.append(consumer)
    return consumers


def measure_refresh(bootstrap: str, data_dir: Path, runs: int, deadline: Deadline
                    ) -> list[float]:
    from slog.tui.collect import Collector

    collector = Collector(bootstrap, data_dir=data_dir)
    try:
        for _ in range(2):
            collector.refresh()
        times, cpu = [], []
        for _ in range(runs):
            deadline.check()
            started, started_cpu = time.perf_counter(), time.thread_time()
            snapshot = collector.refresh().snapshot
            times.append((time.perf_counter() - started) * 1000)
            cpu.append((time.thread_time() - started_cpu) * 1000)
        print(f"  refresh CPU (this process): median {statistics.median(cpu):.1f} ms; "
              f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
        user_topics = [t for t in snapshot.topics if t.name.startswith("bench-")]
        assert len(user_topics) == TOPICS, len(user_topics)
        assert sum(len(t.partitions) for t in user_topics) == TOPICS * PARTITIONS
        assert len(snapshot.groups) == GROUPS, [g.group_id for g in snapshot.groups]
        return times
    finally:
        collector.close()


def measure_cpu(bootstrap: str, data_dir: Path, seconds: float, deadline: Deadline) -> float:
    session = f"slog-dash-bench-{uuid.uuid4().hex[:8]}"
    command = " ".join(shlex.quote(a) for a in (
        "exec", sys.executable, "-m", "slog.cli", "dashboard", "--bootstrap", bootstrap,
        "--refresh", "1s", "--data-dir", str(data_dir)))
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "100", "-y", "30",
                    command], check=True)
    try:
        pid = int(subprocess.run(["tmux", "display", "-p", "-t", session, "#{pane_pid}"],
                                 check=True, capture_output=True, text=True).stdout)
        screen, waited = "", time.monotonic()
        while "bench-" not in screen:  # start-up and the first refresh, then warm-up
            if time.monotonic() - waited > 60:
                raise RuntimeError(f"the dashboard shows no topics:\n{screen}")
            deadline.check()
            time.sleep(0.5)
            screen = subprocess.run(["tmux", "capture-pane", "-p", "-t", session],
                                    capture_output=True, text=True).stdout
        time.sleep(min(5.0, deadline.left()))  # warm-up: rates and sparklines fill in
        before, started = cpu_seconds(pid), time.monotonic()
        time.sleep(min(seconds, deadline.left()))
        used, elapsed = cpu_seconds(pid) - before, time.monotonic() - started
        return 100.0 * used / elapsed
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10 refreshes, 10 s of CPU")
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    deadline = Deadline(args.timeout)
    root = Path(tempfile.mkdtemp(prefix="slog-dash-bench-"))
    data_dir = root / "data"
    base_port = free_port_range(BROKERS)
    bootstrap = ",".join(f"127.0.0.1:{base_port + b}" for b in range(BROKERS))
    consumers: list[Consumer] = []
    print(f"dashboard benchmark: {BROKERS} brokers, {TOPICS} topics x {PARTITIONS} partitions "
          f"(RF {BROKERS}), {GROUPS} groups", flush=True)
    try:
        done = cli("cluster", "up", "--brokers", str(BROKERS), "--data-dir", str(data_dir),
                   "--base-port", str(base_port), "--timeout", "30",
                   timeout=min(90.0, deadline.left()))
        if done.returncode != 0:
            raise RuntimeError(f"slog cluster up failed:\n{done.stdout}\n{done.stderr}")
        consumers = populate(bootstrap, deadline)
        times = measure_refresh(bootstrap, data_dir, 10 if args.quick else 30, deadline)
        median = statistics.median(times)
        p95 = sorted(times)[round(0.95 * (len(times) - 1))]
        print(f"  refresh: median {median:.1f} ms, p95 {p95:.1f} ms over {len(times)} "
              f"(target < {REFRESH_TARGET_MS:.0f} ms)", flush=True)
        cpu = measure_cpu(bootstrap, data_dir, 10.0 if args.quick else 30.0, deadline)
        print(f"  overhead at --refresh 1s: {cpu:.1f} % of one core "
              f"(target < {CPU_TARGET_PCT:.0f} %)", flush=True)
        ok = median < REFRESH_TARGET_MS and cpu < CPU_TARGET_PCT
        print("  targets met" if ok else "  TARGET MISSED")
        return 0 if ok else 1
    except BenchTimeout as exc:
        print(f"  {exc}", file=sys.stderr)
        return 1
    finally:
        for consumer in consumers:
            with contextlib.suppress(Exception):
                consumer.close()
        cli("cluster", "down", "--data-dir", str(data_dir), timeout=120)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
