"""Automatic leader rebalancing (``auto.leader.rebalance.enable``): which partitions to
move back to their preferred leader. Pure; the controller runs the elections.

Kafka's rule, per broker: of the partitions whose preferred leader (first
replica) is that broker, count those led by another broker. When that share
exceeds ``leader.imbalance.per.broker.percentage``, every one of them whose
preferred leader is alive and in the ISR gets a preferred election.
Partitions being reassigned are left alone.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from slog.core.metadata import PartitionState
from slog.replication.reassignment import PartitionKey, in_progress


def imbalance(partitions: Iterable[PartitionState]) -> dict[int, float]:
    """Per preferred-leader broker, the share (0..1) of its partitions led elsewhere."""
    owned: dict[int, int] = {}
    elsewhere: dict[int, int] = {}
    for state in partitions:
        if not state.replicas or in_progress(state):
            continue
        preferred = state.preferred_leader
        owned[preferred] = owned.get(preferred, 0) + 1
        if state.leader != preferred:
            elsewhere[preferred] = elsewhere.get(preferred, 0) + 1
    return {broker: elsewhere.get(broker, 0) / count for broker, count in owned.items()}


def partitions_to_rebalance(partitions: Iterable[PartitionState], live: Collection[int],
                            max_imbalance_percent: int) -> list[PartitionKey]:
    """Partitions whose preferred leader should take over now, sorted."""
    states = list(partitions)
    ratios = imbalance(states)
    over = {b for b, ratio in ratios.items() if ratio > max_imbalance_percent / 100}
    return sorted(
        (s.topic, s.partition) for s in states
        if s.replicas and not in_progress(s) and s.preferred_leader in over
        and s.leader != s.preferred_leader and s.preferred_leader in live
        and s.preferred_leader in s.isr
    )
