"""Consumer groups: rebalance latency, group consume throughput, ``slog group describe``.

One broker is started here (``slog.broker.daemon``, temp data dir) with
``group.initial.rebalance.delay.ms=0`` (slog's default) and a short minimum
session timeout. Three measurements:

* **Rebalance latency** for 1, 2, 4, 8 and 16 slog consumers on a
  16-partition topic (range assignor): N-1 consumers form a stable group, then
  the N-th subscribes; the figure is the time from that ``subscribe()`` to
  every member holding its share of the new generation (all partitions
  assigned, disjointly, each member with at least one, all in one
  generation), as seen through ``assignment()``. Each consumer polls in its
  own thread; ``heartbeat_interval_ms`` is 50, which bounds how soon the
  existing members hear of the rebalance (Kafka's classic protocol tells
  them only in a heartbeat response). Median of ``--runs`` runs. Target:
  median < 200 ms for 8 consumers. The same run measures KIP-848's consumer
  protocol (``group_protocol="consumer"``, the broker's ``uniform``
  assignor, ``group.consumer.heartbeat.interval.ms`` 50) beside the classic
  one: there the newcomer's partitions come free only after their old owners
  heartbeat that they revoked them. Goal: no slower than classic.
* **Group consume throughput**: ``--records`` 100-byte records on 6
  partitions, read by 3 slog consumer *processes* in one group (join time
  included), against one process with all 6 partitions ``assign()``-ed.
  records/s, median of ``--runs``.
* **Idle cost** (``--idle``, alone): its own broker, at slog's defaults
  (KIP-848 heartbeat interval 5 s from the broker; classic members heartbeat
  every 3 s; consumers long-poll Fetch for 500 ms), coordinates a group of 16
  slog consumers subscribed to a 1,000-partition topic that nobody produces
  to. The figure is that broker's CPU time (``/proc/<pid>/stat`` utime +
  stime) per second of wall time, as a % of one core: the median of
  ``--idle-windows`` windows of ``--idle-window-s`` seconds each, first with
  no group (the baseline: the same broker and topic, in the same run), then
  with the 16 members stable, KIP-848's consumer protocol
  (``group_protocol="consumer"``), then the classic protocol. Each group is
  measured twice: its members long-polling Fetch on their (empty) partitions,
  as deployed consumers do, then with every partition paused, so that only
  heartbeats and the client's auto-commits (every 5 s, as Kafka's Java
  consumer) reach the broker. The members poll in threads of this process,
  whose CPU is not counted; the group must keep one generation (member epoch)
  through every window, so members that stopped heartbeating fail the run.
  Goal: the group costs < 2 % of a core over the baseline.
* **``slog group describe``** of 200 groups (each with offsets committed on a
  3-partition topic): wall time of the real command as a subprocess
  (interpreter start-up included) and of the same work in-process. Target:
  < 2 s.

Usage::

    python benchmarks/groups.py [--quick] [--runs N] [--records N] [--rebalance-only]
        [--sizes 1,2,4] [--idle] [--idle-windows N] [--idle-window-s S]
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench_support import Deadline, cpu_seconds, wait_until_idle  # noqa: E402

from slog.broker.daemon import start_daemon, stop_daemon  # noqa: E402
from slog.client import Admin, Consumer, NewTopic, Producer, TopicPartition  # noqa: E402
from tests.brokers import free_port  # noqa: E402

BROKER = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "100",
          "group.consumer.heartbeat.interval.ms": "50"}
SIZES = (1, 2, 4, 8, 16)
PROTOCOLS = ("classic", "consumer")
LATENCY_PARTITIONS = 16
VALUE = b"v" * 100
FAST = {"session_timeout_ms": 3000, "heartbeat_interval_ms": 50, "fetch_max_wait_ms": 100,
        "auto_offset_reset": "earliest"}
IDLE_PARTITIONS = 1000
IDLE_MEMBERS = 16
IDLE_GOAL_PERCENT = 2.0
# The idle group runs at the client's defaults (heartbeat 3 s, Fetch long-poll 500 ms):
# an idle group's cost is what a deployed one costs, not the latency runs' 50 ms beat.
IDLE_CONSUMER: dict[str, Any] = {"auto_offset_reset": "earliest"}


class Member(threading.Thread):
    """A group consumer polling in its own thread until stopped."""

    def __init__(self, bootstrap: str, group: str, topic: str, index: int,
                 protocol: str = "classic", config: Mapping[str, Any] = FAST,
                 poll_ms: int = 20):
        super().__init__(daemon=True)
        self.consumer = Consumer(bootstrap, group_id=group, client_id=f"m{index:02d}",
                                 group_protocol=protocol, **config)
        self.topic = topic
        self.poll_ms = poll_ms
        self.stopped = threading.Event()
        self.fetch_nothing = threading.Event()  # pause every partition: no Fetch
        self.subscribed_at = 0.0

    def run(self) -> None:
        self.subscribed_at = time.perf_counter()
        self.consumer.subscribe([self.topic])
        while not self.stopped.is_set():
            if self.fetch_nothing.is_set():
                self.consumer.pause(self.consumer.assignment())
            self.consumer.poll(self.poll_ms)
        self.consumer.close()


@contextlib.contextmanager
def running(members: list[Member]) -> Iterator[list[Member]]:
    """Start the members' threads; stop and join them (they leave the group) on exit."""
    try:
        for member in members:
            member.start()
        yield members
    finally:
        for member in members:
            member.stopped.set()
        for member in members:
            member.join(10)


def settled(members: list[Member], partitions: int) -> bool:
    """Every member holds its share of one generation (KIP-848: one member epoch), and
    together they hold all."""
    generations = {m.consumer.group_metadata().generation_id for m in members}
    owned = [m.consumer.assignment() for m in members]
    every = [tp for parts in owned for tp in parts]
    return len(generations) == 1 and all(owned) and len(every) == len(set(every)) == partitions


def wait(condition: Any, timeout_s: float = 30.0) -> float:
    deadline = time.perf_counter() + timeout_s
    while not condition():
        if time.perf_counter() > deadline:
            raise TimeoutError("the group did not settle")
        time.sleep(0.001)
    return time.perf_counter()


def rebalance_latency(bootstrap: str, topic: str, size: int, run: int,
                      protocol: str = "classic") -> float:
    group = f"latency-{protocol}-{size}-{run}"
    with running([Member(bootstrap, group, topic, i, protocol)
                  for i in range(size - 1)]) as members:
        if members:
            wait(lambda: settled(members, LATENCY_PARTITIONS))
        last = Member(bootstrap, group, topic, size - 1, protocol)
        members.append(last)
        last.start()
        done = wait(lambda: last.subscribed_at and settled(members, LATENCY_PARTITIONS))
        return done - last.subscribed_at


# -- idle cost ---------------------------------------------------------------------------
def cpu_percent(pid: int, seconds: float) -> float:
    """CPU the process used over the next ``seconds`` of wall time, as a % of one core."""
    used, started = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds(pid) - used) / (time.monotonic() - started) * 100


def idle_windows(pid: int, windows: int, seconds: float) -> list[float]:
    return [cpu_percent(pid, seconds) for _ in range(windows)]


def generation(members: list[Member]) -> set[int]:
    return {m.consumer.group_metadata().generation_id for m in members}


def idle_group_cost(bootstrap: str, pid: int, protocol: str, windows: int,
                    seconds: float) -> tuple[list[float], list[float]]:
    """The broker's CPU per window while a stable group of IDLE_MEMBERS sits idle: with
    the members long-polling Fetch (as deployed consumers do), then with every partition
    paused (heartbeats and auto-commits: the coordinator's own share)."""
    with running([Member(bootstrap, f"idle-{protocol}", "idle", i, protocol, IDLE_CONSUMER,
                         poll_ms=500) for i in range(IDLE_MEMBERS)]) as members:
        wait(lambda: settled(members, IDLE_PARTITIONS), timeout_s=120)
        time.sleep(seconds / 4)  # the join's own work (assignments, first fetches) ends
        before = generation(members)
        fetching = idle_windows(pid, windows, seconds)
        for member in members:
            member.fetch_nothing.set()
        time.sleep(seconds / 4)  # Fetches already waiting at the broker run out
        heartbeats = idle_windows(pid, windows, seconds)
        if generation(members) != before or not settled(members, IDLE_PARTITIONS):
            raise RuntimeError(f"the idle {protocol} group rebalanced during the windows")
        return fetching, heartbeats


def _percent(samples: list[float]) -> str:
    return (f"{statistics.median(samples):5.2f} % of a core "
            f"(windows {', '.join(f'{s:.2f}' for s in samples)})")


def idle_report(windows: int, seconds: float) -> None:
    with broker({"group.initial.rebalance.delay.ms": "0"}) as (bootstrap, pid):
        with Admin(bootstrap) as admin:
            admin.create_topics([NewTopic("idle", IDLE_PARTITIONS)])
        # topic creation's own work (1,000 logs to open) ends before the baseline
        wait_until_idle(pid, Deadline(120), window_s=1.0, at_most_s=60)
        print(f"idle cost on the coordinator: {IDLE_MEMBERS} members, {IDLE_PARTITIONS:,} "
              f"partitions, no records, broker and client defaults; median of {windows} "
              f"windows of {seconds:.0f} s")
        baseline = statistics.median(samples := idle_windows(pid, windows, seconds))
        print(f"  no group:          {_percent(samples)}")
        for protocol, label in (("consumer", "KIP-848"), ("classic", "classic")):
            for how, samples in zip(("fetching", "paused"),
                                    idle_group_cost(bootstrap, pid, protocol, windows, seconds),
                                    strict=True):
                cost = statistics.median(samples) - baseline
                print(f"  {f'{label}, {how}:':18} {_percent(samples)}; the group: "
                      f"{cost:+.2f} % (goal < {IDLE_GOAL_PERCENT:g} %)")


# -- throughput -------------------------------------------------------------------------
def _reader(bootstrap: str, topic: str, group: str | None, partitions: list[int], total: int,
            counter: Any, lock: Any) -> None:
    consumer = Consumer(bootstrap, group_id=group, **{**FAST, "fetch_max_wait_ms": 500})
    if group is None:
        consumer.assign([TopicPartition(topic, p) for p in partitions])
    else:
        consumer.subscribe([topic])
    while counter.value < total:
        records = consumer.poll(100)
        if records:
            with lock:
                counter.value += len(records)
    consumer.close()


def throughput(bootstrap: str, topic: str, total: int, processes: int, group: str | None
               ) -> float:
    context = multiprocessing.get_context("fork")
    counter, lock = context.Value("q", 0, lock=False), context.Lock()
    shares = [[p for p in range(6) if group is not None or p % processes == i]
              for i in range(processes)]
    workers = [context.Process(target=_reader, args=(bootstrap, topic, group, share, total,
                                                     counter, lock)) for share in shares]
    start = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(300)
    elapsed = time.perf_counter() - start
    if counter.value < total:
        raise RuntimeError(f"read {counter.value} of {total}")
    return total / elapsed


# -- describe -----------------------------------------------------------------------------
def describe_200(bootstrap: str) -> tuple[float, float]:
    from slog.cli.group_cmd import _Clients, _offset_rows

    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic("described", 3)])
    groups = [f"g{i:03d}" for i in range(200)]
    tps = [TopicPartition("described", p) for p in range(3)]
    for group in groups:
        with Consumer(bootstrap, group_id=group) as consumer:
            consumer.commit(dict.fromkeys(tps, 0))
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "slog.cli", "group", "describe", *groups,
                             "-b", bootstrap, "-o", "json"], capture_output=True, text=True)
    command = time.perf_counter() - start
    if result.returncode != 0 or result.stdout.count('"group"') != 600:
        raise RuntimeError(f"describe failed: {result.stderr[-500:]}")
    start = time.perf_counter()
    with _Clients(bootstrap) as clients:
        rows = _offset_rows(clients, clients.groups.describe_groups(groups))
    in_process = time.perf_counter() - start
    assert len(rows) == 600
    return command, in_process


@contextlib.contextmanager
def broker(overrides: Mapping[str, str]) -> Iterator[tuple[str, int]]:
    """One broker in a temp data dir: its bootstrap address and pid."""
    with tempfile.TemporaryDirectory() as tmp:
        data_dir, port = Path(tmp) / "data", free_port()
        bootstrap = f"127.0.0.1:{port}"
        info = start_daemon(1, data_dir, bootstrap, dict(overrides))
        try:
            yield bootstrap, info.pid
        finally:
            stop_daemon(1, data_dir)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--records", type=int, default=None)
    parser.add_argument("--rebalance-only", action="store_true",
                        help="only the rebalance latencies (classic and KIP-848)")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)),
                        help="group sizes for the rebalance latency, comma-separated")
    parser.add_argument("--idle", action="store_true",
                        help="only the idle cost of a 16-member group on the coordinator")
    parser.add_argument("--idle-windows", type=int, default=3,
                        help="CPU windows per idle figure (median taken)")
    parser.add_argument("--idle-window-s", type=float, default=20.0,
                        help="length of one idle CPU window, seconds")
    args = parser.parse_args()
    if args.idle:
        idle_report(args.idle_windows, args.idle_window_s)
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    runs = 3 if args.quick and args.runs == 5 else args.runs
    total = args.records or (100_000 if args.quick else 600_000)
    with broker(BROKER) as (bootstrap, _):
        with Admin(bootstrap) as admin:
            admin.create_topics([NewTopic("latency", LATENCY_PARTITIONS),
                                 NewTopic("throughput", 6)])
        with Producer(bootstrap, acks=1) as producer:
            for i in range(total):
                producer.send("throughput", VALUE, partition=i % 6)
            producer.flush()
        print(f"rebalance latency, {LATENCY_PARTITIONS} partitions, heartbeat 50 ms "
              f"(median of {runs}): classic (range) and KIP-848 consumer (uniform)")
        for size in sizes:
            line = f"  {size:2d} consumers:"
            for protocol in PROTOCOLS:
                samples = [rebalance_latency(bootstrap, "latency", size, r, protocol)
                           for r in range(runs)]
                line += (f"  {protocol} {statistics.median(samples) * 1000:6.0f} ms"
                         f" (min {min(samples) * 1000:.0f}, max {max(samples) * 1000:.0f})")
            print(line)
        if args.rebalance_only:
            return
        print(f"group consume, {total:,} records of 100 bytes on 6 partitions "
              f"(median of {runs})")
        group = statistics.median(throughput(bootstrap, "throughput", total, 3, f"tp-{r}")
                                  for r in range(runs))
        single = statistics.median(throughput(bootstrap, "throughput", total, 1, None)
                                   for _ in range(runs))
        print(f"  3 consumers in a group: {group:12,.0f} records/s")
        print(f"  1 consumer, assign():   {single:12,.0f} records/s   "
              f"(group / single = {group / single:.2f}x)")
        command, in_process = describe_200(bootstrap)
        print(f"slog group describe, 200 groups x 3 partitions: {command:.2f} s as a "
              f"command, {in_process:.2f} s in-process (target < 2 s)")


if __name__ == "__main__":
    main()
