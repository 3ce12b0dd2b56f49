"""A consumer group's state (Kafka's GroupMetadata): pure, no I/O, no clock.

States and the transitions Kafka allows::

    Empty ──────────────► PreparingRebalance ◄──────────────┐
      ▲                      │          ▲                   │
      └──── (no members) ────┘          │ member change     │
                             ▼          │                   │
                     CompletingRebalance ───► Stable ───────┘
    (any state) ──► Dead (deleted, expired or unloaded)

``PreparingRebalance`` waits for members to (re)join; ``CompletingRebalance``
waits for the leader's assignment in SyncGroup; ``Stable`` has one.
The rules that drive these transitions live in :mod:`slog.groups.coordinator`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from slog.core.consumer_protocol import PROTOCOL_TYPE, WireFormatError, decode_subscription
from slog.core.errors import SlogError
from slog.core.kafka_errors import ErrorCode
from slog.groups.member import (
    JoinedMember,
    JoinResult,
    MemberMetadata,
    SyncResult,
)
from slog.groups.offsets import GroupOffsets


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
}


class GroupType(Enum):
    """A group's protocol family (KIP-848's ``group.type``): classic groups here,
    consumer groups in :mod:`slog.groups.consumer_group`; share and streams groups
    are named only so that filters by type (ListGroups v5) can be answered."""

    CLASSIC = "classic"
    CONSUMER = "consumer"
    SHARE = "share"
    STREAMS = "streams"


class IllegalStateTransition(SlogError, RuntimeError):
    pass


@dataclass(frozen=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupSummary:
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberSummary, ...]


class GroupMetadata:
    group_type = GroupType.CLASSIC

    def __init__(self, group_id: str, state: GroupState = GroupState.EMPTY, *,
                 now_ms: int = 0):
        self.group_id = group_id
        self.state = state
        self.state_timestamp_ms = now_ms  # wall clock of the last transition
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        # Members told MEMBER_ID_REQUIRED, expected back (id -> expiry deadline).
        self.pending_members: dict[str, float] = {}
        self.pending_sync_members: set[str] = set()
        self.new_member_added = False
        self.subscribed_topics: frozenset[str] | None = None
        self.offsets = GroupOffsets()
        # Deadlines on the coordinator's monotonic clock (ms); None when not armed.
        self.join_deadline_ms: float | None = None
        self.initial_join_remaining_ms: int | None = None  # set while the first join waits
        self.sync_deadline_ms: float | None = None

    def __repr__(self) -> str:
        return (f"<Group {self.group_id!r} {self.state.value} gen={self.generation_id} "
                f"members={len(self.members)}>")

    # -- state ------------------------------------------------------------------------
    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise IllegalStateTransition(
                f"group {self.group_id}: {self.state.value} -> {state.value} is not allowed")
        self.state = state
        self.state_timestamp_ms = now_ms

    @property
    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # -- members ----------------------------------------------------------------------
    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    @property
    def size(self) -> int:
        return len(self.members)

    @property
    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    @staticmethod
    def generate_member_id(client_id: str, group_instance_id: str | None) -> str:
        """Kafka's format: ``<group.instance.id or client.id>-<UUID>``."""
        return f"{group_instance_id if group_instance_id is not None else client_id}-{uuid.uuid4()}"

    def add(self, member: MemberMetadata) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id  # the first joiner leads
        self.members[member.member_id] = member
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is not None and member.group_instance_id is not None and \
                self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.pop(member_id, None)
        self.pending_sync_members.discard(member_id)
        return member

    def update_member(self, member: MemberMetadata, protocols: Iterable[tuple[str, bytes]],
                      rebalance_timeout_ms: int, session_timeout_ms: int) -> None:
        member.protocols = [(n, bytes(m)) for n, m in protocols]
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms

    def current_static_member_id(self, group_instance_id: str | None) -> str | None:
        return None if group_instance_id is None else self.static_members.get(group_instance_id)

    def replace_static_member(self, group_instance_id: str, old_id: str, new_id: str
                              ) -> MemberMetadata:
        """A static member came back with a new member id: keep its place and assignment."""
        member = self.members.pop(old_id)
        # The old incarnation's pending requests are answered: it has been fenced.
        self.invoke_join_callback(member, JoinResult(old_id, ErrorCode.fenced_instance_id))
        self.invoke_sync_callback(member, SyncResult(ErrorCode.fenced_instance_id))
        member.member_id = new_id
        self.members[new_id] = member
        if self.is_leader(old_id):
            self.leader_id = new_id
        self.static_members[group_instance_id] = new_id
        if old_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_id)
            self.pending_sync_members.add(new_id)
        return member

    # -- protocols --------------------------------------------------------------------
    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        members = list(self.members.values())
        if not members:
            return set()
        common = set(members[0].protocol_names)
        for member in members[1:]:
            common &= set(member.protocol_names)
        return common

    def supports_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        names = set(names)
        if self.is_(GroupState.EMPTY):
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        """Each member votes for its favourite common protocol; most votes wins
        (ties go to the protocol the earliest member prefers)."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda name: votes[name])  # max keeps the first of equals

    # -- generations ------------------------------------------------------------------
    def has_all_members_joined(self) -> bool:
        return self.num_awaiting_join == len(self.members) and not self.pending_members

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, else hand leadership to any member that did."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].is_awaiting_join:
            return True
        joined = next((m.member_id for m in self.members.values() if m.is_awaiting_join), None)
        if joined is None:
            return False
        self.leader_id = joined
        return True

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)
        self.subscribed_topics = self.compute_subscribed_topics()
        self.pending_sync_members.clear()

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """Topics of the chosen protocol's subscriptions (consumer groups only;
        None when unknown, e.g. a member's metadata does not parse)."""
        if self.protocol_type != PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics.update(decode_subscription(member.metadata(self.protocol_name)).topics)
        except (WireFormatError, KeyError):
            return None
        return frozenset(topics)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return self.subscribed_topics is not None and topic in self.subscribed_topics

    def current_member_metadata(self) -> tuple[JoinedMember, ...]:
        assert self.protocol_name is not None
        return tuple(JoinedMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                     for m in self.members.values())

    # -- pending requests -------------------------------------------------------------
    def invoke_join_callback(self, member: MemberMetadata, result: JoinResult) -> None:
        callback, member.join_callback = member.join_callback, None
        if callback is not None:
            callback(result)

    def invoke_sync_callback(self, member: MemberMetadata, result: SyncResult) -> bool:
        callback, member.sync_callback = member.sync_callback, None
        if callback is None:
            return False
        callback(result)
        return True

    # -- views ------------------------------------------------------------------------
    def summary(self) -> GroupSummary:
        """What DescribeGroups shows: metadata and assignments only when Stable."""
        protocol = self.protocol_name if self.is_(GroupState.STABLE) else None
        members = tuple(
            MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                          m.metadata(protocol) if protocol is not None else b"",
                          m.assignment if protocol is not None else b"")
            for m in self.members.values())
        return GroupSummary(self.state.value, self.protocol_type or "", protocol or "", members)
