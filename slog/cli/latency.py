"""Benchmark arithmetic for ``slog bench``: latency percentiles, rates and a throttle.

Pure functions and a clock-injected throttle, so they are tested without a broker.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

MIB = 1024 * 1024  # kafka-producer-perf-test's "MB"
PERCENTILES = (("p50", 0.50), ("p95", 0.95), ("p99", 0.99), ("p999", 0.999))


def percentile(ordered: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of an ascending, non-empty sequence."""
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def latency_summary(samples_s: Sequence[float]) -> dict[str, float | None]:
    """min/avg/percentiles/max in milliseconds; every value None without samples."""
    names = ["min", "avg", *(name for name, _ in PERCENTILES), "max"]
    if not samples_s:
        return dict.fromkeys(names)
    ordered = sorted(samples_s)
    summary = {"min": ordered[0], "avg": math.fsum(ordered) / len(ordered)}
    summary.update({name: percentile(ordered, fraction) for name, fraction in PERCENTILES})
    summary["max"] = ordered[-1]
    return {name: round(value * 1000, 3) for name, value in summary.items()}


def rates(records: int, data_bytes: int, elapsed_s: float) -> tuple[float, float]:
    """(records/s, MB/s) over ``elapsed_s``; MB is MiB as Kafka's perf tools count it."""
    elapsed_s = max(elapsed_s, 1e-9)
    return round(records / elapsed_s, 1), round(data_bytes / MIB / elapsed_s, 3)


class Throttle:
    """Keeps a sender at ``per_second`` records/s on average (<= 0: unlimited).

    ``wait(sent)`` sleeps until ``sent`` records are due, so bursts after a
    stall catch up rather than being lost, as Kafka's ThroughputThrottler does.
    """

    def __init__(self, per_second: float, clock: Callable[[], float],
                 sleep: Callable[[float], None]):
        self.per_second = per_second
        self._clock = clock
        self._sleep = sleep
        self._start = clock()

    def wait(self, sent: int) -> None:
        if self.per_second <= 0:
            return
        due = self._start + sent / self.per_second
        ahead = due - self._clock()
        if ahead > 0:
            self._sleep(ahead)
