"""ConsumerGroupCoordinator: KIP-848 consumer-protocol groups on the group coordinator.

It shares the classic coordinator's placement, loading and ``__consumer_offsets``
partitions (through :class:`GroupMetadataManager`, which keeps these groups in
``consumer_groups``) and adds what the new protocol needs around the pure
:class:`ConsumerGroup`:

* a heartbeat's changes are written as Kafka's records before it is answered,
  so a restarted or moved coordinator resumes with the same epochs and
  assignments;
* members that stop heartbeating (``group.consumer.session.timeout.ms``) or do
  not revoke within their rebalance timeout are removed by :meth:`expire`,
  which the broker's timer task runs; only groups with a deadline due are
  looked at;
* the metadata the groups subscribe to is read through ``topics``, rebuilt
  only when the metadata image moved on, so an idle group's heartbeat does no
  work per topic or partition;
* a group id is either classic or consumer: an empty group of one kind becomes
  the other kind when a member of the other protocol arrives (its offsets go
  along); a non-empty one migrates online as ``group.consumer.migration.policy``
  allows (:mod:`slog.groups.migration`): a consumer heartbeat upgrades a stable
  classic group, whose members are then served here through JoinGroup, SyncGroup,
  Heartbeat and LeaveGroup, and the last consumer-protocol member's leaving
  downgrades it (``on_downgrade`` hands the classic group to the classic
  coordinator, which rebalances it).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from slog.core.due import WakingDueSchedule
from slog.core.group_config import GroupSettings
from slog.core.kafka_errors import ErrorCode, KafkaApiError
from slog.groups.consumer_group import (
    JOIN_EPOCH,
    ConsumerGroup,
    ConsumerHeartbeat,
    GroupSnapshot,
    HeartbeatOutcome,
    TopicsView,
)
from slog.groups.consumer_records import change_records, deletion_records
from slog.groups.coordinator import IDLE_TICK_S, TICK_S, ListedGroup
from slog.groups.group import GroupMetadata, GroupState
from slog.groups.manager import GroupMetadataManager
from slog.groups.member import JoinResult, SyncResult
from slog.groups.migration import (
    CONSUMER_PROTOCOL_TYPE,
    MigrationPolicy,
    check_upgrade,
    classic_commit_check,
    classic_heartbeat,
    classic_join,
    classic_protocol_name,
    classic_sync,
    from_classic,
    to_classic,
)
from slog.groups.offsets import OffsetAndMetadata, TopicPartition
from slog.groups.records import GroupKey, OffsetKey
from slog.groups.requests import JoinGroupRequest, OffsetFetchRequest, SyncGroupRequest
from slog.groups.server_assignors import assignors_from_config

log = logging.getLogger("slog.groups")

HeartbeatCallback = Callable[[HeartbeatOutcome | KafkaApiError], None]
CommitCallback = Callable[[dict[TopicPartition, ErrorCode]], None]


@dataclass(frozen=True)
class ConsumerGroupConfig:
    """Broker settings of consumer-protocol groups (Kafka's names)."""

    session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.consumer.heartbeat.interval.ms
    assignors: str = "uniform,range"  # group.consumer.assignors; the first is the default
    max_size: int = 2**31 - 1  # group.consumer.max.size
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000  # offsets.retention.minutes
    offsets_retention_check_ms: int = 600_000  # offsets.retention.check.interval.ms
    # group.consumer.migration.policy
    migration_policy: MigrationPolicy = MigrationPolicy.BIDIRECTIONAL


def _monotonic_ms() -> float:
    return time.monotonic() * 1000


def _wall_ms() -> int:
    return int(time.time() * 1000)


class ConsumerGroupCoordinator:
    def __init__(self, config: ConsumerGroupConfig, manager: GroupMetadataManager,
                 topics: Callable[[], tuple[TopicsView, int]], *,
                 clock: Callable[[], float] = _monotonic_ms,
                 wall: Callable[[], int] = _wall_ms,
                 overrides: Callable[[str], GroupSettings | None] = lambda group_id: None):
        self.config = config
        self.manager = manager
        self._topics = topics
        self._overrides = overrides  # a group's own settings (GROUP configs), if any
        self._defaults = GroupSettings(config.session_timeout_ms, config.heartbeat_interval_ms)
        self._clock = clock
        self._wall = wall
        self._next_retention_check = clock() + config.offsets_retention_check_ms
        self._assignors = assignors_from_config(config.assignors)
        self._due: WakingDueSchedule[str] = WakingDueSchedule(clock, TICK_S, IDLE_TICK_S)
        manager.new_consumer_group = self._new_group
        manager.on_consumer_loaded = self._on_loaded
        # Set by the broker: the classic coordinator takes a downgraded group and rebalances it.
        self.on_downgrade: Callable[[GroupMetadata], None] = lambda group: None

    def _new_group(self, group_id: str) -> ConsumerGroup:
        return ConsumerGroup(group_id, self._assignors, max_size=self.config.max_size)

    def settings(self, group_id: str) -> GroupSettings:
        """The session timeout and heartbeat interval ``group_id`` runs with: its GROUP
        config overrides, else the broker's."""
        return self._overrides(group_id) or self._defaults

    def _on_loaded(self, group: ConsumerGroup) -> None:
        deadline = self._clock() + self.settings(group.group_id).session_timeout_ms
        for member in group.members.values():
            member.session_deadline_ms = deadline  # a new coordinator gives a full session
        self._schedule(group)

    # ================================================================== lookups
    def _validate(self, group_id: str) -> None:
        if self.manager.is_loading(group_id):
            raise KafkaApiError(ErrorCode.coordinator_load_in_progress)
        if not self.manager.owns(group_id):
            raise KafkaApiError(ErrorCode.not_coordinator)

    def group(self, group_id: str) -> ConsumerGroup | None:
        """The consumer group ``group_id`` if this coordinator has it."""
        return self.manager.consumer_groups.get(group_id)

    def _take_over_classic(self, group_id: str) -> ConsumerGroup:
        """A consumer member arrives at a group this coordinator does not have as a
        consumer group: create it, taking over an empty classic group's offsets."""
        classic = self.manager.get(group_id)
        group = self._new_group(group_id)
        if classic is not None and not classic.is_(GroupState.DEAD):
            if classic.is_(GroupState.EMPTY):
                group.offsets = classic.offsets
                log.info("empty classic group %s became a consumer group", group_id)
            else:
                check_upgrade(classic, self.config.migration_policy, self.config.max_size)
                view, version = self._topics()
                from_classic(classic, group, view, version, self._clock())
                for old in classic.members.values():  # a rebalance in progress ends here
                    classic.invoke_join_callback(old, JoinResult(
                        old.member_id, ErrorCode.rebalance_in_progress))
                    classic.invoke_sync_callback(old, SyncResult(
                        ErrorCode.rebalance_in_progress))
                log.info("classic group %s upgraded to a consumer group with its %d members",
                         group_id, len(group.members))
            classic.transition_to(GroupState.DEAD, int(time.time() * 1000))
            del self.manager.groups[group_id]
            if classic.generation_id > 0:
                self.manager.append(group_id, [(GroupKey(group_id).encode(), None)],
                                    lambda error: None)
        self.manager.consumer_groups[group_id] = group
        return group

    def release_to_classic(self, group_id: str) -> GroupMetadata | None:
        """A JoinGroup for ``group_id``: an empty consumer group becomes a classic one
        (its offsets go along); a non-empty one refuses with INCONSISTENT_GROUP_PROTOCOL.
        None when there is no consumer group of that id."""
        group = self.group(group_id)
        if group is None:
            return None
        if not group.is_empty:
            raise KafkaApiError(ErrorCode.inconsistent_group_protocol,
                                f"group {group_id} is a consumer (KIP-848) group")
        self._delete(group)
        classic = self.manager.get_or_create(group_id)
        classic.offsets = group.offsets
        log.info("empty consumer group %s became a classic group", group_id)
        return classic

    # ================================================================== heartbeat
    def handle_heartbeat(self, group_id: str, request: ConsumerHeartbeat,
                         callback: HeartbeatCallback) -> None:
        snapshot = None
        try:
            self._validate(group_id)
            group = self.group(group_id)
            if group is None:
                if request.member_epoch != JOIN_EPOCH:
                    raise KafkaApiError(ErrorCode.group_id_not_found,
                                        f"group {group_id} does not exist")
                group = self._take_over_classic(group_id)
            else:
                snapshot = group.snapshot((request.member_id, None if request.instance_id
                                           is None else group.static_members.get(
                                               request.instance_id)))
            view, version = self._topics()
            outcome: HeartbeatOutcome | KafkaApiError = group.heartbeat(
                request, view, version, self._clock(),
                self.settings(group_id).session_timeout_ms)
        except KafkaApiError as exc:
            outcome = exc
            group = self.group(group_id)
            if group is not None and group.group_epoch == 0 and group.is_empty and \
                    not group.offsets.has_offsets:
                del self.manager.consumer_groups[group_id]  # made for a join that failed
                group = None
            if group is None:
                callback(outcome)
                return
        self._schedule(group)
        self._persist(group, lambda error: callback(
            outcome if error is ErrorCode.none else KafkaApiError(error)), snapshot)

    def _persist(self, group: ConsumerGroup, done: Callable[[ErrorCode], None],
                 snapshot: GroupSnapshot | None = None) -> None:
        """Write what changed; when that fails, the change is reverted (as Kafka does)
        unless a later change was made on top of it, and ``done`` gets the error."""
        records = change_records(group, group.take_changes())
        if not records:
            done(ErrorCode.none)
            return

        def written(error: ErrorCode) -> None:
            if error is not ErrorCode.none and snapshot is not None and \
                    group.restore(snapshot):
                log.warning("consumer group %s: writing its change failed (%s); reverted",
                            group.group_id, error.name)
            done(error)

        self.manager.append(group.group_id, records, written)
        self._maybe_downgrade(group)

    def _maybe_downgrade(self, group: ConsumerGroup) -> None:
        """The last consumer-protocol member is gone and classic ones remain: back to a
        classic group (its records deleted, the classic group's written), which the
        classic coordinator rebalances so the members get a classic generation."""
        if not group.only_classic_members or not self.config.migration_policy.downgrades \
                or self.group(group.group_id) is not group:
            return
        view, _version = self._topics()
        classic = to_classic(group, view, self._wall())
        self._delete(group)
        self.manager.groups[group.group_id] = classic
        self.manager.store_group(classic, {m.member_id: m.assignment
                                           for m in classic.members.values()},
                                 lambda error: None)
        log.info("consumer group %s downgraded to a classic group with its %d members",
                 group.group_id, len(classic.members))
        self.on_downgrade(classic)

    # ================================================================== classic members
    def classic_group(self, group_id: str) -> ConsumerGroup | None:
        """The consumer group that serves classic requests for ``group_id``: one that
        exists and has members (an empty one is given back to the classic coordinator)."""
        group = self.group(group_id)
        return group if group is not None and not group.is_empty else None

    def handle_classic_join(self, group: ConsumerGroup, request: JoinGroupRequest,
                            callback: Callable[[JoinResult], None]) -> None:
        member_id = request.member_id
        try:
            self._validate(group.group_id)
            if request.protocol_type != CONSUMER_PROTOCOL_TYPE:
                raise KafkaApiError(ErrorCode.inconsistent_group_protocol,
                                    f"group {group.group_id} is a consumer group")
            if not member_id:
                member_id = GroupMetadata.generate_member_id(request.client_id,
                                                             request.group_instance_id)
                if request.require_known_member_id:
                    callback(JoinResult(member_id, ErrorCode.member_id_required))
                    return
            view, version = self._topics()
            member = classic_join(group, member_id, request.group_instance_id,
                                  request.client_id, request.client_host,
                                  request.rebalance_timeout_ms, request.session_timeout_ms,
                                  request.protocols, view, version, self._clock())
            result = JoinResult(member_id, generation_id=member.member_epoch,
                                protocol_type=CONSUMER_PROTOCOL_TYPE,
                                protocol_name=classic_protocol_name(member))
        except KafkaApiError as exc:
            result = JoinResult(member_id, exc.code)
        self._schedule(group)
        self._persist(group, lambda error: callback(
            result if error is ErrorCode.none else JoinResult(member_id, error)))

    def handle_classic_sync(self, group: ConsumerGroup, request: SyncGroupRequest,
                            callback: Callable[[SyncResult], None]) -> None:
        try:
            self._validate(group.group_id)
            view, _version = self._topics()
            assignment = classic_sync(group, request.member_id, request.generation_id, view)
            protocol = classic_protocol_name(group.members[request.member_id])
        except KafkaApiError as exc:
            callback(SyncResult(exc.code))
            return
        callback(SyncResult(ErrorCode.none, CONSUMER_PROTOCOL_TYPE, protocol, assignment))

    def handle_classic_heartbeat(self, group: ConsumerGroup, member_id: str, generation: int
                                 ) -> ErrorCode:
        try:
            self._validate(group.group_id)
            error = classic_heartbeat(group, member_id, generation, self._clock())
        except KafkaApiError as exc:
            return exc.code
        self._schedule(group)
        return error

    def handle_classic_leave(self, group: ConsumerGroup,
                             leaving: Sequence[tuple[str, str | None]]
                             ) -> tuple[ErrorCode, list[ErrorCode]]:
        try:
            self._validate(group.group_id)
        except KafkaApiError as exc:
            return exc.code, []
        errors = []
        for member_id, instance_id in leaving:
            if not member_id and instance_id is not None:
                member_id = group.static_members.get(instance_id, "")
            if member_id in group.members:
                group.remove_member(member_id)
                errors.append(ErrorCode.none)
            else:
                errors.append(ErrorCode.unknown_member_id)
        group.settle_epoch()
        self._persist(group, lambda error: None)
        return ErrorCode.none, errors

    # ================================================================== offsets
    def handle_commit_offsets(self, group: ConsumerGroup, member_id: str, member_epoch: int,
                              offsets: Mapping[TopicPartition, OffsetAndMetadata],
                              callback: CommitCallback, *, version: int) -> None:
        try:
            self._validate(group.group_id)
            member = group.members.get(member_id)
            if member is not None and member.classic is not None:
                classic_commit_check(group, member_id, member_epoch)
            elif version < 9 and (member_id or member_epoch >= 0):
                raise KafkaApiError(ErrorCode.unsupported_version,
                                    "members of consumer groups commit with OffsetCommit v9+")
            else:
                group.validate_offset_commit(member_id, member_epoch)
        except KafkaApiError as exc:
            callback(dict.fromkeys(offsets, exc.code))
            return
        self.manager.store_offsets(group, offsets,
                                   lambda error: callback(dict.fromkeys(offsets, error)))

    def handle_fetch_offsets(self, group: ConsumerGroup, request: OffsetFetchRequest
                             ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None]]:
        try:
            self._validate(group.group_id)
            group.validate_offset_fetch(request.member_id, request.member_epoch)
        except KafkaApiError as exc:
            return exc.code, {}
        partitions = request.partitions
        wanted = list(group.offsets.committed) if partitions is None else list(partitions)
        return ErrorCode.none, {tp: group.offsets.get(tp) for tp in wanted}

    def handle_delete_offsets(self, group: ConsumerGroup, partitions: Iterable[TopicPartition]
                              ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete: not for topics the group subscribes to (GROUP_SUBSCRIBED_TO_TOPIC)."""
        try:
            self._validate(group.group_id)
        except KafkaApiError as exc:
            return exc.code, {}
        partitions = list(partitions)
        errors = {tp: ErrorCode.group_subscribed_to_topic for tp in partitions
                  if tp[0] in group.subscribed}
        eligible = [tp for tp in partitions if tp not in errors]
        self._tombstone_offsets(group, self.manager.remove_offsets(group, eligible))
        errors.update(dict.fromkeys(eligible, ErrorCode.none))
        return ErrorCode.none, errors

    def _tombstone_offsets(self, group: ConsumerGroup, partitions: list[TopicPartition]
                           ) -> None:
        if partitions:
            self.manager.append(group.group_id, [
                (OffsetKey(group.group_id, t, p).encode(), None) for t, p in partitions],
                lambda error: None)

    # ================================================================== admin
    def describe(self, group_id: str) -> ConsumerGroup:
        self._validate(group_id)
        group = self.group(group_id)
        if group is None:
            raise KafkaApiError(ErrorCode.group_id_not_found, f"group {group_id} does not exist")
        return group

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()
                    ) -> list[ListedGroup]:
        wanted_states = {s.strip().lower() for s in states}
        wanted_types = {t.strip().lower() for t in types}
        return [ListedGroup(g.group_id, g.protocol_type, g.state.value, g.group_type.value)
                for g in self.manager.consumer_groups.values()
                if (not wanted_states or g.state.value.lower() in wanted_states)
                and (not wanted_types or g.group_type.value in wanted_types)]

    def delete_group(self, group_id: str) -> ErrorCode:
        try:
            group = self.describe(group_id)
        except KafkaApiError as exc:
            return exc.code
        if not group.is_empty:
            return ErrorCode.non_empty_group
        self._delete(group)
        self._tombstone_offsets(group, self.manager.remove_all_offsets(group))
        return ErrorCode.none

    def _delete(self, group: ConsumerGroup) -> None:
        group.dead = True
        del self.manager.consumer_groups[group.group_id]
        self.manager.append(group.group_id, deletion_records(group), lambda error: None)

    def remove_offsets_of_deleted_topics(self, topics: Iterable[str]) -> int:
        """As for classic groups: a topic created again must not inherit old offsets."""
        gone, removed = set(topics), 0
        for group in self.manager.consumer_groups.values():
            tps = self.manager.remove_offsets(group, self.manager.offsets_of_topics(group, gone))
            self._tombstone_offsets(group, tps)
            removed += len(tps)
        return removed

    # ================================================================== time
    def _schedule(self, group: ConsumerGroup) -> None:
        deadline = group.next_deadline()
        if deadline is not None:
            self._due.schedule(group.group_id, deadline)

    def remove_expired_offsets(self) -> int:
        """Kafka's rule for consumer groups: an offset expires ``offsets.retention.minutes``
        after its commit unless the group subscribes to its topic or a transaction has yet
        to commit or abort a new one; an empty group left without offsets (and without
        offsets awaiting a marker) is deleted."""
        now, removed = self._wall(), 0
        for group in list(self.manager.consumer_groups.values()):
            # An offset awaiting its transaction's marker keeps the partition's offset and
            # the group (as Kafka): the COMMIT must find the group it was validated against.
            awaiting_marker = self.manager.txn_offsets.partitions_of(group.group_id)
            expired = [tp for tp in group.offsets.expired(
                now, self.config.offsets_retention_ms, lambda v: v.commit_timestamp_ms,
                frozenset(group.subscribed)) if tp not in awaiting_marker]
            self._tombstone_offsets(group, group.offsets.remove(expired))
            removed += len(expired)
            if group.is_empty and not group.offsets.has_offsets and not awaiting_marker:
                self._delete(group)
        if removed:
            log.info("removed %d expired offsets of consumer groups", removed)
        return removed

    def expire(self) -> None:
        now = self._clock()
        if now >= self._next_retention_check:
            self._next_retention_check = now + self.config.offsets_retention_check_ms
            self.remove_expired_offsets()
        for group_id in self._due.pop_due(now):
            group = self.group(group_id)
            if group is None:
                continue
            gone = group.expire(now)
            if gone:
                log.info("members of consumer group %s removed (session or rebalance "
                         "timeout): %s", group_id, gone)
                self._persist(group, lambda error: None)
            self._schedule(group)

    async def run(self) -> None:
        """The broker's timer task for consumer groups."""
        await self._due.run(self.expire, log, "consumer group coordinator")
