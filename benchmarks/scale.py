"""Scale benchmark: what a cluster costs against how many partitions it holds.

Three brokers on this machine sharing one temp data dir, RF 3,
``log.preallocate=false`` (so 10,000 partitions need no 10,000 preallocated
segments), everything else at its default. One fresh cluster per row; each row
holds N partitions:

* N <= 1,000: one topic of N partitions, created with one CreateTopics;
* N > 1,000: N / 100 topics of 100 partitions, one CreateTopics each, back to back.

A count may repeat (``--partitions 1000,1000,1000``): each is a row of its own,
and the report gives the median creation of the 1,000-partition rows.

Every row's files stay until the whole run ends. On an ext4 file system without
a journal (this VM's root file system is one), the kernel will not reuse an
inode for 1-6 minutes after it was freed, and each new file's inode search steps
over every such inode (``recently_deleted`` in ``find_inode_bit``; perf showed
half of a create's CPU there). A row that deleted the previous row's 15,000
replica files made the next row's file creation several times dearer: 1,000
partitions took 5.7-8.3 s to create right after such a deletion, and 1.1 s on
the same cluster without one. For the same reason, back-to-back runs of this
benchmark measure creation after the previous run's clean-up: leave a few
minutes between them, or give each its own ``--dir`` on another file system.
Before the first row the benchmark times making 1,000 directories and 3,000
empty files in its temp dir and prints it: well under 0.1 s on a quiet disk,
seconds right after a mass deletion.

Per row:

* **creation**: from the first CreateTopics until every broker has opened every
  replica it holds (its ``logs/`` holds the partition directories) and a
  ListOffsets of every partition, sent to its leader, answers. Meanwhile a
  thread sends ApiVersions to each broker every 100 ms: the slowest answer is
  the "responsive" column (a broker that stalls its event loop shows here).
* **idle CPU**: 15 s after creation, the CPU time of the three broker processes
  over 10 s (``/proc/<pid>/stat``), as a percentage of one core.
* **fetches/s**: the brokers' Fetch request counters over the same 10 s, if the
  broker logs them (SIGUSR1), else blank.
* **metadata**: ``kcat -L`` of the whole cluster and ``slog topic list``, each as a
  fresh process, median of 5 and of 3.
* **RSS**: the largest broker's resident set after the idle window.
* **failover**: ``kill -9`` of the broker leading the most partitions (not the
  controller, when another broker leads as many); the time until every
  partition has a live leader in the metadata log, and until an acks=all
  produce (a warm slog producer, already connected) to a partition it led is
  acknowledged.
* **restart after kill -9**: the killed broker started again (it recovers past
  its recovery point); the time until it listens and until it has caught up
  with the metadata log and opened its replicas (the ``starting`` marker gone).
* **clean restart**: SIGTERM (a controlled shutdown) of that broker, then a start;
  the same two times.

Targets (issue "Scale"): idle CPU < 5 % of a core at 10,000 partitions; one
create of 1,000 partitions < 3 s; 10,000 partitions in 100 topics < 30 s;
``kcat -L`` < 150 ms and ``slog topic list`` < 500 ms at 10,000; every partition
led again within 3 s of a kill and the acks=all produce acknowledged within 3 s;
a restart serving within 10 s; broker RSS < 400 MB.

Usage::

    python benchmarks/scale.py [--partitions 30,300,3000,10000] [--timeout S] [--dir PARENT]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_support import BenchTimeout, Deadline, cpu_seconds, measure_and_report  # noqa: E402
from bench_support import wait_until as bench_wait_until  # noqa: E402
from cluster import BROKERS, running  # noqa: E402
from cluster import Cluster as BenchCluster  # noqa: E402

from slog.broker.daemon import is_running, start_daemon, stop_daemon  # noqa: E402

TOPIC_WIDTH = 100  # partitions per topic above 1,000
IDLE_SETTLE_S = 15.0
IDLE_WINDOW_S = 10.0
PAGE = os.sysconf("SC_PAGE_SIZE")
BROKER_CONFIG = {"log.preallocate": "false"}
TARGETS = {  # at 10,000 partitions unless said otherwise
    "idle_pct": 5.0, "create_1000_s": 3.0, "create_10000_s": 30.0, "kcat_ms": 150.0,
    "topic_list_ms": 500.0, "failover_s": 3.0, "restart_s": 10.0, "rss_mb": 400.0,
}


def wait_until(condition: Callable[[], object], deadline: Deadline, what: str,
               limit_s: float = 120.0, poll_s: float = 0.02) -> object:
    """bench_support's, with the longer waits thousands of partitions need."""
    return bench_wait_until(condition, deadline, what, limit_s, poll_s)


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * PAGE / 1e6


def timed(cmd: list[str], timeout: float) -> float:
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, timeout=timeout, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} failed: {done.stderr.decode()[-500:]}")
    return elapsed


class Cluster(BenchCluster):
    """benchmarks/cluster.py's cluster, started with this benchmark's broker settings."""

    def address(self, broker_id: int) -> str:
        return f"127.0.0.1:{self.base_port + broker_id - 1}"

    def up(self, deadline: Deadline) -> float:
        args = [a for k, v in BROKER_CONFIG.items() for a in ("-c", f"{k}={v}")]
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "slog.cli", "cluster", "up", "--brokers", str(BROKERS),
             "--data-dir", str(self.root), "--base-port", str(self.base_port), *args],
            capture_output=True, text=True, timeout=min(120.0, deadline.left()), check=False)
        if done.returncode != 0:
            raise RuntimeError(f"slog cluster up failed:\n{done.stdout}\n{done.stderr}")
        return time.monotonic() - started

    def pids(self) -> list[int]:
        return [self.pid(b) for b in range(1, BROKERS + 1)]

    def replicas_opened(self, broker_id: int, topics: set[str]) -> int:
        logs = self.layout.logs_dir(broker_id)
        if not logs.exists():
            return 0
        return sum(1 for d in os.scandir(logs) if d.is_dir()
                   and d.name.rpartition("-")[0] in topics)

    def start(self, broker_id: int, deadline: Deadline) -> None:
        wait_until(lambda: not is_running(self.layout, broker_id), deadline, "the lock release")
        start_daemon(broker_id, self.root, self.address(broker_id), BROKER_CONFIG,
                     timeout_s=min(120.0, deadline.left()))

    def caught_up(self, broker_id: int) -> bool:
        return not self.layout.broker(broker_id).starting.exists()


class ResponsivenessProbe:
    """ApiVersions to every broker every 100 ms; keeps the slowest answer."""

    def __init__(self, cluster: Cluster):
        self._cluster = cluster
        self.slowest_s = 0.0
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ResponsivenessProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        from slog.client.connection import BrokerConnection
        from slog.protocol.apis import ApiKey

        connections = {}
        while not self._stop.is_set():
            for broker_id in range(1, BROKERS + 1):
                try:
                    conn = connections.get(broker_id)
                    if conn is None:
                        host, port = self._cluster.address(broker_id).split(":")
                        conn = connections[broker_id] = BrokerConnection(
                            host, int(port), client_id="scale-probe", timeout_s=30).connect()
                    started = time.perf_counter()
                    conn.request(ApiKey.API_VERSIONS, {}, version=0)
                    self.slowest_s = max(self.slowest_s, time.perf_counter() - started)
                except Exception:
                    self.failures += 1
                    connections.pop(broker_id, None)
            self._stop.wait(0.1)
        for conn in connections.values():
            with contextlib.suppress(Exception):
                conn.close()


@dataclass
class Row:
    partitions: int
    topics: int = 0
    create_s: float = float("nan")
    slowest_api_versions_s: float = float("nan")
    idle_pct: float = float("nan")
    kcat_ms: float = float("nan")
    topic_list_ms: float = float("nan")
    rss_mb: float = float("nan")
    failover_led: int = 0
    failover_leaders_s: float = float("nan")
    failover_ack_s: float = float("nan")
    restart_listen_s: float = float("nan")
    restart_caught_up_s: float = float("nan")
    clean_listen_s: float = float("nan")
    clean_caught_up_s: float = float("nan")
    live_fencings: int = 0  # fencings of a broker that was not killed or stopped
    notes: list[str] = field(default_factory=list)


def topic_plan(partitions: int) -> dict[str, int]:
    if partitions <= 1000:
        return {"scale-0": partitions}
    return {f"scale-{n}": TOPIC_WIDTH for n in range(partitions // TOPIC_WIDTH)}


def create(cluster: Cluster, plan: dict[str, int], row: Row, deadline: Deadline) -> None:
    from slog.client import Admin, NewTopic, TopicPartition

    topics = set(plan)
    expected = sum(plan.values())  # replicas per broker: RF 3 on 3 brokers
    with ResponsivenessProbe(cluster) as probe:
        started = time.monotonic()
        with Admin(cluster.bootstrap, request_timeout_ms=120_000) as admin:
            for name, count in plan.items():
                admin.create_topics([NewTopic(name, count, 3)])
            wait_until(lambda: all(cluster.replicas_opened(b, topics) >= expected
                                   for b in range(1, BROKERS + 1)),
                       deadline, "every replica to be opened", limit_s=600, poll_s=0.05)
            every = [TopicPartition(t, p) for t, n in plan.items() for p in range(n)]
            wait_until(lambda: _all_listed(admin, every), deadline, "ListOffsets of every "
                       "partition", limit_s=600, poll_s=0.1)
        row.create_s = time.monotonic() - started
    row.slowest_api_versions_s = probe.slowest_s
    if probe.failures:
        row.notes.append(f"{probe.failures} ApiVersions probes failed during creation")


def _all_listed(admin, partitions) -> bool:
    try:
        admin.list_offsets(dict.fromkeys(partitions, "latest"))
    except Exception:
        return False
    return True


def measure_idle(cluster: Cluster, row: Row) -> None:
    time.sleep(IDLE_SETTLE_S)
    pids = cluster.pids()
    before = sum(cpu_seconds(p) for p in pids)
    time.sleep(IDLE_WINDOW_S)
    after = sum(cpu_seconds(p) for p in pids)
    row.idle_pct = (after - before) / IDLE_WINDOW_S * 100
    row.rss_mb = max(rss_mb(p) for p in pids)


def measure_metadata(cluster: Cluster, row: Row, deadline: Deadline) -> None:
    kcat = [timed(["kcat", "-L", "-b", cluster.address(1)], deadline.left()) for _ in range(5)]
    row.kcat_ms = statistics.median(kcat) * 1000
    slog = shutil.which("slog")
    command = [slog] if slog else [sys.executable, "-m", "slog.cli"]
    listed = [timed([*command, "topic", "list", "--bootstrap", cluster.address(1)],
                    deadline.left()) for _ in range(3)]
    row.topic_list_ms = statistics.median(listed) * 1000


def measure_failover(cluster: Cluster, plan: dict[str, int], row: Row,
                     deadline: Deadline) -> int:
    from slog.client import Producer

    image = cluster.image()
    led: dict[int, list[tuple[str, int]]] = {b: [] for b in range(1, BROKERS + 1)}
    for topic in plan:
        for p in image.topics[topic].partitions.values():
            led.setdefault(p.leader, []).append((topic, p.partition))
    most = max(len(v) for v in led.values())
    victim = min((b for b in led if len(led[b]) == most),
                 key=lambda b: b == image.controller_id)
    row.failover_led = len(led[victim])
    probe_topic, probe_partition = led[victim][0]
    producer = Producer(cluster.bootstrap, acks="all", linger_ms=0, retry_backoff_ms=5,
                        request_timeout_ms=2_000, delivery_timeout_ms=60_000)
    try:
        producer.send(probe_topic, b"warm-up", partition=probe_partition).result(timeout=60)
        wall_kill = time.monotonic()
        os.kill(cluster.pid(victim), signal.SIGKILL)
        ack = producer.send(probe_topic, b"probe", partition=probe_partition)

        def all_led() -> bool:
            img = cluster.image()
            live = {b.broker_id for b in img.live_brokers()}
            return all(p.leader in live and p.leader != victim for t in plan
                       for p in img.topics[t].partitions.values())

        wait_until(all_led, deadline, "every partition to have a live leader", limit_s=120,
                   poll_s=0.005)
        row.failover_leaders_s = time.monotonic() - wall_kill
        ack.result(timeout=min(60.0, deadline.left()))
        row.failover_ack_s = time.monotonic() - wall_kill
    finally:
        producer.close(5)
    return victim


def measure_restarts(cluster: Cluster, victim: int, row: Row, deadline: Deadline) -> None:
    # After kill -9: recovery past the recovery point.
    started = time.monotonic()
    cluster.start(victim, deadline)
    row.restart_listen_s = time.monotonic() - started
    wait_until(lambda: cluster.caught_up(victim), deadline, "the restarted broker to catch up",
               limit_s=300)
    row.restart_caught_up_s = time.monotonic() - started
    wait_until(lambda: all(victim in p.isr for t in cluster.image().topics.values()
                           for p in t.partitions.values() if victim in p.replicas),
               deadline, "the restarted broker to rejoin every ISR", limit_s=300, poll_s=0.2)
    # Clean: a controlled shutdown, then a start.
    stop_daemon(victim, cluster.root, timeout_s=min(120.0, deadline.left()))
    started = time.monotonic()
    cluster.start(victim, deadline)
    row.clean_listen_s = time.monotonic() - started
    wait_until(lambda: cluster.caught_up(victim), deadline, "the restarted broker to catch up",
               limit_s=300)
    row.clean_caught_up_s = time.monotonic() - started


def live_fencings(cluster: Cluster) -> int:
    """Fencings the controller logged for a stale heartbeat: a broker whose process was
    alive (a kill -9 is fenced by the lock probe, a restart as "restarted")."""
    count = 0
    for broker_id in range(1, BROKERS + 1):
        log = cluster.layout.broker(broker_id).log
        with contextlib.suppress(OSError):
            for line in log.read_text(errors="replace").splitlines():
                if "fencing broker" in line and ": heartbeat " in line:
                    count += 1
    return count


def file_creation_probe(root: Path) -> float:
    """Seconds to make 1,000 directories and 3,000 empty files (what 1,000 new
    replicas need) in ``root``, kept until the run ends like the rows' files."""
    probe = root / "file-creation-probe"
    started = time.perf_counter()
    probe.mkdir()
    for n in range(1000):
        directory = probe / f"p-{n}"
        directory.mkdir()
        for name in ("0.log", "0.index", "0.timeindex"):
            os.close(os.open(directory / name, os.O_RDWR | os.O_CREAT, 0o600))
    return time.perf_counter() - started


def run_row(root: Path, number: int, partitions: int, deadline: Deadline) -> Row:
    row = Row(partitions)
    plan = topic_plan(partitions)
    row.topics = len(plan)
    # Kept until the run ends (the module's docstring says why).
    cluster = Cluster(root / f"row{number}-p{partitions}")
    with running(cluster):
        cluster.up(deadline)
        print(f"  {partitions:,} partitions in {len(plan)} topic(s): creating", flush=True)
        create(cluster, plan, row, deadline)
        print(f"    created in {row.create_s:.1f} s; idle window", flush=True)
        measure_idle(cluster, row)
        measure_metadata(cluster, row, deadline)
        victim = measure_failover(cluster, plan, row, deadline)
        print(f"    failover of broker {victim} ({row.failover_led} leaderships): "
              f"{row.failover_leaders_s:.2f} s", flush=True)
        measure_restarts(cluster, victim, row, deadline)
        row.live_fencings = live_fencings(cluster)
    return row


def _growth(rows: list[Row], attr: str) -> str:
    """How a figure grows per 10x partitions: the ratio between consecutive rows."""
    values = [getattr(r, attr) for r in rows]
    ratios = [f"{b / a:.1f}x" if a and a == a and b == b else "-"
              for a, b in itertools.pairwise(values)]
    return ", ".join(ratios)


def report(rows: list[Row]) -> bool:
    columns = [
        ("partitions", "partitions", "{:,}"), ("topics", "topics", "{}"),
        ("create s", "create_s", "{:.2f}"),
        ("slowest ApiVersions ms", "slowest_api_versions_s", "{:.0f}", 1000),
        ("idle CPU %", "idle_pct", "{:.1f}"), ("kcat -L ms", "kcat_ms", "{:.0f}"),
        ("topic list ms", "topic_list_ms", "{:.0f}"), ("max RSS MB", "rss_mb", "{:.0f}"),
        ("failover leaders s", "failover_leaders_s", "{:.2f}"),
        ("failover ack s", "failover_ack_s", "{:.2f}"),
        ("restart (kill) listen/caught up s", None, None),
        ("restart (clean) listen/caught up s", None, None),
        ("live brokers fenced", "live_fencings", "{}"),
    ]
    header = [c[0] for c in columns]
    lines = []
    for r in rows:
        cells = []
        for column in columns:
            if column[1] is None:
                pair = (r.restart_listen_s, r.restart_caught_up_s) if "kill" in column[0] \
                    else (r.clean_listen_s, r.clean_caught_up_s)
                cells.append(f"{pair[0]:.1f} / {pair[1]:.1f}")
                continue
            value = getattr(r, column[1]) * (column[3] if len(column) > 3 else 1)
            cells.append(column[2].format(value))
        lines.append(cells)
    print("\n| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for cells in lines:
        print("| " + " | ".join(cells) + " |")
    if len(rows) > 1:  # one row has no growth to show
        steps = ", ".join(f"{b.partitions / a.partitions:g}"
                          for a, b in itertools.pairwise(rows))
        print(f"\ngrowth from row to row (each row has {steps} times the last's partitions):")
        for label, attr in (("creation", "create_s"), ("idle CPU", "idle_pct"),
                            ("kcat -L", "kcat_ms"), ("RSS", "rss_mb"),
                            ("failover", "failover_leaders_s"),
                            ("restart caught up", "restart_caught_up_s")):
            print(f"  {label}: {_growth(rows, attr)}")
    for r in rows:
        for note in r.notes:
            print(f"  note ({r.partitions:,}): {note}")
    ok = True
    biggest = rows[-1]
    if biggest.partitions >= 10_000:
        checks = [
            ("idle CPU", biggest.idle_pct, TARGETS["idle_pct"], "%"),
            ("10,000 partitions created", biggest.create_s, TARGETS["create_10000_s"], " s"),
            ("kcat -L", biggest.kcat_ms, TARGETS["kcat_ms"], " ms"),
            ("slog topic list", biggest.topic_list_ms, TARGETS["topic_list_ms"], " ms"),
            ("failover, leaders", biggest.failover_leaders_s, TARGETS["failover_s"], " s"),
            ("failover, acks=all ack", biggest.failover_ack_s, TARGETS["failover_s"], " s"),
            ("restart after kill -9", biggest.restart_caught_up_s, TARGETS["restart_s"], " s"),
            ("clean restart", biggest.clean_caught_up_s, TARGETS["restart_s"], " s"),
            ("broker RSS", biggest.rss_mb, TARGETS["rss_mb"], " MB"),
        ]
        print(f"\ntargets at {biggest.partitions:,} partitions")
        for label, value, target, unit in checks:
            passed = value < target
            ok &= passed
            print(f"  {label}: {value:.2f}{unit} (target < {target:g}{unit}): "
                  f"{'PASS' if passed else 'FAIL'}")
    creates = [r.create_s for r in rows if r.partitions == 1000]
    if creates:
        median = statistics.median(creates)
        passed = median < TARGETS["create_1000_s"]
        ok &= passed
        runs = "" if len(creates) == 1 else \
            f" (median of {len(creates)}: {', '.join(f'{c:.2f}' for c in creates)})"
        print(f"  one create of 1,000 partitions: {median:.2f} s{runs} (target < "
              f"{TARGETS['create_1000_s']:g} s): {'PASS' if passed else 'FAIL'}")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", default="30,300,3000,10000",
                        help="comma-separated partition counts, one row each")
    parser.add_argument("--timeout", type=float, default=3600,
                        help="stop everything after this many seconds")
    parser.add_argument("--dir", type=Path, default=None, help="parent of the temp dirs")
    args = parser.parse_args(argv)
    if shutil.which("kcat") is None:
        parser.error("kcat is not installed")
    try:
        counts = [int(c) for c in args.partitions.split(",") if c.strip()]
    except ValueError:
        parser.error("--partitions takes integers, e.g. 30,300,3000")
    if not counts or any(c < 1 or (c > 1000 and c % TOPIC_WIDTH) for c in counts):
        parser.error(f"counts above 1,000 must be multiples of {TOPIC_WIDTH}")
    deadline = Deadline(args.timeout)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    root = Path(tempfile.mkdtemp(prefix="slog-scale-bench-", dir=args.dir))
    print(f"scale benchmark: {BROKERS} brokers, RF 3, rows {counts}; temp dir {root}",
          flush=True)
    rows: list[Row] = []

    def measure() -> None:
        print(f"file system: 1,000 directories and 3,000 empty files made in "
              f"{file_creation_probe(root):.3f} s (well under 0.1 s unless files were "
              f"deleted there in the last minutes; see the docstring)", flush=True)
        for number, count in enumerate(counts, 1):
            rows.append(run_row(root, number, count, deadline))

    return measure_and_report(measure, lambda: bool(rows) and report(rows), root,
                              stops=(BenchTimeout, RuntimeError))

if __name__ == "__main__":
    sys.exit(main())
