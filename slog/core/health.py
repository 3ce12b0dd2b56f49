"""The cluster's health rules, defined once.

The controller's metadata image, ``slog cluster status``, the dashboard and the
chaos harness all judge partitions and clusters by these functions, so the
words mean the same everywhere. The image knows only what the controller has
recorded; the readers also know which brokers are really serving, and pass
the replicas on the others as ``offline_replicas``: a leader that is not
serving makes its partition offline, and ISR members that are not serving do
not count as in sync, even before the controller has caught up.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

NO_LEADER = -1


def offline_replicas(replicas: Iterable[int], serving: Collection[int]) -> tuple[int, ...]:
    """The replicas on brokers that are not serving."""
    return tuple(r for r in replicas if r not in serving)


def live_isr(isr: Iterable[int], offline: Collection[int] = ()) -> tuple[int, ...]:
    return tuple(b for b in isr if b not in offline)


def is_offline(leader: int, offline: Collection[int] = ()) -> bool:
    """No leader, or a leader that is not serving: nobody can read or write."""
    return leader == NO_LEADER or leader in offline


def is_under_replicated(replicas: Collection[int], isr: Iterable[int],
                        offline: Collection[int] = ()) -> bool:
    """Some replica is out of the ISR or on a broker that is not serving."""
    return len(live_isr(isr, offline)) < len(replicas)


def is_under_min_isr(isr: Iterable[int], offline: Collection[int], min_insync_replicas: int
                     ) -> bool:
    """acks=all produces fail (NOT_ENOUGH_REPLICAS) until the ISR grows again."""
    return len(live_isr(isr, offline)) < min_insync_replicas


def cluster_health(*, offline_partitions: int, under_replicated_partitions: int,
                   has_controller: bool, serving_brokers: int, brokers: int) -> str:
    """ok; warn (a partition under-replicated or a broker not serving); error (a
    partition offline, no controller, or no broker serving)."""
    if offline_partitions or not has_controller or not serving_brokers:
        return "error"
    if under_replicated_partitions or serving_brokers < brokers:
        return "warn"
    return "ok"
