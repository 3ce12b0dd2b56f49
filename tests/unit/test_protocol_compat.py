"""Cross-checks against kafka-python, an independent implementation of the protocol.

Two families of kafka-python classes are used:

* ``kafka.protocol.{metadata,producer,consumer,admin}``: kafka-python 3's
  generated classes (from Kafka's JSON schemas, but with their own encoder).
* ``kafka.protocol.old``: the original hand-written Struct classes, which share
  nothing with kio or Kafka's JSON files.
"""

from __future__ import annotations

import datetime
import random
import struct
from typing import Any

import kafka.protocol.admin
import kafka.protocol.consumer
import kafka.protocol.metadata
import kafka.protocol.producer
import kafka.protocol.sasl  # noqa: F401  (registers the SASL message classes)
import pytest
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.old.api_versions import ApiVersionsResponse_v0
from kafka.protocol.old.fetch import FetchRequest_v4, FetchResponse_v4, FetchResponse_v11
from kafka.protocol.old.metadata import MetadataRequest_v0, MetadataRequest_v1, MetadataResponse_v1
from kafka.protocol.old.produce import ProduceRequest_v3, ProduceResponse_v3
from kafka.protocol.producer import ProduceRequest
from kafka.record import MemoryRecordsBuilder

from slog.protocol import (
    ApiKey,
    ErrorCode,
    FetchPartitionResult,
    FetchTopicResult,
    RequestHeader,
    api_versions_fallback_response,
    api_versions_response,
    api_versions_table,
    decode_request,
    encode_fetch_response,
    encode_request,
    encode_response,
    parse_request_header,
    request_class,
    response_class,
)
from tests.unit.test_protocol_support import ALL_CASES, random_entity


def _subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_subclasses(sub))
    return out


# kafka-python 3's primary (unversioned) message class per (api key, kind).
KP: dict[tuple[int, str], Any] = {
    (c.API_KEY, c.type): c
    for c in _subclasses(ApiMessage)
    if getattr(c, "_class_version", None) is None and getattr(c, "_json", None)
}


def _decode_slog(frame: bytes | bytearray) -> Any:
    frame = bytes(frame)
    header, offset = parse_request_header(frame)
    return decode_request(header, frame, offset)


def _batch(*values: bytes) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for i, value in enumerate(values):
        builder.append(timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=value, headers=[])
    builder.close()
    return bytes(builder.buffer())


# --- every advertised version, byte for byte -------------------------------------------


# kafka-python has no schema for inter-broker-only APIs such as AlterPartition.
CLIENT_CASES = [(key, version) for key, version in ALL_CASES if (key, "request") in KP]


@pytest.mark.parametrize(("api_key", "version"), CLIENT_CASES)
def test_kafka_python_reencodes_our_requests_identically(api_key: int, version: int) -> None:
    """slog encodes, kafka-python decodes and re-encodes; slog decodes that."""
    kp = KP[(api_key, "request")]
    rng = random.Random(api_key * 31 + version)
    for i in range(4):
        entity = random_entity(request_class(api_key, version), rng, full=i % 2 == 0)
        ours = encode_request(entity, correlation_id=i, client_id="slog")
        theirs = kp[version].decode(ours[4:], header=True).encode(header=True, framed=True)
        assert bytes(theirs) == ours
        assert _decode_slog(bytes(theirs)[4:]) == entity


@pytest.mark.parametrize(("api_key", "version"), CLIENT_CASES)
def test_kafka_python_reads_our_responses(api_key: int, version: int) -> None:
    """slog encodes a response; kafka-python decodes it and re-encodes the same bytes."""
    kp = KP[(api_key, "response")]
    rng = random.Random(api_key * 37 + version)
    for i in range(4):
        entity = random_entity(response_class(api_key, version), rng, full=i % 2 == 0)
        if api_key == ApiKey.API_VERSIONS and version and entity.error_code:
            continue  # clients read ApiVersions errors as v0; see the fallback tests
        ours = encode_response(RequestHeader(api_key, version, i, None, 1), entity)
        decoded = kp[version].decode(ours[4:], header=True)
        assert decoded.header.correlation_id == i
        decoded.with_header(correlation_id=i)
        assert bytes(decoded.encode(header=True, framed=True)) == ours


# --- hand-built kafka-python requests ----------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_api_versions_request(version: int) -> None:
    kwargs = {"client_software_name": "kafka-python", "client_software_version": "3"}
    request = ApiVersionsRequest[version](**(kwargs if version >= 3 else {}))
    request.with_header(correlation_id=12, client_id="kp")
    frame = bytes(request.encode(header=True, framed=True))[4:]
    header, offset = parse_request_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id) == (18, version, 12)
    assert header.client_id == "kp"
    decoded = decode_request(header, frame, offset)
    if version >= 3:
        assert decoded.client_software_name == "kafka-python"


@pytest.mark.parametrize("version", [0, 1, 4, 8, 9, 12])
def test_metadata_request(version: int) -> None:
    topic = MetadataRequest.MetadataRequestTopic
    kwargs: dict[str, Any] = {"topics": [topic(name="orders"), topic(name="payments")]}
    if version >= 4:
        kwargs["allow_auto_topic_creation"] = False
    request = MetadataRequest[version](**kwargs)
    request.with_header(correlation_id=1, client_id="kp")
    decoded = _decode_slog(request.encode(header=True, framed=True)[4:])
    assert [t.name for t in decoded.topics] == ["orders", "payments"]
    if version >= 4:
        assert decoded.allow_auto_topic_creation is False


@pytest.mark.parametrize("version", [3, 5, 7, 8, 9])
def test_produce_request_with_real_record_batch(version: int) -> None:
    batch = _batch(b"hello", b"world")
    topic_data = ProduceRequest.TopicProduceData
    partition_data = topic_data.PartitionProduceData
    request = ProduceRequest[version](
        transactional_id=None,
        acks=-1,
        timeout_ms=1500,
        topic_data=[topic_data(name="t", partition_data=[partition_data(index=2, records=batch)])],
    )
    request.with_header(correlation_id=99, client_id="kp")
    decoded = _decode_slog(request.encode(header=True, framed=True)[4:])
    assert decoded.acks == -1
    assert decoded.timeout == datetime.timedelta(milliseconds=1500)
    (topic,) = decoded.topic_data
    (partition,) = topic.partition_data
    assert (topic.name, partition.index, partition.records) == ("t", 2, batch)


@pytest.mark.parametrize("version", [4, 7, 11, 12])
def test_fetch_request(version: int) -> None:
    topic_cls = FetchRequest.FetchTopic
    partition_cls = topic_cls.FetchPartition
    request = FetchRequest[version](
        replica_id=-1,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=1,
        topics=[
            topic_cls(
                topic="t",
                partitions=[
                    partition_cls(partition=0, fetch_offset=42, partition_max_bytes=4096),
                    partition_cls(partition=1, fetch_offset=7, partition_max_bytes=4096),
                ],
            )
        ],
    )
    request.with_header(correlation_id=3, client_id="kp")
    decoded = _decode_slog(request.encode(header=True, framed=True)[4:])
    assert decoded.max_wait == datetime.timedelta(milliseconds=500)
    assert decoded.isolation_level == 1
    assert [(p.partition, p.fetch_offset) for p in decoded.topics[0].partitions] == [
        (0, 42),
        (1, 7),
    ]


# --- kafka-python's original hand-written Struct classes -------------------------------


def test_old_style_metadata_requests() -> None:
    for request in (MetadataRequest_v0(topics=["a", "b"]), MetadataRequest_v1(topics=None)):
        request.with_header(correlation_id=4, client_id="old")
        decoded = _decode_slog(request.encode(header=True, framed=True)[4:])
        if request.API_VERSION == 0:
            assert [t.name for t in decoded.topics] == ["a", "b"]
        else:
            assert decoded.topics is None  # v1+: null means all topics


def test_old_style_produce_and_fetch_requests() -> None:
    batch = _batch(b"x" * 100)
    produce = ProduceRequest_v3(
        transactional_id="tx", acks=1, timeout_ms=30000, topic_data=[("t", [(0, batch)])]
    )
    produce.with_header(correlation_id=5, client_id="old")
    decoded = _decode_slog(produce.encode(header=True, framed=True)[4:])
    assert decoded.transactional_id == "tx"
    assert decoded.topic_data[0].partition_data[0].records == batch

    fetch = FetchRequest_v4(
        replica_id=-1,
        max_wait_ms=100,
        min_bytes=1,
        max_bytes=1000,
        isolation_level=0,
        topics=[("t", [(3, 17, 1000)])],
    )
    fetch.with_header(correlation_id=6, client_id="old")
    decoded = _decode_slog(fetch.encode(header=True, framed=True)[4:])
    assert decoded.topics[0].partitions[0].fetch_offset == 17


def test_old_style_reads_our_metadata_and_produce_responses() -> None:
    cls = response_class(3, 1)
    broker_cls = cls.__dataclass_fields__["brokers"].type.__args__[0]
    topic_cls = cls.__dataclass_fields__["topics"].type.__args__[0]
    part_cls = topic_cls.__dataclass_fields__["partitions"].type.__args__[0]
    response = cls(
        brokers=(broker_cls(node_id=1, host="127.0.0.1", port=9092, rack=None),),
        controller_id=1,
        topics=(
            topic_cls(
                error_code=ErrorCode.none,
                name="t",
                is_internal=False,
                partitions=(
                    part_cls(
                        error_code=ErrorCode.none,
                        partition_index=0,
                        leader_id=1,
                        replica_nodes=(1,),
                        isr_nodes=(1,),
                    ),
                ),
            ),
        ),
    )
    raw = encode_response(RequestHeader(3, 1, 8, None, 1), response)
    decoded = MetadataResponse_v1.decode(raw[4:], header=True).to_object()
    assert decoded["brokers"] == [{"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None}]
    assert decoded["topics"][0]["partitions"][0]["leader_id"] == 1

    produce = response_class(0, 3)
    ptopic = produce.__dataclass_fields__["responses"].type.__args__[0]
    ppart = ptopic.__dataclass_fields__["partition_responses"].type.__args__[0]
    response = produce(
        responses=(
            ptopic(
                name="t",
                partition_responses=(ppart(index=0, error_code=ErrorCode.none, base_offset=1234),),
            ),
        ),
    )
    raw = encode_response(RequestHeader(0, 3, 9, None, 1), response)
    decoded = ProduceResponse_v3.decode(raw[4:], header=True).to_object()
    assert decoded["responses"][0]["partition_responses"][0]["base_offset"] == 1234


def test_old_style_reads_kip511_fallback() -> None:
    table = api_versions_table(key for key in ApiKey)
    raw = api_versions_fallback_response(77, table)
    decoded = ApiVersionsResponse_v0.decode(raw[4:], header=True)
    assert decoded.header.correlation_id == 77
    obj = decoded.to_object()
    assert obj["error_code"] == 35
    assert len(obj["api_keys"]) == len(table)
    # kafka-python 3 reads ApiVersions errors as v0 whatever it asked for.
    new = KP[(18, "response")][3].decode(raw[4:], header=True)
    assert new.error_code == 35


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_kafka_python_reads_api_versions_table(version: int) -> None:
    table = api_versions_table(key for key in ApiKey)
    raw = encode_response(
        RequestHeader(18, version, 2, None, 1), api_versions_response(version, table)
    )
    decoded = KP[(18, "response")][version].decode(raw[4:], header=True)
    got = {(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys}
    assert got == {(s.api_key, s.min_version, s.max_version) for s in table}


@pytest.mark.parametrize("version", [4, 11])
def test_old_style_reads_fast_path_fetch_response(version: int) -> None:
    batch = _batch(b"a", b"b", b"c")
    view = memoryview(b"\x00" * 10 + batch)[10:]
    topics = [
        FetchTopicResult(
            "t",
            [
                FetchPartitionResult(
                    0,
                    high_watermark=3,
                    last_stable_offset=3,
                    log_start_offset=0,
                    aborted_transactions=[(5, 1)],
                    records=[view[:20], view[20:]],
                ),
                FetchPartitionResult(1, error_code=1, aborted_transactions=[], records=None),
            ],
        )
    ]
    parts = encode_fetch_response(RequestHeader(1, version, 42, None, 1), version, 0, 0, 0, topics)
    raw = b"".join(bytes(p) for p in parts)
    assert struct.unpack_from(">i", raw)[0] == len(raw) - 4
    old = {4: FetchResponse_v4, 11: FetchResponse_v11}[version]
    decoded = old.decode(raw[4:], header=True)
    assert decoded.header.correlation_id == 42
    obj = decoded.to_object()
    p0, p1 = obj["responses"][0]["partitions"]
    assert p0["records"] == batch
    assert p0["aborted_transactions"] == [{"producer_id": 5, "first_offset": 1}]
    assert p1["error_code"] == 1 and p1["records"] is None
