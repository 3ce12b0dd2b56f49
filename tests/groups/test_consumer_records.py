"""The __consumer_offsets records of KIP-848 groups: Kafka's byte layout, and a group
written as records and replayed comes back the same."""

from __future__ import annotations

import uuid

import pytest

from slog.core.wire import WireFormatError
from slog.groups.consumer_group import (
    ClassicMembership,
    ConsumerGroup,
    ConsumerHeartbeat,
    ConsumerMember,
    TopicInfo,
)
from slog.groups.consumer_records import (
    ConsumerGroupKey,
    ConsumerGroupReplay,
    RecordType,
    change_records,
    decode_consumer_key,
    decode_current_assignment,
    decode_group_metadata,
    decode_member_metadata,
    encode_group_metadata,
    encode_member_metadata,
)
from slog.groups.server_assignors import assignors_from_config

T1, T2 = str(uuid.uuid4()), str(uuid.uuid4())
TOPICS = {"a": TopicInfo(T1, 3), "b": TopicInfo(T2, 2)}


def test_keys_are_kafkas() -> None:
    key = ConsumerGroupKey(RecordType.MEMBER_METADATA, "g", "m")
    # int16 type 5, then non-flexible strings (int16 length).
    assert key.encode() == b"\x00\x05\x00\x01g\x00\x01m"
    assert decode_consumer_key(key.encode()) == key
    epoch_key = ConsumerGroupKey(RecordType.GROUP_METADATA, "g")
    assert epoch_key.encode() == b"\x00\x03\x00\x01g"
    assert decode_consumer_key(b"\x00\x01\x00\x01g") is None  # an offset commit key


def test_group_metadata_value_layout() -> None:
    # version 0, epoch 7, one tagged field (tag 0, 8 bytes: the metadata hash).
    data = encode_group_metadata(7, 42)
    assert data == b"\x00\x00\x00\x00\x00\x07\x01\x00\x08" + (42).to_bytes(8, "big")
    assert decode_group_metadata(data) == (7, 42)
    # A value with no tagged fields (an older Kafka's) reads with hash 0.
    assert decode_group_metadata(b"\x00\x00\x00\x00\x00\x07\x00") == (7, 0)
    with pytest.raises(WireFormatError):
        decode_group_metadata(b"\x00\x01\x00\x00\x00\x07\x00")  # a newer version


def test_member_metadata_roundtrip_skips_unknown_tags() -> None:
    g = ConsumerGroup("g", assignors_from_config("uniform"))
    g.heartbeat(ConsumerHeartbeat("m", 0, "cid", "/h", "inst", "rack", 9000, ["a"], "b.*",
                                  "uniform", frozenset()), TOPICS, 1, 0, 45000)
    data = encode_member_metadata(g.members["m"])
    tagged = data[:-1] + b"\x01\x07\x02zz"  # a tag slog does not know: skipped
    back = decode_member_metadata("m", tagged)
    assert (back.instance_id, back.rack_id, back.client_id, back.client_host,
            back.subscribed_topic_names, back.subscribed_topic_regex,
            back.rebalance_timeout_ms, back.server_assignor) == \
        ("inst", "rack", "cid", "/h", ("a",), "b.*", 9000, "uniform")


def test_a_classic_members_metadata_roundtrips_in_tag_0() -> None:
    g = ConsumerGroup("g", assignors_from_config("uniform"))
    g.heartbeat(ConsumerHeartbeat("m", 0, "cid", "/h", None, None, 9000, ["a"], None,
                                  None, frozenset()), TOPICS, 1, 0, 45000)
    g.members["m"].classic = ClassicMembership(30000, (("range", b"\x00\x01"),
                                                        ("roundrobin", b"")))
    back = decode_member_metadata("m", encode_member_metadata(g.members["m"]))
    assert back.classic == g.members["m"].classic
    assert decode_member_metadata("m", encode_member_metadata(
        ConsumerMember("n"))).classic is None


def test_a_group_replayed_from_its_records_is_the_same() -> None:
    g = ConsumerGroup("g", assignors_from_config("uniform,range"))
    records = []

    def beat(member: str, epoch: int, owned: frozenset[tuple[str, int]] | None = None,
             **kw: object) -> int:
        out = g.heartbeat(ConsumerHeartbeat(member, epoch, rebalance_timeout_ms=5000,
                                            owned=owned, **kw),  # type: ignore[arg-type]
                          TOPICS, 1, 0, 45000)
        records.extend(change_records(g, g.take_changes()))
        return out.member_epoch

    a = beat("a", 0, frozenset(), subscribed_topic_names=["a", "b"])
    beat("b", 0, frozenset(), subscribed_topic_names=["a", "b"], instance_id="i")
    beat("a", a, g.members["a"].assigned)  # told to revoke: UNREVOKED_PARTITIONS
    beat("c", 0, frozenset(), subscribed_topic_names=["a"])
    beat("c", -1)
    replay = ConsumerGroupReplay()
    for key, value in records:
        parsed = decode_consumer_key(key)
        assert parsed is not None
        replay.apply(parsed, value)
    back = ConsumerGroup("g", assignors_from_config("uniform,range"))
    assert replay.build(back)
    assert (back.group_epoch, back.target_epoch, back.metadata_hash) == \
        (g.group_epoch, g.target_epoch, g.metadata_hash)
    assert back.target == g.target and back.owners == g.owners
    assert back.static_members == g.static_members == {"i": "b"}
    assert set(back.members) == {"a", "b"}
    for name, member in g.members.items():
        other = back.members[name]
        for attr in ("member_epoch", "previous_member_epoch", "state", "assigned",
                     "pending_revocation", "subscribed_topic_names", "instance_id"):
            assert getattr(other, attr) == getattr(member, attr), attr
    current = [v for k, v in records if k[:2] == b"\x00\x08" and v is not None][-1]
    assert decode_current_assignment(current).member_epoch >= 0
