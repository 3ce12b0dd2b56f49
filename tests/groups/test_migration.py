"""KIP-848's online migration, pure (slog.groups.migration) and over a real offsets log
(ConsumerGroupCoordinator): a classic group upgraded by a consumer member, its classic
members reconciled through JoinGroup/SyncGroup/Heartbeat, and the downgrade back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from slog.core.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from slog.core.kafka_errors import ErrorCode, KafkaApiError
from slog.groups.consumer_coordinator import ConsumerGroupConfig, ConsumerGroupCoordinator
from slog.groups.consumer_group import (
    ConsumerGroup,
    ConsumerHeartbeat,
    MemberState,
    TopicInfo,
)
from slog.groups.group import GroupMetadata, GroupState
from slog.groups.manager import GroupMetadataManager
from slog.groups.member import JoinResult, MemberMetadata, SyncResult
from slog.groups.migration import (
    MigrationPolicy,
    check_upgrade,
    classic_heartbeat,
    classic_join,
    classic_sync,
    from_classic,
    to_classic,
)
from slog.groups.offsets import OffsetAndMetadata
from slog.groups.requests import JoinGroupRequest, SyncGroupRequest
from slog.groups.server_assignors import assignors_from_config
from tests.groups.local_log import LocalOffsetsLog

TOPIC_ID = "00000000-0000-0000-0000-00000000000a"
TOPICS = {"a": TopicInfo(TOPIC_ID, 4)}
WALL = 1_700_000_000_000
SESSION_MS = 10_000


def _protocols(owned: tuple[tuple[str, int], ...] = ()) -> list[tuple[str, bytes]]:
    return [("range", encode_subscription(Subscription(("a",), owned_partitions=owned)))]


def classic_group(generation: int = 3) -> GroupMetadata:
    """A stable classic group: x holds a-0 and a-1, y holds a-2 and a-3."""
    group = GroupMetadata("g", GroupState.STABLE, now_ms=WALL)
    for member_id, held in (("x", (0, 1)), ("y", (2, 3))):
        group.add(MemberMetadata(
            member_id, None, "client", "/127.0.0.1", 5000, SESSION_MS, "consumer",
            _protocols(), assignment=encode_assignment(Assignment(tuple(("a", p)
                                                                         for p in held)))))
    group.generation_id = generation
    group.protocol_name = "range"
    return group


def single_owners(group: ConsumerGroup) -> None:
    """No partition held (assigned or pending revocation) by two members."""
    seen: dict[tuple[str, int], str] = {}
    for m in group.members.values():
        for tp in m.assigned | m.pending_revocation:
            assert tp not in seen, f"{tp} held by {seen[tp]} and {m.member_id}"
            seen[tp] = m.member_id


def join(group: ConsumerGroup, member_id: str, owned: tuple[tuple[str, int], ...] = (),
         now: float = 0) -> int:
    member = classic_join(group, member_id, None, "client", "/h", 5000, SESSION_MS,
                          _protocols(owned), TOPICS, 1, now)
    single_owners(group)
    return member.member_epoch


def beat(group: ConsumerGroup, member_id: str, epoch: int, owned: frozenset[Any] | None = None
         ) -> Any:
    request = ConsumerHeartbeat(member_id, epoch, rebalance_timeout_ms=5000,
                                subscribed_topic_names=["a"] if epoch == 0 else None,
                                owned=frozenset() if epoch == 0 else owned)
    outcome = group.heartbeat(request, TOPICS, 1, 0, 45_000)
    single_owners(group)
    return outcome


def upgraded() -> ConsumerGroup:
    group = ConsumerGroup("g", assignors_from_config("uniform"))
    from_classic(classic_group(), group, TOPICS, 1, 0)
    return group


def test_classic_members_keep_their_assignments_at_the_classic_generation() -> None:
    group = upgraded()
    x, y = group.members["x"], group.members["y"]
    assert x.assigned == {(TOPIC_ID, 0), (TOPIC_ID, 1)}
    assert y.assigned == {(TOPIC_ID, 2), (TOPIC_ID, 3)}
    assert x.member_epoch == y.member_epoch == group.target_epoch == 3
    assert x.classic is not None and x.classic.session_timeout_ms == SESSION_MS
    assert group.owners[(TOPIC_ID, 3)] == "y"
    assert classic_heartbeat(group, "x", 3, 0) is ErrorCode.none


def _named(group: ConsumerGroup, member_id: str) -> tuple[tuple[str, int], ...]:
    return tuple(("a", p) for _t, p in sorted(group.members[member_id].assigned))


def _with_consumer_member() -> tuple[ConsumerGroup, str, str, Any]:
    """The upgraded group once a consumer member joined: (group, the classic member
    that must give a partition up, the other one, the consumer member's outcome)."""
    group = upgraded()
    c = beat(group, "c", 0)
    assert c.assignment == frozenset()  # everything is still held by classic members
    assert group.group_epoch == 4
    loser = next(m for m in ("x", "y") if group.target[m] != group.members[m].assigned)
    other = "y" if loser == "x" else "x"
    # The classic members learn of the rebalance from their heartbeats.
    for member_id in (loser, other):
        assert classic_heartbeat(group, member_id, 3, 0) is ErrorCode.rebalance_in_progress
    return group, loser, other, c


def test_an_eager_classic_member_hands_over_in_one_rejoin() -> None:
    group, loser, other, c = _with_consumer_member()
    # An eager member revoked everything before its JoinGroup (it owns nothing).
    epoch = join(group, loser)
    assert epoch == 4 and classic_heartbeat(group, loser, 4, 0) is ErrorCode.none
    assert decode_assignment(classic_sync(group, loser, epoch, TOPICS)).partitions == \
        _named(group, loser)
    with pytest.raises(KafkaApiError) as exc:
        classic_sync(group, loser, 3, TOPICS)
    assert exc.value.code is ErrorCode.illegal_generation
    assert join(group, other, _named(group, other)) == 4
    c2 = beat(group, "c", c.member_epoch, frozenset())
    assert c2.assignment and len(c2.assignment) + len(group.members[loser].assigned) + \
        len(group.members[other].assigned) == 4
    assert group.state.value == "Stable"


def test_a_cooperative_classic_member_gives_up_partitions_before_they_move() -> None:
    group, loser, _other, c = _with_consumer_member()
    held = _named(group, loser)
    assert join(group, loser, held) == 3  # it still owns what it must give up
    assert group.members[loser].state is MemberState.UNREVOKED_PARTITIONS
    assert len(classic_sync(group, loser, 3, TOPICS)) > 0
    assert beat(group, "c", c.member_epoch, frozenset()).assignment is None  # nothing free
    assert classic_heartbeat(group, loser, 3, 0) is ErrorCode.rebalance_in_progress
    assert join(group, loser, _named(group, loser)) == 4  # revoked: on to the new epoch
    assert beat(group, "c", c.member_epoch, frozenset()).assignment


def test_upgrades_need_the_policy_room_and_the_consumer_protocol() -> None:
    check_upgrade(classic_group(), MigrationPolicy.UPGRADE, 3)
    rebalancing = classic_group()
    rebalancing.transition_to(GroupState.PREPARING_REBALANCE, WALL)
    check_upgrade(rebalancing, MigrationPolicy.BIDIRECTIONAL, 3)
    for policy in (MigrationPolicy.DISABLED, MigrationPolicy.DOWNGRADE):
        with pytest.raises(KafkaApiError) as exc:
            check_upgrade(classic_group(), policy, 3)
        assert exc.value.code is ErrorCode.group_id_not_found
    connect = classic_group()
    connect.protocol_type = "connect"
    with pytest.raises(KafkaApiError):
        check_upgrade(connect, MigrationPolicy.BIDIRECTIONAL, 3)
    with pytest.raises(KafkaApiError):
        check_upgrade(classic_group(), MigrationPolicy.BIDIRECTIONAL, 2)


def test_a_classic_member_with_bad_metadata_is_refused() -> None:
    group = upgraded()
    with pytest.raises(KafkaApiError) as exc:
        classic_join(group, "z", None, "c", "/h", 5000, SESSION_MS, [("range", b"\xff")],
                     TOPICS, 1, 0)
    assert exc.value.code is ErrorCode.inconsistent_group_protocol


def test_only_classic_members_left_make_a_stable_classic_group() -> None:
    group = upgraded()
    beat(group, "c", 0)
    assert not group.only_classic_members
    group.remove_member("c")
    group.settle_epoch()
    assert group.only_classic_members
    classic = to_classic(group, TOPICS, WALL)
    assert classic.is_(GroupState.STABLE) and classic.generation_id == group.group_epoch
    assert classic.protocol_type == "consumer" and classic.protocol_name == "range"
    assert decode_assignment(classic.members["y"].assignment).partitions == \
        (("a", 2), ("a", 3))


# -- over a real offsets log ---------------------------------------------------------------------
class Node:
    def __init__(self, log: LocalOffsetsLog,
                 policy: MigrationPolicy = MigrationPolicy.BIDIRECTIONAL):
        self.now = 0.0
        self.downgraded: list[GroupMetadata] = []
        self.manager = GroupMetadataManager(log, 1, lambda: WALL + int(self.now))
        self.coordinator = ConsumerGroupCoordinator(
            ConsumerGroupConfig(session_timeout_ms=SESSION_MS, migration_policy=policy),
            self.manager, lambda: (TOPICS, 1), clock=lambda: self.now,
            wall=lambda: WALL + int(self.now))
        self.coordinator.on_downgrade = self.downgraded.append
        self.manager.on_election(0)

    def beat(self, member: str, epoch: int) -> Any:
        answers: list[Any] = []
        self.coordinator.handle_heartbeat("g", ConsumerHeartbeat(
            member, epoch, rebalance_timeout_ms=5000,
            subscribed_topic_names=["a"] if epoch == 0 else None,
            owned=frozenset() if epoch >= 0 else None), answers.append)
        [answer] = answers
        return answer

    def join(self, member: str) -> JoinResult:
        group = self.coordinator.classic_group("g")
        assert group is not None
        answers: list[JoinResult] = []
        self.coordinator.handle_classic_join(group, JoinGroupRequest(
            "g", member, None, "client", "/h", 5000, SESSION_MS, "consumer", _protocols()),
            answers.append)
        return answers[0]

    def sync(self, member: str, generation: int) -> SyncResult:
        group = self.coordinator.classic_group("g")
        assert group is not None
        answers: list[SyncResult] = []
        self.coordinator.handle_classic_sync(group, SyncGroupRequest(
            "g", generation, member, None, "consumer", "range", {}), answers.append)
        return answers[0]


    def commit(self, member: str, generation: int, version: int) -> ErrorCode:
        group = self.coordinator.group("g")
        assert group is not None
        answers: list[dict[Any, ErrorCode]] = []
        self.coordinator.handle_commit_offsets(
            group, member, generation, {("a", 0): OffsetAndMetadata(7, -1, "", WALL)},
            answers.append, version=version)
        return answers[0][("a", 0)]


@pytest.fixture
def log(tmp_path: Path) -> Any:
    offsets_log = LocalOffsetsLog(tmp_path)
    yield offsets_log
    offsets_log.close()


def test_upgrade_and_downgrade_are_written_and_reloaded(log: LocalOffsetsLog) -> None:
    node = Node(log)
    node.manager.groups["g"] = classic_group()
    outcome = node.beat("c", 0)
    assert not isinstance(outcome, KafkaApiError)
    assert node.manager.get("g") is None
    group = node.coordinator.group("g")
    assert group is not None and set(group.members) == {"x", "y", "c"}
    joined = node.join("x")
    assert joined.error is ErrorCode.none and joined.protocol_name == "range"
    assert node.sync("x", joined.generation_id).error is ErrorCode.none

    fresh = Node(log)  # a coordinator restart sees the same consumer group
    loaded = fresh.coordinator.group("g")
    assert loaded is not None and fresh.manager.get("g") is None
    assert loaded.members["y"].classic == group.members["y"].classic
    assert loaded.members["x"].member_epoch == group.members["x"].member_epoch
    assert loaded.owners == group.owners

    assert not isinstance(node.beat("c", -1), KafkaApiError)  # the last consumer member
    assert node.coordinator.group("g") is None
    classic = node.manager.get("g")
    assert classic is not None and set(classic.members) == {"x", "y"}
    assert node.downgraded == [classic]

    again = Node(log)  # and the downgrade is in the log too
    assert again.coordinator.group("g") is None
    reloaded = again.manager.get("g")
    assert reloaded is not None and set(reloaded.members) == {"x", "y"}


def test_an_upgrade_during_a_classic_rebalance_answers_its_pending_joins(
        log: LocalOffsetsLog) -> None:
    node = Node(log)
    classic = node.manager.groups["g"] = classic_group()
    classic.transition_to(GroupState.PREPARING_REBALANCE, WALL)
    answers: list[JoinResult] = []
    classic.members["x"].join_callback = answers.append
    assert not isinstance(node.beat("c", 0), KafkaApiError)
    assert [a.error for a in answers] == [ErrorCode.rebalance_in_progress]
    group = node.coordinator.group("g")
    assert group is not None and group.owners[(TOPIC_ID, 0)] == "x"  # still counted as x's
    assert node.join("x").error is ErrorCode.none  # x rejoins the consumer group


def test_classic_members_commit_with_their_generation(log: LocalOffsetsLog) -> None:
    node = Node(log)
    node.manager.groups["g"] = classic_group()
    node.beat("c", 0)
    assert node.commit("x", 3, version=8) is ErrorCode.none  # older versions are fine
    assert node.commit("x", 2, version=8) is ErrorCode.illegal_generation
    assert node.commit("c", 5, version=8) is ErrorCode.unsupported_version


def test_a_disabled_policy_keeps_the_classic_group(log: LocalOffsetsLog) -> None:
    node = Node(log, MigrationPolicy.DISABLED)
    node.manager.groups["g"] = classic_group()
    outcome = node.beat("c", 0)
    assert isinstance(outcome, KafkaApiError) and \
        outcome.code is ErrorCode.group_id_not_found
    assert node.manager.get("g") is not None and node.coordinator.group("g") is None


def test_upgrade_only_does_not_downgrade(log: LocalOffsetsLog) -> None:
    node = Node(log, MigrationPolicy.UPGRADE)
    node.manager.groups["g"] = classic_group()
    node.beat("c", 0)
    node.beat("c", -1)
    group = node.coordinator.group("g")
    assert group is not None and set(group.members) == {"x", "y"}
    assert node.manager.get("g") is None and node.downgraded == []
