"""A KIP-848 consumer-protocol group ("consumer" group): pure, no I/O, no clock.

Three epochs drive it:

* the **group epoch** goes up whenever what the assignment depends on
  changes: a member joins or leaves, a subscription changes, or a subscribed
  topic appears, goes or gains partitions;
* the **target assignment epoch** is the group epoch the current target
  assignment (what the server-side assignor computed) was made for;
* each **member epoch** is the target epoch the member has caught up with.

A member reconciles towards its target one heartbeat at a time, and a
partition is never handed to a new owner before its old owner has said it
let it go (``owners`` records who holds what, pending revocations included)::

    STABLE ──(new target takes partitions away)──► UNREVOKED_PARTITIONS
       ▲ ▲                                            │ member acks: owns none of them
       │ └──────(everything it gets is free)──────────┤
       │                                              ▼
       └──(the last partition was released)── UNRELEASED_PARTITIONS

The protocol rules (errors, joins, leaves, static members) are methods of
:class:`ConsumerGroup`; the coordinator (``consumer_coordinator``) adds
requests, deadlines and persistence. Every change a heartbeat or an expiry
makes is noted in :attr:`ConsumerGroup.changes`, which the coordinator turns
into ``__consumer_offsets`` records.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum

from slog.core.kafka_errors import ErrorCode, KafkaApiError
from slog.groups.group import GroupType
from slog.groups.member import NO_GENERATION, UNKNOWN_MEMBER_ID
from slog.groups.offsets import GroupOffsets
from slog.groups.server_assignors import (
    Assignment,
    MemberSubscription,
    ServerAssignor,
    TopicIdPartition,
)

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2  # a static member that will be back (keeps its place)
NO_CHANGE = -1  # rebalance_timeout_ms: unchanged since the last heartbeat
EMPTY: Assignment = frozenset()


class MemberState(Enum):
    """Kafka's MemberState with its record byte."""

    STABLE = 0
    UNRELEASED_PARTITIONS = 1
    UNREVOKED_PARTITIONS = 2
    UNKNOWN = 127


class ConsumerGroupState(Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"  # the group epoch moved past the target's
    RECONCILING = "Reconciling"  # some member has not caught up with the target
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class TopicInfo:
    topic_id: str
    partitions: int


TopicsView = Mapping[str, TopicInfo]  # name -> id and partition count


@dataclass(frozen=True)
class ConsumerHeartbeat:
    """One ConsumerGroupHeartbeat, after the handler's request-level checks.
    ``None`` fields did not change since the member's last heartbeat."""

    member_id: str
    member_epoch: int
    client_id: str = ""
    client_host: str = ""
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = NO_CHANGE
    subscribed_topic_names: Sequence[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None


@dataclass(frozen=True)
class ClassicMembership:
    """A member that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat) inside
    a consumer group, after an online upgrade (Kafka's ClassicMemberMetadata)."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]  # (assignor name, subscription), preferred first


@dataclass
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = 300_000
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = EMPTY
    pending_revocation: Assignment = EMPTY
    # Deadlines on the coordinator's monotonic clock (ms).
    session_deadline_ms: float = 0.0
    revocation_deadline_ms: float | None = None
    classic: ClassicMembership | None = None  # None: it speaks ConsumerGroupHeartbeat

    @property
    def is_static(self) -> bool:
        return self.instance_id is not None

    def subscribes(self, topic: str) -> bool:
        if topic in self.subscribed_topic_names:
            return True
        return self.subscribed_topic_regex is not None and \
            compile_regex(self.subscribed_topic_regex).fullmatch(topic) is not None


@dataclass
class Changes:
    """What changed since the coordinator last wrote records."""

    epoch: bool = False
    target: bool = False  # the whole target assignment (one record per member and one epoch)
    members: set[str] = field(default_factory=set)  # metadata (subscriptions, ids)
    assignments: set[str] = field(default_factory=set)  # current assignments
    removed: set[str] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.epoch or self.target or self.members or self.assignments
                    or self.removed)


@dataclass(frozen=True)
class HeartbeatOutcome:
    member_id: str
    member_epoch: int
    assignment: Assignment | None  # None: unchanged, not sent


@dataclass(frozen=True)
class GroupSnapshot:
    """What a heartbeat may change, taken before it (see ConsumerGroup.snapshot)."""

    seq: int
    epochs: tuple[int, int, int, int | None]  # group, target, metadata hash, metadata version
    subscribed: dict[str, TopicInfo]
    members: dict[str, ConsumerMember]
    copies: dict[str, ConsumerMember]  # the members the heartbeat may change, as they were
    static_members: dict[str, str]
    target: dict[str, Assignment]


def compile_regex(pattern: str) -> re.Pattern[str]:
    """KIP-848 regexes are RE2; slog uses Python's ``re`` with ``fullmatch``, which
    agrees on the usual patterns (``topic-.*``, ``(a|b)\\d+``)."""
    try:
        return _REGEX_CACHE[pattern]
    except KeyError:
        pass
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise KafkaApiError(ErrorCode.invalid_regular_expression,
                            f"subscribed_topic_regex {pattern!r}: {exc}") from exc
    if len(_REGEX_CACHE) > 1024:
        _REGEX_CACHE.clear()
    _REGEX_CACHE[pattern] = compiled
    return compiled


_REGEX_CACHE: dict[str, re.Pattern[str]] = {}


def metadata_hash(subscribed: TopicsView) -> int:
    """A stable 64-bit digest of the subscribed topics (ConsumerGroupMetadataValue's
    MetadataHash): a coordinator that loads the group sees whether they changed."""
    digest = hashlib.blake2b(digest_size=8)
    for name in sorted(subscribed):
        info = subscribed[name]
        digest.update(f"{name}\0{info.topic_id}\0{info.partitions}\n".encode())
    return int.from_bytes(digest.digest(), "big", signed=True)


class ConsumerGroup:
    group_type = GroupType.CONSUMER
    protocol_type = "consumer"

    def __init__(self, group_id: str, assignors: Sequence[ServerAssignor], *,
                 max_size: int = 2**31 - 1):
        self.group_id = group_id
        self.assignors = {a.name: a for a in assignors}
        self.default_assignor = assignors[0].name
        self.max_size = max_size
        self.group_epoch = 0
        self.target_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target: dict[str, Assignment] = {}
        self.owners: dict[TopicIdPartition, str] = {}  # who holds each partition now
        self.subscribed: dict[str, TopicInfo] = {}
        self.metadata_hash = 0
        self.metadata_version: int | None = None  # the view ``subscribed`` was built from
        self.dead = False
        self.offsets = GroupOffsets()
        self.changes = Changes()
        self._bump_pending = False
        self._snapshots = 0  # the newest snapshot's number

    def __repr__(self) -> str:
        return (f"<ConsumerGroup {self.group_id!r} {self.state.value} epoch={self.group_epoch}"
                f" target={self.target_epoch} members={len(self.members)}>")

    # -- views --------------------------------------------------------------------------
    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.target_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(m.state is not MemberState.STABLE or m.member_epoch != self.target_epoch
               for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    @property
    def is_empty(self) -> bool:
        return not self.members

    @property
    def only_classic_members(self) -> bool:
        """Non-empty, and nobody speaks the consumer protocol: a downgrade candidate."""
        return bool(self.members) and all(m.classic is not None for m in self.members.values())

    def assignor_name(self) -> str:
        """The assignor most members asked for (ties: the first asked), else the default."""
        votes: dict[str, int] = {}
        for member in self.members.values():
            if member.server_assignor is not None:
                votes[member.server_assignor] = votes.get(member.server_assignor, 0) + 1
        return max(votes, key=lambda n: votes[n]) if votes else self.default_assignor

    # -- reverting a change whose records were not written ------------------------------------
    def snapshot(self, member_ids: Sequence[str | None]) -> GroupSnapshot:
        """The group before a change that touches at most ``member_ids`` (besides
        removals): dicts are copied (pointers, C speed), members only those named, so
        an idle heartbeat still costs nothing per partition."""
        self._snapshots += 1
        copies = {m: replace(self.members[m]) for m in member_ids
                  if m is not None and m in self.members}
        return GroupSnapshot(
            self._snapshots,
            (self.group_epoch, self.target_epoch, self.metadata_hash, self.metadata_version),
            self.subscribed, dict(self.members), copies, dict(self.static_members),
            dict(self.target))

    def restore(self, snapshot: GroupSnapshot) -> bool:
        """Back to ``snapshot`` (Kafka reverts a change whose records failed to be
        written); only when no later change was made on top of it. False otherwise."""
        if snapshot.seq != self._snapshots:
            return False
        self.group_epoch, self.target_epoch, self.metadata_hash, self.metadata_version = \
            snapshot.epochs
        self.subscribed = snapshot.subscribed
        self.members = {**snapshot.members, **snapshot.copies}
        self.static_members = dict(snapshot.static_members)
        self.target = dict(snapshot.target)
        self.owners = {tp: m.member_id for m in self.members.values()
                       for tp in m.assigned | m.pending_revocation}
        self.changes = Changes()
        self._bump_pending = False
        return True

    def take_changes(self) -> Changes:
        changes, self.changes = self.changes, Changes()
        return changes

    # -- heartbeat ----------------------------------------------------------------------
    def heartbeat(self, request: ConsumerHeartbeat, topics: TopicsView, topics_version: int,
                  now_ms: float, session_timeout_ms: int) -> HeartbeatOutcome:
        """Kafka's consumerGroupHeartbeat; raises KafkaApiError for the error answers."""
        if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(request)
        if request.server_assignor is not None and \
                request.server_assignor not in self.assignors:
            raise KafkaApiError(ErrorCode.unsupported_assignor,
                                f"assignor {request.server_assignor!r} is not one of "
                                f"{', '.join(self.assignors)}")
        if request.subscribed_topic_regex is not None:
            compile_regex(request.subscribed_topic_regex)
        if request.member_epoch == JOIN_EPOCH:
            member = self._join(request)
        else:
            member = self._current_member(request)
        before = member.assigned
        self._update_subscription(member, request)
        self.refresh_metadata(topics, topics_version)
        self._settle_epoch()
        if self.group_epoch > self.target_epoch:
            self._compute_target()
        self._reconcile(member, request.owned, now_ms)
        member.session_deadline_ms = now_ms + session_timeout_ms
        # Identity, not equality: reconciliation makes a new set when it changes one,
        # and an idle heartbeat must not look at every partition.
        changed = member.assigned is not before or request.member_epoch == JOIN_EPOCH or \
            (request.owned is not None and request.owned != member.assigned)
        return HeartbeatOutcome(member.member_id, member.member_epoch,
                                member.assigned if changed else None)

    def _join(self, request: ConsumerHeartbeat) -> ConsumerMember:
        if request.instance_id is not None:
            held = self.static_members.get(request.instance_id)
            if held is not None and held != request.member_id:
                old = self.members[held]
                if old.member_epoch != STATIC_LEAVE_EPOCH:
                    raise KafkaApiError(ErrorCode.unreleased_instance_id,
                                        f"instance {request.instance_id!r} is still held by "
                                        f"member {held}")
                return self._replace_static_member(old, request.member_id)
        existing = self.members.get(request.member_id)
        if existing is not None:
            # It rejoined (it lost its state): it owns nothing now, so start it over.
            self.remove_member(existing.member_id)
        if len(self.members) >= self.max_size:
            raise KafkaApiError(ErrorCode.group_max_size_reached,
                                f"group {self.group_id} has {len(self.members)} members")
        member = ConsumerMember(request.member_id, request.instance_id)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self.changes.members.add(member.member_id)
        self.changes.assignments.add(member.member_id)
        self._bump_epoch()
        return member

    def _replace_static_member(self, old: ConsumerMember, new_id: str) -> ConsumerMember:
        """A static member back after a restart: its place, epoch and partitions go on
        under the new member id, without a rebalance."""
        del self.members[old.member_id]
        self.changes.removed.add(old.member_id)
        old_id = old.member_id
        old.member_id = new_id
        old.member_epoch = old.previous_member_epoch if old.previous_member_epoch > 0 \
            else self.target_epoch
        self.members[new_id] = old
        assert old.instance_id is not None
        self.static_members[old.instance_id] = new_id
        for tp in old.assigned | old.pending_revocation:
            self.owners[tp] = new_id
        if old_id in self.target:
            self.target[new_id] = self.target.pop(old_id)
            self.changes.target = True
        self.changes.removed.discard(new_id)
        self.changes.members.add(new_id)
        self.changes.assignments.add(new_id)
        return old

    def _current_member(self, request: ConsumerHeartbeat) -> ConsumerMember:
        member = self.members.get(request.member_id)
        if member is None:
            raise KafkaApiError(ErrorCode.unknown_member_id,
                                f"member {request.member_id} is not in group {self.group_id}")
        if request.instance_id is not None and \
                self.static_members.get(request.instance_id) != member.member_id:
            raise KafkaApiError(ErrorCode.fenced_instance_id,
                                f"instance {request.instance_id!r} belongs to another member")
        epoch = request.member_epoch
        if epoch > member.member_epoch:
            raise KafkaApiError(ErrorCode.fenced_member_epoch,
                                f"epoch {epoch} is ahead of the member's {member.member_epoch}")
        # An epoch behind: it may have missed our last answer, and its previous epoch
        # is fine as long as it owns nothing the newer assignment took away.
        if epoch < member.member_epoch and (
                epoch != member.previous_member_epoch or request.owned is None
                or not request.owned <= member.assigned):
            raise KafkaApiError(ErrorCode.fenced_member_epoch,
                                    f"epoch {epoch} is behind the member's "
                                    f"{member.member_epoch}")
        return member

    def _update_subscription(self, member: ConsumerMember, request: ConsumerHeartbeat) -> None:
        updated = False
        for name, value in (("instance_id", request.instance_id),
                            ("rack_id", request.rack_id),
                            ("server_assignor", request.server_assignor)):
            if value is not None and getattr(member, name) != value:
                setattr(member, name, value)
                updated = True
        if request.client_id and member.client_id != request.client_id:
            member.client_id, updated = request.client_id, True
        if request.client_host and member.client_host != request.client_host:
            member.client_host, updated = request.client_host, True
        if request.rebalance_timeout_ms >= 0 and \
                member.rebalance_timeout_ms != request.rebalance_timeout_ms:
            member.rebalance_timeout_ms, updated = request.rebalance_timeout_ms, True
        resubscribed = False
        if request.subscribed_topic_names is not None:
            names = tuple(sorted(set(request.subscribed_topic_names)))
            if names != member.subscribed_topic_names:
                member.subscribed_topic_names, resubscribed = names, True
        if request.subscribed_topic_regex is not None:
            regex = request.subscribed_topic_regex or None  # "" clears it
            if regex != member.subscribed_topic_regex:
                member.subscribed_topic_regex, resubscribed = regex, True
        if updated or resubscribed:
            self.changes.members.add(member.member_id)
        if resubscribed:
            self.metadata_version = None  # the subscribed topics need a new look
            self._bump_epoch()

    # -- metadata -----------------------------------------------------------------------
    def refresh_metadata(self, topics: TopicsView, version: int) -> None:
        """Recompute the subscribed topics when the metadata moved on; a difference in
        them (a topic created or deleted, partitions added) bumps the group epoch. Costs
        nothing while ``version`` stays the same."""
        if version == self.metadata_version:
            return
        self.metadata_version = version
        names: set[str] = set()
        regexes: set[str] = set()
        for member in self.members.values():
            names.update(member.subscribed_topic_names)
            if member.subscribed_topic_regex is not None:
                regexes.add(member.subscribed_topic_regex)
        subscribed = {n: topics[n] for n in names if n in topics}
        for pattern in regexes:
            compiled = compile_regex(pattern)
            subscribed.update({n: info for n, info in topics.items()
                               if compiled.fullmatch(n) is not None})
        digest = metadata_hash(subscribed)
        self.subscribed = subscribed
        if digest != self.metadata_hash:
            self.metadata_hash = digest
            self._bump_epoch()

    def _bump_epoch(self) -> None:
        """Several reasons in one heartbeat make one new epoch (see _settle_epoch)."""
        self._bump_pending = True

    def settle_epoch(self) -> None:
        """Make the pending bump one new group epoch (after removals from outside)."""
        self._settle_epoch()

    def _settle_epoch(self) -> None:
        if self._bump_pending:
            self._bump_pending = False
            self.group_epoch += 1
            self.changes.epoch = True

    # -- target assignment ----------------------------------------------------------------
    def _compute_target(self) -> None:
        counts = {info.topic_id: info.partitions for info in self.subscribed.values()}
        specs = {
            m.member_id: MemberSubscription(
                frozenset(info.topic_id for name, info in self.subscribed.items()
                          if m.subscribes(name)),
                self.target.get(m.member_id, EMPTY))
            for m in self.members.values()}
        self.target = self.assignors[self.assignor_name()].assign(specs, counts) \
            if specs else {}
        self.target_epoch = self.group_epoch
        self.changes.target = True

    # -- reconciliation -------------------------------------------------------------------
    def _reconcile(self, member: ConsumerMember, owned: Assignment | None,
                   now_ms: float) -> None:
        """Kafka's CurrentAssignmentBuilder: one step towards the member's target."""
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if owned is None or owned & member.pending_revocation:
                return  # not revoked yet: the revocation deadline runs
            self._release(member, member.pending_revocation)
            member.pending_revocation = EMPTY
            member.revocation_deadline_ms = None
        elif member.state is MemberState.STABLE and member.member_epoch == self.target_epoch:
            return  # the idle case: nothing per partition
        target = self.target.get(member.member_id, EMPTY)
        kept = member.assigned & target
        revoke = member.assigned - target
        self.changes.assignments.add(member.member_id)
        if revoke:
            member.assigned = kept
            member.pending_revocation = revoke
            member.state = MemberState.UNREVOKED_PARTITIONS
            member.revocation_deadline_ms = now_ms + member.rebalance_timeout_ms
            return
        wanted = target - kept
        free = frozenset(tp for tp in wanted if self.owners.get(tp, member.member_id)
                         == member.member_id)
        for tp in free:
            self.owners[tp] = member.member_id
        if member.member_epoch != self.target_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = self.target_epoch
        if kept | free != member.assigned:  # the same set stays the same object
            member.assigned = kept | free
        member.state = MemberState.UNRELEASED_PARTITIONS if wanted - free \
            else MemberState.STABLE

    def step_classic_member(self, member_id: str, owned: Assignment, now_ms: float) -> None:
        """A classic member's JoinGroup both reports what it owns and asks for its next
        assignment: when that report acknowledges its pending revocations, go on at
        once rather than after one more rejoin."""
        member = self.members[member_id]
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            self._reconcile(member, owned, now_ms)

    def _release(self, member: ConsumerMember, partitions: Assignment) -> None:
        for tp in partitions:
            if self.owners.get(tp) == member.member_id:
                del self.owners[tp]

    # -- leaving and expiry ----------------------------------------------------------------
    def _leave(self, request: ConsumerHeartbeat) -> HeartbeatOutcome:
        member = self.members.get(request.member_id)
        if member is None:
            raise KafkaApiError(ErrorCode.unknown_member_id,
                                f"member {request.member_id} is not in group {self.group_id}")
        if request.member_epoch == STATIC_LEAVE_EPOCH:
            if not member.is_static:
                raise KafkaApiError(ErrorCode.invalid_request,
                                    "epoch -2 is for static members (group.instance.id)")
            # Keeps its partitions until it is back or its session times out.
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = STATIC_LEAVE_EPOCH
            self.changes.assignments.add(member.member_id)
        else:
            self.remove_member(member.member_id)
            self._settle_epoch()
        return HeartbeatOutcome(request.member_id, request.member_epoch, None)

    def remove_member(self, member_id: str) -> None:
        """Left, fenced or expired: its partitions are free at once."""
        member = self.members.pop(member_id)
        if member.instance_id is not None and \
                self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        self._release(member, member.assigned | member.pending_revocation)
        self.target.pop(member_id, None)
        self.metadata_version = None  # its subscription may have been the only one of some
        if not self.members:
            self.subscribed = {}
        self.changes.removed.add(member_id)
        self.changes.members.discard(member_id)
        self.changes.assignments.discard(member_id)
        self._bump_epoch()

    def expire(self, now_ms: float) -> list[str]:
        """Members past their session or revocation deadline, removed (fenced)."""
        gone = [m.member_id for m in self.members.values()
                if now_ms >= m.session_deadline_ms or
                (m.revocation_deadline_ms is not None and now_ms >= m.revocation_deadline_ms)]
        for member_id in gone:
            self.remove_member(member_id)
        self._settle_epoch()
        return gone

    def next_deadline(self) -> float | None:
        deadlines = [m.session_deadline_ms for m in self.members.values()]
        deadlines += [m.revocation_deadline_ms for m in self.members.values()
                      if m.revocation_deadline_ms is not None]
        return min(deadlines, default=None)

    # -- offsets --------------------------------------------------------------------------
    def validate_offset_commit(self, member_id: str, member_epoch: int) -> None:
        """OffsetCommit v9+: only a current member at its current epoch commits; an
        empty group also takes commits from outside (admin tools)."""
        if member_epoch < 0 and not member_id and not self.members:
            return
        self._check_member_epoch(member_id, member_epoch, ErrorCode.stale_member_epoch)

    def validate_txn_offset_commit(self, member_id: str, instance_id: str | None,
                                   generation: int) -> None:
        """TxnOffsetCommit, Kafka's rules for a consumer group. Its member id, instance id
        and generation are optional (older producers send none of them): a commit naming
        none passes, as does one without a generation into an empty group. Otherwise the
        member must exist at that epoch (a classic member's generation is its epoch).
        TxnOffsetCommit has no STALE_MEMBER_EPOCH: a wrong epoch is ILLEGAL_GENERATION."""
        if generation < 0 and not self.members:
            return
        if generation == NO_GENERATION and member_id == UNKNOWN_MEMBER_ID and \
                instance_id is None:
            return
        self._check_member_epoch(member_id, generation, ErrorCode.illegal_generation)

    def _check_member_epoch(self, member_id: str, epoch: int, wrong_epoch: ErrorCode) -> None:
        member = self.members.get(member_id)
        if member is None:
            raise KafkaApiError(ErrorCode.unknown_member_id,
                                f"member {member_id!r} is not in group {self.group_id}")
        if epoch != member.member_epoch:
            raise KafkaApiError(wrong_epoch,
                                f"epoch {epoch}, the member is at {member.member_epoch}")

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        """OffsetFetch v9+: a member fetching names its epoch; others pass -1."""
        if member_epoch < 0 and not member_id:
            return
        self.validate_offset_commit(member_id or "", member_epoch)


def new_member_id() -> str:
    """What ConsumerGroupHeartbeat v0 hands a member that joined without an id."""
    return str(uuid.uuid4())
