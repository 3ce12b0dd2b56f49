"""GroupMetadata, the pure state of one group, and its committed offsets."""

from __future__ import annotations

import pytest

from slog.core.kafka_errors import ErrorCode
from slog.groups.group import GroupMetadata, GroupState, IllegalStateTransition
from slog.groups.member import MemberMetadata
from slog.groups.offsets import GroupOffsets, OffsetAndMetadata

S = GroupState


def member(member_id: str, protocols: list[str], instance: str | None = None
           ) -> MemberMetadata:
    return MemberMetadata(member_id, instance, "client", "/h", 1000, 1000, "consumer",
                          [(p, p.encode()) for p in protocols])


@pytest.mark.parametrize(("start", "path"), [
    (S.EMPTY, [S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.STABLE,
               S.PREPARING_REBALANCE, S.EMPTY, S.DEAD]),
    (S.STABLE, [S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE]),
])
def test_allowed_transitions(start: GroupState, path: list[GroupState]) -> None:
    group = GroupMetadata("g", start)
    for state in path:
        group.transition_to(state, 1)
        assert group.state is state


@pytest.mark.parametrize(("start", "target"), [
    (S.EMPTY, S.STABLE), (S.EMPTY, S.COMPLETING_REBALANCE), (S.STABLE, S.EMPTY),
    (S.PREPARING_REBALANCE, S.STABLE), (S.DEAD, S.EMPTY), (S.COMPLETING_REBALANCE, S.EMPTY),
])
def test_illegal_transitions(start: GroupState, target: GroupState) -> None:
    with pytest.raises(IllegalStateTransition):
        GroupMetadata("g", start).transition_to(target, 1)


def test_first_member_leads_and_leadership_moves_on_removal() -> None:
    group = GroupMetadata("g")
    group.add(member("a", ["range"]))
    group.add(member("b", ["range"]))
    assert group.leader_id == "a" and group.protocol_type == "consumer"
    group.remove("a")
    assert group.leader_id == "b"
    group.remove("b")
    assert group.leader_id is None


def test_protocol_votes_pick_a_common_protocol() -> None:
    group = GroupMetadata("g")
    group.add(member("a", ["roundrobin", "range"]))
    group.add(member("b", ["range", "roundrobin", "sticky"]))
    group.add(member("c", ["range", "roundrobin"]))
    assert group.candidate_protocols() == {"range", "roundrobin"}
    assert group.select_protocol() == "range"  # two votes to one


def test_supported_protocols() -> None:
    group = GroupMetadata("g")
    assert not group.supports_protocols("", ["range"])  # an empty group needs a type
    assert not group.supports_protocols("consumer", [])
    group.add(member("a", ["range"]))
    group.transition_to(S.PREPARING_REBALANCE, 1)
    assert group.supports_protocols("consumer", ["sticky", "range"])
    assert not group.supports_protocols("consumer", ["sticky"])
    assert not group.supports_protocols("connect", ["range"])


def test_static_member_replacement_keeps_place_and_assignment() -> None:
    group = GroupMetadata("g")
    old = member("old", ["range"], instance="i-1")
    old.assignment = b"parts"
    group.add(old)
    fenced = []
    old.join_callback = fenced.append
    replaced = group.replace_static_member("i-1", "old", "new")
    assert replaced.member_id == "new" and replaced.assignment == b"parts"
    assert group.leader_id == "new" and group.static_members == {"i-1": "new"}
    assert fenced[0].error is ErrorCode.fenced_instance_id


def test_summary_shows_metadata_only_when_stable() -> None:
    group = GroupMetadata("g")
    m = member("a", ["range"])
    m.assignment = b"asg"
    group.add(m)
    group.transition_to(S.PREPARING_REBALANCE, 1)
    group.init_next_generation(2)
    assert group.summary().members[0].metadata == b""
    group.transition_to(S.STABLE, 3)
    summary = group.summary()
    assert (summary.state, summary.protocol) == ("Stable", "range")
    assert (summary.members[0].metadata, summary.members[0].assignment) == (b"range", b"asg")


def test_offsets_apply_in_log_order_not_completion_order() -> None:
    offsets = GroupOffsets()
    tp = ("t", 0)
    offsets.prepare([tp, tp])
    assert offsets.has_pending(tp) and offsets.has_offsets
    offsets.complete(tp, OffsetAndMetadata(20), 11, appended=True)  # the later record
    offsets.complete(tp, OffsetAndMetadata(10), 10, appended=True)  # finishes last
    assert offsets.get(tp) == OffsetAndMetadata(20)
    assert not offsets.has_pending(tp)
    offsets.load(tp, None, 12)  # a tombstone
    assert offsets.get(tp) is None and not offsets.has_offsets


def test_expired_offsets() -> None:
    offsets = GroupOffsets()
    offsets.load(("a", 0), OffsetAndMetadata(1, commit_timestamp_ms=100), 0)
    offsets.load(("b", 0), OffsetAndMetadata(1, commit_timestamp_ms=900), 1)
    offsets.load(("c", 0), OffsetAndMetadata(1, commit_timestamp_ms=100,
                                             expire_timestamp_ms=2000), 2)
    by_commit = offsets.expired(1000, 500, lambda v: v.commit_timestamp_ms)
    assert by_commit == [("a", 0)]
    assert offsets.expired(1000, 500, lambda v: v.commit_timestamp_ms,
                           keep_topics=frozenset({"a"})) == []
    assert ("c", 0) in offsets.expired(2000, 10_000, lambda v: v.commit_timestamp_ms)
