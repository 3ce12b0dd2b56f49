"""A real multi-broker cluster for failure tests: broker processes on one data dir.

The ``cluster`` fixture starts N brokers (3 unless a test says
``@pytest.mark.brokers(n)``) on free ports, sharing one temporary data dir,
with short liveness timeouts (``FAST``, plus ``@pytest.mark.broker_config``)
so that failovers happen in about a second. Tests read the cluster state the
way brokers do, by replaying the metadata log, and drive failures with real
signals: ``kill`` (SIGKILL), ``pause``/``resume`` (SIGSTOP/SIGCONT),
``stop`` (SIGTERM, a controlled shutdown) and ``restart``.

Every wait is a ``wait_until`` with a timeout; nothing sleeps blindly.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from slog.broker.daemon import stop_daemon
from slog.chaos.replicas import segments, valid_batches
from slog.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from slog.client.connection import BrokerConnection
from slog.core import batch
from slog.core.metadata import MetadataImage, PartitionState
from slog.core.metadata_log import MetadataLogReader
from slog.core.names import DataDirLayout
from slog.core.records import build_batch, decode_records
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from tests.brokers import BrokerProcess, free_port

T = TypeVar("T")

# Fast failure detection: fenced 1.5 s after a pause, out of the ISR 3 s after falling behind.
FAST = {
    "broker.session.timeout.ms": "1500",
    "replica.lag.time.max.ms": "3000",
    "auto.leader.rebalance.enable": "false",
}
WAIT_S = 20.0
_NOT_YET = (ErrorCode.unknown_topic_or_partition, ErrorCode.not_leader_or_follower)


def wait_until(condition: Callable[[], T], timeout_s: float = WAIT_S, what: str = "condition",
               interval_s: float = 0.02) -> T:
    """Poll ``condition`` until it returns something truthy; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g}s waiting for {what}")
        time.sleep(interval_s)


def _in_threads(fn: Callable[[int], Any], items: Iterable[int]) -> None:
    errors: list[BaseException] = []

    def run(item: int) -> None:
        try:
            fn(item)
        except BaseException as exc:  # re-raised below, on the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in items]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


_LIVE: set[Cluster] = set()  # clusters whose brokers may be running
_GUARDED = False


def _kill_leftovers() -> None:
    """Kill the brokers of clusters not closed: broker processes are daemons in
    their own sessions, so a pytest killed by a signal (``timeout``, CI) would
    leave them running, since fixture teardown never runs."""
    for cluster in list(_LIVE):
        cluster.kill_all()


def _guard_against_leaks() -> None:
    global _GUARDED
    if _GUARDED or threading.current_thread() is not threading.main_thread():
        return
    _GUARDED = True
    atexit.register(_kill_leftovers)
    previous = signal.getsignal(signal.SIGTERM)

    def on_sigterm(signum: int, frame: Any) -> None:
        _kill_leftovers()
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_sigterm)


class Cluster:
    def __init__(self, data_dir: Path, brokers: int, overrides: dict[str, str]):
        self.data_dir = data_dir
        self.layout = DataDirLayout(data_dir)
        self.overrides = overrides
        self.brokers = {b: BrokerProcess(b, data_dir, free_port(), dict(overrides))
                        for b in range(1, brokers + 1)}
        self.paused: set[int] = set()
        self.down: set[int] = set(self.brokers)
        self._reader: MetadataLogReader | None = None
        self._image = MetadataImage()
        self._clients: list[Any] = []
        self._t0 = time.monotonic()

    def step(self, what: str) -> None:
        """A timestamped progress line (pytest shows it when a test fails)."""
        print(f"[{time.monotonic() - self._t0:7.3f}s] {what}", flush=True)

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> Cluster:
        _guard_against_leaks()
        _LIVE.add(self)
        _in_threads(self.restart, sorted(self.brokers))
        self.wait_registered()
        return self

    def restart(self, broker_id: int) -> None:
        """Start a stopped or killed broker again on its old port."""
        self.brokers[broker_id].start()
        self.down.discard(broker_id)

    def kill(self, broker_id: int) -> None:
        """kill -9, and wait until the OS has released its alive.lock."""
        self.resume(broker_id)
        self.brokers[broker_id].kill()
        self.down.add(broker_id)

    def stop(self, broker_id: int, timeout_s: float = 30) -> None:
        """SIGTERM: a controlled shutdown."""
        self.resume(broker_id)
        stop_daemon(broker_id, self.data_dir, timeout_s=timeout_s)
        self.down.add(broker_id)

    def pause(self, broker_id: int) -> None:
        os.kill(self.pid(broker_id), signal.SIGSTOP)
        self.paused.add(broker_id)

    def resume(self, broker_id: int) -> None:
        if broker_id in self.paused:
            os.kill(self.pid(broker_id), signal.SIGCONT)
            self.paused.discard(broker_id)

    def pid(self, broker_id: int) -> int:
        info = self.brokers[broker_id].info
        assert info is not None, f"broker {broker_id} never started"
        return info.pid

    def close(self) -> None:
        for client in self._clients:
            with contextlib.suppress(Exception):
                client.close(0) if isinstance(client, Producer) else client.close()
        for broker_id in list(self.paused):
            self.resume(broker_id)
        running = [b for b in self.brokers if b not in self.down]
        # Followers first, then the controller: nobody fails over to a stopping broker.
        controller = self.image().controller_id
        for broker_id in sorted(running, key=lambda b: b == controller):
            try:
                self.stop(broker_id)
            except Exception:
                self.kill(broker_id)
        _LIVE.discard(self)

    def kill_all(self) -> None:
        """SIGKILL every broker process of this data dir (last-resort cleanup).

        Found by command line rather than broker.json, which a broker that is
        just starting has not written yet.
        """
        wanted = str(self.data_dir.resolve())
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                args = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
            except OSError:
                continue
            if "slog.broker" in args and "--data-dir" in args and \
                    args[args.index("--data-dir") + 1] == wanted:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(proc.name), signal.SIGKILL)

    # -- what the metadata log says ------------------------------------------------------
    def image(self) -> MetadataImage:
        """The cluster as the brokers see it: the metadata log replayed (incrementally)."""
        if self._reader is None:
            self._reader = MetadataLogReader(self.layout.metadata_dir)
        for offset, record in self._reader.poll():
            self._image.apply(record, offset)
        return self._image

    def state(self, topic: str, partition: int = 0) -> PartitionState:
        state = self.image().partition(topic, partition)
        assert state is not None, f"{topic}-{partition} is not in the metadata"
        return state

    def leader(self, topic: str, partition: int = 0) -> int:
        return self.state(topic, partition).leader

    def controller(self) -> int:
        return self.image().controller_id

    def registered(self, broker_id: int) -> bool:
        """Registered, unfenced, under the incarnation now running."""
        info = self.brokers[broker_id].info
        reg = self.image().brokers.get(broker_id)
        return info is not None and reg is not None and not reg.fenced and \
            reg.incarnation == info.incarnation and reg.port == info.port

    # -- waits -----------------------------------------------------------------------------
    def wait_registered(self, broker_ids: Iterable[int] | None = None,
                        timeout_s: float = WAIT_S) -> None:
        ids = sorted(self.brokers if broker_ids is None else broker_ids)
        wait_until(lambda: self.controller() > 0 and all(self.registered(b) for b in ids),
                   timeout_s, f"brokers {ids} to be registered")

    def wait_fenced(self, broker_id: int, timeout_s: float = WAIT_S) -> None:
        wait_until(lambda: (r := self.image().brokers.get(broker_id)) is not None and r.fenced,
                   timeout_s, f"broker {broker_id} to be fenced")

    def wait_leader(self, topic: str, partition: int = 0, *, not_in: Iterable[int] = (),
                    timeout_s: float = WAIT_S) -> int:
        """A live leader not in ``not_in``; returns its id."""
        excluded = set(not_in)

        def elected() -> int:
            state = self.state(topic, partition)
            reg = self.image().brokers.get(state.leader)
            ok = state.leader > 0 and state.leader not in excluded and reg is not None \
                and not reg.fenced
            return state.leader if ok else 0

        return wait_until(elected, timeout_s,
                          f"a leader of {topic}-{partition} outside {sorted(excluded)}")

    def in_sync(self, topic: str) -> bool:
        image = self.image()
        parts = image.topics[topic].partitions.values() if topic in image.topics else []
        return bool(parts) and all(
            p.leader > 0 and set(p.isr) == set(p.replicas) and
            all(self.registered(r) for r in p.replicas) for p in parts)

    def wait_in_sync(self, topic: str, timeout_s: float = WAIT_S) -> None:
        """Every partition has a leader and its full replica set in the ISR."""
        wait_until(lambda: self.in_sync(topic), timeout_s,
                   f"every replica of {topic} in the ISR "
                   f"({[(p.partition, p.leader, p.isr) for p in self._partitions(topic)]})")

    def wait_isr(self, topic: str, partition: int, isr: Iterable[int],
                 timeout_s: float = WAIT_S) -> None:
        wanted = set(isr)
        wait_until(lambda: set(self.state(topic, partition).isr) == wanted, timeout_s,
                   f"ISR of {topic}-{partition} to become {sorted(wanted)}")

    def _partitions(self, topic: str) -> list[PartitionState]:
        image = self._image
        return list(image.topics[topic].partitions.values()) if topic in image.topics else []

    # -- clients -----------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        """Every broker that is neither down nor paused (a paused one stalls bootstraps)."""
        up = [b for b in self.brokers if b not in self.down and b not in self.paused]
        return ",".join(self.brokers[b].bootstrap for b in up or self.brokers)

    def admin(self) -> Admin:
        admin = Admin(self.bootstrap, request_timeout_ms=10_000)
        self._clients.append(admin)
        return admin

    def producer(self, **options: Any) -> Producer:
        options.setdefault("retry_backoff_ms", 20)
        options.setdefault("request_timeout_ms", 5_000)
        options.setdefault("delivery_timeout_ms", 30_000)
        producer = Producer(self.bootstrap, **options)
        self._clients.append(producer)
        return producer

    def consumer(self, **options: Any) -> Consumer:
        options.setdefault("auto_offset_reset", "earliest")
        options.setdefault("retry_backoff_ms", 20)
        consumer = Consumer(self.bootstrap, **options)
        self._clients.append(consumer)
        return consumer

    def connect(self, broker_id: int, timeout_s: float = 10.0) -> BrokerConnection:
        """A raw protocol connection to one broker (the caller closes it)."""
        return BrokerConnection("127.0.0.1", self.brokers[broker_id].port,
                                timeout_s=timeout_s, node_id=broker_id).connect()

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 3, *,
                     assignment: dict[int, list[int]] | None = None,
                     configs: dict[str, str] | None = None) -> None:
        """Create a topic and wait until every replica is in sync."""
        spec = NewTopic(name, configs=dict(configs or {}), assignment=assignment) \
            if assignment else NewTopic(name, partitions, replication_factor,
                                        dict(configs or {}))
        with Admin(self.bootstrap, request_timeout_ms=10_000) as admin:
            admin.create_topics([spec])
        self.wait_in_sync(name)
        # ...and every replica has read it (a log directory appears when it does).
        wait_until(lambda: all(self.layout.partition_dir(b, name, p.partition).is_dir()
                               for p in self._partitions(name) for b in p.replicas),
                   WAIT_S, f"every replica of {name} to open its log")

    def read_all(self, topic: str, partition: int, end: int,
                 timeout_s: float = WAIT_S) -> list[Any]:
        """Every record of a partition below offset ``end``, through the protocol."""
        consumer = self.consumer()
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        records: list[Any] = []
        deadline = time.monotonic() + timeout_s
        while consumer.position(tp) < end:
            assert time.monotonic() < deadline, \
                f"read {len(records)} records of {tp}, position {consumer.position(tp)} < {end}"
            records += consumer.poll(200)
        consumer.close()
        return [r for r in records if r.offset < end]

    def high_watermark(self, topic: str, partition: int = 0) -> int:
        with Admin(self.bootstrap, request_timeout_ms=10_000) as admin:
            tp = TopicPartition(topic, partition)
            return admin.list_offsets({tp: "latest"})[tp].offset

    # -- files -------------------------------------------------------------------------------
    def replica_batches(self, broker_id: int, topic: str, partition: int,
                        below: int | None = None) -> list[bytes]:
        """The valid batches of one replica's segment files, in order (below offset ``below``)."""
        directory = self.layout.partition_dir(broker_id, topic, partition)
        found: list[bytes] = []
        for path in segments(directory):
            for _, last_offset, raw in valid_batches(path):
                if below is not None and last_offset >= below:
                    return found
                found.append(raw)
        return found

    def replica_values(self, broker_id: int, topic: str, partition: int
                       ) -> dict[int, bytes | None]:
        """offset → value of every record in one replica's files."""
        values: dict[int, bytes | None] = {}
        for raw in self.replica_batches(broker_id, topic, partition):
            _, records = decode_records(raw)
            values.update((r.offset, r.value) for r in records)
        return values

    def produce_to(self, broker_id: int, topic: str, partition: int, values: list[bytes],
                   acks: int = 1) -> int:
        """Produce one batch straight to ``broker_id``; returns the partition's error code."""
        with self.connect(broker_id) as conn:
            return produce_error(conn.request(ApiKey.PRODUCE,
                                              produce_body(topic, partition, values, acks)))

    def append_to(self, broker_id: int, topic: str, partition: int, values: list[bytes],
                  acks: int = 1) -> int:
        """Produce one batch straight to ``broker_id``, which must accept it; its base offset.

        The metadata log may name ``broker_id`` leader a moment before that broker
        has read it, so "not the leader (yet)" is retried for a few seconds.
        """
        deadline = time.monotonic() + 5
        with self.connect(broker_id) as conn:
            while True:
                response = conn.request(ApiKey.PRODUCE,
                                        produce_body(topic, partition, values, acks))
                [result] = response.responses[0].partition_responses
                if result.error_code not in _NOT_YET or time.monotonic() > deadline:
                    break
                time.sleep(0.02)
        assert result.error_code == 0, \
            f"broker {broker_id} refused {topic}-{partition}: {result.error_code!r}"
        return int(result.base_offset)

    def log_text(self, broker_id: int) -> str:
        return self.brokers[broker_id].log_text

    def log_lines(self, broker_id: int, logger: str) -> str:
        """The lines one logger (e.g. ``slog.controller``) wrote to a broker's log."""
        return "\n".join(line for line in self.log_text(broker_id).splitlines()
                         if f" {logger}: " in line)

    def all_logs(self) -> str:
        return "\n".join(self.log_text(b) for b in sorted(self.brokers))


def broker_stats(cluster: Cluster, broker_id: int) -> dict[str, int]:
    """The broker's counters (requests, group-commit fsyncs...), as it logs them on SIGUSR1."""
    before = cluster.log_text(broker_id).count(" stats: ")
    os.kill(cluster.pid(broker_id), signal.SIGUSR1)
    wait_until(lambda: cluster.log_text(broker_id).count(" stats: ") > before, 10,
               f"broker {broker_id} to log its stats")
    line = cluster.log_text(broker_id).rsplit(" stats: ", 1)[1].splitlines()[0]
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}


def produce_body(topic: str, partition: int, values: list[bytes], acks: int) -> dict[str, Any]:
    """A Produce request body carrying one batch of ``values``."""
    payload = build_batch((None, v, (), 0) for v in values)
    return {"transactional_id": None, "acks": acks, "timeout": 5_000,
            "topic_data": [{"name": topic, "partition_data": [
                {"index": partition, "records": payload}]}]}


def produce_error(response: Any) -> int:
    """The error code of a one-partition Produce response."""
    [topic_response] = response.responses
    [result] = topic_response.partition_responses
    return int(result.error_code)


def check_acknowledged(cluster: Cluster, topic: str, partitions: Iterable[int],
                       acked: dict[bytes, tuple[int, int]]) -> dict[int, int]:
    """Each acknowledged record once, at its offset; returns each partition's HW."""
    marks = {}
    for p in partitions:
        hw = cluster.high_watermark(topic, p)
        records = cluster.read_all(topic, p, hw)
        assert [r.offset for r in records] == list(range(hw)), f"{topic}-{p} has gaps"
        duplicated = {v for v, n in Counter(r.value for r in records).items() if n > 1}
        assert not duplicated, f"{topic}-{p}: duplicated records {sorted(duplicated)[:5]}"
        by_offset = {r.offset: r.value for r in records}
        for value, (partition, offset) in acked.items():
            if partition == p:
                assert by_offset.get(offset) == value, \
                    f"{value!r} acknowledged at {topic}-{p}@{offset}, found " \
                    f"{by_offset.get(offset)!r} (hw {hw})"
        marks[p] = hw
    return marks


def check_identical_replicas(cluster: Cluster, topic: str, marks: dict[int, int]) -> None:
    """Stop the cluster cleanly, then compare every replica's batches up to the HW."""
    replicas = {p: cluster.state(topic, p).replicas for p in marks}
    cluster.close()
    for p, hw in marks.items():
        copies = {b: cluster.replica_batches(b, topic, p, below=hw) for b in replicas[p]}
        leader_copy = next(iter(copies.values()))
        assert sum(_record_count(raw) for raw in leader_copy) == hw, \
            f"{topic}-{p}: replica holds fewer records than the HW {hw}"
        for broker_id, copy in copies.items():
            assert copy == leader_copy, \
                f"{topic}-{p}: replica on broker {broker_id} differs below the HW {hw}"


def _record_count(raw: bytes) -> int:
    return batch.parse_header(raw).last_offset_delta + 1


def _marker_value(request: pytest.FixtureRequest, name: str, default: Any) -> Any:
    marker = request.node.get_closest_marker(name)
    return marker.args[0] if marker and marker.args else default


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "brokers(n): number of brokers in the cluster fixture")
    config.addinivalue_line("markers", "broker_config(dict): extra broker settings")


@contextlib.contextmanager
def running_cluster(data_dir: Path, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    overrides = {**FAST, **_marker_value(request, "broker_config", {})}
    nodes = Cluster(data_dir, _marker_value(request, "brokers", 3), overrides)
    try:
        nodes.start()
        yield nodes
    finally:
        nodes.close()
    tracebacks = [b for b in nodes.brokers if "Traceback" in nodes.log_text(b)]
    assert not tracebacks, "\n".join(nodes.log_text(b)[-6000:] for b in tracebacks)


@pytest.fixture
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    with running_cluster(tmp_path / "data", request) as nodes:
        yield nodes


@pytest.fixture
def own_cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """``cluster`` under another name, for a test (with its own markers) in a module whose
    ``cluster`` is the shared one."""
    with running_cluster(tmp_path / "data", request) as nodes:
        yield nodes


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
                   ) -> Iterator[Cluster]:
    """One cluster for a whole module (markers from the module's ``pytestmark``), for tests
    that break no broker and use topics of their own: a cluster start is seconds."""
    with running_cluster(tmp_path_factory.mktemp("cluster") / "data", request) as nodes:
        yield nodes
