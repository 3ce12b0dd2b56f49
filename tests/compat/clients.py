"""Shared helpers for the broker suites: real Kafka clients behind one record model,
and a raw-socket wire client for hostile input.

Writers and readers exist for kcat, confluent-kafka (librdkafka), kafka-python,
aiokafka and slog's own ``BrokerConnection``. Each writer produces a list of
:class:`Rec` to one partition; each reader returns every record of one
partition as :class:`Consumed`, reading from the beginning up to the end
offset it sees when it starts. Group consumption does not exist yet, so
consumers use manual assignment and never a group (librdkafka insists on a
``group.id`` in its config, but never joins a group when only ``assign`` is
used).

Nothing here skips: a missing tool is a test failure with a message.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import struct
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from slog.client.connection import BrokerConnection
from slog.core import compression as codecs
from slog.core.batch import TIMESTAMP_TYPE_BIT
from slog.core.records import BatchBuilder, iter_decoded_batches
from slog.protocol.apis import ApiKey, request_class
from slog.protocol.codec import decode_response, encode_request
from slog.protocol.errors import ErrorCode
from slog.protocol.framing import recv_frame
from slog.protocol.shapes import shape

TIMEOUT_S = 30.0
Header = tuple[str, bytes | None]
# Explicit record timestamps in the tests are an hour old: well inside the
# default 7-day retention, so a retention check can never delete test data.
RECENT_MS = time.time_ns() // 1_000_000 - 3_600_000


# ---------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Rec:
    """A record as a producer sends it. ``timestamp`` None: the producer stamps it."""

    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    timestamp: int | None = None


@dataclass(frozen=True)
class Consumed:
    """A record as a consumer sees it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
    timestamp: int
    create_time: bool  # CreateTime (True) or LogAppendTime

    def as_rec(self) -> Rec:
        return Rec(self.key, self.value, self.headers, self.timestamp)


def host_port(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.rpartition(":")
    return host, int(port)


# ---------------------------------------------------------------------------- kcat


def require_kcat() -> str:
    """Path of kcat; a clear failure (never a skip) when it is not installed."""
    path = shutil.which("kcat")
    if path is None:
        pytest.fail("kcat is not installed; the compat suite needs it "
                    "(apt-get install kcat, as .ci/run does)", pytrace=False)
    return path


def run_kcat(*args: str, input_bytes: bytes | None = None, check: bool = True
             ) -> subprocess.CompletedProcess[bytes]:
    proc = subprocess.run([require_kcat(), *args], input=input_bytes, capture_output=True,
                          timeout=TIMEOUT_S)
    if check and proc.returncode != 0:
        raise AssertionError(f"kcat {' '.join(args)} exited {proc.returncode}:\n"
                             f"{proc.stderr.decode(errors='replace')}")
    return proc


_KEY_DELIM, _MSG_DELIM = b"\x1f", b"\x1e"


def _kcat_header_args(headers: Sequence[Header]) -> list[str]:
    args = []
    for name, value in headers:
        # "-H name" (no '=') sends a null header value.
        args += ["-H", name if value is None else f"{name}={value.decode()}"]
    return args


def kcat_produce(bootstrap: str, topic: str, records: Sequence[Rec], *, partition: int = 0,
                 compression: str = "none") -> list[int]:
    """Produce with ``kcat -P -K -Z``: one run per run of records sharing headers
    (``-H`` applies to a whole run).

    kcat cannot set timestamps, and with -Z an empty key or value means null.
    Returns no offsets (kcat does not report them).
    """
    for group in _runs_by_headers(records):
        assert all(writer_can_send("kcat", r) and r.timestamp is None for r in group)
        payload = b"".join((r.key or b"") + _KEY_DELIM + (r.value or b"") + _MSG_DELIM
                           for r in group)
        run_kcat("-b", bootstrap, "-P", "-t", topic, "-p", str(partition), "-Z",
                 "-K", r"\x1f", "-D", r"\x1e", "-z", compression,
                 *_kcat_header_args(group[0].headers), input_bytes=payload)
    return []


def _runs_by_headers(records: Sequence[Rec]) -> list[list[Rec]]:
    runs: list[list[Rec]] = []
    for record in records:
        if runs and runs[-1][0].headers == record.headers:
            runs[-1].append(record)
        else:
            runs.append([record])
    return runs


def _utf8(value: str | None) -> bytes | None:
    return None if value is None else value.encode()


def kcat_consume(bootstrap: str, topic: str, partition: int = 0) -> list[Consumed]:
    """``kcat -C -e -J``: everything from the beginning to the end of the partition."""
    proc = run_kcat("-b", bootstrap, "-C", "-e", "-q", "-J", "-o", "beginning", "-t", topic,
                    "-p", str(partition))
    result = []
    for line in proc.stdout.decode().splitlines():
        msg = json.loads(line)
        flat = msg.get("headers") or []
        headers = tuple((flat[i], _utf8(flat[i + 1])) for i in range(0, len(flat), 2))
        result.append(Consumed(msg["partition"], msg["offset"], _utf8(msg["key"]),
                               _utf8(msg["payload"]), headers, msg["ts"],
                               msg["tstype"] == "create"))
    return result


def kcat_metadata(bootstrap: str, topic: str | None = None) -> dict[str, Any]:
    args = ["-b", bootstrap, "-L", "-J"] + (["-t", topic] if topic else [])
    metadata: dict[str, Any] = json.loads(run_kcat(*args).stdout)
    return metadata


def kcat_offsets_for_times(bootstrap: str, topic: str, partition: int, timestamp: int) -> int:
    """``kcat -Q -t topic:partition:timestamp``; the offset it prints (-1: none)."""
    out = run_kcat("-b", bootstrap, "-Q", "-t", f"{topic}:{partition}:{timestamp}").stdout
    # "<topic> [<partition>] offset <n>"
    line = out.decode().strip()
    prefix = f"{topic} [{partition}] offset "
    assert line.startswith(prefix), f"unexpected kcat -Q output {line!r}"
    return int(line[len(prefix):])


# ---------------------------------------------------------------------------- confluent-kafka


def confluent_deliver(bootstrap: str, topic: str, records: Sequence[Rec], *,
                      partition: int | None = None, compression: str = "none",
                      **config: Any) -> list[tuple[int, int]]:
    """Idempotent acks=all producer; the delivery reports' (partition, offset) in send order.

    ``partition`` None leaves the choice to librdkafka's partitioner.
    """
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "compression.type": compression,
                         "linger.ms": 5, **config})
    reports: dict[int, tuple[Any, int, int]] = {}

    def on_delivery(index: int) -> Callable[[Any, Any], None]:
        def callback(err: Any, msg: Any) -> None:
            reports[index] = (err, msg.partition(), msg.offset())
        return callback

    for i, r in enumerate(records):
        kwargs: dict[str, Any] = {"timestamp": r.timestamp} if r.timestamp is not None else {}
        if partition is not None:
            kwargs["partition"] = partition
        producer.produce(topic, key=r.key, value=r.value, headers=list(r.headers),
                         on_delivery=on_delivery(i), **kwargs)
    assert producer.flush(TIMEOUT_S) == 0, "confluent-kafka could not deliver everything"
    assert sorted(reports) == list(range(len(records)))
    for err, _, _ in reports.values():
        assert err is None, f"delivery failed: {err}"
    return [reports[i][1:] for i in range(len(records))]


def confluent_produce(bootstrap: str, topic: str, records: Sequence[Rec], *, partition: int = 0,
                      compression: str = "none") -> list[int]:
    reports = confluent_deliver(bootstrap, topic, records, partition=partition,
                                compression=compression)
    assert {p for p, _ in reports} <= {partition}
    return [offset for _, offset in reports]


def confluent_consume(bootstrap: str, topic: str, partition: int = 0) -> list[Consumed]:
    return confluent_consume_partitions(bootstrap, topic, [partition])


def confluent_consume_partitions(bootstrap: str, topic: str, partitions: Sequence[int]
                                 ) -> list[Consumed]:
    """One Consumer assigned ``partitions`` from OFFSET_BEGINNING, read up to each one's EOF."""
    from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_CREATE_TIME, Consumer, KafkaError
    from confluent_kafka import TopicPartition as CkTopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "slog-compat-assign-only",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "fetch.wait.max.ms": 50})
    try:
        consumer.assign([CkTopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        result: list[Consumed] = []
        pending = set(partitions)
        deadline = time.monotonic() + TIMEOUT_S
        while pending:
            assert time.monotonic() < deadline, f"confluent-kafka never reached EOF of {pending}"
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, \
                    f"confluent-kafka consumer error: {msg.error()}"
                pending.discard(msg.partition())
                continue
            ts_type, ts = msg.timestamp()
            result.append(Consumed(msg.partition(), msg.offset(), msg.key(), msg.value(),
                                   tuple(msg.headers() or ()), ts,
                                   ts_type == TIMESTAMP_CREATE_TIME))
        return result
    finally:
        consumer.close()


# ---------------------------------------------------------------------------- kafka-python


def kafka_python_produce(bootstrap: str, topic: str, records: Sequence[Rec], *,
                         partition: int = 0, compression: str = "none") -> list[int]:
    """KafkaProducer with its defaults (idempotent, acks=all) apart from compression."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap,
                             compression_type=None if compression == "none" else compression)
    try:
        futures = [producer.send(topic, key=r.key, value=r.value, partition=partition,
                                 headers=list(r.headers), timestamp_ms=r.timestamp)
                   for r in records]
        producer.flush(TIMEOUT_S)
        metadata = [f.get(TIMEOUT_S) for f in futures]
    finally:
        producer.close(TIMEOUT_S)
    assert {m.partition for m in metadata} <= {partition}
    return [m.offset for m in metadata]


def kafka_python_consume(bootstrap: str, topic: str, partition: int = 0) -> list[Consumed]:
    return kafka_python_consume_partitions(bootstrap, topic, [partition])


def kafka_python_consume_partitions(bootstrap: str, topic: str, partitions: Sequence[int]
                                    ) -> list[Consumed]:
    """KafkaConsumer without a group: assign, seek_to_beginning, poll up to the end offsets."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        result: list[Consumed] = []
        deadline = time.monotonic() + TIMEOUT_S
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, "kafka-python never reached the end offsets"
            for messages in consumer.poll(timeout_ms=500).values():
                result += [Consumed(m.partition, m.offset, m.key, m.value, tuple(m.headers),
                                    m.timestamp, m.timestamp_type == 0) for m in messages]
        return result
    finally:
        consumer.close()


# ---------------------------------------------------------------------------- aiokafka


def aiokafka_produce(bootstrap: str, topic: str, records: Sequence[Rec], *, partition: int = 0,
                     compression: str = "none") -> list[int]:
    from aiokafka import AIOKafkaProducer

    async def produce() -> list[int]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all",
                                    enable_idempotence=True,
                                    compression_type=None if compression == "none"
                                    else compression)
        await producer.start()
        try:
            offsets = []
            for r in records:
                metadata = await producer.send_and_wait(
                    topic, key=r.key, value=r.value, partition=partition,
                    headers=list(r.headers), timestamp_ms=r.timestamp)
                assert metadata.partition == partition
                offsets.append(metadata.offset)
            return offsets
        finally:
            await producer.stop()

    return asyncio.run(asyncio.wait_for(produce(), TIMEOUT_S))


def aiokafka_consume(bootstrap: str, topic: str, partition: int = 0) -> list[Consumed]:
    return asyncio.run(asyncio.wait_for(aiokafka_consume_partitions(bootstrap, topic, [partition]),
                                        TIMEOUT_S))


async def aiokafka_consume_partitions(bootstrap: str, topic: str, partitions: Sequence[int]
                                      ) -> list[Consumed]:
    """AIOKafkaConsumer without a group: assign, seek_to_beginning, getmany up to the end."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)

        async def behind() -> bool:
            return any([await consumer.position(tp) < ends[tp] for tp in tps])

        result: list[Consumed] = []
        while await behind():
            for messages in (await consumer.getmany(*tps, timeout_ms=500)).values():
                result += [Consumed(m.partition, m.offset, m.key, m.value, tuple(m.headers),
                                    m.timestamp, m.timestamp_type == 0) for m in messages]
        return result
    finally:
        await consumer.stop()


# ---------------------------------------------------------------------------- slog


CODEC_IDS = {"none": codecs.NONE, "gzip": codecs.GZIP, "snappy": codecs.SNAPPY,
             "lz4": codecs.LZ4, "zstd": codecs.ZSTD}


def slog_connection(bootstrap: str, timeout_s: float = TIMEOUT_S) -> BrokerConnection:
    host, port = host_port(bootstrap)
    return BrokerConnection(host, port, client_id="slog-tests", timeout_s=timeout_s).connect()


def produce_request(topic: str, partition: int, records: bytes | None, acks: int = -1
                    ) -> dict[str, Any]:
    return {"transactional_id": None, "acks": acks, "timeout": 5000,
            "topic_data": [{"name": topic,
                            "partition_data": [{"index": partition, "records": records}]}]}


def slog_produce(bootstrap: str, topic: str, records: Sequence[Rec], *, partition: int = 0,
                 compression: str = "none") -> list[int]:
    """One batch from slog's BatchBuilder, sent as Produce (acks=all) on a BrokerConnection."""
    builder = BatchBuilder(compression=CODEC_IDS[compression])
    for r in records:
        builder.append(r.key, r.value, r.headers, r.timestamp)
    with slog_connection(bootstrap) as conn:
        response = conn.request(ApiKey.PRODUCE, produce_request(topic, partition,
                                                                builder.build()))
    [answer] = response.responses[0].partition_responses
    assert answer.error_code == ErrorCode.none, answer
    return [answer.base_offset + i for i in range(len(records))]


def fetch_request(topic: str, partition: int, offset: int, max_wait_ms: int = 100,
                  max_bytes: int = 1 << 20) -> dict[str, Any]:
    return {"replica_id": -1, "max_wait": max_wait_ms, "min_bytes": 1, "max_bytes": max_bytes,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": partition, "fetch_offset": offset, "partition_max_bytes": max_bytes,
                 "current_leader_epoch": -1, "log_start_offset": -1}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def slog_consume(bootstrap: str, topic: str, partition: int = 0) -> list[Consumed]:
    """Fetch from offset 0 up to the high watermark and decode with slog.core.records."""
    result: list[Consumed] = []
    offset = 0
    with slog_connection(bootstrap) as conn:
        while True:
            response = conn.request(ApiKey.FETCH, fetch_request(topic, partition, offset))
            [answer] = response.responses[0].partitions
            assert answer.error_code == ErrorCode.none, answer
            for _, header, batch_records in iter_decoded_batches(answer.records or b""):
                create_time = not header.attributes & TIMESTAMP_TYPE_BIT
                for r in batch_records:
                    if r.offset >= offset:
                        timestamp = r.timestamp if create_time else header.max_timestamp
                        result.append(Consumed(partition, r.offset, r.key, r.value,
                                               tuple(r.headers), timestamp, create_time))
                offset = max(offset, header.base_offset + header.last_offset_delta + 1)
            if offset >= answer.high_watermark:
                return result


# ---------------------------------------------------------------------------- registries

Writer = Callable[..., list[int]]
Reader = Callable[[str, str, int], list[Consumed]]

WRITERS: dict[str, Writer] = {
    "kcat": kcat_produce,
    "confluent": confluent_produce,
    "kafka-python": kafka_python_produce,
    "aiokafka": aiokafka_produce,
    "slog": slog_produce,
}
READERS: dict[str, Reader] = {
    "kcat": kcat_consume,
    "confluent": confluent_consume,
    "kafka-python": kafka_python_consume,
    "aiokafka": aiokafka_consume,
    "slog": slog_consume,
}


def writer_can_send(writer: str, record: Rec) -> bool:
    """What each client's API can express (all of them can read everything)."""
    if writer == "kcat":
        # With -Z an empty key or value means null (its timestamps are its own).
        return record.key != b"" and record.value != b""
    if writer in ("kafka-python", "aiokafka"):
        if record.key is None and record.value is None:
            return False  # both refuse a record with neither key nor value
        if writer == "kafka-python" and any(v is None for _, v in record.headers):
            return False  # kafka-python insists on (str, bytes) headers
    return True


def records_for(writer: str, records: Sequence[Rec]) -> list[Rec]:
    """``records`` reduced to what ``writer`` can send, as it will send them."""
    kept = [r for r in records if writer_can_send(writer, r)]
    if writer == "kcat":
        kept = [replace(r, timestamp=None) for r in kept]  # kcat cannot set timestamps
    return kept


def assert_same_records(got: Sequence[Consumed], expected: Sequence[Rec], *,
                        first_offset: int = 0, stamped_between: tuple[int, int] | None = None,
                        label: str = "") -> None:
    """``got`` holds exactly ``expected`` at consecutive offsets, all CreateTime.

    Records sent without a timestamp must carry one from ``stamped_between``.
    """
    assert [c.offset for c in got] == list(range(first_offset, first_offset + len(expected))), \
        f"{label}: offsets {[c.offset for c in got]}"
    for c, r in zip(got, expected, strict=True):
        assert c.create_time, f"{label}: offset {c.offset} is not CreateTime"
        if r.timestamp is None:
            assert stamped_between is not None
            low, high = stamped_between
            assert low <= c.timestamp <= high, f"{label}: producer timestamp {c.timestamp}"
            r = replace(r, timestamp=c.timestamp)
        assert c.as_rec() == r, f"{label}: offset {c.offset}: {c.as_rec()} != {r}"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# ---------------------------------------------------------------------------- admin via slog


def create_topic(bootstrap: str, name: str, partitions: int = 1,
                 configs: Mapping[str, str] | None = None) -> None:
    with slog_connection(bootstrap) as conn:
        response = conn.request(ApiKey.CREATE_TOPICS, {
            "topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                        "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
            "timeout": 5000, "validate_only": False})
    [topic] = response.topics
    assert topic.error_code == ErrorCode.none, topic


# ---------------------------------------------------------------------------- raw wire


class Wire:
    """A raw socket to a broker, for bytes no well-behaved client would send."""

    def __init__(self, bootstrap: str, timeout_s: float = 5.0):
        self.sock = socket.create_connection(host_port(bootstrap), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._correlation = 100

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_frame(self, payload: bytes) -> None:
        self.send(struct.pack(">i", len(payload)) + payload)

    def encode(self, api_key: int, version: int, body: Mapping[str, Any] | Any) -> bytes:
        self._correlation += 1
        entity = shape(request_class(api_key, version), body)
        return encode_request(entity, correlation_id=self._correlation, client_id="hostile")

    def request(self, api_key: int, version: int, body: Mapping[str, Any] | Any) -> Any:
        """Send one request; return the decoded response (its correlation id checked)."""
        self.send(self.encode(api_key, version, body))
        return self.response(api_key, version)

    def response(self, api_key: int, version: int) -> Any:
        frame = recv_frame(self.sock, 64 << 20)
        assert frame is not None, "the broker closed the connection instead of answering"
        correlation_id, response = decode_response(api_key, version, frame)
        assert correlation_id == self._correlation
        return response

    def read_frame(self) -> bytes | None:
        return recv_frame(self.sock, 64 << 20)

    def closed_by_peer(self, timeout_s: float = 5.0) -> bool:
        """True once the broker closes the socket; False if it stays open for ``timeout_s``."""
        self.sock.settimeout(timeout_s)
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def process_rss_kb(pid: int) -> int:
    """Resident set size from /proc/<pid>/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "State:\tZ" not in status.read_text()


def tree_snapshot(root: Path) -> set[str]:
    """Every path under ``root`` (names only), to check that nothing was created."""
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@contextlib.contextmanager
def no_new_paths(root: Path, ignore: Callable[[str], bool] = lambda _: False) -> Iterator[None]:
    before = tree_snapshot(root)
    yield
    created = {p for p in tree_snapshot(root) - before if not ignore(p)}
    assert not created, f"created on disk: {sorted(created)}"


def process_fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


CANARY_TOPIC = "canary"


def assert_serving(bootstrap: str, topic: str = CANARY_TOPIC) -> None:
    """A well-behaved client on a fresh connection gets Metadata and Produce round trips."""
    with slog_connection(bootstrap, timeout_s=10) as conn:
        response = conn.request(ApiKey.METADATA, {"topics": [{"name": topic}],
                                                  "allow_auto_topic_creation": True})
    [entry] = response.topics
    assert entry.error_code == ErrorCode.none, entry
    assert [b.node_id for b in response.brokers], response
    offsets = slog_produce(bootstrap, topic, [Rec(b"canary", b"still serving")])
    assert offsets[0] >= 0
