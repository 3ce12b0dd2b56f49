from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from slog.core.metadata import MetadataImage, PartitionState
from slog.core.metadata_records import MetadataRecord, UnknownRecordTypeError, decode_record


def _rec(fields: dict[str, Any]) -> MetadataRecord:
    """A record as the log stores it (JSON), decoded as every reader decodes it."""
    return decode_record(fields)


def _topic(name: str = "t", epoch: int = 1) -> list[MetadataRecord]:
    return [
        _rec({"type": "topic", "name": name, "topic_id": "id-" + name,
              "configs": {"retention.ms": "1"}, "controller_epoch": epoch}),
        replace(PartitionState(name, 0, (1, 2), (1, 2), 1).to_record(), controller_epoch=epoch),
    ]


def test_replay_builds_topics_and_brokers() -> None:
    image = MetadataImage()
    records = [
        _rec({"type": "controller", "controller_id": 1, "controller_epoch": 1}),
        _rec({"type": "broker", "broker_id": 1, "host": "h", "port": 1, "controller_epoch": 1}),
        _rec({"type": "broker", "broker_id": 2, "host": "h", "port": 2, "controller_epoch": 1}),
        *_topic(),
    ]
    image.apply_all(enumerate(records))
    assert image.offset == len(records)
    assert image.controller_id == 1
    assert [b.broker_id for b in image.live_brokers()] == [1, 2]
    state = image.partition("t", 0)
    assert state is not None and state.leader == 1 and not state.is_under_replicated
    assert image.topics["t"].replication_factor == 2


def test_records_of_a_replaced_controller_are_ignored() -> None:
    image = MetadataImage()
    image.apply(_rec({"type": "controller", "controller_id": 2, "controller_epoch": 5}))
    for record in _topic(epoch=4):
        assert image.apply(record) is False
    assert "t" not in image.topics


def test_fence_config_and_remove() -> None:
    image = MetadataImage()
    image.apply(_rec({"type": "broker", "broker_id": 3, "host": "h", "port": 1}))
    image.apply(_rec({"type": "broker_fence", "broker_id": 3, "fenced": True}))
    assert image.live_brokers() == []
    for record in _topic():
        image.apply(record)
    image.apply(_rec({"type": "topic_config", "topic": "t",
                      "configs": {"retention.ms": None, "cleanup.policy": "compact"}}))
    assert image.topics["t"].configs == {"cleanup.policy": "compact"}
    image.apply(_rec({"type": "remove_topic", "name": "t"}))
    assert image.partition("t", 0) is None


def test_unknown_record_types_are_refused_by_the_codec() -> None:
    # The log reader skips them with a warning (test_metadata_records); the image
    # never sees them.
    with pytest.raises(UnknownRecordTypeError):
        decode_record({"type": "from_the_future"})


def test_broker_racks_are_optional_in_records() -> None:
    image = MetadataImage()
    image.apply_all(enumerate(map(_rec, [
        {"type": "broker", "broker_id": 1, "host": "h", "port": 1},  # written before racks
        {"type": "broker", "broker_id": 2, "host": "h", "port": 2, "rack": "b"},
        {"type": "broker", "broker_id": 3, "host": "h", "port": 3, "rack": None},
    ])))
    assert image.racks([1, 2, 3, 4]) == {1: None, 2: "b", 3: None, 4: None}
    image.apply(_rec({"type": "broker_fence", "broker_id": 2, "fenced": True}))
    assert image.brokers[2].rack == "b"  # fencing keeps what the broker registered with


def test_broker_config_records_set_and_delete_per_broker_and_default() -> None:
    image = MetadataImage()
    image.apply(_rec({"type": "broker_config", "broker_id": None,
                      "configs": {"log.retention.ms": "5", "max.connections": "9"}}))
    image.apply(_rec({"type": "broker_config", "broker_id": 2,
                      "configs": {"log.retention.ms": "7"}}))
    image.apply(_rec({"type": "broker_config", "broker_id": None,
                      "configs": {"max.connections": None}}))
    assert image.dynamic_broker_configs(None) == {"log.retention.ms": "5"}
    assert image.dynamic_broker_configs(2) == {"log.retention.ms": "7"}
    assert image.dynamic_broker_configs(1) == {}
    image.apply(_rec({"type": "broker_config", "broker_id": 2,
                      "configs": {"log.retention.ms": None}}))
    assert 2 not in image.broker_configs
