"""Hostile and broken input against a live broker.

Every test checks three things: the broker answers with the Kafka error a real
Kafka broker would give, or closes *that* connection; it keeps serving a
client that was already connected and a new one (Metadata and Produce round
trips); and the records already in the log are exactly as before.
"""

from __future__ import annotations

import random
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slog.client.connection import BrokerConnection
from slog.core.records import BatchBuilder
from slog.protocol.apis import ApiKey
from slog.protocol.codec import decode_response
from slog.protocol.errors import ErrorCode
from slog.protocol.headers import encode_request_header
from tests.brokers import BrokerProcess, running_broker
from tests.compat.clients import (
    RECENT_MS,
    Consumed,
    Rec,
    Wire,
    assert_serving,
    create_topic,
    no_new_paths,
    process_alive,
    process_fd_count,
    process_rss_kb,
    produce_request,
    slog_connection,
    slog_consume,
    slog_produce,
)

VICTIM = "victim"
VICTIM_PARTITIONS = 2
MAX_REQUEST_BYTES = 100 * 1024 * 1024  # socket.request.max.bytes default
PRODUCE_V, METADATA_V, CREATE_TOPICS_V = 9, 12, 7


def good_batch(value: bytes = b"good") -> bytes:
    builder = BatchBuilder()
    builder.append(b"key", value, (("h", b"v"),), RECENT_MS)
    builder.append(None, value + b"-2", (), 1_700_000_000_001)
    return builder.build()


def victim_records(bootstrap: str) -> list[list[Consumed]]:
    return [slog_consume(bootstrap, VICTIM, p) for p in range(VICTIM_PARTITIONS)]


@pytest.fixture(scope="module")
def shared_broker(module_broker: BrokerProcess) -> BrokerProcess:
    """A broker of this module's own: the tests watch its data dir for new files and its
    memory, which other modules' topics (compaction, retention) would disturb."""
    return module_broker


@pytest.fixture(scope="module")
def bystander(shared_broker: BrokerProcess) -> Iterator[BrokerConnection]:
    """A client connected before any of the hostile traffic; it must keep working."""
    create_topic(shared_broker.bootstrap, VICTIM, partitions=VICTIM_PARTITIONS)
    for p in range(VICTIM_PARTITIONS):
        slog_produce(shared_broker.bootstrap, VICTIM,
                     [Rec(b"k%d" % i, b"original %d" % i, (("n", b"%d" % i),),
                          RECENT_MS + i) for i in range(5)], partition=p)
    assert_serving(shared_broker.bootstrap)  # creates the canary topic
    with slog_connection(shared_broker.bootstrap) as conn:
        yield conn


@pytest.fixture(autouse=True)
def unharmed(shared_broker: BrokerProcess, bystander: BrokerConnection) -> Iterator[None]:
    assert shared_broker.info is not None
    before = victim_records(shared_broker.bootstrap)
    assert all(len(p) == 5 for p in before)
    log_size = len(shared_broker.log_text)
    yield
    assert process_alive(shared_broker.info.pid), "the broker died"
    new_log = shared_broker.log_text[log_size:]
    assert "Traceback" not in new_log, new_log[-4000:]
    response = bystander.request(ApiKey.METADATA, {"topics": [{"name": VICTIM}]})
    assert response.topics[0].error_code == ErrorCode.none
    assert_serving(shared_broker.bootstrap)
    assert victim_records(shared_broker.bootstrap) == before, "the victim topic changed"


def header(api_key: int, version: int, correlation_id: int = 7, *, flexible: bool) -> bytes:
    return encode_request_header(api_key, version, correlation_id, "hostile", flexible=flexible)


def assert_closed(wire: Wire) -> None:
    assert wire.closed_by_peer(timeout_s=5), "the broker left the connection open"


# ----------------------------------------------------------------------------- framing

_rng = random.Random(20240611)
GARBAGE = {
    "empty frame": b"",
    "too short for a header": b"\x00\x03\x00",
    "zeros": bytes(12),
    "client id runs past the end": struct.pack(">hhih", 3, 12, 1, 500) + b"abc",
    "negative client id length": struct.pack(">hhih", 3, 1, 1, -7),
    "random": _rng.randbytes(64),
    "valid header, truncated metadata body": header(3, 12, flexible=True) + b"\x05\x02",
    # transactional_id null, acks -1, timeout 5000, then a compact array of 2**32 - 2 topics
    "produce announcing 2**32 topics": header(0, 9, flexible=True) + b"\x00\xff\xff"
                                      + b"\x00\x00\x13\x88" + b"\xff\xff\xff\xff\x0f",
    "fetch with a negative array length": header(1, 4, flexible=False) + struct.pack(
        ">iiiibi", -1, 100, 1, 1024, 0, -2),
}


@pytest.mark.parametrize("payload", list(GARBAGE.values()), ids=list(GARBAGE))
def test_malformed_frame_closes_connection(shared_broker: BrokerProcess, payload: bytes) -> None:
    with Wire(shared_broker.bootstrap) as wire:
        wire.send_frame(payload)
        assert_closed(wire)


@pytest.mark.parametrize("raw", [
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  # a TLS ClientHello: a 369 MB "frame"
    b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",  # 1.2 GB
    struct.pack(">i", MAX_REQUEST_BYTES + 1) + b"\x00" * 64,
    struct.pack(">i", 0x7FFFFFFF) + b"\x00\x12\x00\x03",
], ids=["tls", "http", "limit+1", "int32-max"])
def test_giant_length_prefix_is_refused_without_allocating(shared_broker: BrokerProcess,
                                                           raw: bytes) -> None:
    assert shared_broker.info is not None
    rss_before = process_rss_kb(shared_broker.info.pid)
    wires = [Wire(shared_broker.bootstrap) for _ in range(5)]
    for wire in wires:
        wire.send(raw)
    for wire in wires:
        assert_closed(wire)
        wire.close()
    grown_kb = process_rss_kb(shared_broker.info.pid) - rss_before
    assert grown_kb < 20 * 1024, f"broker RSS grew by {grown_kb} KiB"


def test_announced_but_unsent_frames_cost_no_memory(shared_broker: BrokerProcess) -> None:
    """Slowloris: legal 90 MB frame sizes with only a few bytes behind them."""
    assert shared_broker.info is not None
    rss_before = process_rss_kb(shared_broker.info.pid)
    wires = [Wire(shared_broker.bootstrap) for _ in range(8)]
    for wire in wires:
        wire.send(struct.pack(">i", 90 * 1024 * 1024) + b"\x00\x00\x00\x09")
    assert_serving(shared_broker.bootstrap)
    grown_kb = process_rss_kb(shared_broker.info.pid) - rss_before
    for wire in wires:
        wire.close()
    assert grown_kb < 20 * 1024, f"broker RSS grew by {grown_kb} KiB"


@pytest.mark.parametrize("size", [-1, -5, -(2**31)])
def test_negative_length_closes_connection(shared_broker: BrokerProcess, size: int) -> None:
    with Wire(shared_broker.bootstrap) as wire:
        wire.send(struct.pack(">i", size) + b"\x00\x03\x00\x0c")
        assert_closed(wire)


@pytest.mark.parametrize("sent", [
    b"\x00\x00",  # half a size prefix
    struct.pack(">i", 100) + b"\x00\x03\x00\x0c\x00\x00",  # a frame cut short
    struct.pack(">i", 40) + header(0, 9, flexible=True)[:9],  # inside the header
])
def test_truncated_frames_leave_no_trace(shared_broker: BrokerProcess, sent: bytes) -> None:
    assert shared_broker.info is not None
    pid = shared_broker.info.pid
    fds_before = process_fd_count(pid)
    for _ in range(20):
        with Wire(shared_broker.bootstrap) as wire:
            wire.send(sent)
    # The broker drops each connection when it sees EOF mid-frame (no fd leak).
    deadline = time.monotonic() + 5
    while process_fd_count(pid) > fds_before:
        assert time.monotonic() < deadline, "connections with truncated frames were not closed"
        time.sleep(0.05)
    # A half-closed writer (shutdown(SHUT_WR)) gets its connection closed too.
    with Wire(shared_broker.bootstrap) as wire:
        wire.send(sent)
        wire.sock.shutdown(socket.SHUT_WR)
        assert_closed(wire)


def test_odd_but_legal_headers_are_answered(shared_broker: BrokerProcess) -> None:
    """Invalid UTF-8 in the client id and a negative correlation id still get answers."""
    body = b"\x00"  # ApiVersions v0 has an empty body; the extra byte is ignored
    for client_id in (b"\xff\xfe\xfd", b""):
        with Wire(shared_broker.bootstrap) as wire:
            wire.send_frame(struct.pack(">hhih", 18, 0, -42, len(client_id)) + client_id + body)
            frame = wire.read_frame()
            assert frame is not None
            correlation_id, response = decode_response(18, 0, frame)
            assert correlation_id == -42
            assert response.error_code == ErrorCode.none


NULL_ARRAYS = {
    # Kafka refuses to parse a null where the schema has a non-nullable array
    # ("non-nullable field topics was serialized as null") and drops the connection.
    "list offsets v6 topics": header(2, 6, flexible=True) + struct.pack(">ib", -1, 0)
                              + b"\x00\x00",
    "produce v3 topic_data": header(0, 3, flexible=False) + struct.pack(">hhii", -1, -1, 5000, -1),
    "fetch v4 topics": header(1, 4, flexible=False) + struct.pack(">iiiibi", -1, 100, 1, 1024, 0,
                                                                 -1),
    "metadata v0 topics": header(3, 0, flexible=False) + struct.pack(">i", -1),
    "create topics v2 topics": header(19, 2, flexible=False) + struct.pack(">iib", -1, 5000, 0),
}


@pytest.mark.parametrize("payload", list(NULL_ARRAYS.values()), ids=list(NULL_ARRAYS))
def test_null_for_non_nullable_array_closes_connection(shared_broker: BrokerProcess,
                                                       payload: bytes) -> None:
    with Wire(shared_broker.bootstrap) as wire:
        wire.send_frame(payload)
        assert_closed(wire)


def test_null_for_nullable_array_is_answered(shared_broker: BrokerProcess) -> None:
    """Metadata v1+ topics may be null (every topic): the control for the test above."""
    with Wire(shared_broker.bootstrap) as wire:
        wire.send_frame(header(3, 1, flexible=False) + struct.pack(">i", -1))
        frame = wire.read_frame()
    assert frame is not None
    _, response = decode_response(3, 1, frame)
    assert VICTIM in {t.name for t in response.topics}


# ----------------------------------------------------------------------------- api keys / versions


def test_api_versions_unknown_version_gets_kip511_fallback(shared_broker: BrokerProcess) -> None:
    for version in (5, 99, 32767):
        with Wire(shared_broker.bootstrap) as wire:
            wire.send_frame(header(18, version, 1234, flexible=True) + b"\x00\x00\x00")
            frame = wire.read_frame()
            assert frame is not None
            # KIP-511: a v0 response (v0 header, no tagged fields) with UNSUPPORTED_VERSION.
            correlation_id, response = decode_response(18, 0, frame)
            assert correlation_id == 1234
            assert response.error_code == ErrorCode.unsupported_version
            rows = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
            assert rows[18] == (0, 4)
            # The connection stays usable: the client retries with a version it was told.
            answer = wire.request(18, 3, {"client_software_name": "t",
                                          "client_software_version": "1"})
            assert answer.error_code == ErrorCode.none


@pytest.mark.parametrize(("api_key", "version", "flexible"), [
    (999, 0, False),  # no such API
    (-1, 0, False),
    (38, 1, False),  # CreateDelegationToken: a Kafka API slog does not implement
    (ApiKey.METADATA, 99, True),  # versions beyond the advertised range
    (ApiKey.PRODUCE, 2, False),  # below the minimum (Kafka 4 removed v0-2)
    (ApiKey.FETCH, 18, True),
])
def test_unsupported_api_or_version_closes_connection(shared_broker: BrokerProcess, api_key: int,
                                                      version: int, flexible: bool) -> None:
    with Wire(shared_broker.bootstrap) as wire:
        wire.send_frame(header(api_key, version, flexible=flexible) + b"\x00" * 16)
        assert_closed(wire)


# ----------------------------------------------------------------------------- produce


def produce_error(wire: Wire, records: bytes | None, *, topic: str = VICTIM, partition: int = 0,
                  acks: int = -1) -> Any:
    response = wire.request(ApiKey.PRODUCE, PRODUCE_V,
                            produce_request(topic, partition, records, acks))
    [answer] = response.responses[0].partition_responses
    assert answer.index == partition
    assert answer.base_offset == -1, answer
    return answer.error_code


def with_byte(data: bytes, position: int, value: int) -> bytes:
    changed = bytearray(data)
    changed[position] = value
    return bytes(changed)


def with_length(data: bytes, length: int) -> bytes:
    changed = bytearray(data)
    struct.pack_into(">i", changed, 8, length)
    return bytes(changed)


GOOD = good_batch()
BAD_BATCHES = {
    "bad crc": (with_byte(GOOD, len(GOOD) - 1, GOOD[-1] ^ 0x55), ErrorCode.corrupt_message),
    "crc field flipped": (with_byte(GOOD, 17, GOOD[17] ^ 1), ErrorCode.corrupt_message),
    "magic 1": (with_byte(GOOD, 16, 1), ErrorCode.invalid_record),
    "magic 3": (with_byte(GOOD, 16, 3), ErrorCode.invalid_record),
    "length longer than the data": (with_length(GOOD, len(GOOD) + 100), ErrorCode.invalid_record),
    "length shorter than the data": (with_length(GOOD, 40), ErrorCode.invalid_record),
    "negative length": (with_length(GOOD, -12), ErrorCode.invalid_record),
    "two batches": (GOOD + good_batch(b"second"), ErrorCode.invalid_record),
    "truncated header": (GOOD[:30], ErrorCode.invalid_record),
    "empty": (b"", ErrorCode.invalid_record),
    "null": (None, ErrorCode.invalid_record),
}


@pytest.mark.parametrize("case", list(BAD_BATCHES), ids=list(BAD_BATCHES))
def test_bad_batches_are_rejected(shared_broker: BrokerProcess, case: str) -> None:
    records, expected = BAD_BATCHES[case]
    with Wire(shared_broker.bootstrap) as wire:
        assert produce_error(wire, records) == expected
        # The same connection goes on working.
        assert wire.request(ApiKey.METADATA, METADATA_V, {"topics": None}).brokers


@pytest.mark.parametrize(("topic", "partition"), [
    (VICTIM, -1), (VICTIM, VICTIM_PARTITIONS), (VICTIM, 2**31 - 1), (VICTIM, -(2**31)),
    ("no-such-topic", 0),
])
def test_unknown_partitions(shared_broker: BrokerProcess, topic: str, partition: int) -> None:
    with Wire(shared_broker.bootstrap) as wire:
        error = produce_error(wire, GOOD, topic=topic, partition=partition)
        assert error == ErrorCode.unknown_topic_or_partition


@pytest.mark.parametrize("acks", [5, -2, 2, 32767])
def test_invalid_acks(shared_broker: BrokerProcess, acks: int) -> None:
    with Wire(shared_broker.bootstrap) as wire:
        assert produce_error(wire, GOOD, acks=acks) == ErrorCode.invalid_required_acks


def test_bad_partition_does_not_spoil_good_one(shared_broker: BrokerProcess) -> None:
    topic = "mixed-request"
    create_topic(shared_broker.bootstrap, topic, partitions=2)
    body = produce_request(topic, 0, GOOD)
    body["topic_data"][0]["partition_data"].append(
        {"index": 1, "records": BAD_BATCHES["bad crc"][0]})
    with Wire(shared_broker.bootstrap) as wire:
        response = wire.request(ApiKey.PRODUCE, PRODUCE_V, body)
    ok, bad = response.responses[0].partition_responses
    assert (ok.index, ok.error_code, ok.base_offset) == (0, ErrorCode.none, 0)
    assert (bad.index, bad.error_code) == (1, ErrorCode.corrupt_message)
    assert [c.value for c in slog_consume(shared_broker.bootstrap, topic, 0)] == \
        [b"good", b"good-2"]
    assert slog_consume(shared_broker.bootstrap, topic, 1) == []


def test_acks_zero(shared_broker: BrokerProcess) -> None:
    """acks=0: no response when it worked; a failed partition closes the connection."""
    topic = "acks-zero"
    create_topic(shared_broker.bootstrap, topic)
    with Wire(shared_broker.bootstrap) as wire:
        wire.send(wire.encode(ApiKey.PRODUCE, PRODUCE_V, produce_request(topic, 0, GOOD, 0)))
        response = wire.request(ApiKey.METADATA, METADATA_V, {"topics": [{"name": topic}]})
        assert response.topics[0].error_code == ErrorCode.none  # the next answer is this one
        wire.send(wire.encode(ApiKey.PRODUCE, PRODUCE_V,
                              produce_request(topic, 0, BAD_BATCHES["bad crc"][0], 0)))
        assert_closed(wire)
    assert [c.value for c in slog_consume(shared_broker.bootstrap, topic, 0)] == \
        [b"good", b"good-2"]


# ----------------------------------------------------------------------------- topic names

ILLEGAL_NAMES = ["..", ".", "a/b", "../../etc", "x" * 250, "", "tab\tname", "nul\x00", "é"]


def illegal_name_ids() -> list[str]:
    return [repr(n) if len(n) < 20 else f"{len(n)} chars" for n in ILLEGAL_NAMES]


def _tree_root(broker: BrokerProcess) -> Path:
    return broker.data_dir.parent  # '../../etc' would land next to the data dir


@pytest.mark.parametrize("name", ILLEGAL_NAMES, ids=illegal_name_ids())
def test_illegal_topic_names(shared_broker: BrokerProcess, name: str) -> None:
    def topic_names() -> set[str]:
        response = wire.request(ApiKey.METADATA, METADATA_V, {"topics": None})
        return {t.name for t in response.topics}

    with Wire(shared_broker.bootstrap) as wire, \
            no_new_paths(_tree_root(shared_broker), ignore=lambda p: p.endswith("broker.log")):
        known = topic_names()
        created = wire.request(ApiKey.CREATE_TOPICS, CREATE_TOPICS_V,
                               create_topics_body({name: 1}))
        assert created.topics[0].error_code == ErrorCode.invalid_topic_exception

        metadata = wire.request(ApiKey.METADATA, METADATA_V, {
            "topics": [{"name": name}], "allow_auto_topic_creation": True})
        assert metadata.topics[0].error_code == ErrorCode.invalid_topic_exception

        # Kafka answers a produce to a topic it does not have with UNKNOWN_TOPIC_OR_PARTITION.
        assert produce_error(wire, GOOD, topic=name) == ErrorCode.unknown_topic_or_partition

        configs = wire.request(ApiKey.DESCRIBE_CONFIGS, 4, {
            "resources": [{"resource_type": 2, "resource_name": name,
                           "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False})
        assert configs.results[0].error_code == ErrorCode.invalid_topic_exception

        altered = wire.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
            "resources": [{"resource_type": 2, "resource_name": name, "configs": [
                {"name": "retention.ms", "config_operation": 0, "value": "1"}]}],
            "validate_only": False})
        assert altered.responses[0].error_code == ErrorCode.invalid_topic_exception

        deleted = wire.request(ApiKey.DELETE_TOPICS, 5, {"topic_names": [name],
                                                         "timeout": 5000})
        assert deleted.responses[0].error_code in (ErrorCode.unknown_topic_or_partition,
                                                   ErrorCode.invalid_topic_exception)
        assert topic_names() == known


def create_topics_body(topics: dict[str, int]) -> dict[str, Any]:
    return {"topics": [{"name": name, "num_partitions": n, "replication_factor": 1,
                        "assignments": [], "configs": []} for name, n in topics.items()],
            "timeout": 5000, "validate_only": False}


OUT_OF_RANGE_CONFIGS = [("max.message.bytes", "99999999999999999999"),
                        ("segment.bytes", "3000000000"), ("min.insync.replicas", "2147483648"),
                        ("retention.ms", "9223372036854775808")]


@pytest.mark.parametrize(("name", "value"), OUT_OF_RANGE_CONFIGS,
                         ids=[n for n, _ in OUT_OF_RANGE_CONFIGS])
def test_out_of_range_configs_are_refused(shared_broker: BrokerProcess, name: str,
                                          value: str) -> None:
    """Regression: an INT config beyond int32 passed validation, reached the metadata log,
    and then failed every later metadata apply (no topic could be created any more)."""
    with Wire(shared_broker.bootstrap) as wire:
        body = create_topics_body({"range-config": 1})
        body["topics"][0]["configs"] = [{"name": name, "value": value}]
        created = wire.request(ApiKey.CREATE_TOPICS, CREATE_TOPICS_V, body)
        assert created.topics[0].error_code == ErrorCode.invalid_config
        altered = wire.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
            "resources": [{"resource_type": 2, "resource_name": VICTIM, "configs": [
                {"name": name, "config_operation": 0, "value": value}]}],
            "validate_only": False})
        assert altered.responses[0].error_code == ErrorCode.invalid_config
        created = wire.request(ApiKey.CREATE_TOPICS, CREATE_TOPICS_V,
                               create_topics_body({f"after-{name}": 1}))
        assert created.topics[0].error_code == ErrorCode.none


def test_topic_named_twice_is_answered_once(shared_broker: BrokerProcess) -> None:
    """Kafka lists a duplicated name once with INVALID_REQUEST and creates nothing for it;
    librdkafka refuses a response that names a topic twice."""
    with Wire(shared_broker.bootstrap) as wire:
        body = create_topics_body({"twice": 1, "once-beside-twice": 1})
        body["topics"].append(dict(body["topics"][0]))
        created = wire.request(ApiKey.CREATE_TOPICS, CREATE_TOPICS_V, body)
        errors = {t.name: t.error_code for t in created.topics}
        assert len(created.topics) == 2
        assert errors == {"twice": ErrorCode.invalid_request,
                          "once-beside-twice": ErrorCode.none}
        metadata = wire.request(ApiKey.METADATA, METADATA_V, {
            "topics": [{"name": "twice"}], "allow_auto_topic_creation": False})
        assert metadata.topics[0].error_code == ErrorCode.unknown_topic_or_partition


@pytest.mark.parametrize("count", [2**31 - 1, 10_001])
def test_huge_partition_counts_are_refused(shared_broker: BrokerProcess, count: int) -> None:
    """Kafka caps one request at 10,000 new partitions (POLICY_VIOLATION); without a cap
    2**31 - 1 would have the controller plan partitions until memory runs out."""
    with Wire(shared_broker.bootstrap, timeout_s=10) as wire, \
            no_new_paths(_tree_root(shared_broker), ignore=lambda p: p.endswith("broker.log")):
        created = wire.request(ApiKey.CREATE_TOPICS, CREATE_TOPICS_V,
                               create_topics_body({"huge-partitions": count}))
        assert created.topics[0].error_code == ErrorCode.policy_violation
        # The cap is per request, not per topic, and an invalid count offsets nothing.
        for topics in ({"half-a": 5001, "half-b": 5001}, {"negative": -20_000, "big": 15_000}):
            created = wire.request(ApiKey.CREATE_TOPICS, CREATE_TOPICS_V,
                                   create_topics_body(topics))
            assert {t.error_code for t in created.topics} == {ErrorCode.policy_violation}
        grown = wire.request(ApiKey.CREATE_PARTITIONS, 3, {
            "topics": [{"name": VICTIM, "count": min(count + VICTIM_PARTITIONS, 2**31 - 1),
                        "assignments": None}],
            "timeout": 5000, "validate_only": False})
        assert grown.results[0].error_code == ErrorCode.policy_violation
        metadata = wire.request(ApiKey.METADATA, METADATA_V, {"topics": [{"name": VICTIM}]})
        assert len(metadata.topics[0].partitions) == VICTIM_PARTITIONS


def test_large_but_legal_create_topics_request(broker: BrokerProcess) -> None:
    """1500 long-named topics with configs in one request: a metadata batch over 1 MB."""
    configs = [{"name": k, "value": v} for k, v in {
        "retention.ms": "86400000", "cleanup.policy": "compact,delete",
        "max.message.bytes": "2000000", "segment.bytes": "1048576",
        "message.timestamp.type": "LogAppendTime"}.items()]
    names = [f"t{i:05d}-" + "x" * 230 for i in range(1500)]
    with slog_connection(broker.bootstrap, timeout_s=60) as conn:
        created = conn.request(ApiKey.CREATE_TOPICS, {
            "topics": [{"name": n, "num_partitions": 1, "replication_factor": 1,
                        "assignments": [], "configs": configs} for n in names],
            "timeout": 5000, "validate_only": False})
        assert {t.error_code for t in created.topics} == {ErrorCode.none}
        listed = conn.request(ApiKey.METADATA, {"topics": None})
    assert set(names) <= {t.name for t in listed.topics}
    assert_serving(broker.bootstrap)


# ----------------------------------------------------------------------------- connections


def test_max_connections_and_idle_timeout(tmp_path: Path) -> None:
    limits = {"max.connections": "5", "connections.max.idle.ms": "1000"}
    with running_broker(tmp_path / "data", **limits) as broker:
        assert broker.info is not None
        assert_serving(broker.bootstrap)
        time.sleep(0.2)  # let the broker see those connections close
        fds_before = process_fd_count(broker.info.pid)
        opened = time.monotonic()
        idle = [Wire(broker.bootstrap) for _ in range(2)]
        half_sent = [Wire(broker.bootstrap) for _ in range(3)]
        half_sent[0].send(b"\x00\x00")  # half a size prefix
        half_sent[1].send(struct.pack(">i", 64) + header(3, 12, flexible=True))  # half a frame
        half_sent[2].send(b"\x00")  # and a trickle of bytes (slowloris)
        time.sleep(0.2)
        for wire in [*idle, *half_sent]:
            assert not wire.closed_by_peer(timeout_s=0.01), "refused below max.connections"

        # A sixth connection is refused at once.
        with Wire(broker.bootstrap) as extra:
            assert extra.closed_by_peer(timeout_s=0.5)

        half_sent[2].send(b"\x00")
        for wire in [*idle, *half_sent]:
            assert wire.closed_by_peer(timeout_s=5)
            wire.close()
        waited = time.monotonic() - opened
        assert 0.9 < waited < 4, f"idle connections closed after {waited:.2f}s"

        # Once they are gone a well-behaved client gets in, and one that keeps
        # talking is not taken for idle.
        deadline = time.monotonic() + 5
        while process_fd_count(broker.info.pid) > fds_before:
            assert time.monotonic() < deadline, "closed connections still hold descriptors"
            time.sleep(0.05)
        with Wire(broker.bootstrap) as busy:
            for _ in range(6):
                assert busy.request(ApiKey.API_VERSIONS, 3, {
                    "client_software_name": "t", "client_software_version": "1"}).api_keys
                time.sleep(0.4)
        assert_serving(broker.bootstrap)
