"""The controller: the single writer of the metadata log.

Whichever broker holds ``controller.lock`` runs this. Every cluster change
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
from dataclasses import dataclass, field

from slog.core.config import BrokerConfig, ConfigError, validate_topic_configs
from slog.core.errors import InvalidTopicError
from slog.core.metadata import NO_LEADER, MetadataImage, PartitionState, Record
from slog.core.metadata_log import MetadataLogWriter
from slog.core.names import topic_collides, validate_topic_name
from slog.replication.placement import PlacementError, assign_replicas

log = logging.getLogger("slog.controller")

# Kafka's controller refuses a CreateTopics/CreatePartitions request that would
# add more partitions than this (POLICY_VIOLATION), so a hostile count cannot
# make it plan billions of partitions (KAFKA-17870).
MAX_PARTITIONS_PER_REQUEST = 10_000


class ControllerError(Exception):
    """A rejected admin operation; ``code`` is the Kafka error name."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


@dataclass
class NewTopic:
    name: str
    num_partitions: int = -1  # -1: the broker default (num.partitions)
    replication_factor: int = -1  # -1: default.replication.factor, else min(3, brokers)
    assignment: dict[int, list[int]] = field(default_factory=dict)
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CreatedTopic:
    name: str
    topic_id: str
    num_partitions: int
    replication_factor: int
    configs: dict[str, str]


class Controller:
    def __init__(
        self,
        config: BrokerConfig,
        writer: MetadataLogWriter,
        image: Callable[[], MetadataImage],
        on_write: Callable[[], None],
    ):
        self.config = config
        self._writer = writer
        self._image = image  # the broker's live image, refreshed by on_write
        self._on_write = on_write
        self.epoch = 0

    @property
    def image(self) -> MetadataImage:
        return self._image()

    def _write(self, records: Sequence[Record]) -> None:
        now = int(time.time() * 1000)
        stamped = [{**r, "controller_epoch": self.epoch, "ts": now} for r in records]
        self._writer.append(stamped)
        self._on_write()

    # -- lifecycle ----------------------------------------------------------------
    def activate(self) -> int:
        """Claim the next controller epoch; records of older controllers lose."""
        self.epoch = self.image.controller_epoch + 1
        self._write([{"type": "controller", "controller_id": self.config.broker_id}])
        log.info("broker %d is the controller at epoch %d", self.config.broker_id, self.epoch)
        return self.epoch

    def register_broker(self, broker_id: int, host: str, port: int, incarnation: str) -> None:
        current = self.image.brokers.get(broker_id)
        if current and (current.host, current.port, current.incarnation, current.fenced) == (
            host, port, incarnation, False
        ):
            return
        self._write([{"type": "broker", "broker_id": broker_id, "host": host, "port": port,
                      "incarnation": incarnation, "fenced": False}])

    # -- topics -------------------------------------------------------------------
    def _live_broker_ids(self) -> list[int]:
        return sorted(b.broker_id for b in self.image.live_brokers())

    def _default_replication_factor(self) -> int:
        configured = self.config.get_int("default.replication.factor")
        if configured > 0:
            return configured
        return max(1, min(3, len(self._live_broker_ids())))

    def plan_topic(self, spec: NewTopic) -> tuple[CreatedTopic, list[Record]]:
        """Validate ``spec`` and return the records that would create it."""
        try:
            validate_topic_name(spec.name)
        except InvalidTopicError as exc:
            raise ControllerError("invalid_topic_exception", str(exc)) from exc
        image = self.image
        if spec.name in image.topics:
            raise ControllerError("topic_already_exists", f"topic {spec.name!r} already exists")
        clash = next((t for t in image.topics if topic_collides(t, spec.name)), None)
        if clash:
            raise ControllerError(
                "invalid_topic_exception",
                f"topic {spec.name!r} collides with existing topic {clash!r} ('.' and '_')",
            )
        try:
            configs = {k: v for k, v in validate_topic_configs(spec.configs).items() if v}
        except ConfigError as exc:
            raise ControllerError("invalid_config", str(exc)) from exc
        live = self._live_broker_ids()
        if spec.assignment:
            plan = self._check_assignment(spec, live)
        else:
            partitions = spec.num_partitions if spec.num_partitions > 0 else \
                self.config.get_int("num.partitions")
            if spec.num_partitions == 0 or spec.num_partitions < -1:
                raise ControllerError("invalid_partitions",
                                      "the number of partitions must be at least 1")
            rf = spec.replication_factor if spec.replication_factor > 0 else \
                self._default_replication_factor()
            if spec.replication_factor == 0 or spec.replication_factor < -1:
                raise ControllerError("invalid_replication_factor",
                                      "the replication factor must be at least 1")
            try:
                plan = assign_replicas(live, partitions, rf,
                                       start_index=random.randrange(max(1, len(live))))
            except PlacementError as exc:
                raise ControllerError("invalid_replication_factor", str(exc)) from exc
        topic_id = str(uuid.uuid4())
        records: list[Record] = [
            {"type": "topic", "name": spec.name, "topic_id": topic_id, "configs": configs}
        ]
        records += [self._new_partition(spec.name, p, replicas).to_record()
                    for p, replicas in sorted(plan.items())]
        created = CreatedTopic(spec.name, topic_id, len(plan), len(plan[0]), configs)
        return created, records

    def _check_assignment(self, spec: NewTopic, live: list[int]) -> dict[int, list[int]]:
        plan = spec.assignment
        if sorted(plan) != list(range(len(plan))):
            raise ControllerError("invalid_replica_assignment",
                                  "partitions in a replica assignment must be 0..N-1")
        for p, replicas in plan.items():
            if not replicas or len(set(replicas)) != len(replicas):
                raise ControllerError("invalid_replica_assignment",
                                      f"partition {p} has an empty or duplicated replica list")
            unknown = [b for b in replicas if b not in self.image.brokers]
            if unknown:
                raise ControllerError("invalid_replica_assignment",
                                      f"partition {p} names unknown broker(s) {unknown}")
        if len({len(r) for r in plan.values()}) != 1:
            raise ControllerError("invalid_replica_assignment",
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
        pending: list[Record] = []
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
                    raise ControllerError("invalid_request", f"topic {spec.name!r} listed twice")
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
                outcome[name] = ControllerError("unknown_topic_or_partition",
                                                f"topic {name!r} does not exist")
                continue
            outcome[name] = None
            records.append({"type": "remove_topic", "name": name})
        if records:
            self._write(records)
        return outcome

    def create_partitions(self, topic: str, total: int, assignment: list[list[int]] | None,
                          *, validate_only: bool = False) -> None:
        image = self.image.topics.get(topic)
        if image is None:
            raise ControllerError("unknown_topic_or_partition", f"topic {topic!r} does not exist")
        current = len(image.partitions)
        if total <= current:
            raise ControllerError(
                "invalid_partitions",
                f"topic {topic!r} has {current} partitions; the new count must be larger",
            )
        added = total - current
        if added > MAX_PARTITIONS_PER_REQUEST:
            raise _too_many_partitions()
        if assignment:
            if len(assignment) != added:
                raise ControllerError("invalid_replica_assignment",
                                      f"expected {added} replica lists, got {len(assignment)}")
            plan = dict(enumerate(assignment, start=current))
        else:
            try:
                plan = assign_replicas(self._live_broker_ids(), added, image.replication_factor,
                                       first_partition=current)
            except PlacementError as exc:
                raise ControllerError("invalid_replication_factor", str(exc)) from exc
        if not validate_only:
            self._write([self._new_partition(topic, p, r).to_record() for p, r in plan.items()])

    def alter_topic_configs(self, topic: str, changes: Mapping[str, str | None], *,
                            validate_only: bool = False) -> None:
        if topic not in self.image.topics:
            raise ControllerError("unknown_topic_or_partition", f"topic {topic!r} does not exist")
        try:
            clean = validate_topic_configs(changes)
        except ConfigError as exc:
            raise ControllerError("invalid_config", str(exc)) from exc
        if clean and not validate_only:
            self._write([{"type": "topic_config", "topic": topic, "configs": clean}])


def _too_many_partitions() -> ControllerError:
    return ControllerError(
        "policy_violation",
        f"a request may add at most {MAX_PARTITIONS_PER_REQUEST} partitions",
    )
