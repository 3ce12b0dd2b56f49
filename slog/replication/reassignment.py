"""Partition reassignment as Kafka does it: pure state transitions and plan files.

A reassignment moves a partition from its current replicas to a target list
in steps the controller takes one at a time (KIP-455):

1. **start**: ``replicas = target + (current - target)``, ``adding = target -
   current``, ``removing = current - target``. The added brokers find
   themselves in the replica list and start fetching from the leader, which
   admits them to the ISR once they have caught up.
2. once every adding replica is in the ISR, **move the leader** if it is not
   in the target: the first target replica that is alive and in sync takes
   over, with a new leader epoch.
3. **drop the old replicas**: ``replicas = target``, ``isr = isr ∩ target``.
   The removed brokers delete their copies when they see they no longer
   host the partition.

Cancelling drops the adding replicas and keeps the original ones (in the order
the reassignment left them, as Kafka does; the rollback plan restores the exact
order). A new target for a partition that is already moving replaces the old
target, starting from the original replicas.

The second half of the module is the JSON plan file of Kafka's
``kafka-reassign-partitions`` (``{"version": 1, "partitions": [{"topic",
"partition", "replicas"}]}``): parsing, checking against the cluster and
proposing a new placement.
"""

from __future__ import annotations

import json
import random
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from slog.core.errors import SlogError
from slog.core.kafka_errors import ErrorCode, KafkaApiError
from slog.core.metadata import NO_LEADER, MetadataImage, PartitionState
from slog.replication.placement import PlacementError, RackAwareMode, assign_replicas

PartitionKey = tuple[str, int]
Assignment = dict[PartitionKey, tuple[int, ...]]
Step = tuple[PartitionState, PartitionState]  # (before, after)
PLAN_VERSION = 1


class ReassignmentError(KafkaApiError):
    """A refused reassignment (of one partition)."""


# -- state transitions -----------------------------------------------------------------
def in_progress(state: PartitionState) -> bool:
    return bool(state.adding or state.removing)


def original_replicas(state: PartitionState) -> tuple[int, ...]:
    """The replicas before the reassignment began (all of them if none is running)."""
    return tuple(r for r in state.replicas if r not in state.adding)


def target_replicas(state: PartitionState) -> tuple[int, ...]:
    """Where the partition is going (its replicas if it is not moving)."""
    return tuple(r for r in state.replicas if r not in state.removing)


def check_target(target: Sequence[int], brokers: Collection[int]) -> tuple[int, ...]:
    """A usable target replica list, or INVALID_REPLICA_ASSIGNMENT saying why not."""
    if not target:
        raise ReassignmentError(ErrorCode.invalid_replica_assignment,
                                "the target replica list is empty")
    repeated = sorted({b for b in target if list(target).count(b) > 1})
    if repeated:
        raise ReassignmentError(ErrorCode.invalid_replica_assignment,
                                f"the target lists broker(s) {repeated} more than once")
    unknown = [b for b in target if b not in brokers]
    if unknown:
        raise ReassignmentError(ErrorCode.invalid_replica_assignment,
                                f"the target names unknown broker(s) {unknown}")
    return tuple(target)


def _reshaped(state: PartitionState, replicas: tuple[int, ...], adding: tuple[int, ...],
              removing: tuple[int, ...], live: Collection[int]) -> PartitionState:
    """``state`` with a new replica list; the ISR and leader follow it."""
    isr = tuple(r for r in state.isr if r in replicas)
    leader = state.leader
    if leader != NO_LEADER and leader not in replicas:
        leader = next((r for r in replicas if r in isr and r in live), NO_LEADER)
    if not isr or (state.leader != NO_LEADER and leader == NO_LEADER):
        raise ReassignmentError(ErrorCode.invalid_replica_assignment,
                                f"{state.topic}-{state.partition}: no remaining replica is "
                                "alive and in sync to lead")
    return replace(state, replicas=replicas, isr=isr, leader=leader,
                   leader_epoch=state.leader_epoch + (leader != state.leader),
                   partition_epoch=state.partition_epoch + 1, adding=adding, removing=removing)


def start(state: PartitionState, target: Sequence[int], live: Collection[int]
          ) -> PartitionState | None:
    """Step 1, or a replacement of a running reassignment; None when nothing changes."""
    target = tuple(target)
    original = original_replicas(state)
    if target == original:
        return cancel(state, live) if in_progress(state) else None
    if target == state.replicas and not in_progress(state):
        return None
    replicas = target + tuple(r for r in original if r not in target)
    adding = tuple(r for r in target if r not in original)
    removing = tuple(r for r in original if r not in target)
    if not adding and not removing:  # a reorder: nothing to copy, apply it now
        return _reshaped(state, target, (), (), live)
    return _reshaped(state, replicas, adding, removing, live)


def cancel(state: PartitionState, live: Collection[int]) -> PartitionState:
    """Back to the original replicas; NO_REASSIGNMENT_IN_PROGRESS if nothing moves."""
    if not in_progress(state):
        raise ReassignmentError(ErrorCode.no_reassignment_in_progress,
                                f"{state.topic}-{state.partition} is not being reassigned")
    return _reshaped(state, original_replicas(state), (), (), live)


def advance(state: PartitionState, live: Collection[int]) -> PartitionState | None:
    """The next step (2: move the leader, 3: drop the old replicas), or None to wait."""
    if not in_progress(state) or any(r not in state.isr for r in state.adding):
        return None
    target = target_replicas(state)
    if state.leader not in target:
        leader = next((r for r in target if r in state.isr and r in live), NO_LEADER)
        if leader == NO_LEADER:
            return None  # wait until a target replica is alive and in sync
        return replace(state, leader=leader, leader_epoch=state.leader_epoch + 1,
                       partition_epoch=state.partition_epoch + 1)
    return _reshaped(state, target, (), (), live)


def alter(image: MetadataImage, targets: Mapping[PartitionKey, Sequence[int] | None],
          live: Collection[int], allow_rf_change: bool = True
          ) -> tuple[list[Step], dict[PartitionKey, ReassignmentError | None]]:
    """AlterPartitionReassignments: the (before, after) changes and each partition's outcome.

    A target of None cancels. Partitions are independent: one refusal does
    not stop the others (as in Kafka). Without ``allow_rf_change`` (KIP-860,
    v1) a target with another replica count than the partition had before any
    reassignment began is refused with INVALID_REPLICATION_FACTOR.
    """
    changed: list[Step] = []
    outcome: dict[PartitionKey, ReassignmentError | None] = {}
    for (topic, number), target in targets.items():
        try:
            state = image.partition(topic, number)
            if state is None:
                raise ReassignmentError(ErrorCode.unknown_topic_or_partition,
                                        f"{topic}-{number} does not exist")
            new: PartitionState | None
            if target is None:
                new = cancel(state, live)
            else:
                checked = check_target(target, image.brokers)
                before = len(original_replicas(state))
                if not allow_rf_change and len(checked) != before:
                    raise ReassignmentError(
                        ErrorCode.invalid_replication_factor,
                        f"{topic}-{number} has {before} replicas and the target "
                        f"{len(checked)}, and the request does not allow that change")
                new = start(state, checked, live)
        except ReassignmentError as exc:
            outcome[(topic, number)] = exc
            continue
        outcome[(topic, number)] = None
        if new is not None:
            changed.append((state, new))
    return changed, outcome


def describe_step(before: PartitionState, after: PartitionState) -> str:
    """One log line for a reassignment step."""
    name = f"{after.topic}-{after.partition}"
    if in_progress(after) and not in_progress(before):
        return (f"{name}: reassignment started, replicas {list(after.replicas)} "
                f"(adding {list(after.adding)}, removing {list(after.removing)})")
    if in_progress(after):
        if after.leader != before.leader:
            return f"{name}: reassignment moved the leader {before.leader} -> {after.leader}"
        return f"{name}: reassignment now targets {list(target_replicas(after))}"
    if before.adding and not set(before.adding) <= set(after.replicas):
        return f"{name}: reassignment cancelled, replicas {list(after.replicas)}"
    return f"{name}: reassignment complete, replicas {list(after.replicas)}"


# -- plan files ------------------------------------------------------------------------
class PlanError(SlogError, ValueError):
    """A plan file that cannot be used; nothing has been changed."""


def plan_to_json(assignment: Mapping[PartitionKey, Sequence[int]]) -> dict[str, Any]:
    """Kafka's plan format, partitions sorted."""
    return {"version": PLAN_VERSION, "partitions": [
        {"topic": topic, "partition": number, "replicas": list(replicas)}
        for (topic, number), replicas in sorted(assignment.items())]}


_KINDS = {str: "a string", int: "an integer", list: "a list"}


def _field(entry: Mapping[str, Any], name: str, kind: type, where: str) -> Any:
    value = entry.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise PlanError(f"{where}: {name!r} must be {_KINDS[kind]}")
    return value


def parse_plan(text: str) -> Assignment:
    """A plan file's partitions → target replicas, or PlanError naming the problem."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlanError(f"the plan is not valid JSON: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("partitions"), list):
        raise PlanError('the plan must be an object with a "partitions" list')
    version = data.get("version", PLAN_VERSION)
    if version != PLAN_VERSION:
        raise PlanError(f"unsupported plan version {version!r} (expected {PLAN_VERSION})")
    plan: Assignment = {}
    for index, entry in enumerate(data["partitions"]):
        where = f"partitions[{index}]"
        if not isinstance(entry, dict):
            raise PlanError(f"{where} must be an object")
        topic = _field(entry, "topic", str, where)
        number = _field(entry, "partition", int, where)
        replicas = _field(entry, "replicas", list, where)
        if not all(isinstance(r, int) and not isinstance(r, bool) for r in replicas):
            raise PlanError(f"{where}: replicas must be broker ids (integers)")
        if (topic, number) in plan:
            raise PlanError(f"{topic}-{number} appears more than once in the plan")
        plan[(topic, number)] = tuple(replicas)
    if not plan:
        raise PlanError("the plan lists no partitions")
    return plan


def check_plan(plan: Assignment, current: Mapping[PartitionKey, Sequence[int]],
               brokers: Collection[int], *, same_replica_count: bool = False) -> None:
    """Everything a plan must satisfy before any of it is applied (PlanError otherwise).

    ``current`` is the cluster's replica assignment, ``brokers`` its broker ids. A
    plan may change a partition's replica count (how Kafka raises a replication
    factor) unless ``same_replica_count`` (KIP-860's opt-out) is asked for.
    """
    topics = {topic for topic, _ in current}
    for (topic, number), replicas in sorted(plan.items()):
        name = f"{topic}-{number}"
        if topic not in topics:
            raise PlanError(f"unknown topic {topic!r} in the plan")
        if (topic, number) not in current:
            raise PlanError(f"topic {topic!r} has no partition {number}")
        try:
            check_target(replicas, brokers)
        except ReassignmentError as exc:
            raise PlanError(f"{name}: {exc}") from None
        if same_replica_count and len(replicas) != len(current[(topic, number)]):
            raise PlanError(f"{name}: the plan lists {len(replicas)} replica(s) but the "
                            f"partition has {len(current[(topic, number)])}, and the "
                            "replication factor may not change")


def propose(current: Mapping[PartitionKey, Sequence[int]], topics: Iterable[str],
            brokers: Sequence[int], rng: random.Random | None = None, *,
            racks: Mapping[int, str | None] | None = None,
            rack_mode: RackAwareMode = RackAwareMode.ENFORCED) -> Assignment:
    """A new placement of ``topics`` over ``brokers`` (Kafka's assignment, random start).

    Each topic keeps its partition count and replication factor; with ``racks``
    (broker id → broker.rack) the placement is rack-aware as on topic creation.
    """
    if not brokers:
        raise PlanError("no brokers to place replicas on")
    rng = rng or random.Random()
    proposed: Assignment = {}
    for topic in topics:
        numbers = sorted(n for t, n in current if t == topic)
        if not numbers:
            raise PlanError(f"unknown topic {topic!r}")
        rf = len(current[(topic, numbers[0])])
        try:
            placed = assign_replicas(brokers, len(numbers), rf,
                                     start_index=rng.randrange(len(brokers)),
                                     shift=rng.randrange(len(brokers)),
                                     racks=racks, rack_mode=rack_mode)
        except PlacementError as exc:
            raise PlanError(f"topic {topic!r}: {exc}") from None
        proposed.update({(topic, n): tuple(placed[i]) for i, n in enumerate(numbers)})
    return proposed
