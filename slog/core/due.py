"""DueSchedule: which keys need work now, without looking at the ones that do not.

Periodic jobs (ISR expiry, flush.ms, group session timeouts) used to scan every
partition or member on every tick; with thousands of them an idle broker spent
its time finding nothing to do. Instead, whoever knows when a key's next
deadline is schedules it here, and a tick pops only the keys that are due.

A key has at most one deadline: scheduling it again keeps the earlier one
(a sooner check subsumes a later one). Superseded heap entries are skipped
lazily when they surface. Pure and clock-free: callers pass ``now``.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class DueSchedule(Generic[K]):
    def __init__(self) -> None:
        self._deadline: dict[K, float] = {}
        # (deadline, tie-breaker, key): keys need not be comparable.
        self._heap: list[tuple[float, int, K]] = []
        self._order = itertools.count()

    def __len__(self) -> int:
        return len(self._deadline)

    def __contains__(self, key: object) -> bool:
        return key in self._deadline

    def deadline(self, key: K) -> float | None:
        return self._deadline.get(key)

    def schedule(self, key: K, at: float) -> None:
        """Make ``key`` due at ``at`` unless it is already due sooner."""
        current = self._deadline.get(key)
        if current is not None and current <= at:
            return
        self._deadline[key] = at
        heapq.heappush(self._heap, (at, next(self._order), key))
        self._compact_if_bloated()

    def cancel(self, key: K) -> None:
        self._deadline.pop(key, None)

    def next_deadline(self) -> float | None:
        """The earliest live deadline, or None when nothing is scheduled."""
        self._drop_stale_top()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: float) -> list[K]:
        """Every key whose deadline is at or before ``now``, earliest first; they are
        unscheduled (reschedule what still needs watching)."""
        return list(self._iter_due(now))

    def _iter_due(self, now: float) -> Iterator[K]:
        while self._heap and self._heap[0][0] <= now:
            at, _, key = heapq.heappop(self._heap)
            if self._deadline.get(key) == at:
                del self._deadline[key]
                yield key

    def _drop_stale_top(self) -> None:
        while self._heap and self._deadline.get(self._heap[0][2]) != self._heap[0][0]:
            heapq.heappop(self._heap)

    def _compact_if_bloated(self) -> None:
        # Rescheduling sooner leaves the old entry behind; rebuild before it dominates.
        if len(self._heap) > 64 and len(self._heap) > 4 * len(self._deadline):
            self._heap = [(at, next(self._order), key) for key, at in self._deadline.items()]
            heapq.heapify(self._heap)


class WakingDueSchedule(DueSchedule[K]):
    """A DueSchedule whose timer task sleeps until the earliest deadline instead of
    ticking: an idle broker's timers used to wake dozens of times a second to find
    nothing due. Scheduling something sooner than the planned wake-up wakes it.

    ``clock`` gives the time in the unit of the deadlines (ms); ``granularity_s``
    is the shortest sleep (deadlines are met within it, and a wake-up waits that
    long to batch what else comes); ``idle_s`` the longest, for work the owner does
    on every wake-up whatever is due.
    """

    def __init__(self, clock: Callable[[], float], granularity_s: float, idle_s: float):
        super().__init__()
        self._clock = clock
        self._granularity_s = granularity_s
        self._idle_s = idle_s
        self._wakeup = asyncio.Event()
        self._next_wake = 0.0

    def schedule(self, key: K, at: float) -> None:
        super().schedule(key, at)
        if at < self._next_wake:
            self._wakeup.set()

    async def sleep_until_due(self, also_at: float | None = None) -> None:
        """Sleep until the earliest deadline, or ``also_at`` if sooner (a deadline the
        owner keeps outside the schedule)."""
        now = self._clock()
        earliest = self.next_deadline()
        if also_at is not None and (earliest is None or also_at < earliest):
            earliest = also_at
        delay_s = self._idle_s if earliest is None else \
            min(self._idle_s, max(self._granularity_s, (earliest - now) / 1000))
        self._next_wake = now + delay_s * 1000
        self._wakeup.clear()
        try:
            await asyncio.wait_for(self._wakeup.wait(), delay_s)
        except TimeoutError:
            return
        await asyncio.sleep(self._granularity_s)

    async def run(self, tick: Callable[[], None], log: logging.Logger, what: str) -> None:
        """A timer task: ``tick()`` whenever something is due; a failing tick is logged
        and the task goes on."""
        while True:
            await self.sleep_until_due()
            try:
                tick()
            except Exception:
                log.exception("%s tick failed", what)


class Wakeup:
    """A loop's sleep that ends early when someone knows there is work: whoever
    changes what the loop looks at sets it; a set during the work is kept, so
    the next sleep ends at once.

    A future and a timer rather than ``asyncio.wait_for``: on Python 3.11 a
    wait_for whose inner wait completes as its task is cancelled returns
    instead of raising, and a loop woken often then outlives its cancellation.
    """

    def __init__(self) -> None:
        self._pending = False
        self._waiter: asyncio.Future[bool] | None = None

    def set(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(True)
        else:
            self._pending = True

    async def sleep(self, timeout_s: float) -> bool:
        """Sleep up to ``timeout_s``; True when woken. Call before the work it wakes."""
        if self._pending:
            self._pending = False
            return True
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bool] = loop.create_future()
        self._waiter = waiter
        timer = loop.call_later(timeout_s, _settle, waiter, False)
        try:
            return await waiter
        finally:
            timer.cancel()
            self._waiter = None


def _settle(waiter: asyncio.Future[bool], value: bool) -> None:
    if not waiter.done():
        waiter.set_result(value)
