"""Rates and sparklines from successive snapshots (pure; the clock is the snapshots').

Counters that only grow (a topic's summed high watermarks, the bytes a broker
holds) become per-second rates between refreshes; gauges (a group's lag) are
kept as they are. A counter that went down (a topic re-created, retention)
restarts its rate instead of showing a negative one.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Mapping

from slog.tui.model import ClusterSnapshot

HISTORY = 60  # points per series: a minute at the default refresh


class Series:
    """The last ``HISTORY`` values of many keys, taken at the same instants."""

    def __init__(self, length: int = HISTORY):
        self._length = length
        self._times: deque[float] = deque(maxlen=length)
        self._values: dict[str, deque[float | None]] = {}

    def add(self, at: float, values: Mapping[str, float]) -> None:
        if self._times and at <= self._times[-1]:
            return  # the same snapshot twice, or a clock step back
        self._times.append(at)
        for key in values.keys() - self._values.keys():
            self._values[key] = deque([None] * (len(self._times) - 1), maxlen=self._length)
        for key, column in self._values.items():
            column.append(values.get(key))

    def values(self, key: str) -> list[float]:
        return [v for v in self._values.get(key, ()) if v is not None]

    def last(self, key: str) -> float | None:
        column = self._values.get(key)
        return column[-1] if column else None

    def rates(self, key: str) -> list[float]:
        """Per-second increase between consecutive points (a drop counts as 0)."""
        column = self._values.get(key)
        if not column:
            return []
        out = []
        points = list(zip(self._times, column, strict=True))
        for (t0, v0), (t1, v1) in itertools.pairwise(points):
            if v0 is not None and v1 is not None and t1 > t0:
                out.append(max(0.0, (v1 - v0) / (t1 - t0)))
        return out

    def rate(self, key: str) -> float | None:
        """The per-second rate between the last two points; None unless both have a value
        (so a broker that stopped answering shows no rate rather than its last one)."""
        column = self._values.get(key)
        if not column or len(column) < 2 or column[-1] is None or column[-2] is None:
            return None
        t0, t1 = self._times[-2], self._times[-1]
        return max(0.0, (column[-1] - column[-2]) / (t1 - t0))


def topic_counters(snapshot: ClusterSnapshot) -> dict[str, float]:
    return {t.name: float(t.end_offsets) for t in snapshot.topics}


def broker_in_counters(snapshot: ClusterSnapshot) -> dict[str, float]:
    """Bytes each broker holds: their growth is what it writes (as leader or follower)."""
    return {str(b): float(n) for b, n in snapshot.broker_bytes.items()}


def broker_out_counters(snapshot: ClusterSnapshot) -> dict[str, float]:
    """Bytes each leader has shipped to its in-sync followers: size times followers.

    Consumers' reads are not in any protocol answer, so "out" is replication.
    """
    out: dict[str, float] = {}
    for p in snapshot.partitions:
        if p.size >= 0 and p.leader >= 0:
            followers = sum(1 for r in p.isr if r != p.leader)
            key = str(p.leader)
            out[key] = out.get(key, 0.0) + p.size * followers
    return out


def group_lag_values(snapshot: ClusterSnapshot) -> dict[str, float]:
    return {g.group_id: float(g.lag) for g in snapshot.groups}


class History:
    """Everything the dashboard plots, fed one snapshot per refresh."""

    def __init__(self, length: int = HISTORY):
        self.topic_messages = Series(length)
        self.broker_in = Series(length)
        self.broker_out = Series(length)
        self.group_lag = Series(length)

    def add(self, snapshot: ClusterSnapshot) -> None:
        at = snapshot.taken_at
        self.topic_messages.add(at, topic_counters(snapshot))
        self.broker_in.add(at, broker_in_counters(snapshot))
        self.broker_out.add(at, broker_out_counters(snapshot))
        self.group_lag.add(at, group_lag_values(snapshot))
