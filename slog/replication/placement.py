"""Replica placement on topic create and partition add (rack-unaware, as Kafka's).

Partition p's first replica (its preferred leader) is broker
``(p + start) % n``, so leadership spreads evenly; the followers are shifted
by an amount that grows every n partitions, so follower load spreads too.
"""

from __future__ import annotations

from collections.abc import Sequence


class PlacementError(ValueError):
    pass


def assign_replicas(
    brokers: Sequence[int],
    partitions: int,
    replication_factor: int,
    *,
    first_partition: int = 0,
    start_index: int | None = None,
    shift: int | None = None,
) -> dict[int, list[int]]:
    """Map partition → replica list for partitions ``first_partition..+partitions``."""
    ordered = sorted(brokers)
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
        replicas = [ordered[first]]
        for j in range(replication_factor - 1):
            offset = 1 + (next_shift + j) % (n - 1)
            replicas.append(ordered[(first + offset) % n])
        plan[p] = replicas
    return plan


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
