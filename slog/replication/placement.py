"""Replica placement on topic create and partition add, as Kafka's assignment does it.

Partition p's first replica (its preferred leader) is broker
``(p + start) % n``, so leadership spreads evenly; the followers are shifted
by an amount that grows every n partitions, so follower load spreads too.

When every broker has a ``broker.rack``, the same walk runs over the brokers
listed rack by rack in turn (a1, b1, c1, a2, ...), and a follower is skipped
while its rack already holds a replica and some rack holds none: each
partition's replicas span min(RF, racks) racks. A mix of racked and un-racked
brokers is refused (Kafka's rule) unless the caller chose a laxer
:class:`RackAwareMode`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import Enum

from slog.core.errors import SlogError


class PlacementError(SlogError, ValueError):
    pass


class RackAwareMode(Enum):
    """Kafka's three modes of using broker racks when placing replicas."""

    ENFORCED = "enforced"  # every broker has a rack, or none has: a mix is an error
    SAFE = "safe"  # a mix places as if no broker had a rack (auto-created topics)
    DISABLED = "disabled"  # racks are ignored (reassign generate --disable-rack-aware)


def assign_replicas(
    brokers: Sequence[int],
    partitions: int,
    replication_factor: int,
    *,
    first_partition: int = 0,
    start_index: int | None = None,
    shift: int | None = None,
    racks: Mapping[int, str | None] | None = None,
    rack_mode: RackAwareMode = RackAwareMode.ENFORCED,
) -> dict[int, list[int]]:
    """Map partition → replica list for partitions ``first_partition..+partitions``.

    ``racks``: broker id → broker.rack (None: no rack). Placement is rack-aware
    when every broker has one (and ``rack_mode`` is not DISABLED).
    """
    rack_of = _racks_to_use(brokers, racks, rack_mode)
    ordered = rack_alternated(rack_of) if rack_of else sorted(brokers)
    n = len(ordered)
    if partitions <= 0:
        raise PlacementError("the number of partitions must be at least 1")
    if replication_factor <= 0:
        raise PlacementError("the replication factor must be at least 1")
    if replication_factor > n:
        raise PlacementError(
            f"replication factor {replication_factor} is larger than the "
            f"{n} available broker{'s' if n != 1 else ''}"
        )
    # Deterministic defaults keep plans reproducible; callers may randomise.
    start = first_partition % n if start_index is None else start_index % n
    next_shift = (start if shift is None else shift) % n
    plan: dict[int, list[int]] = {}
    for p in range(first_partition, first_partition + partitions):
        if p > 0 and p % n == 0:
            next_shift += 1
        first = (p + start) % n
        if rack_of:
            plan[p] = _rack_aware_replicas(ordered, rack_of, first, next_shift,
                                           replication_factor)
            continue
        replicas = [ordered[first]]
        for j in range(replication_factor - 1):
            offset = 1 + (next_shift + j) % (n - 1)
            replicas.append(ordered[(first + offset) % n])
        plan[p] = replicas
    return plan


def _racks_to_use(brokers: Sequence[int], racks: Mapping[int, str | None] | None,
                  mode: RackAwareMode) -> dict[int, str]:
    """The racks to place by, or {} for rack-unaware placement."""
    if not racks or mode is RackAwareMode.DISABLED:
        return {}
    known = {b: rack for b in brokers if (rack := racks.get(b))}
    if not known:
        return {}
    if len(known) != len(brokers):
        if mode is RackAwareMode.SAFE:
            return {}
        missing = sorted(b for b in brokers if b not in known)
        raise PlacementError(
            "not all brokers have rack information for replica rack aware assignment "
            f"(no broker.rack on broker{'s' if len(missing) > 1 else ''} "
            f"{', '.join(map(str, missing))})")
    return known


def rack_alternated(rack_of: Mapping[int, str]) -> list[int]:
    """Brokers taken one rack at a time, racks in name order: a1, b1, c1, a2, b2, a3..."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(rack_of):
        by_rack.setdefault(rack_of[broker], []).append(broker)
    columns = [by_rack[rack] for rack in sorted(by_rack)]
    deepest = max(len(c) for c in columns)
    return [c[i] for i in range(deepest) for c in columns if i < len(c)]


def _rack_aware_replicas(ordered: Sequence[int], rack_of: Mapping[int, str], first: int,
                         shift: int, replication_factor: int) -> list[int]:
    """One partition's replicas: leader ``ordered[first]``, then followers found by a
    shifted walk that passes over a rack (or broker) already used while unused ones remain."""
    n = len(ordered)
    all_racks = len(set(rack_of.values()))
    leader = ordered[first]
    replicas, used_racks = [leader], {rack_of[leader]}
    # Shifting by whole rack rounds keeps the next follower in a different rack.
    stride = shift * all_racks
    k = 0
    while len(replicas) < replication_factor:
        broker = ordered[(first + 1 + (stride + k) % (n - 1)) % n]
        k += 1
        rack = rack_of[broker]
        if rack in used_racks and len(used_racks) < all_racks:
            continue
        if broker in replicas:
            continue  # rf <= n, so an unused broker is always ahead
        replicas.append(broker)
        used_racks.add(rack)
    return replicas


def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    """Parse ``1:2,2:3`` (partition-ordered, ':' between replicas) as kafka-topics does."""
    plan: dict[int, list[int]] = {}
    for p, group in enumerate(text.split(",")):
        try:
            replicas = [int(b) for b in group.split(":")]
        except ValueError as exc:
            raise PlacementError(f"bad replica list {group!r}: use broker ids like 1:2:3") from exc
        if len(set(replicas)) != len(replicas):
            raise PlacementError(f"partition {p} lists a broker twice: {group}")
        plan[p] = replicas
    if len({len(r) for r in plan.values()}) > 1:
        raise PlacementError("every partition must have the same number of replicas")
    return plan
