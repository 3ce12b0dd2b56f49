"""GroupCoordinator: Kafka's classic group protocol, rule for rule.

The method names follow Kafka's GroupCoordinator (handleJoinGroup,
doNewMemberJoinGroup, doCurrentMemberJoinGroup, addMemberAndRebalance,
prepareRebalance, onCompleteJoin, handleSyncGroup, ...) so the two can be
read side by side. What Kafka does with purgatories is done here with
deadlines on the groups and :meth:`GroupCoordinator.expire`, which the broker
calls every few tens of milliseconds:

* a rebalance's join phase ends when every known member has rejoined (checked
  on every event) or at the rebalance timeout; the first rebalance of an
  empty group waits ``group.initial.rebalance.delay.ms``, extended while new
  members keep arriving;
* a member that neither heartbeats nor waits in a JoinGroup/SyncGroup is
  removed after its session timeout;
* members that got a JoinGroup answer but do not SyncGroup within the
  rebalance timeout are removed.

JoinGroup and SyncGroup answer through callbacks, possibly much later; every
other call answers at once or through its callback. Nothing here touches a
socket or a file: persistence goes through :class:`GroupMetadataManager`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from slog.core.consumer_protocol import PROTOCOL_TYPE
from slog.core.due import WakingDueSchedule
from slog.core.kafka_errors import ErrorCode, KafkaApiError
from slog.groups.group import GroupMetadata, GroupState, GroupSummary
from slog.groups.manager import GroupMetadataManager
from slog.groups.member import (
    UNKNOWN_MEMBER_ID,
    JoinCallback,
    JoinResult,
    MemberMetadata,
    SyncCallback,
    SyncResult,
)
from slog.groups.offsets import OffsetAndMetadata, TopicPartition
from slog.groups.requests import (
    HeartbeatRequest,
    JoinGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)

log = logging.getLogger("slog.groups")

TICK_S = 0.05  # the timer's granularity: deadlines are met within it
IDLE_TICK_S = 1.0  # with nothing due, still look this often (ownership, offset retention)
DEAD_SUMMARY = GroupSummary(GroupState.DEAD.value, "", "", ())
CommitCallback = Callable[[dict[TopicPartition, ErrorCode]], None]


class ListedGroup(NamedTuple):
    """One group of a ListGroups answer."""

    group_id: str
    protocol_type: str
    state: str
    group_type: str  # GroupType's value


@dataclass(frozen=True)
class GroupConfig:
    """Broker settings that govern groups (Kafka's names in the comments)."""

    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 0  # group.initial.rebalance.delay.ms (Kafka: 3000)
    max_size: int = 2**31 - 1  # group.max.size
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000  # offsets.retention.minutes
    offsets_retention_check_ms: int = 600_000  # offsets.retention.check.interval.ms
    new_member_join_timeout_ms: int = 300_000  # Kafka's NewMemberJoinTimeoutMs


def _monotonic_ms() -> float:
    return time.monotonic() * 1000


def _wall_ms() -> int:
    return int(time.time() * 1000)


class GroupCoordinator:
    def __init__(self, config: GroupConfig, manager: GroupMetadataManager, *,
                 clock: Callable[[], float] = _monotonic_ms,
                 wall: Callable[[], int] = _wall_ms):
        self.config = config
        self.manager = manager
        self._clock = clock
        self._wall = wall
        self._next_retention_check = clock() + config.offsets_retention_check_ms
        # Groups by when expire() must look at them next: the earliest of their
        # member, pending-member, join and sync deadlines, or at once after a request
        # touched them. Groups with nothing due cost nothing per tick.
        self._due: WakingDueSchedule[str] = WakingDueSchedule(clock, TICK_S, IDLE_TICK_S)
        manager.on_loaded = self._on_group_loaded
        manager.on_unloaded = self._on_group_unloaded

    # ================================================================== validation
    def _validate_group_status(self, group_id: str | None, *, allow_empty: bool = False
                               ) -> ErrorCode | None:
        """Kafka's validateGroupStatus. Offset and admin APIs accept "" as a group id."""
        if group_id is None or (group_id == "" and not allow_empty):
            return ErrorCode.invalid_group_id
        self._wake(group_id)  # whatever the request changes, the next tick looks at it
        if self.manager.is_loading(group_id):
            return ErrorCode.coordinator_load_in_progress
        if not self.manager.owns(group_id):
            return ErrorCode.not_coordinator
        return None

    @staticmethod
    def _validate_current_member(group: GroupMetadata, member_id: str,
                                 group_instance_id: str | None) -> ErrorCode | None:
        """The instance id (if any) maps to ``member_id``, and the member exists."""
        if group_instance_id is not None:
            current = group.current_static_member_id(group_instance_id)
            if current is None:
                return ErrorCode.unknown_member_id
            if current != member_id:
                return ErrorCode.fenced_instance_id
        if not group.has(member_id):
            return ErrorCode.unknown_member_id
        return None

    # ================================================================== JoinGroup
    def handle_join_group(self, request: JoinGroupRequest, callback: JoinCallback) -> None:
        member_id = request.member_id
        error = self._validate_group_status(request.group_id)
        if error is not None:
            callback(JoinResult(member_id, error))
            return
        if not self.config.min_session_timeout_ms <= request.session_timeout_ms <= \
                self.config.max_session_timeout_ms:
            callback(JoinResult(member_id, ErrorCode.invalid_session_timeout))
            return
        is_unknown = member_id == UNKNOWN_MEMBER_ID
        group = self.manager.get(request.group_id)
        if group is None:
            if not is_unknown:
                callback(JoinResult(member_id, ErrorCode.unknown_member_id))
                return
            group = self.manager.get_or_create(request.group_id)
        if not self._accept_joining_member(group, member_id):
            if group.has(member_id):  # a member that had not rejoined: the group shrinks
                self._evict(group, group.get(member_id))
            callback(JoinResult(UNKNOWN_MEMBER_ID, ErrorCode.group_max_size_reached))
        elif is_unknown:
            self._do_new_member_join(group, request, callback)
        else:
            self._do_current_member_join(group, request, callback)
        self._try_complete_join(group)

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        """group.max.size, counted as Kafka does: in PreparingRebalance only members that
        already rejoined count, since the others may never come back."""
        if group.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_(GroupState.PREPARING_REBALANCE):
            return (group.has(member_id) and group.get(member_id).is_awaiting_join) or \
                group.num_awaiting_join < self.config.max_size
        return group.has(member_id) or group.size < self.config.max_size

    def _do_new_member_join(self, group: GroupMetadata, request: JoinGroupRequest,
                            callback: JoinCallback) -> None:
        if group.is_(GroupState.DEAD):
            callback(JoinResult(UNKNOWN_MEMBER_ID, ErrorCode.coordinator_not_available))
            return
        if not group.supports_protocols(request.protocol_type,
                                        (n for n, _ in request.protocols)):
            callback(JoinResult(UNKNOWN_MEMBER_ID, ErrorCode.inconsistent_group_protocol))
            return
        instance_id = request.group_instance_id
        new_id = group.generate_member_id(request.client_id, instance_id)
        if instance_id is not None:
            old_id = group.current_static_member_id(instance_id)
            if old_id is not None:
                log.info("static member %s of group %s rejoined as %s", instance_id,
                         group.group_id, new_id)
                self._update_static_member_and_rebalance(group, old_id, new_id, instance_id,
                                                         request, callback)
                return
        elif request.require_known_member_id:
            # JoinGroup v4+: hand out the id first, admit the member when it comes back.
            group.pending_members[new_id] = self._clock() + request.session_timeout_ms
            self._wake(group.group_id)
            callback(JoinResult(new_id, ErrorCode.member_id_required))
            return
        self._add_member_and_rebalance(group, new_id, request, callback)

    def _do_current_member_join(self, group: GroupMetadata, request: JoinGroupRequest,
                                callback: JoinCallback) -> None:
        member_id, protocols = request.member_id, request.protocols
        if group.is_(GroupState.DEAD):
            callback(JoinResult(member_id, ErrorCode.coordinator_not_available))
            return
        if not group.supports_protocols(request.protocol_type, (n for n, _ in protocols)):
            callback(JoinResult(member_id, ErrorCode.inconsistent_group_protocol))
            return
        if member_id in group.pending_members:
            if request.group_instance_id is not None:  # pending members are never static
                callback(JoinResult(member_id, ErrorCode.unknown_member_id))
                return
            self._add_member_and_rebalance(group, member_id, request, callback)
            return
        error = self._validate_current_member(group, member_id, request.group_instance_id)
        if error is not None:
            callback(JoinResult(member_id, error))
            return
        member = group.get(member_id)
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, request, callback)
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # It missed the JoinGroup answer: repeat it for this generation.
                callback(self._join_result(group, member_id))
            else:
                self._update_member_and_rebalance(group, member, request, callback)
        elif state is GroupState.STABLE:
            if group.is_leader(member_id) or not member.matches(protocols):
                # A rejoining leader forces a rebalance: it may have seen a metadata
                # change (new partitions, new matching topics) that needs one.
                self._update_member_and_rebalance(group, member, request, callback)
            else:
                callback(self._join_result(group, member_id, with_members=False))
        else:  # Empty with a member id we no longer know: start over
            callback(JoinResult(member_id, ErrorCode.unknown_member_id))

    def _join_result(self, group: GroupMetadata, member_id: str, *, with_members: bool = True
                     ) -> JoinResult:
        leader = group.is_leader(member_id) and with_members
        return JoinResult(member_id, ErrorCode.none, group.generation_id, group.protocol_type,
                          group.protocol_name, group.leader_id or "",
                          members=group.current_member_metadata() if leader else ())

    def _add_member_and_rebalance(self, group: GroupMetadata, member_id: str,
                                  request: JoinGroupRequest, callback: JoinCallback) -> None:
        member = MemberMetadata(member_id, request.group_instance_id, request.client_id,
                                request.client_host, request.rebalance_timeout_ms,
                                request.session_timeout_ms, request.protocol_type,
                                [(n, bytes(m)) for n, m in request.protocols],
                                join_callback=callback, is_new=True)
        if group.is_(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True  # lets the initial delay stretch for late joiners
        group.add(member)
        # A new member cannot heartbeat yet and its connection is muted while it
        # waits, so its JoinGroup itself expires after a (long) fixed time.
        self._schedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance(group, f"new member {member_id} joined")

    def _update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata,
                                     request: JoinGroupRequest, callback: JoinCallback) -> None:
        group.update_member(member, request.protocols, request.rebalance_timeout_ms,
                            request.session_timeout_ms)
        self._set_join_callback(group, member, callback)
        self._maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")

    @staticmethod
    def _set_join_callback(group: GroupMetadata, member: MemberMetadata,
                           callback: JoinCallback | None) -> None:
        # A JoinGroup superseded by a newer one of the same member still gets an
        # answer (its connection is likely gone); REBALANCE_IN_PROGRESS just rejoins.
        group.invoke_join_callback(member, JoinResult(member.member_id,
                                                      ErrorCode.rebalance_in_progress))
        member.join_callback = callback

    def _update_static_member_and_rebalance(
            self, group: GroupMetadata, old_id: str, new_id: str, group_instance_id: str,
            request: JoinGroupRequest, callback: JoinCallback) -> None:
        current_leader = group.leader_id or ""
        support_skip_assignment = request.support_skip_assignment
        member = group.replace_static_member(group_instance_id, old_id, new_id)
        self._schedule_heartbeat(group, member)
        old = (list(member.protocols), member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(member, request.protocols, request.rebalance_timeout_ms,
                            request.session_timeout_ms)
        member.join_callback = callback
        if group.is_(GroupState.STABLE):
            if group.select_protocol() != group.protocol_name:
                self._maybe_prepare_rebalance(group, f"static member {new_id} changed protocols")
                return
            # A restart within the session timeout: same place, same assignment, no
            # rebalance. The new member id is persisted first so a failover keeps it.
            generation = group.generation_id

            def stored(error: ErrorCode) -> None:
                if error is not ErrorCode.none:
                    member.join_callback = None
                    group.update_member(member, old[0], old[1], old[2])
                    restored = group.replace_static_member(group_instance_id, new_id, old_id)
                    self._schedule_heartbeat(group, restored)
                    callback(JoinResult(UNKNOWN_MEMBER_ID, error, group.generation_id,
                                        group.protocol_type, group.protocol_name,
                                        current_leader))
                    return
                leads = support_skip_assignment and group.is_leader(new_id)
                group.invoke_join_callback(member, JoinResult(
                    new_id, ErrorCode.none, generation, group.protocol_type, group.protocol_name,
                    (group.leader_id or "") if support_skip_assignment else current_leader,
                    skip_assignment=leads,
                    members=group.current_member_metadata() if leads else ()))

            self.manager.store_group(group, {m.member_id: m.assignment
                                             for m in group.members.values()}, stored)
        elif group.is_(GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, f"static member {new_id} rejoined")
        # PreparingRebalance: the running rebalance picks it up.

    # ================================================================== rebalances
    @staticmethod
    def _rebalance_timeout(group: GroupMetadata) -> int:
        return max((m.rebalance_timeout_ms for m in group.members.values()), default=0)

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance:
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.rebalance_in_progress)
        group.sync_deadline_ms = None
        was_empty = group.is_(GroupState.EMPTY)
        group.transition_to(GroupState.PREPARING_REBALANCE, self._wall())
        now = self._clock()
        timeout = self._rebalance_timeout(group)
        if was_empty:
            delay = self.config.initial_rebalance_delay_ms
            group.initial_join_remaining_ms = max(timeout - delay, 0)
            group.join_deadline_ms = now + delay
        else:
            group.initial_join_remaining_ms = None
            group.join_deadline_ms = now + timeout
        self._wake(group.group_id)
        log.info("preparing to rebalance group %s in generation %d (%s)", group.group_id,
                 group.generation_id, reason)
        self._try_complete_join(group)  # e.g. the last member left: nobody to wait for

    def _try_complete_join(self, group: GroupMetadata) -> None:
        """Kafka's DelayedJoin.tryComplete, plus InitialDelayedJoin's expiry."""
        if not group.is_(GroupState.PREPARING_REBALANCE) or group.join_deadline_ms is None:
            return
        now = self._clock()
        if group.initial_join_remaining_ms is not None:
            # The initial delay only ends by time, stretched while members keep coming.
            while group.join_deadline_ms is not None and now >= group.join_deadline_ms:
                remaining = group.initial_join_remaining_ms
                if group.new_member_added and remaining:
                    group.new_member_added = False
                    delay = min(self.config.initial_rebalance_delay_ms, remaining)
                    group.initial_join_remaining_ms = max(
                        remaining - self.config.initial_rebalance_delay_ms, 0)
                    group.join_deadline_ms = now + delay
                    self._wake(group.group_id)
                    if delay:
                        return
                else:
                    self._complete_join(group)
                    return
            return
        if group.has_all_members_joined() or now >= group.join_deadline_ms:
            self._complete_join(group)

    def _complete_join(self, group: GroupMetadata) -> None:
        """Kafka's onCompleteJoin: drop members that did not rejoin, start a generation."""
        group.join_deadline_ms = None
        group.initial_join_remaining_ms = None
        for member in group.not_yet_rejoined():
            if not member.is_static:
                log.info("removing member %s from group %s: it did not rejoin in time",
                         member.member_id, group.group_id)
                self._evict(group, member)
        if group.is_(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that have not come back: wait for them (or their
            # session timeouts) a little longer.
            group.join_deadline_ms = self._clock() + self._rebalance_timeout(group)
            self._wake(group.group_id)
            return
        group.init_next_generation(self._wall())
        if group.is_(GroupState.EMPTY):
            log.info("group %s is now empty (generation %d)", group.group_id,
                     group.generation_id)
            self.manager.store_group(group, {}, self._log_store_error(group))
            return
        log.info("stabilized group %s generation %d (%d members, protocol %s)",
                 group.group_id, group.generation_id, group.size, group.protocol_name)
        for member in list(group.members.values()):
            group.invoke_join_callback(member, self._join_result(group, member.member_id))
            self._schedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        group.sync_deadline_ms = self._clock() + self._rebalance_timeout(group)
        self._wake(group.group_id)

    @staticmethod
    def _log_store_error(group: GroupMetadata) -> Callable[[ErrorCode], None]:
        def done(error: ErrorCode) -> None:
            if error is not ErrorCode.none:
                log.warning("could not store group %s: %s", group.group_id, error.name)
        return done

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members.values():
            result = SyncResult(error, group.protocol_type, group.protocol_name,
                                member.assignment if error is ErrorCode.none else b"")
            if group.invoke_sync_callback(member, result):
                # The member just heard from us; its session restarts now.
                self._schedule_heartbeat(group, member)

    def _evict(self, group: GroupMetadata, member: MemberMetadata) -> None:
        """Remove a member, answering whatever it still waits for."""
        group.invoke_join_callback(member, JoinResult(UNKNOWN_MEMBER_ID,
                                                      ErrorCode.unknown_member_id))
        group.invoke_sync_callback(member, SyncResult(ErrorCode.unknown_member_id))
        group.remove(member.member_id)

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata,
                                        reason: str) -> None:
        self._evict(group, member)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, reason)
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata,
                            timeout_ms: int | None = None) -> None:
        """Kafka's completeAndScheduleNextHeartbeatExpiration."""
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        member.heartbeat_deadline_ms = self._clock() + timeout
        self._due.schedule(group.group_id, member.heartbeat_deadline_ms)

    # ================================================================== SyncGroup
    def handle_sync_group(self, request: SyncGroupRequest, callback: SyncCallback) -> None:
        member_id = request.member_id
        error = self._validate_group_status(request.group_id)
        if error is ErrorCode.coordinator_load_in_progress:
            # The rebalance's state is gone with the old coordinator; rejoining is the
            # way on, and older clients do not expect LOAD_IN_PROGRESS here.
            callback(SyncResult(ErrorCode.rebalance_in_progress))
            return
        if error is not None:
            callback(SyncResult(error))
            return
        group = self.manager.get(request.group_id)
        if group is None:
            callback(SyncResult(ErrorCode.unknown_member_id))
            return
        error = self._validate_sync(group, request)
        if error is not None:
            callback(SyncResult(error))
            return
        state = group.state
        if state is GroupState.EMPTY:
            callback(SyncResult(ErrorCode.unknown_member_id))
        elif state is GroupState.PREPARING_REBALANCE:
            callback(SyncResult(ErrorCode.rebalance_in_progress))
        elif state is GroupState.COMPLETING_REBALANCE:
            member = group.get(member_id)
            group.invoke_sync_callback(member, SyncResult(ErrorCode.rebalance_in_progress))
            member.sync_callback = callback
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                self._store_assignment(group, member_id, request.assignments)
        elif state is GroupState.STABLE:
            self._remove_pending_sync_member(group, member_id)
            member = group.get(member_id)
            callback(SyncResult(ErrorCode.none, group.protocol_type, group.protocol_name,
                                member.assignment))
            self._schedule_heartbeat(group, member)

    def _validate_sync(self, group: GroupMetadata, request: SyncGroupRequest) -> ErrorCode | None:
        error = self._validate_generation_member(group, request.member_id,
                                                 request.group_instance_id,
                                                 request.generation_id)
        if error is not None:
            return error
        protocol_type, protocol_name = request.protocol_type, request.protocol_name
        if protocol_type is not None and protocol_type != group.protocol_type:
            return ErrorCode.inconsistent_group_protocol
        if protocol_name is not None and protocol_name != group.protocol_name:
            return ErrorCode.inconsistent_group_protocol
        return None

    def _validate_generation_member(self, group: GroupMetadata, member_id: str,
                                    group_instance_id: str | None, generation_id: int
                                    ) -> ErrorCode | None:
        """A live group, a current member, and the group's generation."""
        if group.is_(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        error = self._validate_current_member(group, member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        return None

    def _store_assignment(self, group: GroupMetadata, leader_id: str,
                          assignments: Mapping[str, bytes]) -> None:
        log.info("assignment received from leader %s of group %s for generation %d",
                 leader_id, group.group_id, group.generation_id)
        # Members the leader left out get an empty assignment.
        assignment = {m: bytes(assignments.get(m, b"")) for m in group.members}
        generation = group.generation_id

        def stored(error: ErrorCode) -> None:
            # A member may have joined meanwhile: act only if nothing moved on.
            if not (group.is_(GroupState.COMPLETING_REBALANCE)
                    and group.generation_id == generation):
                return
            if error is not ErrorCode.none:
                self._reset_and_propagate_assignment_error(group, error)
                self._maybe_prepare_rebalance(group, "storing the assignment failed")
                return
            for member_id, data in assignment.items():
                if group.has(member_id):
                    group.get(member_id).assignment = data
            self._propagate_assignment(group, ErrorCode.none)
            group.transition_to(GroupState.STABLE, self._wall())

        self.manager.store_group(group, assignment, stored)

    def _remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members:
            group.sync_deadline_ms = None

    # ================================================================== Heartbeat / LeaveGroup
    def handle_heartbeat(self, request: HeartbeatRequest) -> ErrorCode:
        error = self._validate_group_status(request.group_id)
        if error is ErrorCode.coordinator_load_in_progress:
            return ErrorCode.none  # the group is being loaded: answer blindly, as Kafka does
        if error is not None:
            return error
        group = self.manager.get(request.group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        error = self._validate_generation_member(group, request.member_id,
                                                 request.group_instance_id,
                                                 request.generation_id)
        if error is not None:
            return error
        if group.is_(GroupState.EMPTY):
            return ErrorCode.unknown_member_id
        self._schedule_heartbeat(group, group.get(request.member_id))
        if group.is_(GroupState.PREPARING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def handle_leave_group(self, group_id: str, leaving: Sequence[tuple[str, str | None]]
                           ) -> tuple[ErrorCode, list[ErrorCode]]:
        """``leaving``: (member id, group instance id); an empty member id with an
        instance id removes that static member (the admin path)."""
        error = self._validate_group_status(group_id)
        if error is not None:
            return error, []
        group = self.manager.get(group_id)
        if group is None:
            return ErrorCode.none, [ErrorCode.unknown_member_id for _ in leaving]
        if group.is_(GroupState.DEAD):
            return ErrorCode.coordinator_not_available, []
        return ErrorCode.none, [self._leave_one(group, m, i) for m, i in leaving]

    def _leave_one(self, group: GroupMetadata, member_id: str, instance_id: str | None
                   ) -> ErrorCode:
        if member_id == UNKNOWN_MEMBER_ID:
            current = group.current_static_member_id(instance_id)
            if current is None:
                return ErrorCode.unknown_member_id
            member_id = current
        elif member_id in group.pending_members:
            del group.pending_members[member_id]
            self._try_complete_join(group)
            return ErrorCode.none
        else:
            error = self._validate_current_member(group, member_id, instance_id)
            if error is not None:
                return error
        member = group.get(member_id)
        log.info("member %s is leaving group %s", member_id, group.group_id)
        self._remove_member_and_update_group(group, member, f"member {member_id} left")
        return ErrorCode.none

    # ================================================================== offsets
    def handle_commit_offsets(self, request: OffsetCommitRequest,
                              callback: CommitCallback) -> None:
        offsets = request.offsets

        def fail(error: ErrorCode) -> None:
            callback(dict.fromkeys(offsets, error))

        error = self._validate_group_status(request.group_id, allow_empty=True)
        if error is not None:
            fail(error)
            return
        group = self.manager.get(request.group_id)
        if group is None:
            if request.generation_id >= 0:  # a member of a generation we never had
                fail(ErrorCode.group_id_not_found if request.report_unknown_group
                     else ErrorCode.illegal_generation)
                return
            # Not using group management, just storing offsets (assign() + commit()).
            group = self.manager.get_or_create(request.group_id)
        error = self._validate_offset_commit(group, request)
        if error is not None:
            fail(error)
        elif group.is_(GroupState.COMPLETING_REBALANCE):
            # A member of the new generation that has not synced yet.
            fail(ErrorCode.rebalance_in_progress)
        else:
            if group.has(request.member_id):
                self._schedule_heartbeat(group, group.get(request.member_id))
            self._store_offsets(group, offsets, callback)

    def _validate_offset_commit(self, group: GroupMetadata, request: OffsetCommitRequest,
                                transactional: bool = False) -> ErrorCode | None:
        if request.generation_id >= 0 or request.member_id != UNKNOWN_MEMBER_ID or \
                request.group_instance_id is not None:
            return self._validate_generation_member(group, request.member_id,
                                                    request.group_instance_id,
                                                    request.generation_id)
        if group.is_(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        if not group.is_(GroupState.EMPTY) and not transactional:
            # Only members may commit for an active group; TxnOffsetCommit is exempt, as
            # in Kafka: its older versions carry no member id or generation at all.
            return ErrorCode.unknown_member_id
        return None

    # Transactional offsets: slog.transactions.offsets holds them until the marker.
    def validate_txn_offset_commit(self, request: OffsetCommitRequest) -> ErrorCode | None:
        """TxnOffsetCommit's checks, an OffsetCommit's (nothing is stored yet)."""
        error = self._validate_group_status(request.group_id, allow_empty=True)
        if error is not None:
            return error
        limit = self.config.offset_metadata_max_bytes
        if any(len(v.metadata.encode()) > limit for v in request.offsets.values()):
            return ErrorCode.offset_metadata_too_large
        consumer_group = self.manager.consumer_groups.get(request.group_id)
        if consumer_group is not None:  # KIP-848: the member epoch is the generation
            try:
                consumer_group.validate_txn_offset_commit(
                    request.member_id, request.group_instance_id, request.generation_id)
            except KafkaApiError as exc:
                return exc.code
            return None
        group = self.manager.get(request.group_id)
        if group is None:  # made once the offsets are written: create_txn_offset_groups
            return ErrorCode.illegal_generation if request.generation_id >= 0 else None
        return self._validate_offset_commit(group, request, transactional=True)

    def store_txn_offsets(self, group_id: str,
                          offsets: Mapping[TopicPartition, OffsetAndMetadata],
                          callback: Callable[[ErrorCode], None]) -> None:
        """A COMMIT marker reached the group's partition: its offsets are stored into the
        group they were committed to, the KIP-848 group when there is one (OffsetFetch
        reads that group's offsets). That group cannot expire while they wait (see
        ``GroupMetadataManager.txn_offsets``) and deleting it drops them. Should the id
        have changed kind meanwhile (an empty consumer group turned classic by a JoinGroup
        keeps its offsets), they still land in the offsets of that group id, as Kafka
        keeps offsets by group id: in a simple group of that id if there is none."""
        self.manager.store_offsets(self.manager.offsets_group(group_id), offsets, callback)

    def _store_offsets(self, group: GroupMetadata,
                       offsets: Mapping[TopicPartition, OffsetAndMetadata],
                       callback: CommitCallback) -> None:
        limit = self.config.offset_metadata_max_bytes
        valid = {tp: v for tp, v in offsets.items() if len(v.metadata.encode()) <= limit}
        status = dict.fromkeys(offsets, ErrorCode.offset_metadata_too_large)
        if not valid:
            callback(status)
            return

        def stored(error: ErrorCode) -> None:
            status.update(dict.fromkeys(valid, error))
            callback(status)

        self.manager.store_offsets(group, valid, stored)

    def handle_fetch_offsets(self, request: OffsetFetchRequest
                             ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None]]:
        """Committed offsets regardless of the group's state (standalone consumers use
        this too); None for a partition without one. ``partitions=None``: all of them.
        A classic group has no member epochs: the request's member fields are ignored."""
        error = self._validate_group_status(request.group_id, allow_empty=True)
        if error is not None:
            return error, {}
        group = self.manager.get(request.group_id)
        partitions = request.partitions
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.none, dict.fromkeys(partitions or ())
        wanted = list(group.offsets.committed) if partitions is None else list(partitions)
        return ErrorCode.none, {tp: group.offsets.get(tp) for tp in wanted}

    # ================================================================== admin
    def handle_describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary]:
        """GROUP_ID_NOT_FOUND for a group this coordinator does not have (DescribeGroups
        v6 answers that; older versions describe it as Dead with no error)."""
        error = self._validate_group_status(group_id, allow_empty=True)
        if error is not None:
            return error, DEAD_SUMMARY
        group = self.manager.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.group_id_not_found, DEAD_SUMMARY
        return ErrorCode.none, group.summary()

    def handle_list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()
                           ) -> tuple[ErrorCode, list[ListedGroup]]:
        """Every group here, optionally only those in one of ``states`` and of one of
        ``types`` (both any case, as Kafka; a type no group has matches nothing)."""
        wanted_states = {s.strip().lower() for s in states}
        wanted_types = {t.strip().lower() for t in types}
        error = ErrorCode.coordinator_load_in_progress if self.manager.any_loading \
            else ErrorCode.none
        return error, [ListedGroup(g.group_id, g.protocol_type or "", g.state.value,
                                   g.group_type.value)
                       for g in self.manager.all_groups()
                       if not g.is_(GroupState.DEAD)
                       and (not wanted_states or g.state.value.lower() in wanted_states)
                       and (not wanted_types or g.group_type.value in wanted_types)]

    def handle_delete_groups(self, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        errors: dict[str, ErrorCode] = {}
        doomed = []
        for group_id in group_ids:
            error = self._validate_group_status(group_id, allow_empty=True)
            group = self.manager.get(group_id) if error is None else None
            if group is not None:
                # A session that ran out since the timer last looked (it wakes within
                # TICK_S) has ended: a client that waited it out may delete the group.
                self._expire_group(group, self._clock())
            if error is not None:
                errors[group_id] = error
            elif group is None or group.is_(GroupState.DEAD):
                errors[group_id] = ErrorCode.group_id_not_found
            elif group.is_(GroupState.EMPTY):
                group.transition_to(GroupState.DEAD, self._wall())
                doomed.append(group)
                errors[group_id] = ErrorCode.none
            else:
                errors[group_id] = ErrorCode.non_empty_group
        if doomed:
            self.manager.cleanup(doomed, self.manager.remove_all_offsets)
        return errors

    def handle_delete_offsets(self, group_id: str, partitions: Sequence[TopicPartition]
                              ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        error = self._validate_group_status(group_id, allow_empty=True)
        if error is not None:
            return error, {}
        group = self.manager.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.group_id_not_found, {}
        if group.is_(GroupState.EMPTY):
            eligible, errors = list(partitions), {}
        elif group.protocol_type == PROTOCOL_TYPE:
            errors = {tp: ErrorCode.group_subscribed_to_topic for tp in partitions
                      if group.is_subscribed_to_topic(tp[0])}
            eligible = [tp for tp in partitions if tp not in errors]
        else:
            return ErrorCode.non_empty_group, {}
        if eligible:
            self.manager.cleanup([group], lambda g: self.manager.remove_offsets(g, eligible))
            errors.update(dict.fromkeys(eligible, ErrorCode.none))
        return ErrorCode.none, errors

    # ================================================================== loading
    def adopt_downgraded(self, group: GroupMetadata) -> None:
        """A consumer group that became classic again (KIP-848's downgrade, see
        ``migration``): its members get sessions here and rejoin in a rebalance, so
        each learns a classic generation and an assignment its leader computes."""
        for member in group.members.values():
            self._schedule_heartbeat(group, member)
        self._prepare_rebalance(group, "downgraded from a consumer group")

    def _on_group_loaded(self, group: GroupMetadata) -> None:
        for member in group.members.values():
            self._schedule_heartbeat(group, member)

    def _on_group_unloaded(self, group: GroupMetadata) -> None:
        previous = group.state
        group.transition_to(GroupState.DEAD, self._wall())
        for member in group.members.values():
            if previous is GroupState.PREPARING_REBALANCE:
                group.invoke_join_callback(member, JoinResult(member.member_id,
                                                              ErrorCode.not_coordinator))
            group.invoke_sync_callback(member, SyncResult(ErrorCode.not_coordinator))

    # ================================================================== time
    def expire(self) -> None:
        """Everything time decides: sessions, pending members, join and sync deadlines,
        offset retention. Only groups with something due are looked at."""
        now = self._clock()
        self.manager.check_ownership()
        for group_id in self._due.pop_due(now):
            group = self.manager.groups.get(group_id)
            if group is None:
                continue
            self._expire_group(group, now)
            deadline = self._next_deadline(group, now)
            if deadline is not None:
                self._due.schedule(group_id, deadline)
        if now >= self._next_retention_check:
            self._next_retention_check = now + self.config.offsets_retention_check_ms
            self.remove_expired_offsets()

    def _wake(self, group_id: str) -> None:
        self._due.schedule(group_id, self._clock())

    @staticmethod
    def _next_deadline(group: GroupMetadata, now: float) -> float | None:
        """When ``_expire_group`` could next change ``group`` without a request arriving.
        A member waiting in a rebalance cannot expire, so a deadline of its already past
        does not count: the rebalance's join or sync deadline covers it."""
        if group.is_(GroupState.DEAD):
            return None
        deadlines = list(group.pending_members.values())
        deadlines += [m.heartbeat_deadline_ms for m in group.members.values()
                      if m.heartbeat_deadline_ms > now]
        if group.is_(GroupState.PREPARING_REBALANCE) and group.join_deadline_ms is not None:
            deadlines.append(group.join_deadline_ms)
        if group.sync_deadline_ms is not None:
            deadlines.append(group.sync_deadline_ms)
        return min(deadlines, default=None)

    def _expire_group(self, group: GroupMetadata, now: float) -> None:
        if group.is_(GroupState.DEAD):
            return
        for member_id, deadline in list(group.pending_members.items()):
            if now >= deadline:
                log.info("pending member %s of group %s expired", member_id, group.group_id)
                del group.pending_members[member_id]
                self._try_complete_join(group)
        for member in list(group.members.values()):
            if group.has(member.member_id) and not member.has_satisfied_heartbeat(now):
                log.info("member %s of group %s has failed (session timeout), removing it",
                         member.member_id, group.group_id)
                self._remove_member_and_update_group(
                    group, member, f"member {member.member_id} expired")
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)
        sync_deadline = group.sync_deadline_ms
        if sync_deadline is not None and now >= sync_deadline and group.pending_sync_members and \
                group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            late = sorted(group.pending_sync_members)
            log.info("removing members of group %s that did not sync in time: %s",
                     group.group_id, late)
            for member_id in late:
                if group.has(member_id):
                    self._evict(group, group.get(member_id))
            group.sync_deadline_ms = None
            self._prepare_rebalance(group, "members did not sync in time")

    def remove_expired_offsets(self) -> int:
        now = self._wall()
        retention = self.config.offsets_retention_ms

        def select(group: GroupMetadata) -> list[TopicPartition]:
            offsets = group.offsets
            if group.protocol_type is not None and group.is_(GroupState.EMPTY):
                expired = offsets.expired(now, retention, lambda _v: group.state_timestamp_ms)
            elif group.protocol_type == PROTOCOL_TYPE and group.is_(GroupState.STABLE) and \
                    group.subscribed_topics is not None:
                expired = offsets.expired(now, retention, lambda v: v.commit_timestamp_ms,
                                          group.subscribed_topics)
            elif group.protocol_type is None:
                expired = offsets.expired(now, retention, lambda v: v.commit_timestamp_ms)
            else:
                expired = []
            awaiting_marker = self.manager.txn_offsets.partitions_of(group.group_id)
            return offsets.remove(tp for tp in expired if tp not in awaiting_marker)

        removed = self.manager.cleanup(self.manager.all_groups(), select)
        if removed:
            log.info("removed %d expired offsets", removed)
        return removed

    def remove_offsets_of_deleted_topics(self, topics: Collection[str]) -> int:
        """Kafka's clean-up on topic deletion: a topic created again under the same
        name must not inherit the old topic's offsets, committed or awaiting a marker."""
        gone = set(topics)

        def select(group: GroupMetadata) -> list[TopicPartition]:
            return self.manager.remove_offsets(group, self.manager.offsets_of_topics(group, gone))

        removed = self.manager.cleanup(self.manager.all_groups(), select) + \
            self.manager.remove_groupless_txn_offsets(gone)
        if removed:
            log.info("removed %d offsets of deleted topics %s", removed, sorted(gone))
        return removed

    async def run(self) -> None:
        """The broker's timer task."""
        await self._due.run(self.expire, log, "group coordinator")
