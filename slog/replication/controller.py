"""The controller: the single writer of the metadata log.

Whichever broker holds the controller lease runs this (see
:mod:`slog.core.controller_lease`). Every cluster change
(topic create/delete, partitions, configs, broker registration) is validated
against the current image and then written as metadata records; brokers,
including this one, apply those records when they tail the log.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from slog.core.acls import AclBinding, AclFilter
from slog.core.config import (
    BrokerConfig,
    ConfigError,
    validate_dynamic_broker_config,
    validate_topic_configs,
)
from slog.core.controller_lease import LeaseBusyError, NotControllerError
from slog.core.errors import InvalidTopicError
from slog.core.group_config import validate_group_configs
from slog.core.kafka_errors import ErrorCode, KafkaApiError
from slog.core.listeners import Endpoint
from slog.core.metadata import NO_LEADER, MetadataImage, PartitionState
from slog.core.metadata_log import MetadataLogWriter
from slog.core.metadata_records import (
    AccessControlEntryRecord,
    BrokerConfigRecord,
    BrokerRegistration,
    ClientQuotaRecord,
    ControllerRecord,
    FenceBrokerRecord,
    GroupConfigRecord,
    MetadataRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    TopicConfigRecord,
    TopicRecord,
)
from slog.core.names import topic_collides, validate_topic_name
from slog.core.quotas import QuotaEntity, QuotaError, check_value
from slog.replication import elections, leader_balance, reassignment
from slog.replication.placement import PlacementError, RackAwareMode, assign_replicas
from slog.replication.throttle import split_throttle_configs

log = logging.getLogger("slog.controller")

# Kafka's controller refuses a CreateTopics/CreatePartitions request that would
# add more partitions than this (POLICY_VIOLATION), so a hostile count cannot
# make it plan billions of partitions (KAFKA-17870).
MAX_PARTITIONS_PER_REQUEST = 10_000


class ControllerError(KafkaApiError):
    """A rejected admin operation (or one partition's part of one)."""


class ControllerDeposedError(ControllerError):
    """The metadata log refused this controller's write: the lease has passed on."""

    def __init__(self, message: str):
        super().__init__(ErrorCode.not_controller, message)


@dataclass
class NewTopic:
    name: str
    num_partitions: int = -1  # -1: the broker default (num.partitions)
    replication_factor: int = -1  # -1: default.replication.factor, else min(3, brokers)
    assignment: dict[int, list[int]] = field(default_factory=dict)
    configs: dict[str, str] = field(default_factory=dict)
    # CreateTopics refuses a mix of racked and un-racked brokers; topics a broker
    # creates itself (auto-create, __consumer_offsets) place rack-unaware then (Kafka's).
    rack_mode: RackAwareMode = RackAwareMode.ENFORCED


@dataclass(frozen=True)
class CreatedTopic:
    name: str
    topic_id: str
    num_partitions: int
    replication_factor: int
    configs: dict[str, str]


@dataclass(frozen=True)
class IsrChange:
    """One partition of an AlterPartition request: the ISR its leader proposes."""

    topic: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: Sequence[int]


@dataclass(frozen=True)
class BrokerStatus:
    """What the controller's liveness probe saw of one broker."""

    broker_id: int
    host: str
    port: int
    incarnation: str
    problem: str | None  # why it must be fenced (gone, heartbeat too old); None: healthy
    shutting_down: bool
    rack: str | None = None
    endpoints: tuple[Endpoint, ...] = ()  # every listener's (empty: host/port only)
    starting: bool = False  # still catching up with the metadata log: not registered yet

    @property
    def healthy(self) -> bool:
        return self.problem is None


class Controller:
    def __init__(
        self,
        config: BrokerConfig,
        writer: MetadataLogWriter,
        image: Callable[[], MetadataImage],
        on_write: Callable[[], object],
        on_deposed: Callable[[], object] = lambda: None,
    ):
        self.config = config
        self._writer = writer
        self._image = image  # the broker's live image, refreshed by on_write
        self._on_write = on_write
        self._on_deposed = on_deposed  # the lease passed on: the broker steps down
        self.epoch = 0
        self.deposed = False
        self.shutting_down: set[int] = set()  # may not rejoin an ISR until they restart
        self._live_at_last_election: set[int] | None = None
        self._next_leader_check = time.monotonic() + \
            config.get_int("leader.imbalance.check.interval.seconds")
        # The image (identity, offset) the last reassignment scan saw: steps depend only
        # on the image, so an unchanged one is not scanned again every tick.
        self._reassignments_scanned: tuple[int, int] | None = None

    @property
    def image(self) -> MetadataImage:
        return self._image()

    def _write(self, records: Sequence[MetadataRecord]) -> None:
        now = int(time.time() * 1000)
        stamped = [replace(r, controller_epoch=self.epoch, ts=now) for r in records]
        if self.deposed:
            raise ControllerDeposedError(f"the controller of epoch {self.epoch} was replaced")
        try:
            self._writer.append(stamped)
        except NotControllerError as exc:
            self.deposed = True
            log.warning("broker %d: metadata append refused: %s", self.config.broker_id, exc)
            self._on_deposed()
            raise ControllerDeposedError(str(exc)) from exc
        except LeaseBusyError as exc:
            raise ControllerError(ErrorCode.request_timed_out, str(exc)) from exc
        self._on_write()

    # -- lifecycle ----------------------------------------------------------------
    def activate(self) -> int:
        """Announce the epoch the writer's lease was claimed at; records of older
        controllers lose, and their appends are refused."""
        self.epoch = self._writer.epoch
        self._write([ControllerRecord(self.config.broker_id)])
        log.info("broker %d is the controller at epoch %d", self.config.broker_id, self.epoch)
        return self.epoch

    def register_broker(self, broker_id: int, host: str, port: int, incarnation: str,
                        rack: str | None = None,
                        endpoints: Sequence[Endpoint] = ()) -> None:
        """A live broker (re)joins. A new incarnation first loses its ISR places:
        it restarted, so what it had not flushed may be gone."""
        current = self.image.brokers.get(broker_id)
        registration = BrokerRegistration(broker_id, host, port, incarnation, False, rack,
                                          tuple(endpoints))
        if current == registration:
            return
        if current is not None and not current.fenced and current.incarnation != incarnation:
            self.fence_broker(broker_id, "restarted")
        self._write([RegisterBrokerRecord(registration)])
        self.elect_offline_partitions()

    def sync_liveness(self, brokers: Sequence[BrokerStatus]) -> None:
        """Register healthy brokers, fence dead or paused ones, drain stopping ones.

        A starting broker is neither registered nor fenced for heartbeat age;
        a registration it still has belongs to its previous run, so that one
        is fenced (it may have lost unflushed data)."""
        for status in brokers:
            current = self.image.brokers.get(status.broker_id)
            if status.problem is not None:
                if current is not None and not current.fenced:
                    self.fence_broker(status.broker_id, status.problem)
                continue
            if status.starting:
                if current is not None and not current.fenced:
                    self.fence_broker(status.broker_id, "restarting, not caught up yet")
                continue
            if status.shutting_down:
                self.shutting_down.add(status.broker_id)
                if current is not None and not current.fenced:
                    self.controlled_shutdown(status.broker_id)
                continue
            self.shutting_down.discard(status.broker_id)
            self.register_broker(status.broker_id, status.host, status.port, status.incarnation,
                                 status.rack, status.endpoints)
        self.elect_offline_partitions()

    def fence_broker(self, broker_id: int, reason: str) -> None:
        """Take a dead or paused broker out of every ISR and move its leaderships."""
        current = self.image.brokers.get(broker_id)
        if current is None or current.fenced:
            return
        live = set(self._live_broker_ids()) - {broker_id}
        records: list[MetadataRecord] = [FenceBrokerRecord(broker_id, True)]
        for state in self.image.partitions_of(broker_id):
            changed = elections.on_broker_fenced(state, broker_id, live,
                                                 self._unclean_allowed(state.topic))
            if changed is not None:
                records.append(changed.to_record())
                self._log_change(state, changed)
        # One line per fencing, reason included: `grep "fencing broker"` counts them.
        log.warning("fencing broker %d: %s; %d partition(s) change", broker_id, reason,
                    len(records) - 1)
        self._write(records)

    def elect_offline_partitions(self) -> int:
        """Give leaderless partitions a leader where Kafka's rules allow one.

        Runs every tick, so it visits only the leaderless partitions the image
        indexes, unless the set of live brokers changed since the last visit (then
        a leader may be dead without its partitions saying so: all of them).
        """
        live = set(self._live_broker_ids())
        if live == self._live_at_last_election:
            candidates = self.image.partitions_in(sorted(self.image.offline))
        else:
            candidates = self.image.all_partitions()
        records = []
        for state in candidates:
            changed = elections.elect_offline(state, live, self._unclean_allowed(state.topic))
            if changed is not None:
                records.append(changed.to_record())
                self._log_change(state, changed)
        if records:
            self._write(records)
        self._live_at_last_election = live
        return len(records)

    def _unclean_allowed(self, topic: str) -> bool:
        image = self.image.topics.get(topic)
        overrides = image.configs if image else {}
        return self.config.cluster_topic_value(
            overrides, "unclean.leader.election.enable") == "true"

    @staticmethod
    def _log_change(before: PartitionState, after: PartitionState) -> None:
        if after.leader != before.leader:
            lost = " (unclean: records only the old ISR had are lost)" \
                if after.leader not in before.isr and after.leader != NO_LEADER else ""
            log.warning("%s-%d leader %d -> %d at epoch %d, isr %s%s", after.topic,
                        after.partition, before.leader, after.leader, after.leader_epoch,
                        list(after.isr), lost)
        elif after.isr != before.isr:
            log.info("%s-%d isr %s -> %s", after.topic, after.partition, list(before.isr),
                     list(after.isr))

    # -- partition changes requested by leaders and admins ----------------------------
    def alter_partition(self, broker_id: int, topic: str, partition: int, leader_epoch: int,
                        partition_epoch: int, new_isr: Sequence[int]) -> PartitionState:
        """A leader's ISR change (Kafka's AlterPartition), checked against current state."""
        outcome, = self.alter_partitions(
            broker_id, [IsrChange(topic, partition, leader_epoch, partition_epoch, new_isr)])
        if isinstance(outcome, ControllerError):
            raise outcome
        return outcome

    def alter_partitions(self, broker_id: int, changes: Sequence[IsrChange]
                         ) -> list[PartitionState | ControllerError]:
        """A leader's ISR changes of one AlterPartition request: each checked on its own,
        all accepted ones written in one metadata append. Returns each change's new
        state or refusal, in order."""
        outcomes: list[PartitionState | ControllerError] = []
        records = []
        for change in changes:
            try:
                state, changed = self._checked_isr_change(broker_id, change)
            except ControllerError as exc:
                outcomes.append(exc)
                continue
            if changed is None:
                outcomes.append(state)
                continue
            self._log_change(state, changed)
            records.append(changed.to_record())
            outcomes.append(changed)
        if records:
            self._write(records)
        return outcomes

    def _checked_isr_change(self, broker_id: int, change: IsrChange
                            ) -> tuple[PartitionState, PartitionState | None]:
        topic, partition = change.topic, change.partition
        state = self.image.partition(topic, partition)
        if state is None:
            raise ControllerError(ErrorCode.unknown_topic_or_partition,
                                  f"{topic}-{partition} is gone")
        if state.leader != broker_id or change.leader_epoch != state.leader_epoch:
            raise ControllerError(ErrorCode.fenced_leader_epoch,
                                  f"{topic}-{partition}: broker {broker_id} at epoch "
                                  f"{change.leader_epoch} is not the leader (epoch "
                                  f"{state.leader_epoch})")
        if change.partition_epoch != state.partition_epoch:
            raise ControllerError(ErrorCode.invalid_update_version,
                                  f"{topic}-{partition}: partition epoch "
                                  f"{change.partition_epoch} is stale ({state.partition_epoch})")
        isr = tuple(dict.fromkeys(change.new_isr))
        live = set(self._live_broker_ids())
        if broker_id not in isr or not set(isr) <= set(state.replicas):
            raise ControllerError(ErrorCode.invalid_request,
                                  f"ISR {list(isr)} is not a replica subset that includes "
                                  "the leader")
        added = set(isr) - set(state.isr)
        if not added <= live - self.shutting_down:
            raise ControllerError(ErrorCode.ineligible_replica,
                                  f"fenced brokers {sorted(added - live)} cannot join the ISR")
        return state, elections.with_isr(state, isr)

    def elect_leaders(self, preferred: bool, partitions: Sequence[tuple[str, int]] | None
                      ) -> dict[tuple[str, int], ControllerError | None]:
        """ElectLeaders: preferred (back to the first replica) or unclean (offline only)."""
        live = set(self._live_broker_ids())
        targets = [(p.topic, p.partition) for p in self.image.all_partitions()] \
            if partitions is None else list(partitions)
        outcome: dict[tuple[str, int], ControllerError | None] = {}
        records = []
        for topic, number in targets:
            state = self.image.partition(topic, number)
            if state is None:
                outcome[(topic, number)] = ControllerError(
                    ErrorCode.unknown_topic_or_partition, f"{topic}-{number} does not exist")
                continue
            changed = elections.preferred_election(state, live) if preferred else \
                (elections.unclean_election(state, live) if state.is_offline or
                 state.leader not in live else None)
            if changed is None:
                outcome[(topic, number)] = self._why_no_election(state, live, preferred)
                continue
            outcome[(topic, number)] = None
            records.append(changed.to_record())
            self._log_change(state, changed)
        if records:
            self._write(records)
        return outcome

    @staticmethod
    def _why_no_election(state: PartitionState, live: set[int], preferred: bool
                         ) -> ControllerError:
        if preferred and state.leader == state.preferred_leader:
            return ControllerError(ErrorCode.election_not_needed,
                                   "the preferred replica already leads")
        if not preferred and state.leader in live:
            return ControllerError(ErrorCode.election_not_needed,
                                   "the partition has a live leader")
        if preferred:
            return ControllerError(ErrorCode.preferred_leader_not_available,
                                   f"replica {state.preferred_leader} is not alive and in sync")
        return ControllerError(ErrorCode.eligible_leaders_not_available, "no replica is alive")

    def controlled_shutdown(self, broker_id: int) -> int:
        """Move leaderships and ISR places off a broker that is stopping.

        Returns how many partitions it still leads (nowhere else to go)."""
        live = set(self._live_broker_ids())
        records = []
        remaining = 0
        for state in self.image.partitions_of(broker_id):
            changed = elections.controlled_shutdown(state, broker_id, live)
            if changed is not None:
                records.append(changed.to_record())
                self._log_change(state, changed)
            elif state.leader == broker_id:
                remaining += 1
        if records:
            self._write(records)
        return remaining

    # -- reassignment and leader balance (logic in reassignment.py, leader_balance.py) --
    def _write_steps(self, changes: Sequence[tuple[PartitionState, PartitionState]]) -> None:
        for before, after in changes:
            self._log_change(before, after)
            log.info("%s", reassignment.describe_step(before, after))
        if changes:
            self._write([after.to_record() for _, after in changes])

    def alter_reassignments(self, targets: Mapping[tuple[str, int], Sequence[int] | None],
                            allow_rf_change: bool = True
                            ) -> dict[tuple[str, int], ControllerError | None]:
        """AlterPartitionReassignments: start, replace (a target) or cancel (None)."""
        changed, outcome = reassignment.alter(self.image, targets, set(self._live_broker_ids()),
                                              allow_rf_change)
        self._write_steps(changed)
        return {key: None if e is None else ControllerError(e.code, str(e))
                for key, e in outcome.items()}

    def maintain_reassignments(self) -> None:
        """Controller tick: take the next step of every reassignment that can move."""
        image = self.image
        scanned = (id(image), image.offset)
        if scanned == self._reassignments_scanned:
            return
        self._reassignments_scanned = scanned
        live = set(self._live_broker_ids())
        moving = self.image.partitions_in(sorted(self.image.reassigning))
        self._write_steps([(s, after) for s in moving
                           if (after := reassignment.advance(s, live)) is not None])

    def maybe_rebalance_leaders(self, now: float) -> None:
        """Controller tick: auto.leader.rebalance.enable's preferred elections."""
        if now < self._next_leader_check:
            return
        self._next_leader_check = now + self.config.get_int(
            "leader.imbalance.check.interval.seconds")
        if not self.config.get_bool("auto.leader.rebalance.enable"):
            return
        wanted = leader_balance.partitions_to_rebalance(
            self.image.all_partitions(), set(self._live_broker_ids()) - self.shutting_down,
            self.config.get_int("leader.imbalance.per.broker.percentage"))
        if wanted:
            log.info("leader imbalance: preferred election for %d partition(s)", len(wanted))
            self.elect_leaders(True, wanted)

    def tick(self) -> None:
        """Periodic duties after the liveness sync."""
        self.maintain_reassignments()
        self.maybe_rebalance_leaders(time.monotonic())

    def next_tick_due(self) -> float:
        """When (``time.monotonic()``) a tick has timed work: the leader balance check.
        Reassignment steps follow metadata changes, which wake the controller anyway."""
        return self._next_leader_check

    # -- topics -------------------------------------------------------------------
    def _live_broker_ids(self) -> list[int]:
        return sorted(b.broker_id for b in self.image.live_brokers())

    def _default_replication_factor(self) -> int:
        configured = self.config.get_int("default.replication.factor")
        if configured > 0:
            return configured
        return max(1, min(3, len(self._live_broker_ids())))

    def plan_topic(self, spec: NewTopic) -> tuple[CreatedTopic, list[MetadataRecord]]:
        """Validate ``spec`` and return the records that would create it."""
        try:
            validate_topic_name(spec.name)
        except InvalidTopicError as exc:
            raise ControllerError(ErrorCode.invalid_topic_exception, str(exc)) from exc
        image = self.image
        if spec.name in image.topics:
            raise ControllerError(ErrorCode.topic_already_exists,
                                  f"topic {spec.name!r} already exists")
        clash = next((t for t in image.topics if topic_collides(t, spec.name)), None)
        if clash:
            raise ControllerError(
                ErrorCode.invalid_topic_exception,
                f"topic {spec.name!r} collides with existing topic {clash!r} ('.' and '_')",
            )
        try:
            configs = {k: v for k, v in validate_topic_configs(spec.configs).items() if v}
        except ConfigError as exc:
            raise ControllerError(ErrorCode.invalid_config, str(exc)) from exc
        live = self._live_broker_ids()
        if spec.assignment:
            plan = self._check_assignment(spec, live)
        else:
            partitions = spec.num_partitions if spec.num_partitions > 0 else \
                self.config.get_int("num.partitions")
            if spec.num_partitions == 0 or spec.num_partitions < -1:
                raise ControllerError(ErrorCode.invalid_partitions,
                                      "the number of partitions must be at least 1")
            rf = spec.replication_factor if spec.replication_factor > 0 else \
                self._default_replication_factor()
            if spec.replication_factor == 0 or spec.replication_factor < -1:
                raise ControllerError(ErrorCode.invalid_replication_factor,
                                      "the replication factor must be at least 1")
            try:
                plan = assign_replicas(live, partitions, rf,
                                       start_index=random.randrange(max(1, len(live))),
                                       racks=image.racks(live), rack_mode=spec.rack_mode)
            except PlacementError as exc:
                raise ControllerError(ErrorCode.invalid_replication_factor, str(exc)) from exc
        topic_id = str(uuid.uuid4())
        records: list[MetadataRecord] = [TopicRecord(spec.name, topic_id, configs)]
        records += [self._new_partition(spec.name, p, replicas).to_record()
                    for p, replicas in sorted(plan.items())]
        created = CreatedTopic(spec.name, topic_id, len(plan), len(plan[0]), configs)
        return created, records

    def _check_assignment(self, spec: NewTopic, live: list[int]) -> dict[int, list[int]]:
        plan = spec.assignment
        if sorted(plan) != list(range(len(plan))):
            raise ControllerError(ErrorCode.invalid_replica_assignment,
                                  "partitions in a replica assignment must be 0..N-1")
        for p, replicas in plan.items():
            if not replicas or len(set(replicas)) != len(replicas):
                raise ControllerError(ErrorCode.invalid_replica_assignment,
                                      f"partition {p} has an empty or duplicated replica list")
            unknown = [b for b in replicas if b not in self.image.brokers]
            if unknown:
                raise ControllerError(ErrorCode.invalid_replica_assignment,
                                      f"partition {p} names unknown broker(s) {unknown}")
        if len({len(r) for r in plan.values()}) != 1:
            raise ControllerError(ErrorCode.invalid_replica_assignment,
                                  "every partition must have the same number of replicas")
        return plan

    def _new_partition(self, topic: str, partition: int, replicas: list[int]) -> PartitionState:
        live = set(self._live_broker_ids())
        isr = tuple(r for r in replicas if r in live)
        leader = isr[0] if isr else NO_LEADER
        return PartitionState(topic, partition, tuple(replicas), isr, leader, 0, 0)

    def create_topics(self, specs: Sequence[NewTopic], *, validate_only: bool = False
                      ) -> list[CreatedTopic | ControllerError]:
        results: list[CreatedTopic | ControllerError] = []
        pending: list[MetadataRecord] = []
        seen: set[str] = set()
        default_partitions = self.config.get_int("num.partitions")
        # Invalid counts add nothing, so they cannot offset a huge one.
        total = sum(len(s.assignment) if s.assignment else
                    default_partitions if s.num_partitions == -1 else max(s.num_partitions, 0)
                    for s in specs)
        for spec in specs:
            try:
                if total > MAX_PARTITIONS_PER_REQUEST:
                    raise _too_many_partitions()
                if spec.name in seen:
                    raise ControllerError(ErrorCode.invalid_request,
                                          f"topic {spec.name!r} listed twice")
                seen.add(spec.name)
                created, records = self.plan_topic(spec)
            except ControllerError as exc:
                results.append(exc)
                continue
            results.append(created)
            pending += records
        if pending and not validate_only:
            self._write(pending)
        return results

    def delete_topics(self, names: Sequence[str]) -> dict[str, ControllerError | None]:
        outcome: dict[str, ControllerError | None] = {}
        records = []
        for name in names:
            if name not in self.image.topics:
                outcome[name] = ControllerError(ErrorCode.unknown_topic_or_partition,
                                                f"topic {name!r} does not exist")
                continue
            outcome[name] = None
            records.append(RemoveTopicRecord(name))
        if records:
            self._write(records)
        return outcome

    # -- ACLs (CreateAcls / DeleteAcls) ------------------------------------------------
    def create_acls(self, bindings: Sequence[AclBinding]) -> None:
        """Store validated bindings; one already stored is not written twice."""
        new = [b for b in dict.fromkeys(bindings) if b not in self.image.acls]
        if new:
            self._write([AccessControlEntryRecord(b) for b in new])

    def delete_acls(self, filters: Sequence[AclFilter]) -> list[list[AclBinding]]:
        """Delete every binding each filter matches; per filter, what it deleted."""
        matched = [[b for b in self.image.acls if f.matches(b)] for f in filters]
        doomed = list(dict.fromkeys(b for group in matched for b in group))
        if doomed:
            self._write([RemoveAccessControlEntryRecord(b) for b in doomed])
        return matched

    # -- client quotas (AlterClientQuotas) -----------------------------------------------
    def alter_client_quotas(self, entity: QuotaEntity, changes: Mapping[str, float | None], *,
                            validate_only: bool = False) -> None:
        """Set (or, with None, remove) quota keys of one entity; ControllerError with
        INVALID_REQUEST for a key or value Kafka refuses."""
        clean: dict[str, float | None] = {}
        for key, value in changes.items():
            try:
                clean[key] = None if value is None else check_value(key, value)
            except QuotaError as exc:
                raise ControllerError(ErrorCode.invalid_request, str(exc)) from exc
        current = self.image.client_quotas.get(entity, {})
        clean = {k: v for k, v in clean.items() if current.get(k) != v}
        if clean and not validate_only:
            self._write([ClientQuotaRecord(dict(entity), clean)])

    def create_partitions(self, topic: str, total: int, assignment: list[list[int]] | None,
                          *, validate_only: bool = False) -> None:
        image = self.image.topics.get(topic)
        if image is None:
            raise ControllerError(ErrorCode.unknown_topic_or_partition,
                                  f"topic {topic!r} does not exist")
        current = len(image.partitions)
        if total <= current:
            raise ControllerError(
                ErrorCode.invalid_partitions,
                f"topic {topic!r} has {current} partitions; the new count must be larger",
            )
        added = total - current
        if added > MAX_PARTITIONS_PER_REQUEST:
            raise _too_many_partitions()
        if assignment:
            if len(assignment) != added:
                raise ControllerError(ErrorCode.invalid_replica_assignment,
                                      f"expected {added} replica lists, got {len(assignment)}")
            plan = dict(enumerate(assignment, start=current))
        else:
            try:
                live = self._live_broker_ids()
                plan = assign_replicas(live, added, image.replication_factor,
                                       first_partition=current, racks=self.image.racks(live))
            except PlacementError as exc:
                raise ControllerError(ErrorCode.invalid_replication_factor, str(exc)) from exc
        if not validate_only:
            self._write([self._new_partition(topic, p, r).to_record() for p, r in plan.items()])

    def alter_topic_configs(self, topic: str, changes: Mapping[str, str | None], *,
                            validate_only: bool = False) -> None:
        if topic not in self.image.topics:
            raise ControllerError(ErrorCode.unknown_topic_or_partition,
                                  f"topic {topic!r} does not exist")
        try:
            throttle, changes = split_throttle_configs(changes)
            clean = {**validate_topic_configs(changes), **throttle}
        except ConfigError as exc:
            raise ControllerError(ErrorCode.invalid_config, str(exc)) from exc
        if clean and not validate_only:
            self._write([TopicConfigRecord(topic, clean)])

    def alter_broker_configs(self, broker_id: int | None, changes: Mapping[str, str | None], *,
                             validate_only: bool = False) -> None:
        """Set (or, with None, delete) dynamic configs of one broker or, for None, of the
        cluster-wide default. A dynamic default may lower a limit every topic without its
        own override lives by (retention, segment size), so it takes effect everywhere as
        soon as the brokers replay the record."""
        clean: dict[str, str | None] = {}
        for key, value in changes.items():
            try:
                clean[key] = None if value is None else validate_dynamic_broker_config(
                    key, value, per_broker=broker_id is not None)
            except ConfigError as exc:
                # Kafka answers INVALID_REQUEST for broker config validation (KAFKA-13609).
                raise ControllerError(ErrorCode.invalid_request, str(exc)) from exc
        current = self.image.dynamic_broker_configs(broker_id)
        clean = {k: v for k, v in clean.items() if current.get(k) != v}
        if clean and not validate_only:
            self._write([BrokerConfigRecord(broker_id, clean)])


    def alter_group_configs(self, group: str, changes: Mapping[str, str | None],
                            broker: Mapping[str, str], *, validate_only: bool = False) -> None:
        """Set (or, with None, delete) one group's config overrides, within the bounds of
        the broker settings ``broker``. A group that does not exist yet may have them."""
        current = self.image.group_configs.get(group, {})
        try:
            clean = validate_group_configs(changes, current, broker)
        except ConfigError as exc:
            raise ControllerError(ErrorCode.invalid_config, str(exc)) from exc
        clean = {k: v for k, v in clean.items() if current.get(k) != v}
        if clean and not validate_only:
            self._write([GroupConfigRecord(group, clean)])


def _too_many_partitions() -> ControllerError:
    return ControllerError(
        ErrorCode.policy_violation,
        f"a request may add at most {MAX_PARTITIONS_PER_REQUEST} partitions",
    )
