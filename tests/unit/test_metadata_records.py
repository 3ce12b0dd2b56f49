"""The metadata log's typed records: today's on-disk format, validation, newer types.

``WRITTEN_BEFORE_TYPED_RECORDS`` is what the controller wrote before records were
typed (captured from that version's metadata log): it must decode, replay and
encode back byte for byte, so existing data dirs load unchanged.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from slog.core.acls import Operation
from slog.core.controller_lease import ControllerLease
from slog.core.listeners import Endpoint
from slog.core.log import PartitionLog
from slog.core.metadata import MetadataImage
from slog.core.metadata_log import (
    METADATA_LOG_CONFIG,
    MetadataLogReader,
    MetadataLogWriter,
    metadata_log_dir,
)
from slog.core.metadata_records import (
    AccessControlEntryRecord,
    BrokerRegistration,
    FenceBrokerRecord,
    InvalidRecordError,
    PartitionRecord,
    PartitionState,
    RegisterBrokerRecord,
    TopicRecord,
    UnknownRecordTypeError,
    decode_record,
    encode_record,
)
from slog.core.records import build_batch

WRITTEN_BEFORE_TYPED_RECORDS = """\
{"type":"controller","controller_id":1,"controller_epoch":1,"ts":1795651322629}
{"type":"broker","broker_id":1,"host":"127.0.0.1","port":9092,"incarnation":"inc-1","fenced":false,"rack":"r1","endpoints":[{"name":"PLAINTEXT","host":"127.0.0.1","port":9092,"security_protocol":"PLAINTEXT"},{"name":"SSL","host":"127.0.0.1","port":9192,"security_protocol":"SSL"}],"controller_epoch":1,"ts":1795651322634}
{"type":"broker","broker_id":2,"host":"127.0.0.1","port":9093,"incarnation":"inc-2","fenced":false,"rack":"r2","controller_epoch":1,"ts":1795651322645}
{"type":"topic","name":"orders","topic_id":"be868008-df15-4011-81ba-e4d68ec0f354","configs":{"retention.ms":"1000"},"controller_epoch":1,"ts":1795651322647}
{"type":"partition","topic":"orders","partition":0,"replicas":[1,2],"isr":[1,2],"leader":1,"leader_epoch":0,"partition_epoch":0,"adding":[],"removing":[],"controller_epoch":1,"ts":1795651322647}
{"type":"partition","topic":"orders","partition":1,"replicas":[2,1],"isr":[2,1],"leader":2,"leader_epoch":0,"partition_epoch":0,"adding":[],"removing":[],"controller_epoch":1,"ts":1795651322647}
{"type":"topic_config","topic":"orders","configs":{"retention.ms":null,"cleanup.policy":"compact"},"controller_epoch":1,"ts":1795651322649}
{"type":"broker_config","broker_id":null,"configs":{"log.retention.ms":"5000"},"controller_epoch":1,"ts":1795651322654}
{"type":"broker_config","broker_id":2,"configs":{"log.retention.ms":"7000"},"controller_epoch":1,"ts":1795651322655}
{"type":"acl","resource_type":2,"resource_name":"orders","pattern_type":3,"principal":"User:alice","host":"*","operation":3,"permission":3,"controller_epoch":1,"ts":1795651322660}
{"type":"remove_acl","resource_type":2,"resource_name":"orders","pattern_type":3,"principal":"User:alice","host":"*","operation":3,"permission":3,"controller_epoch":1,"ts":1795651322661}
{"type":"acl","resource_type":3,"resource_name":"app","pattern_type":4,"principal":"User:bob","host":"*","operation":3,"permission":3,"controller_epoch":1,"ts":1795651322662}
{"type":"broker_fence","broker_id":2,"fenced":true,"controller_epoch":1,"ts":1795651322663}
{"type":"partition","topic":"orders","partition":0,"replicas":[1,2],"isr":[1],"leader":1,"leader_epoch":0,"partition_epoch":1,"adding":[],"removing":[],"controller_epoch":1,"ts":1795651322663}
{"type":"partition","topic":"orders","partition":1,"replicas":[2,1,3],"isr":[1],"leader":1,"leader_epoch":1,"partition_epoch":1,"adding":[3],"removing":[2],"controller_epoch":1,"ts":1795651322663}
{"type":"topic","name":"gone","topic_id":"0f5b1b52-5d0e-4c51-9b4e-f1f2a2f5e0aa","configs":{},"controller_epoch":1,"ts":1795651322665}
{"type":"remove_topic","name":"gone","controller_epoch":1,"ts":1795651322668}
{"type":"producer_ids","next_producer_id":4000,"controller_epoch":1,"ts":1795651322669}
"""
# Records of older versions still, each without the fields added since.
OLDER_RECORDS = [
    {"type": "broker", "broker_id": 3, "host": "h", "port": 1, "controller_epoch": 1},
    {"type": "topic", "name": "legacy", "topic_id": "x", "controller_epoch": 1},
    {"type": "partition", "topic": "legacy", "partition": 0, "replicas": [3], "isr": [3],
     "leader": 3, "controller_epoch": 1},
]


def _lines() -> list[str]:
    return WRITTEN_BEFORE_TYPED_RECORDS.splitlines()


def _write_raw(metadata_dir: Path, values: list[bytes]) -> None:
    """Append JSON values as the controller did before records were typed."""
    directory = metadata_log_dir(metadata_dir)
    directory.mkdir(parents=True, exist_ok=True)
    log = PartitionLog.open(directory, METADATA_LOG_CONFIG, clean_shutdown=False)
    log.append(build_batch((None, value, (), 0) for value in values))
    log.flush()
    log.close()


def test_records_of_before_decode_and_encode_back_byte_for_byte() -> None:
    for line in _lines():
        record = decode_record(json.loads(line))
        assert json.dumps(encode_record(record), separators=(",", ":")) == line


def test_records_of_before_replay_into_the_image() -> None:
    image = MetadataImage()
    image.apply_all(enumerate(decode_record(json.loads(line)) for line in _lines()))
    image.apply_all(enumerate(map(decode_record, OLDER_RECORDS), start=100))
    assert image.controller_id == 1 and image.controller_epoch == 1
    one, two, three = image.brokers[1], image.brokers[2], image.brokers[3]
    assert one.rack == "r1" and one.endpoint("SSL") == ("127.0.0.1", 9192)
    assert two.fenced and two.rack == "r2" and two.endpoints == ()
    assert three == BrokerRegistration(3, "h", 1)  # defaults for what it lacked
    assert set(image.topics) == {"orders", "legacy"}
    assert image.topics["orders"].configs == {"cleanup.policy": "compact"}
    assert image.partition("orders", 1) == PartitionState(
        "orders", 1, (2, 1, 3), (1,), 1, 1, 1, adding=(3,), removing=(2,))
    assert image.partition("legacy", 0) == PartitionState("legacy", 0, (3,), (3,), 3)
    assert image.reassigning == {("orders", 1)}
    assert image.dynamic_broker_configs(None) == {"log.retention.ms": "5000"}
    assert image.dynamic_broker_configs(2) == {"log.retention.ms": "7000"}
    assert [(a.resource_name, a.operation) for a in image.acls] == [("app", Operation.READ)]
    assert image.next_producer_id == 4000


def test_typed_records_are_what_was_written_before() -> None:
    registration = BrokerRegistration(
        1, "127.0.0.1", 9092, "inc-1", False, "r1",
        (Endpoint("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"),
         Endpoint("SSL", "127.0.0.1", 9192, "SSL")))
    state = PartitionState("orders", 0, (1, 2), (1, 2), 1)
    lines = _lines()
    assert decode_record(json.loads(lines[1])) == RegisterBrokerRecord(
        registration, controller_epoch=1, ts=1795651322634)
    assert decode_record(json.loads(lines[4])) == PartitionRecord(
        state, controller_epoch=1, ts=1795651322647)
    assert encode_record(FenceBrokerRecord(2, True)) == {
        "type": "broker_fence", "broker_id": 2, "fenced": True, "controller_epoch": 0, "ts": 0}


@pytest.mark.parametrize("fields", [
    {"type": "broker", "broker_id": -1, "host": "h", "port": 1},  # ids are not negative
    {"type": "broker", "broker_id": 1, "host": "h", "port": 70000},  # not a port
    {"type": "broker", "broker_id": 1, "host": "h", "port": 1,
     "endpoints": [{"name": "SSL", "host": "h"}]},  # an endpoint without a port
    {"type": "broker", "broker_id": "1", "host": "h", "port": 1},  # a string
    {"type": "broker_fence", "broker_id": 1, "fenced": 1},  # not a bool
    {"type": "broker_fence", "broker_id": 1},  # missing
    {"type": "partition", "topic": "t", "partition": 0, "replicas": [1], "isr": [1],
     "leader": -2},  # leaders are -1 (none) or a broker
    {"type": "partition", "topic": "t", "partition": 0, "replicas": [1], "isr": "1",
     "leader": 1},  # a list
    {"type": "partition", "topic": "t", "partition": 0, "replicas": [1, None], "isr": [1],
     "leader": 1},
    {"type": "partition", "topic": "t", "partition": True, "replicas": [1], "isr": [1],
     "leader": 1},  # a bool is not a number here
    {"type": "topic", "name": "t", "topic_id": "x", "configs": {"a": 1}},  # values are strings
    {"type": "topic_config", "topic": "t", "configs": ["a"]},
    {"type": "acl", "resource_type": 2, "resource_name": "t", "pattern_type": 3,
     "principal": "User:a", "host": "*", "operation": 99, "permission": 3},  # no such op
    {"type": "controller", "controller_id": 1, "controller_epoch": -1},
    {"type": 7},
    ["not", "an", "object"],
])
def test_invalid_records_are_refused(fields: object) -> None:
    with pytest.raises(InvalidRecordError):
        decode_record(fields)


def test_fields_a_newer_version_added_are_ignored() -> None:
    record = decode_record({"type": "topic", "name": "t", "topic_id": "x", "new_field": [1]})
    assert record == TopicRecord("t", "x")


def test_the_reader_skips_unknown_and_invalid_records_with_a_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    metadata = tmp_path / "metadata"
    valid = [line.encode() for line in _lines()[:4]]
    future = [json.dumps({"type": "from_the_future", "x": i}).encode() for i in range(3)]
    broken = [b'{"type":"broker","broker_id":"one","host":"h","port":1}', b"not json"]
    _write_raw(metadata, valid[:2] + future + broken + valid[2:])
    with caplog.at_level(logging.WARNING, logger="slog.metadata"):
        read = list(MetadataLogReader(metadata).poll())
    assert [offset for offset, _ in read] == [0, 1, 7, 8]
    assert [type(r).__name__ for _, r in read] == [
        "ControllerRecord", "RegisterBrokerRecord", "RegisterBrokerRecord", "TopicRecord"]
    warnings = [r.getMessage() for r in caplog.records]
    assert sum("from_the_future" in w for w in warnings) == 1  # once per type, not per record
    assert sum("invalid metadata record" in w for w in warnings) == 2
    with pytest.raises(UnknownRecordTypeError):
        decode_record(json.loads(future[0]))


def test_the_writer_and_reader_round_trip_typed_records(tmp_path: Path) -> None:
    metadata = tmp_path / "metadata"
    lease = ControllerLease(tmp_path / "controller.lease", metadata / "append.lock", 9.0)
    with lease.exclusive(1.0):
        writer = MetadataLogWriter.take_over(metadata, lease, 1, "test", 0)
    records = [decode_record(json.loads(line)) for line in _lines()]
    records.append(AccessControlEntryRecord(records[9].binding))  # type: ignore[attr-defined]
    writer.append(records)
    writer.close()
    lease.close()
    assert [r for _, r in MetadataLogReader(metadata).poll()] == records
