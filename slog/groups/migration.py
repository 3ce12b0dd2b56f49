"""KIP-848's online migration between classic and consumer groups: pure, no I/O.

Kafka 4 converts a group in place, without stopping its consumers
(``group.consumer.migration.policy``):

* **upgrade**: the first ConsumerGroupHeartbeat for a stable, non-empty classic
  group of the ``consumer`` protocol type turns it into a consumer group; the
  classic members stay, keeping their current assignment at an epoch equal to
  the classic generation, and are then served through the consumer group
  (:func:`classic_join`, :func:`classic_sync`, :func:`classic_heartbeat`);
* **downgrade**: when the last consumer-protocol member leaves and only classic
  members remain, the group becomes a classic group again (:func:`to_classic`)
  and the coordinator starts a classic rebalance.

A classic member in a consumer group cannot reconcile through heartbeats: its
Heartbeat answers REBALANCE_IN_PROGRESS whenever it is not stable at the target
epoch, and its JoinGroup (which reports the partitions it still owns) takes it
one reconciliation step further; SyncGroup hands it the partitions it now holds,
computed by the server-side assignor. Partitions still move only once released,
so no partition has two owners, whichever protocol each member speaks.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

from slog.core.consumer_protocol import Assignment as ClassicAssignment
from slog.core.consumer_protocol import decode_assignment, decode_subscription, encode_assignment
from slog.core.kafka_errors import ErrorCode, KafkaApiError
from slog.core.wire import WireFormatError
from slog.groups.consumer_group import (
    JOIN_EPOCH,
    ClassicMembership,
    ConsumerGroup,
    ConsumerHeartbeat,
    ConsumerMember,
    MemberState,
    TopicsView,
)
from slog.groups.group import GroupMetadata, GroupState
from slog.groups.member import MemberMetadata
from slog.groups.server_assignors import Assignment

CONSUMER_PROTOCOL_TYPE = "consumer"


class MigrationPolicy(Enum):
    """``group.consumer.migration.policy`` (Kafka's default: bidirectional)."""

    DISABLED = "disabled"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    BIDIRECTIONAL = "bidirectional"

    @property
    def upgrades(self) -> bool:
        return self in (MigrationPolicy.UPGRADE, MigrationPolicy.BIDIRECTIONAL)

    @property
    def downgrades(self) -> bool:
        return self in (MigrationPolicy.DOWNGRADE, MigrationPolicy.BIDIRECTIONAL)


def _bad_metadata(member_id: str, what: str) -> KafkaApiError:
    return KafkaApiError(ErrorCode.inconsistent_group_protocol,
                         f"member {member_id}: {what} is not the consumer protocol's")


def _subscription(member_id: str, protocols: Sequence[tuple[str, bytes]], topics: TopicsView
                  ) -> tuple[tuple[str, ...], Assignment]:
    """The topics a classic member subscribes to and the partitions it says it owns
    (by topic id), from its preferred protocol's metadata (all carry the same)."""
    if not protocols:
        raise _bad_metadata(member_id, "an empty protocol list")
    try:
        sub = decode_subscription(protocols[0][1])
    except WireFormatError as exc:
        raise _bad_metadata(member_id, "its subscription") from exc
    owned = frozenset((topics[t].topic_id, p) for t, p in sub.owned_partitions if t in topics)
    return tuple(sub.topics), owned


def _named(partitions: Assignment, topics: TopicsView) -> ClassicAssignment:
    names = {info.topic_id: name for name, info in topics.items()}
    return ClassicAssignment(tuple(sorted((names[t], p) for t, p in partitions if t in names)))


# -- upgrade -------------------------------------------------------------------------------
def check_upgrade(classic: GroupMetadata, policy: MigrationPolicy, max_size: int) -> None:
    """Whether a consumer-protocol member may turn ``classic`` (non-empty) into a consumer
    group; GROUP_ID_NOT_FOUND otherwise, as Kafka answers (clients take it as fatal). A
    rebalance in progress does not stop it: its pending requests are answered
    REBALANCE_IN_PROGRESS and the members rejoin the consumer group."""
    why = None
    if not policy.upgrades:
        why = f"group.consumer.migration.policy is {policy.value}"
    elif classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
        why = f"its protocol type is {classic.protocol_type!r}, not 'consumer'"
    elif len(classic.members) >= max_size:
        why = f"its {len(classic.members)} members leave no room (group.consumer.max.size)"
    if why is not None:
        raise KafkaApiError(ErrorCode.group_id_not_found,
                            f"classic group {classic.group_id} cannot be upgraded: {why}")


def from_classic(classic: GroupMetadata, group: ConsumerGroup, topics: TopicsView,
                 topics_version: int, now_ms: float) -> None:
    """Fill the new ``group`` with ``classic``'s members, each keeping its assignment at
    the classic generation (which becomes the group and target epoch). During a classic
    rebalance that is the last synced assignment: a member is counted as holding it
    until its rejoin says otherwise, so nothing it may still hold moves too early."""
    epoch = classic.generation_id
    group.offsets = classic.offsets
    for old in classic.members.values():
        topics_of, _owned = _subscription(old.member_id, old.protocols, topics)
        try:
            held = decode_assignment(old.assignment).partitions if old.assignment else ()
        except WireFormatError as exc:
            raise _bad_metadata(old.member_id, "its assignment") from exc
        assigned = frozenset((topics[t].topic_id, p) for t, p in held if t in topics)
        member = ConsumerMember(
            old.member_id, old.group_instance_id, None, old.client_id, old.client_host,
            tuple(sorted(set(topics_of))), None, None, old.rebalance_timeout_ms,
            member_epoch=epoch, previous_member_epoch=epoch - 1, assigned=assigned,
            session_deadline_ms=now_ms + old.session_timeout_ms,
            classic=ClassicMembership(old.session_timeout_ms, tuple(old.protocols)))
        group.members[member.member_id] = member
        if member.instance_id is not None:
            group.static_members[member.instance_id] = member.member_id
        group.target[member.member_id] = assigned
        for tp in assigned:
            group.owners[tp] = member.member_id
        group.changes.members.add(member.member_id)
        group.changes.assignments.add(member.member_id)
    group.group_epoch = group.target_epoch = epoch
    # Bumps the epoch (pending until the upgrading heartbeat settles it with its join).
    group.refresh_metadata(topics, topics_version)
    group.changes.epoch = group.changes.target = True


# -- classic members in a consumer group ------------------------------------------------------
def classic_join(group: ConsumerGroup, member_id: str, instance_id: str | None,
                 client_id: str, client_host: str, rebalance_timeout_ms: int,
                 session_timeout_ms: int, protocols: Sequence[tuple[str, bytes]],
                 topics: TopicsView, topics_version: int, now_ms: float) -> ConsumerMember:
    """A JoinGroup: join, or report owned partitions and take the next reconciliation
    step. Raises KafkaApiError for the error answers."""
    names, owned = _subscription(member_id, protocols, topics)
    current = group.members.get(member_id)
    if current is not None and current.classic is None:
        raise KafkaApiError(ErrorCode.inconsistent_group_protocol,
                            f"member {member_id} speaks the consumer protocol")
    epoch = JOIN_EPOCH if current is None else current.member_epoch
    group.heartbeat(ConsumerHeartbeat(
        member_id, epoch, client_id, client_host, instance_id, None, rebalance_timeout_ms,
        names, None, None, owned if current is not None else frozenset()),
        topics, topics_version, now_ms, session_timeout_ms)
    member = group.members[member_id]
    classic = ClassicMembership(session_timeout_ms, tuple((n, bytes(m)) for n, m in protocols))
    if member.classic != classic:
        member.classic = classic
        group.changes.members.add(member_id)
    group.step_classic_member(member_id, owned, now_ms)
    return member


def _classic_member(group: ConsumerGroup, member_id: str, generation: int) -> ConsumerMember:
    member = group.members.get(member_id)
    if member is None:
        raise KafkaApiError(ErrorCode.unknown_member_id,
                            f"member {member_id} is not in group {group.group_id}")
    if member.classic is None:
        raise KafkaApiError(ErrorCode.inconsistent_group_protocol,
                            f"member {member_id} speaks the consumer protocol")
    if generation != member.member_epoch:
        raise KafkaApiError(ErrorCode.illegal_generation,
                            f"generation {generation}, the member is at {member.member_epoch}")
    return member


def classic_commit_check(group: ConsumerGroup, member_id: str, generation: int) -> None:
    """OffsetCommit from a classic member (any version): its generation is its member
    epoch (ILLEGAL_GENERATION otherwise, as for a classic group)."""
    _classic_member(group, member_id, generation)


def classic_sync(group: ConsumerGroup, member_id: str, generation: int, topics: TopicsView
                 ) -> bytes:
    """SyncGroup: the member's current assignment in the consumer protocol's bytes."""
    member = _classic_member(group, member_id, generation)
    return encode_assignment(_named(member.assigned, topics))


def classic_heartbeat(group: ConsumerGroup, member_id: str, generation: int,
                      now_ms: float) -> ErrorCode:
    """Heartbeat: keeps the session; REBALANCE_IN_PROGRESS when the member must rejoin
    to learn (or to give up) partitions."""
    member = _classic_member(group, member_id, generation)
    assert member.classic is not None
    member.session_deadline_ms = now_ms + member.classic.session_timeout_ms
    if member.state is not MemberState.STABLE or member.member_epoch != group.target_epoch:
        return ErrorCode.rebalance_in_progress
    return ErrorCode.none


def classic_protocol_name(member: ConsumerMember) -> str:
    """The assignor name JoinGroup and SyncGroup report: the member's preferred one (its
    client applies the assignment with that protocol's eager or cooperative rules)."""
    assert member.classic is not None
    return member.classic.protocols[0][0]


# -- downgrade ---------------------------------------------------------------------------------
def to_classic(group: ConsumerGroup, topics: TopicsView, wall_ms: int) -> GroupMetadata:
    """A classic group with ``group``'s (classic) members and offsets, at generation
    ``group_epoch`` and Stable; the coordinator then starts a rebalance."""
    classic = GroupMetadata(group.group_id, GroupState.STABLE, now_ms=wall_ms)
    classic.offsets = group.offsets
    for m in group.members.values():
        assert m.classic is not None
        member = MemberMetadata(
            m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
            m.classic.session_timeout_ms, CONSUMER_PROTOCOL_TYPE, list(m.classic.protocols),
            assignment=encode_assignment(_named(m.assigned, topics)))
        classic.add(member)
        if member.group_instance_id is not None:
            classic.static_members[member.group_instance_id] = member.member_id
    classic.generation_id = group.group_epoch
    classic.protocol_type = CONSUMER_PROTOCOL_TYPE
    classic.protocol_name = classic.select_protocol()
    classic.subscribed_topics = classic.compute_subscribed_topics()
    return classic
