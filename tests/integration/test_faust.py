"""Faust (faust-streaming), a Python stream-processing library, runs a stateful app against a
real 3-broker slog cluster, as a separate process, the way its users run it.

The app (``faust_apps/word_count.py``) counts words in a table backed by a changelog topic
and writes each new count to an output topic. A read_committed consumer then checks the
output: each input record's result exactly once, and each word's counts running 1..n (the
table's state right), in exactly-once mode through a kill -9 of the app and of a broker
(the transaction coordinator), and in the at-least-once default mode.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from kafka import KafkaProducer

from slog.protocol.apis import ApiKey
from tests.cluster.conftest import Cluster, wait_until

pytestmark = pytest.mark.timeout(240)

APP = Path(__file__).parent / "faust_apps" / "word_count.py"
PARTITIONS = 4
WORDS = [f"w{i:02d}" for i in range(12)]
LOGLEVEL = os.environ.get("FAUST_TEST_LOGLEVEL", "info")  # debug: Faust's own commits too
PROGRESS_S = 60.0  # how long the app may take to show progress (2 shared cores, start-up)


@dataclass
class Input:
    """The records produced so far: (word, id), in order."""

    records: list[tuple[str, str]] = field(default_factory=list)

    def expected_counts(self) -> Counter[str]:
        return Counter(word for word, _ in self.records)


def produce(bootstrap: str, topic: str, ids: range, into: Input, pause_s: float = 0.0,
            chunk: int = 50) -> None:
    """Keyed records, partitioned as Faust partitions (murmur2, Kafka's default partitioner),
    so each word's count and its output stay in one partition and transaction. Idempotent:
    a retry across a broker kill must not duplicate an input."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=20,
                             enable_idempotence=True, request_timeout_ms=10_000,
                             retry_backoff_ms=100)
    try:
        for start in range(ids.start, ids.stop, chunk):
            sent = []
            for i in range(start, min(start + chunk, ids.stop)):
                word = WORDS[(i * 7) % len(WORDS)]
                producer.send(topic, key=word.encode(), value=str(i).encode())
                sent.append((word, str(i)))
            producer.flush(timeout=60)
            into.records += sent
            if pause_s:
                time.sleep(pause_s)
    finally:
        producer.close(timeout=10)


class Feeder(threading.Thread):
    """:func:`produce` in the background, paced, while the test kills things; ``join``
    re-raises what failed."""

    def __init__(self, bootstrap: str, topic: str, ids: range, into: Input):
        super().__init__(daemon=True)
        self.args_ = (bootstrap, topic, ids, into)
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            produce(*self.args_, pause_s=0.05)
        except BaseException as exc:  # re-raised by join, on the test's thread
            self.error = exc

    def join(self, timeout: float | None = None) -> None:
        super().join(timeout)
        if self.error is not None:
            raise AssertionError(f"producing the input failed: {self.error!r}") from self.error


class OutputReader:
    """Reads the app's output topic from the beginning with isolation.level=read_committed,
    keeping what it has read, so waits resume where the last one stopped."""

    def __init__(self, bootstrap: str, topic: str):
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "faust-checker",
                                  "isolation.level": "read_committed",
                                  "enable.auto.commit": False})
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING)
                              for p in range(PARTITIONS)])
        self.records: list[dict[str, object]] = []

    def poll(self, timeout_s: float = 0.5) -> int:
        for message in self.consumer.consume(1000, timeout_s):
            assert message.error() is None, f"read_committed consumer: {message.error()}"
            self.records.append(json.loads(message.value()))
        return len(self.records)

    def wait_for(self, count: int, app: App | None = None,
                 timeout_s: float = PROGRESS_S) -> None:
        deadline = time.monotonic() + timeout_s
        while self.poll() < count:
            if app is not None:
                app.check_alive()
            assert time.monotonic() < deadline, \
                f"{timeout_s:g}s without {count} committed results (have " \
                f"{len(self.records)}){'' if app is None else app.errors()}"

    def close(self) -> None:
        self.consumer.close()


class App:
    """The word count app as a separate process: ``python word_count.py worker``."""

    def __init__(self, cluster: Cluster, app_id: str, guarantee: str, topics: tuple[str, str],
                 log_dir: Path):
        self.cluster = cluster
        self.env = {**os.environ, "FAUST_BROKERS": cluster.bootstrap, "FAUST_APP_ID": app_id,
                    "FAUST_GUARANTEE": guarantee, "FAUST_PARTITIONS": str(PARTITIONS),
                    "FAUST_INPUT": topics[0], "FAUST_OUTPUT": topics[1]}
        self.log_dir = log_dir
        self.runs = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"app-{self.runs}.log"

    def start(self) -> None:
        self.runs += 1
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, str(APP), "worker", "--loglevel", LOGLEVEL],
                env=self.env, stdout=log, stderr=subprocess.STDOUT, cwd=self.log_dir)

    def check_alive(self) -> None:
        assert self.process is not None
        code = self.process.poll()
        assert code is None, f"the app exited ({code}):{self.log_tail()}"

    def kill(self) -> None:
        """kill -9: no shutdown, an open transaction left behind."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()

    def log_tail(self, chars: int = 4000) -> str:
        return "\n" + self.log_path.read_text(errors="replace")[-chars:]

    def errors(self) -> str:
        """The app's error lines, then its log's tail: what a failed wait reports. A running
        app is sent SIGUSR1 first, on which Faust's worker logs where each task waits."""
        if self.process is not None and self.process.poll() is None:
            size = self.log_path.stat().st_size
            self.process.send_signal(signal.SIGUSR1)
            with contextlib.suppress(AssertionError):
                wait_until(lambda: self.log_path.stat().st_size > size, 5, "a task dump")
            time.sleep(0.5)  # the rest of the dump
        lines = self.log_path.read_text(errors="replace").splitlines()
        errors = [line for line in lines if "[ERROR]" in line or "[CRITICAL]" in line]
        return "; app errors:\n" + "\n".join(errors[-15:]) + "\napp log tail:" + \
            self.log_tail(12000)


@contextlib.contextmanager
def word_count(cluster: Cluster, tmp_path: Path, name: str, guarantee: str
               ) -> Iterator[tuple[App, OutputReader, str]]:
    """The input and output topics (RF 3), the app (started) and a reader of its output."""
    topics = (f"{name}-words", f"{name}-counts")
    for topic in topics:
        cluster.create_topic(topic, PARTITIONS, 3)
    app = App(cluster, name, guarantee, topics, tmp_path)
    reader = OutputReader(cluster.bootstrap, topics[1])
    app.start()
    try:
        yield app, reader, topics[0]
    finally:
        app.stop()
        reader.close()


def check_exactly_once(reader: OutputReader, produced: Input) -> None:
    """Every input id once in the committed output, and each word's counts 1..n."""
    reader.wait_for(len(produced.records))
    reader.poll(2.0)  # anything more committed (a duplicate) shows up too
    ids = Counter(str(r["id"]) for r in reader.records)
    duplicated = sorted((i for i, n in ids.items() if n > 1), key=int)
    assert not duplicated, f"{len(duplicated)} inputs have more than one result: {duplicated[:10]}"
    missing = sorted({i for _, i in produced.records} - set(ids), key=int)
    assert not missing, f"{len(missing)} inputs have no result: {missing[:10]}"
    counts: dict[str, list[int]] = defaultdict(list)
    for record in reader.records:
        counts[str(record["word"])].append(int(str(record["count"])))
    expected = produced.expected_counts()
    for word, seen in counts.items():
        assert sorted(seen) == list(range(1, expected[word] + 1)), \
            f"{word}: counts {sorted(seen)[:5]}...{sorted(seen)[-5:]} " \
            f"for {expected[word]} inputs (the table's state is wrong)"


def test_at_least_once_counts(cluster: Cluster, tmp_path: Path) -> None:
    """The default mode: every input counted once on a run without failures."""
    produced = Input()
    with word_count(cluster, tmp_path, "alo", "at_least_once") as (app, reader, words):
        produce(cluster.bootstrap, words, range(600), produced)
        reader.wait_for(600, app)
        app.check_alive()
        check_exactly_once(reader, produced)


def test_exactly_once_through_app_and_broker_kills(cluster: Cluster, tmp_path: Path) -> None:
    produced = Input()
    with word_count(cluster, tmp_path, "eos", "exactly_once") as (app, reader, words):
        produce(cluster.bootstrap, words, range(400), produced)
        reader.wait_for(400, app)
        cluster.step("first 400 counted exactly once")

        # kill -9 of the app mid-stream: the input keeps coming while it is down
        feeder = Feeder(cluster.bootstrap, words, range(400, 1600), produced)
        feeder.start()
        reader.wait_for(600, app)
        app.kill()
        cluster.step(f"app killed with {len(reader.records)} results read")
        app.start()
        feeder.join()
        reader.wait_for(1600, app)
        cluster.step("restarted app caught up")

        # kill -9 of the broker coordinating one of the app's transactions, mid-stream
        coordinator = transaction_coordinator(cluster, app, "eos-1-0")
        feeder = Feeder(cluster.bootstrap, words, range(1600, 2400), produced)
        feeder.start()
        reader.wait_for(1800, app)
        led = [f"{t}-{p}" for t in ("eos-words", "eos-counts", "eos-counts-changelog")
               for p in range(PARTITIONS) if cluster.leader(t, p) == coordinator]
        cluster.kill(coordinator)
        cluster.step(f"broker {coordinator} killed: coordinator of eos-1-0, leader of {led}")
        feeder.join()
        reader.wait_for(2400, app)
        cluster.restart(coordinator)
        cluster.wait_registered()
        cluster.step("app caught up without the broker; broker restarted")
        produce(cluster.bootstrap, words, range(2400, 2600), produced)
        reader.wait_for(2600, app)
        app.check_alive()
        check_exactly_once(reader, produced)


def transaction_coordinator(cluster: Cluster, app: App, transactional_id: str) -> int:
    """The broker coordinating one of the app's transactional ids. Faust names them
    ``{app id}-{topic group}-{partition}``; the input topic's group is 1 (0 is the
    one-partition leader topic), which the app's log confirms."""
    assert f"for transactional id {transactional_id} " in app.log_path.read_text(), \
        f"the app uses no transactional id {transactional_id}:{app.log_tail()}"

    def found() -> int:
        with cluster.connect(next(b for b in cluster.brokers if b not in cluster.down)) as conn:
            response = conn.request(ApiKey.FIND_COORDINATOR,
                                    {"key": transactional_id, "key_type": 1}, version=3)
        return 0 if response.error_code else int(response.node_id)
    return wait_until(found, 20, f"the coordinator of {transactional_id}")
