"""End-to-end broker throughput: slog with librdkafka clients against Redis Streams.

Workloads (``--quick``: the same, one run, client ``c`` only; smaller record
counts would mostly time client start-up):

* 1,000,000 records of 100 bytes, and 100,000 records of 1 KiB,
* into a topic of 1 and of 6 partitions (Redis: 1 stream, or 6 streams;
  ``--partitions 6,1000`` picks other counts, e.g. to compare producing to
  1,000 partitions at once with 6),
* produced with acks=1, then read back from the beginning until all are read.

Peers, one after the other on the same machine (never at the same time):

* **slog**: one broker started here with ``slog.broker.daemon`` in a temp data
  dir, default settings (``--write-caching false,true``: also a second broker
  with ``write.caching.default=true``, peers ``+wc``, one after the other).
  Three librdkafka clients:

  - ``c`` (the headline figures): ``rdkafka_perf.c`` next to this script,
    compiled here with the C compiler against confluent-kafka's own bundled
    librdkafka (the library the spec names; system ``-lrdkafka`` if the wheel
    has none; the header comes from librdkafka-dev). Like librdkafka's
    ``rdkafka_performance`` example it does nothing per record besides the
    librdkafka call: ``rd_kafka_produce`` of a shared value (record i to
    partition i mod P), then flush; ``rd_kafka_assign`` at offset 0 and
    ``rd_kafka_consume_batch_queue`` until N records arrived. This is the
    counterpart of ``redis-benchmark``, which is C doing nothing per entry
    either, so neither peer is measured through a slower client.
  - ``kcat`` (librdkafka in C): ``kcat -P -l FILE`` produces one record per
    line of a prepared file; ``kcat -C -o 0 -c N`` consumes into /dev/null.
    kcat formats and writes every record it consumes, which costs it about
    a core at these rates, so its consume figures are client-bound.
  - ``python``: confluent-kafka's ``Producer.produce`` in a loop, then a
    ``Consumer`` with ``assign()`` at offset 0 polling ``consume()`` until
    all records arrived. These figures include the Python interpreter's cost
    per record (``produce()`` alone tops out at about 0.85 M calls/s on the
    reference machine, ``consume()`` at well under 1 M records/s), so they
    measure the client more than the broker.

  The consumers assign the partitions themselves at offset 0 (the topic is
  new, so that is its beginning, checked with the watermarks; an absolute
  offset spares librdkafka a ListOffsets round) and use no group protocol.

* **mock** (``--mock``, client ``c`` only): librdkafka's own mock cluster, the
  C broker librdkafka tests itself against, started by ``rdkafka_mock_broker.c``
  next to this script (built like ``rdkafka_perf.c``). It keeps batches in
  memory, the last 5 MB of each partition: no disk, no fsync, no replication,
  and so nothing to consume from offset 0 (only its produce is measured; its
  watermarks must add up to the records sent). It is not a target to beat but the
  ceiling: what the client reaches against the cheapest broker it can talk to
  on this machine. With two partition counts (``--partitions 6,1000``) the
  report prints each peer's rate at the larger count over the rate at the
  smaller, so slog's ratio reads against the ratio the client allows.

* **redis**: ``redis-server --appendonly yes --appendfsync everysec --save ''``
  in a temp dir, driven by ``redis-benchmark`` (C):

  - produce: ``XADD <stream> * f <value>`` with ``-P 100`` (pipeline 100) and
    one connection (``-c 1``): librdkafka also uses one connection to a broker,
    and one connection is redis-benchmark's fastest setting on 2 cores (the
    default 50 connections measured ~30% slower). 6 "partitions" are 6
    streams picked at random per command (``-r 6`` on the stream name).
  - consume: ``XREADGROUP GROUP g c NOACK COUNT 1000 STREAMS <streams> >``
    with ``-P 10``, one connection, as many commands as needed to drain the
    largest stream; verified afterwards (every group's lag is 0). Why this is
    the fairest choice: the C client parses every reply like librdkafka
    parses every fetch; COUNT 1000 x pipeline 10 (10,000 entries per round
    trip) is the fastest setting measured (COUNT 10,000 -P 1, COUNT 5,000
    -P 2, COUNT 100 -P 100, COUNT 1000 -P 4 were 5-30% slower or equal, and
    ``--threads 2`` with 2 or 4 connections was no faster) and the batching
    is comparable to a Kafka fetch of 1 MB; NOACK skips the pending-entries
    list, which a Kafka consumer with assign() and no commits does not have
    either, and it is the faster option for Redis, so the ratio is
    conservative.

Every throughput is timed as the wall time of the whole client run (process
start, connect and metadata included, on both sides: about 10 ms for kcat,
20-30 ms for rdkafka_perf with librdkafka's orderly close, 5 ms for
redis-benchmark). After creating its topics the broker gets up to 5 s to go
idle, so the first workload does not pay for topic creation. MB = 10^6 bytes
of record values. Server CPU time comes from /proc/<pid>/stat (utime + stime,
10 ms ticks) around each phase;
"srv" is that CPU time over the phase's wall time, "cli" the same for the
client process (its rusage; the Python client's is this process's CPU time).
Together they tell whether the server or the client was the limit (both share
the machine's cores; a multi-threaded librdkafka client can exceed 100%). RSS is
read from /proc/<pid>/status after the last workload of a run, with all of
the run's data still in the log. The same figures are shown for redis-server.

Targets: produce >= 2x Redis XADD records/s, consume >= 2x Redis XREADGROUP,
broker RSS < 150 MB after the run. Medians of ``--runs`` runs (default 3).
The whole benchmark stops after ``--timeout`` seconds; every process it
started is stopped and every temp dir removed, also on errors and Ctrl-C.

Usage::

    python benchmarks/broker.py [--quick] [--runs N] [--clients c,kcat,python] [--timeout S]
        [--partitions 1,6] [--write-caching false,true] [--mock]

``--quick`` takes about 20 s, the default (three runs, three clients) about
three minutes on two quiet cores. Other load on the machine shows in every
figure: run it on a quiet machine, or several times, and read the ratios
together with the srv/cli columns. The exit status is 0 when the first client
listed (``c`` by default) meets every target.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import glob
import math
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_support import BenchTimeout, Deadline, cpu_seconds, wait_until_idle  # noqa: E402

from slog.broker.daemon import start_daemon, stop_daemon  # noqa: E402

PRODUCE_TARGET = 2.0
CONSUME_TARGET = 2.0
RSS_TARGET_MB = 150

# What a Kafka user sets for producer throughput (state them in the output).
PRODUCER_CONFIG = {
    "acks": "1",
    "linger.ms": "5",
    "batch.size": "1000000",
    "compression.type": "none",
    "queue.buffering.max.messages": "2000000",
    "queue.buffering.max.kbytes": "2097151",
    "enable.idempotence": "false",
}
# Consumer: Kafka's default fetch sizes (fetch.max.bytes 50 MB, 1 MB per
# partition; 10 MB per partition measured no faster) and a deep prefetch queue.
# Nothing is committed, so storing each record's offset (a lock per record in
# librdkafka) is work for nothing; the Redis peer reads with NOACK likewise.
CONSUMER_CONFIG = {
    "queued.min.messages": "1000000",
    "queued.max.messages.kbytes": "1048576",
    "enable.auto.offset.store": "false",
}
# Only librdkafka >= 2.1 has this (the Python client's; kcat's may be older).
# Before 2.1 (and with its default of 1000 ms) a partition whose prefetch queue
# passed queued.min.messages is only fetched again a second later; the large
# queued.min.messages above keeps older versions out of that state.
PYTHON_CONSUMER_EXTRA = {"fetch.queue.backoff.ms": "10"}
CLIENTS = ("c", "kcat", "python")

REDIS_XADD_PIPELINE = 100
REDIS_READ_COUNT = 1000
REDIS_READ_PIPELINE = 10




@dataclass(frozen=True)
class Case:
    value_size: int
    records: int
    partitions: int

    @property
    def name(self) -> str:
        size = "1 KiB" if self.value_size == 1024 else f"{self.value_size} B"
        return f"{self.records:,} x {size}, {self.partitions}p"

    @property
    def key(self) -> str:
        return f"v{self.value_size}-p{self.partitions}"

    @property
    def payload_bytes(self) -> int:
        return self.value_size * self.records


@dataclass
class Measure:
    produce_s: list[float] = field(default_factory=list)
    consume_s: list[float] = field(default_factory=list)
    server_cpu_produce: list[float] = field(default_factory=list)
    server_cpu_consume: list[float] = field(default_factory=list)
    client_cpu_produce: list[float] = field(default_factory=list)
    client_cpu_consume: list[float] = field(default_factory=list)

    def add(self, phase: str, timing: Timing, server_cpu: float) -> None:
        getattr(self, f"{phase}_s").append(timing.wall)
        getattr(self, f"client_cpu_{phase}").append(timing.client_cpu)
        getattr(self, f"server_cpu_{phase}").append(server_cpu)


@dataclass(frozen=True)
class Timing:
    wall: float
    client_cpu: float


@dataclass
class RunMemory:
    rss: int
    anon: int
    file: int


# ------------------------------------------------------------------ helpers




def free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def memory(pid: int) -> RunMemory:
    values = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name in ("VmRSS", "RssAnon", "RssFile"):
                values[name] = int(rest.split()[0]) * 1024
    return RunMemory(values["VmRSS"], values["RssAnon"], values["RssFile"])


def value_bytes(size: int) -> bytes:
    """Printable, newline-free (kcat splits lines; redis-benchmark takes argv)."""
    pattern = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return (pattern * (size // len(pattern) + 1))[:size]


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_client(cmd: list[str], deadline: Deadline, what: str) -> Timing:
    """Run a client to completion: its wall time and CPU time in seconds.

    Clients run one at a time and the servers are reaped only at the end, so
    the growth of RUSAGE_CHILDREN across the run is this client's CPU time.
    """
    cpu = children_cpu()
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              timeout=deadline.left(), check=False)
    except subprocess.TimeoutExpired:
        raise BenchTimeout(f"{what} did not finish in time") from None
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({done.returncode}): "
                           f"{done.stderr.decode(errors='replace')[-2000:]}")
    return Timing(elapsed, children_cpu() - cpu)


@contextlib.contextmanager
def timed_here() -> Iterator[list[Timing]]:
    """Time a client that runs in this process (its CPU time is ours)."""
    out: list[Timing] = []
    cpu, start = time.process_time(), time.perf_counter()
    yield out
    out.append(Timing(time.perf_counter() - start, time.process_time() - cpu))


def build_rdkafka_perf(root: Path) -> tuple[Path, str]:
    """Compile rdkafka_perf.c; the binary and the librdkafka it links."""
    return build_c_client(root, "rdkafka_perf"), librdkafka_description()


def build_c_client(root: Path, name: str) -> Path:
    """Compile benchmarks/NAME.c against the librdkafka the Python client bundles."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RuntimeError(f"{name}.c needs a C compiler (cc or gcc)")
    source = REPO / "benchmarks" / f"{name}.c"
    binary = root / name
    bundled = bundled_librdkafka()
    link = [str(bundled), f"-Wl,-rpath,{bundled.parent}"] if bundled else ["-lrdkafka"]
    done = subprocess.run([compiler, "-O2", "-o", str(binary), str(source), *link],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"building {name}.c failed (it needs the librdkafka "
                           f"headers, e.g. the librdkafka-dev package):\n{done.stderr[-2000:]}")
    return binary


def librdkafka_description() -> str:
    bundled = bundled_librdkafka()
    return f"confluent-kafka's bundled {bundled.name}" if bundled else "the system librdkafka"


def bundled_librdkafka() -> Path | None:
    """The librdkafka shared library inside the confluent-kafka wheel, if any."""
    try:
        import confluent_kafka
    except ImportError:
        return None
    libs = Path(confluent_kafka.__file__).resolve().parent.parent / "confluent_kafka.libs"
    found = sorted(glob.glob(str(libs / "librdkafka*.so*")))
    return Path(found[0]) if found else None


def kafka_args(config: dict[str, str]) -> list[str]:
    return [arg for key, value in config.items() for arg in ("-X", f"{key}={value}")]


def key_values(config: dict[str, str]) -> list[str]:
    return [f"{key}={value}" for key, value in config.items()]


@dataclass
class Tools:
    """What the clients need, prepared once per benchmark."""
    values: dict[int, Path] = field(default_factory=dict)  # kcat: one record per line
    rdkafka_perf: Path | None = None
    mock_broker: Path | None = None  # --mock: rdkafka_mock_broker.c, built
    rdkafka_perf_lib: str = ""


# ------------------------------------------------------------------ redis


class RedisPeer:
    def __init__(self, root: Path, deadline: Deadline):
        import redis

        self.dir = root / "redis"
        self.dir.mkdir()
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--dir", str(self.dir), "--appendonly", "yes", "--appendfsync", "everysec",
             "--save", "", "--logfile", str(self.dir / "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )
        self.client = redis.Redis(port=self.port)
        while True:
            deadline.check()
            try:
                if self.client.ping():
                    break
            except redis.ConnectionError:
                if self.proc.poll() is not None:
                    raise RuntimeError("redis-server exited at start") from None
                time.sleep(0.02)

    def streams(self, case: Case) -> list[str]:
        if case.partitions == 1:
            return [case.key]
        # redis-benchmark expands __rand_int__ to 12 digits in [0, -r).
        return [f"{case.key}:{i:012d}" for i in range(case.partitions)]

    def produce(self, case: Case, deadline: Deadline) -> tuple[Timing, float]:
        cmd = ["redis-benchmark", "-p", str(self.port), "-c", "1", "-P",
               str(REDIS_XADD_PIPELINE), "-n", str(case.records)]
        if case.partitions > 1:
            cmd += ["-r", str(case.partitions), "XADD", f"{case.key}:__rand_int__"]
        else:
            cmd += ["XADD", case.key]
        cmd += ["*", "f", value_bytes(case.value_size).decode()]
        cpu = cpu_seconds(self.proc.pid)
        timing = run_client(cmd, deadline, "redis-benchmark XADD")
        cpu = cpu_seconds(self.proc.pid) - cpu
        stored = sum(self.client.xlen(s) for s in self.streams(case))
        if stored != case.records:
            raise RuntimeError(f"redis holds {stored} entries, expected {case.records}")
        return timing, cpu

    def consume(self, case: Case, deadline: Deadline) -> tuple[Timing, float]:
        streams = self.streams(case)
        longest = max(self.client.xlen(s) for s in streams)
        for s in streams:
            self.client.xgroup_create(s, "g", id="0")
        commands = math.ceil(longest / REDIS_READ_COUNT)
        commands = math.ceil(commands / REDIS_READ_PIPELINE) * REDIS_READ_PIPELINE
        cmd = ["redis-benchmark", "-p", str(self.port), "-c", "1", "-P",
               str(REDIS_READ_PIPELINE), "-n", str(commands), "XREADGROUP", "GROUP", "g", "c",
               "NOACK", "COUNT", str(REDIS_READ_COUNT), "STREAMS", *streams,
               *([">"] * len(streams))]
        cpu = cpu_seconds(self.proc.pid)
        timing = run_client(cmd, deadline, "redis-benchmark XREADGROUP")
        cpu = cpu_seconds(self.proc.pid) - cpu
        for s in streams:
            (group,) = self.client.xinfo_groups(s)
            if group.get("lag") != 0 or group.get("entries-read") != self.client.xlen(s):
                raise RuntimeError(f"XREADGROUP did not read all of {s}: {group}")
        return timing, cpu

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# ------------------------------------ Kafka-protocol brokers: slog, librdkafka's mock


class KafkaPeer:
    """A broker the Kafka clients talk to at ``bootstrap``; ``pid`` is its process."""

    bootstrap: str
    pid: int
    # False: the peer drops old batches (the mock keeps 5 MB a partition), so
    # only its produce is measured and its watermarks' sum is what it took.
    keeps_everything = True

    def stored(self, topic: str, partitions: int, deadline: Deadline) -> int:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "bench-check",
                             "log_level": 3})
        try:
            total = 0
            for p in range(partitions):
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, p), timeout=deadline.left())
                if low != 0 and self.keeps_everything:
                    raise RuntimeError(f"{topic}-{p} starts at offset {low}, not 0")
                total += high
            return total
        finally:
            consumer.close()

    # rdkafka_perf.c ----------------------------------------------------------
    def produce_c(self, topic: str, case: Case, tools: Tools, deadline: Deadline) -> Timing:
        cmd = [str(tools.rdkafka_perf), "produce", self.bootstrap, topic, str(case.partitions),
               str(case.records), str(case.value_size), *key_values(PRODUCER_CONFIG)]
        return run_client(cmd, deadline, "rdkafka_perf produce")

    def consume_c(self, topic: str, case: Case, tools: Tools, deadline: Deadline) -> Timing:
        # It fails unless exactly N records arrive.
        cmd = [str(tools.rdkafka_perf), "consume", self.bootstrap, topic, str(case.partitions),
               str(case.records), *key_values(CONSUMER_CONFIG)]
        return run_client(cmd, deadline, "rdkafka_perf consume")

    # kcat ------------------------------------------------------------------
    def produce_kcat(self, topic: str, case: Case, tools: Tools, deadline: Deadline) -> Timing:
        cmd = ["kcat", "-P", "-b", self.bootstrap, "-t", topic, "-l",
               str(tools.values[case.value_size]), *kafka_args(PRODUCER_CONFIG)]
        return run_client(cmd, deadline, "kcat -P")

    def consume_kcat(self, topic: str, case: Case, tools: Tools, deadline: Deadline) -> Timing:
        # -c N: exit after N records (a lost record makes it hit the time limit).
        cmd = ["kcat", "-C", "-b", self.bootstrap, "-t", topic, "-o", "0", "-q",
               "-c", str(case.records), *kafka_args(CONSUMER_CONFIG)]
        return run_client(cmd, deadline, "kcat -C")

    # confluent-kafka -----------------------------------------------------
    def produce_python(self, topic: str, case: Case, tools: Tools,
                       deadline: Deadline) -> Timing:
        from confluent_kafka import KafkaException, Producer

        errors: list[str] = []
        producer = Producer({"bootstrap.servers": self.bootstrap, **PRODUCER_CONFIG,
                             "log_level": 3, "error_cb": lambda err: errors.append(str(err))})
        value = value_bytes(case.value_size)
        produce, poll = producer.produce, producer.poll
        with timed_here() as timing:
            for i in range(case.records):
                try:
                    produce(topic, value)
                except BufferError:
                    poll(0.005)
                    produce(topic, value)
                if not i & 0xFFFF:
                    deadline.check()
            while producer.flush(min(1.0, deadline.left())):
                pass
        if errors:
            raise KafkaException(f"producer errors: {errors[:5]}")
        return timing[0]

    def consume_python(self, topic: str, case: Case, tools: Tools,
                       deadline: Deadline) -> Timing:
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "bench",
                             "enable.auto.commit": False, "log_level": 3, **CONSUMER_CONFIG,
                             **PYTHON_CONSUMER_EXTRA})
        try:
            with timed_here() as timing:
                # An absolute offset spares librdkafka a ListOffsets round (which
                # it first tries before the leader connection is up, then retries
                # 500 ms later).
                consumer.assign([TopicPartition(topic, p, 0) for p in range(case.partitions)])
                seen = 0
                while seen < case.records:
                    deadline.check()
                    # consume() waits until it has num_messages or the timeout passed.
                    messages = consumer.consume(min(100_000, case.records - seen), 0.1)
                    for message in messages:
                        if message.error() is not None:
                            raise KafkaException(message.error())
                    seen += len(messages)
        finally:
            consumer.close()
        if seen != case.records:
            raise RuntimeError(f"consumed {seen} records, expected {case.records}")
        return timing[0]


class SlogPeer(KafkaPeer):
    def __init__(self, root: Path, deadline: Deadline, write_caching: bool = False):
        self.dir = root / "slog"
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        overrides = {"write.caching.default": "true" if write_caching else "false"}
        self.info = start_daemon(1, self.dir, self.bootstrap, overrides,
                                 timeout_s=min(30.0, deadline.left()))
        self.pid = self.info.pid

    def create_topics(self, names: dict[str, int], deadline: Deadline) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 3})
        futures = admin.create_topics([NewTopic(n, p, 1) for n, p in names.items()],
                                      operation_timeout=10)
        for future in futures.values():
            future.result(timeout=deadline.left())
        # Wait until every partition has a leader in the broker's metadata.
        while True:
            meta = admin.list_topics(timeout=deadline.left())
            ready = all(
                name in meta.topics and len(meta.topics[name].partitions) == parts
                and all(p.leader >= 0 for p in meta.topics[name].partitions.values())
                for name, parts in names.items()
            )
            if ready:
                break
            time.sleep(0.05)
        self._wait_until_served(admin, names, deadline)
        wait_until_idle(self.pid, deadline)

    @staticmethod
    def _wait_until_served(admin: Any, names: dict[str, int], deadline: Deadline) -> None:
        """Until the broker answers ListOffsets for every partition. Metadata names
        the leader as soon as the controller chose it, but the broker creates a
        thousand partitions' logs on a worker thread for seconds after that (and
        looks idle while it waits on the disk): a producer started then gets
        NOT_LEADER_OR_FOLLOWER answers and metadata refreshes, which would be
        timed as produce throughput."""
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        wanted = {TopicPartition(name, p): OffsetSpec.latest()
                  for name, parts in names.items() for p in range(parts)}
        while True:
            futures = admin.list_offsets(wanted, request_timeout=deadline.left())
            failed = 0
            for future in futures.values():
                try:
                    future.result(timeout=deadline.left())
                except Exception:  # not served yet (UNKNOWN_TOPIC_OR_PART, NOT_LEADER)
                    failed += 1
            if not failed:
                return
            time.sleep(0.2)

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            stop_daemon(1, self.dir, timeout_s=30)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, 0)
            os.kill(self.pid, signal.SIGKILL)


class MockPeer(KafkaPeer):
    """librdkafka's mock cluster (rdkafka_mock_broker.c): a C broker that keeps
    batches in memory (the last 5 MB of each partition). What a librdkafka client
    reaches against it is the ceiling on this machine, which is what a
    many-partition ratio is read against."""

    keeps_everything = False

    def __init__(self, binary: Path, topics: dict[str, int], deadline: Deadline):
        self.proc = subprocess.Popen(
            [str(binary), *(f"{name}={parts}" for name, parts in topics.items())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, start_new_session=True)
        self.pid = self.proc.pid
        assert self.proc.stdout is not None
        self.bootstrap = self.proc.stdout.readline().strip()
        if not self.bootstrap:
            self.stop()
            raise RuntimeError("rdkafka_mock_broker did not start")
        wait_until_idle(self.pid, deadline)

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()  # end of file: it shuts the cluster down
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# ------------------------------------------------------------------ runs


@contextlib.contextmanager
def stopping(peer) -> Iterator:
    try:
        yield peer
    finally:
        peer.stop()


def label(client: str, write_caching: bool) -> str:
    """A slog peer's name in the results: the client, "+wc" with write.caching=true."""
    return client + ("+wc" if write_caching else "")


MOCK = "mock"  # librdkafka's mock cluster's label in the results (client c only)


def run_once(cases: list[Case], clients: list[str], caching: list[bool], root: Path,
             tools: Tools, results: dict[tuple[str, str], Measure],
             memories: dict[str, list[RunMemory]], deadline: Deadline) -> None:
    with stopping(RedisPeer(root, deadline)) as redis_peer:
        for case in cases:
            m = results.setdefault(("redis", case.key), Measure())
            m.add("produce", *redis_peer.produce(case, deadline))
            m.add("consume", *redis_peer.consume(case, deadline))
            print(f"  redis  {case.name:<24} XADD {case.records / m.produce_s[-1]:>12,.0f} rec/s"
                  f"   XREADGROUP {case.records / m.consume_s[-1]:>12,.0f} rec/s", flush=True)
        memories.setdefault("redis", []).append(memory(redis_peer.proc.pid))
    shutil.rmtree(root / "redis", ignore_errors=True)

    for write_caching in caching:
        with stopping(SlogPeer(root, deadline, write_caching)) as slog:
            slog.create_topics(topic_names(cases, clients), deadline)
            measure(slog, cases, clients, functools.partial(label, write_caching=write_caching),
                    tools, results, deadline)
            memories.setdefault(label("slog", write_caching), []).append(memory(slog.pid))
        shutil.rmtree(root / "slog", ignore_errors=True)
    if tools.mock_broker is not None:
        with stopping(MockPeer(tools.mock_broker, topic_names(cases, ["c"]), deadline)) as mock:
            measure(mock, cases, ["c"], lambda client: MOCK, tools, results, deadline)
            memories.setdefault(MOCK, []).append(memory(mock.pid))


def topic_names(cases: list[Case], clients: list[str]) -> dict[str, int]:
    """One topic per client and workload, so every produce starts on empty logs."""
    return {f"{client}-{case.key}": case.partitions for client in clients for case in cases}


def measure(peer: KafkaPeer, cases: list[Case], clients: list[str], name_of: Callable[[str], str],
            tools: Tools, results: dict[tuple[str, str], Measure], deadline: Deadline) -> None:
    """Each client produces each workload to ``peer``, then reads it back."""
    for case in cases:
        for client in clients:
            topic = f"{client}-{case.key}"
            name = name_of(client)
            m = results.setdefault((name, case.key), Measure())
            cpu = cpu_seconds(peer.pid)
            timing = getattr(peer, f"produce_{client}")(topic, case, tools, deadline)
            m.add("produce", timing, cpu_seconds(peer.pid) - cpu)
            stored = peer.stored(topic, case.partitions, deadline)
            if stored != case.records:
                raise RuntimeError(f"{topic}: broker holds {stored} records, "
                                   f"expected {case.records}")
            consumed = ""
            if peer.keeps_everything:
                cpu = cpu_seconds(peer.pid)
                timing = getattr(peer, f"consume_{client}")(topic, case, tools, deadline)
                m.add("consume", timing, cpu_seconds(peer.pid) - cpu)
                consumed = f"   consume {case.records / m.consume_s[-1]:>12,.0f} rec/s"
            print(f"  {name:<6} {case.name:<24} produce "
                  f"{case.records / m.produce_s[-1]:>9,.0f} rec/s{consumed}", flush=True)


def write_value_files(root: Path, cases: list[Case]) -> dict[int, Path]:
    files = {}
    for size in sorted({c.value_size for c in cases}):
        count = max(c.records for c in cases if c.value_size == size)
        path = root / f"values-{size}.txt"
        line = value_bytes(size) + b"\n"
        with open(path, "wb") as f:
            chunk = line * max(1, (1 << 20) // len(line))
            per_chunk = len(chunk) // len(line)
            for _ in range(count // per_chunk):
                f.write(chunk)
            f.write(line * (count % per_chunk))
        files[size] = path
    return files


# ------------------------------------------------------------------ report


def _rate(case: Case, seconds: list[float]) -> tuple[float, float]:
    s = statistics.median(seconds)
    return case.records / s, case.payload_bytes / s / 1e6


def _busy(cpu: list[float], seconds: list[float]) -> str:
    """CPU time over wall time of a phase: near 100% (one core) = that process is the limit."""
    return f"{100 * statistics.median(c / s for c, s in zip(cpu, seconds, strict=True)):.0f}%"


def _row(case: Case, label: str, m: Measure, redis: Measure | None) -> tuple[str, bool]:
    """One table row; whether it meets both throughput targets against redis."""
    columns, passed = [], True
    for phase in ("produce", "consume"):
        seconds = getattr(m, f"{phase}_s")
        if not seconds:  # the mock peer does not keep what a consume would read
            columns.append(f"{'-':>10} {'-':>6} {'':>5} {'':>4} {'':>4}")
            continue
        rate, mb = _rate(case, seconds)
        ratio = ""
        if redis is not None:
            against = rate / _rate(case, getattr(redis, f"{phase}_s"))[0]
            ratio = f"{against:.2f}"
            passed &= against >= (PRODUCE_TARGET if phase == "produce" else CONSUME_TARGET)
        columns.append(f"{rate:>10,.0f} {mb:>6.1f} {ratio:>5} "
                       f"{_busy(getattr(m, f'server_cpu_{phase}'), seconds):>4} "
                       f"{_busy(getattr(m, f'client_cpu_{phase}'), seconds):>4}")
    gb = case.payload_bytes / 1e9
    return (f"{case.name if redis is None else '':<24} {label:<10} {columns[0]} {columns[1]} "
            f"{statistics.median(m.server_cpu_produce) / gb:>8.1f}"), passed


def print_partition_scaling(cases: list[Case], peers: list[str],
                            results: dict[tuple[str, str], Measure]) -> None:
    """Records/s at the most partitions over records/s at the fewest, per peer and
    record size: how much spreading the same records over more partitions costs."""
    counts = sorted({case.partitions for case in cases})
    if len(counts) < 2:
        return
    few, many = counts[0], counts[-1]
    print(f"\n{many} partitions against {few} (records/s at {many} / at {few}), medians:")
    for size in sorted({case.value_size for case in cases}):
        at = {case.partitions: case for case in cases if case.value_size == size}
        for peer in peers:
            cells = []
            for phase in ("produce", "consume"):
                seconds = [getattr(results[(peer, at[n].key)], f"{phase}_s") for n in (few, many)]
                if all(seconds):
                    rates = [_rate(at[n], s)[0] for n, s in zip((few, many), seconds, strict=True)]
                    cells.append(f"{phase} {rates[1] / rates[0]:.2f}x")
            print(f"  {at[few].value_size:>5} B records  {shown_name(peer):<10} "
                  f"{'   '.join(cells)}")


def shown_name(peer: str) -> str:
    """A peer's label in the report's tables: mock/c, or slog/ and the client."""
    if peer == MOCK:
        return "mock/c"
    return "slog/" + peer.replace("kcat", "kc").replace("python", "py")


def report(cases: list[Case], peers: list[str], results: dict[tuple[str, str], Measure],
           memories: dict[str, list[RunMemory]], runs: int, tools: Tools) -> bool:
    """``peers``: the slog peers' labels (see :func:`label`), the first one decides."""
    print(f"\nmedians of {runs} run(s); MB = 10^6 bytes of record values; "
          "ratio = slog / redis records/s")
    print("producer: " + ", ".join(f"{k}={v}" for k, v in PRODUCER_CONFIG.items()))
    print("consumer: " + ", ".join(f"{k}={v}" for k, v in CONSUMER_CONFIG.items())
          + " (python also " + ", ".join(f"{k}={v}" for k, v in PYTHON_CONSUMER_EXTRA.items())
          + ")")
    if tools.rdkafka_perf_lib:
        print(f"client c: rdkafka_perf.c with {tools.rdkafka_perf_lib}")
    print(f"redis: XADD -c 1 -P {REDIS_XADD_PIPELINE}; XREADGROUP NOACK COUNT "
          f"{REDIS_READ_COUNT} -c 1 -P {REDIS_READ_PIPELINE}; appendonly yes, everysec\n")
    head = (f"{'workload':<24} {'peer':<10} {'produce/s':>10} {'MB/s':>6} {'ratio':>5} "
            f"{'srv':>4} {'cli':>4} {'consume/s':>10} {'MB/s':>6} {'ratio':>5} {'srv':>4} "
            f"{'cli':>4} {'CPU s/GB':>8}")
    print(head)
    print("-" * len(head))
    passed = {peer: True for peer in peers}
    shown = [*peers, *([MOCK] if tools.mock_broker is not None else [])]
    for case in cases:
        redis = results[("redis", case.key)]
        print(_row(case, "redis", redis, None)[0])
        for peer in shown:
            line, ok = _row(case, shown_name(peer), results[(peer, case.key)], redis)
            if peer in passed:
                passed[peer] &= ok
            print(line)
    produced_gb = sum(c.payload_bytes for c in cases) * len(peers) / 1e9
    run_cpu = statistics.median(
        sum(results[(peer, case.key)].server_cpu_produce[run]
            + results[(peer, case.key)].server_cpu_consume[run]
            for peer in peers for case in cases)
        for run in range(runs))
    print("\nsrv / cli: CPU time of the server (utime+stime from /proc/<pid>/stat, 10 ms ticks) "
          "and of the client over the wall time of the phase; 100% is one core of two.")
    print("CPU s/GB: server CPU during the produce phase per GB of record values "
          "(slog broker / redis-server).")
    print(f"slog broker over the whole run (produce + consume): {run_cpu:.2f} CPU s for "
          f"{produced_gb:.2f} GB produced = {run_cpu / produced_gb:.2f} CPU s/GB")
    print("slog/c  = rdkafka_perf.c (librdkafka from C, as redis-benchmark is C); "
          "slog/kc = kcat; slog/py = confluent-kafka from Python; +wc = a broker with "
          "write.caching=true (acknowledged before fsync), else write.caching=false")
    if MOCK in shown:
        print("mock/c  = rdkafka_perf.c against librdkafka's mock cluster "
              "(rdkafka_mock_broker.c: a C broker keeping batches in memory; produce only)")
    print_partition_scaling(cases, shown, results)
    slog_mem = max(next(m for key, m in memories.items() if key not in ("redis", MOCK)),
                   key=lambda m: m.rss)
    redis_mem = max(memories["redis"], key=lambda m: m.rss)
    print(f"RSS after the run (worst run): slog broker {slog_mem.rss / 1e6:.0f} MB "
          f"(anon {slog_mem.anon / 1e6:.0f} MB, file-backed {slog_mem.file / 1e6:.0f} MB), "
          f"redis-server {redis_mem.rss / 1e6:.0f} MB")
    rss_ok = slog_mem.rss < RSS_TARGET_MB * 1e6
    print(f"\ntargets: produce >= {PRODUCE_TARGET}x and consume >= {CONSUME_TARGET}x redis "
          "records/s in every workload: "
          + ", ".join(f"{peer} {'PASS' if ok else 'FAIL'}" for peer, ok in passed.items())
          + f"; broker RSS < {RSS_TARGET_MB} MB: {'PASS' if rss_ok else 'FAIL'}")
    return passed[peers[0]] and rss_ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="one run (unless --runs is given) of client c only (unless "
                             "--clients is given)")
    parser.add_argument("--runs", type=int, default=None, help="runs to take medians of (3)")
    parser.add_argument("--clients", default=None,
                        help="slog clients, comma separated: c, kcat, python (the first one "
                             "decides the exit status)")
    parser.add_argument("--timeout", type=float, default=None,
                        help="stop everything after this many seconds (default 900, quick 300)")
    parser.add_argument("--dir", type=Path, default=None, help="parent of the temp dirs")
    parser.add_argument("--partitions", default="1,6",
                        help="partition counts of the topics (Redis: streams), comma separated")
    parser.add_argument("--mock", action="store_true",
                        help="also run client c against librdkafka's mock cluster (a C broker "
                             "in memory), the ceiling the client reaches on this machine")
    parser.add_argument("--write-caching", default="false",
                        help="the brokers' write.caching: false (slog's default, acknowledged "
                             "once fsynced), true (Kafka's behaviour), or false,true for both "
                             "in the same run (peers +wc)")
    args = parser.parse_args(argv)
    caching = [c.strip() for c in args.write_caching.split(",") if c.strip()]
    if not caching or set(caching) - {"false", "true"}:
        parser.error("--write-caching takes false, true or false,true")
    try:
        partition_counts = [int(p) for p in args.partitions.split(",") if p.strip()]
    except ValueError:
        parser.error("--partitions takes integers, e.g. 1,6")
    if not partition_counts or min(partition_counts) < 1:
        parser.error("--partitions takes positive integers, e.g. 1,6")
    runs = args.runs or (1 if args.quick else 3)
    chosen = args.clients or ("c" if args.quick else ",".join(CLIENTS))
    clients = [c.strip() for c in chosen.split(",") if c.strip()]
    if not clients or set(clients) - set(CLIENTS):
        parser.error("--clients takes c, kcat and/or python")
    if args.mock and "c" not in clients:
        parser.error("--mock needs client c")
    for tool in ("redis-server", "redis-benchmark", *(["kcat"] if "kcat" in clients else [])):
        if shutil.which(tool) is None:
            parser.error(f"{tool} is not installed")
    cases = [Case(size, count, parts)
             for size, count in ((100, 1_000_000), (1024, 100_000)) for parts in partition_counts]
    deadline = Deadline(args.timeout or (300 if args.quick else 900))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    root = Path(tempfile.mkdtemp(prefix="slog-broker-bench-", dir=args.dir))
    results: dict[tuple[str, str], Measure] = {}
    memories: dict[str, list[RunMemory]] = {}
    print(f"broker benchmark: {runs} run(s), clients {', '.join(clients)}, temp dir {root}",
          flush=True)
    try:
        tools = Tools()
        if "kcat" in clients:
            tools.values = write_value_files(root, cases)
        if "c" in clients:
            tools.rdkafka_perf, tools.rdkafka_perf_lib = build_rdkafka_perf(root)
        if args.mock:
            tools.mock_broker = build_c_client(root, "rdkafka_mock_broker")
        for run in range(runs):
            print(f"run {run + 1}/{runs}", flush=True)
            run_root = root / f"run{run}"
            run_root.mkdir()
            run_once(cases, clients, [c == "true" for c in caching], run_root, tools,
                     results, memories, deadline)
            shutil.rmtree(run_root, ignore_errors=True)
    except (BenchTimeout, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        shutil.rmtree(root, ignore_errors=True)
    peers = [label(client, c == "true") for c in caching for client in clients]
    return 0 if report(cases, peers, results, memories, runs, tools) else 1


if __name__ == "__main__":
    sys.exit(main())
