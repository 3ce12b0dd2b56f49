"""Load figures from a history. Pure: acknowledged records/s in a time window, and how long
each kind of fault kept partitions from acknowledging anything."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterable
from itertools import pairwise

from slog.chaos.history import Ack, Fault


def ack_rate(acks: Iterable[Ack], start: float, end: float) -> float:
    """Records acknowledged per second with an ack time in [start, end)."""
    if end <= start:
        return 0.0
    return sum(1 for a in acks if start <= a.time < end) / (end - start)


def longest_stalls(acks: Iterable[Ack], faults: Iterable[Fault]) -> dict[str, float]:
    """Per fault kind, the longest time one partition acknowledged nothing while a fault of
    that kind (injection to recovered ISR) was going on, in seconds."""
    times: dict[int, list[float]] = defaultdict(list)
    for ack in acks:
        times[ack.partition].append(ack.time)
    for series in times.values():
        series.sort()
    worst: dict[str, float] = {}
    for fault in faults:
        for series in list(times.values()) or [[]]:  # no acks at all: the whole fault
            inside = series[bisect_left(series, fault.start):bisect_right(series, fault.end)]
            edges = [fault.start, *inside, fault.end]
            gap = max(b - a for a, b in pairwise(edges))
            worst[fault.kind] = round(max(worst.get(fault.kind, 0.0), gap), 3)
    return worst
