"""Enforcing client quotas: rates over a sampled window, throttle times, handler time.

Each client (its user and client id) resolves each quota key to the most
specific entity that sets it (:mod:`slog.core.quotas`), and is measured by the
rate that entity's clients share. A rate is Kafka's sampled rate:
``quota.window.num`` samples of ``quota.window.size.seconds`` each; the rate is
their sum over the time they span, counted as at least all but one sample as
Kafka does, but only once the rate is that old: before, over the time since its
first record, at least one sample. (With Kafka's minimum from the start, a new
client may send nearly a window's worth at once, and the bursts repeat each
time the samples holding the last one expire together: a client capped at
1 MB/s moved in 10 MB bursts and got 70-75 % of its quota over half a minute.
Here a new client starts at its quota's pace.)

When a request takes a rate over its quota, the client is throttled for the
time that brings the rate back to the quota: until the window's total over the
time the samples really span is the quota (Kafka's ``(rate - quota) / quota *
window`` once the window has filled), at most one full window. The response carries it as
``throttle_time_ms`` and the connection is then muted (nothing more is read
from it) for that long (KIP-219), see ``slog.broker.server``.

Produce counts request bytes, fetch counts response bytes (at most one sample's
worth per response; the answer goes out and the throttle follows it, where Kafka
would withhold the answer: see ``slog.broker.handlers.fetch``), and
``request_percentage`` counts the time handlers spend on the event loop for the
client, as a percentage of one thread (:class:`TimedHandler` measures it).
Brokers (follower fetches, the inter-broker principal) are never throttled.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Generator
from typing import Any, Final

from slog.core.metadata import MetadataImage
from slog.core.quotas import CONSUMER_BYTE_RATE, ResolvedQuota, resolve

ANONYMOUS_USER: Final = "ANONYMOUS"  # the user of an unauthenticated connection (Kafka's)
_MAX_RESOLVED = 10_000  # cached resolutions kept before the cache starts over
_SENSOR_SWEEP_S = 60.0  # how often rates idle for a whole window are dropped


class SampledRate:
    """Kafka's sampled rate (its ``Rate`` over ``SampledStat``), per second."""

    __slots__ = ("_born", "_count", "_samples", "_window_s", "last_record")

    def __init__(self, samples: int, window_s: float):
        self._count = max(samples, 2)
        self._window_s = window_s
        self._samples: list[list[float]] = []  # [start, total], oldest first
        self._born = 0.0  # the first record since the samples were last empty
        self.last_record = 0.0

    def record(self, value: float, now: float) -> None:
        self.last_record = now
        self._purge(now)
        samples = self._samples
        if not samples:
            self._born = now
        if samples and now < samples[-1][0] + self._window_s:
            samples[-1][1] += value
            return
        samples.append([now, value])
        if len(samples) > self._count:
            del samples[0]

    def _purge(self, now: float) -> None:
        span = self._count * self._window_s
        samples = self._samples
        while samples and now - samples[0][0] >= span:
            del samples[0]

    def window_s(self, now: float) -> float:
        """The time the rate is measured over: what the samples span, at least one
        sample (see the module docstring)."""
        return max(self.elapsed_s(now), self._window_s)

    def rate(self, now: float) -> float:
        window = self.window_s(now)
        return self.total(now) / window if window > 0 else 0.0

    def total(self, now: float) -> float:
        self._purge(now)
        return sum(total for _, total in self._samples)

    def elapsed_s(self, now: float) -> float:
        """The time the samples' total is spread over: since the rate's first record
        while that is shorter than all but one sample, then since the oldest sample's
        start, but never less than all but one sample (Kafka's minimum, which it
        applies from the first record on: see the module docstring)."""
        self._purge(now)
        if not self._samples:
            return 0.0
        full = (self._count - 1) * self._window_s
        age = now - self._born
        if age < full:
            return age
        return max(now - self._samples[0][0], full)


class ClientQuotas:
    """The rates of every throttled client of this broker, and their throttle times."""

    def __init__(self, image: Callable[[], MetadataImage], samples: int, window_s: float,
                 clock: Callable[[], float] = time.monotonic):
        self._image = image
        self._samples = samples
        self._window_s = window_s
        self._clock = clock
        self._rates: dict[tuple[str, tuple[str, str]], SampledRate] = {}
        self._resolved: dict[tuple[str, str, str], ResolvedQuota | None] = {}
        self._resolved_version = -1
        self._next_sweep = 0.0

    @property
    def active(self) -> bool:
        """Whether any quota is set (else nothing is measured at all)."""
        return bool(self._image().client_quotas)

    @property
    def max_throttle_ms(self) -> int:
        return int(self._samples * self._window_s * 1000)

    def quota(self, user: str, client_id: str, key: str) -> ResolvedQuota | None:
        image = self._image()
        if not image.client_quotas:
            return None
        if image.client_quotas_version != self._resolved_version or \
                len(self._resolved) > _MAX_RESOLVED:
            self._resolved = {}
            self._resolved_version = image.client_quotas_version
        wanted = (user, client_id, key)
        if wanted not in self._resolved:
            self._resolved[wanted] = resolve(image.client_quotas, user, client_id, key)
        return self._resolved[wanted]

    def record(self, user: str, client_id: str, key: str, value: float) -> int:
        """Count ``value`` against the client's ``key`` quota; the throttle time it earns
        (ms, 0 within the quota or without one)."""
        quota = self.quota(user, client_id, key)
        if quota is None:
            return 0
        now = self._clock()
        rate = self._rate(key, quota, now)
        rate.record(value, now)
        return self._throttle_ms(rate, quota.limit, now)

    def window_bytes(self, user: str, client_id: str) -> int | None:
        """The most a consumer may fetch in one response, or None without a quota: its
        quota over one sample. (Kafka allows all but one sample's worth; a smaller
        answer keeps a throttled consumer's stream steady instead of window-sized
        bursts, and an answer over the quota is withheld whole, so a smaller one wastes
        less of the client's time.)"""
        quota = self.quota(user, client_id, CONSUMER_BYTE_RATE)
        if quota is None:
            return None
        return max(int(quota.limit * self._window_s), 1)

    def _rate(self, key: str, quota: ResolvedQuota, now: float) -> SampledRate:
        if now >= self._next_sweep:
            self._next_sweep = now + _SENSOR_SWEEP_S
            idle = now - self._samples * self._window_s
            self._rates = {k: r for k, r in self._rates.items() if r.last_record >= idle}
        rate = self._rates.get((key, quota.sensor))
        if rate is None:
            rate = self._rates[(key, quota.sensor)] = SampledRate(self._samples, self._window_s)
        return rate

    def _throttle_ms(self, rate: SampledRate, limit: float, now: float) -> int:
        if rate.rate(now) <= limit:
            return 0
        # Until the window's total over the time it really spans is back at the quota.
        # Kafka's (rate - quota) / quota * window is the same once the window has
        # filled; before, its window is the all-but-one-sample minimum, which wakes a
        # new client too early, again and again, and lets bursts through.
        throttle_s = rate.total(now) / limit - rate.elapsed_s(now)
        return min(max(int(throttle_s * 1000), 1), self.max_throttle_ms)


def quota_user(principal: str | None) -> str:
    """The quota ``user`` of a principal: its name (``User:alice`` -> ``alice``)."""
    if not principal:
        return ANONYMOUS_USER
    return principal.partition(":")[2] or principal


class TimedHandler:
    """Awaits a handler's coroutine and measures the time it runs on the event loop
    (its steps between awaits), not the time it waits: a long-polling fetch costs
    what reading costs, not its max wait."""

    __slots__ = ("_coro", "spent_s")

    def __init__(self, coro: Awaitable[Any]):
        self._coro = coro
        self.spent_s = 0.0

    def __await__(self) -> Generator[Any, Any, Any]:
        inner = self._coro.__await__()
        clock = time.perf_counter
        value: Any = None
        error: BaseException | None = None
        while True:
            start = clock()
            try:
                step = inner.send(value) if error is None else inner.throw(error)
            except StopIteration as done:
                self.spent_s += clock() - start
                return done.value
            finally:
                error = None
            self.spent_s += clock() - start
            try:
                value = yield step
            except GeneratorExit:
                inner.close()
                raise
            except BaseException as exc:  # cancellation included: the handler sees it
                error, value = exc, None
