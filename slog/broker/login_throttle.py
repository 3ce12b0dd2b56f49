"""Failed SASL logins, rate limited per source address.

A password guesser gets its answers later and later: the first few failures
from an address (a mistyped password) are answered at once; after that each
failure's answer waits, twice as long as the one before, up to a ceiling, and
answers to one address leave no faster than that, however many connections it
opens (beyond the ceiling, each waits the ceiling). The wait is an
``asyncio.sleep`` of the failing connection only: the event loop and every
other connection go on. A successful login is never held, wherever it comes
from, and does not reset the count (a guesser with one good account could
otherwise clear it between guesses). An address quiet for a while starts
afresh.

The ceiling is ``connection.failed.authentication.delay.max.ms`` (8 s; 0 turns
the hold off). Kafka holds every failed authentication's close for
``connection.failed.authentication.delay.ms`` (100 ms), a flat delay; this one
grows, so that a guesser's rate drops to one answer per ceiling.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("slog.broker.sasl")

FREE_FAILURES = 3  # answered at once
FIRST_DELAY_S = 0.25
MAX_DELAY_S = 8.0  # connection.failed.authentication.delay.max.ms's default
FORGET_AFTER_S = 300.0  # an address without a failure for this long starts afresh
MAX_ADDRESSES = 10_000  # the longest-quiet address is forgotten first


@dataclass
class _Failures:
    count: int = 0
    last_at: float = 0.0
    next_answer_at: float = 0.0  # answers to this address leave no earlier


class FailedLoginThrottle:
    """``max_delay_s``: the ceiling (0: every failure is answered at once)."""

    def __init__(self, max_delay_s: float = MAX_DELAY_S,
                 clock: Callable[[], float] = time.monotonic):
        self.max_delay_s = max_delay_s
        self._clock = clock
        self._by_address: OrderedDict[str, _Failures] = OrderedDict()

    def failure_delay(self, address: str) -> float:
        """Count one failed login from ``address``; returns how long to hold its
        answer (0 for the first few)."""
        now = self._clock()
        failures = self._by_address.pop(address, None)
        if failures is None or now - failures.last_at > FORGET_AFTER_S:
            failures = _Failures()
        self._by_address[address] = failures  # most recent last
        while len(self._by_address) > MAX_ADDRESSES:
            self._by_address.popitem(last=False)
        failures.count += 1
        failures.last_at = now
        beyond = failures.count - FREE_FAILURES
        if beyond <= 0 or self.max_delay_s <= 0:
            return 0.0
        step = min(self.max_delay_s, FIRST_DELAY_S * 2 ** min(beyond - 1, 32))
        delay = min(self.max_delay_s, max(0.0, failures.next_answer_at - now) + step)
        failures.next_answer_at = now + delay
        if beyond == 1:
            log.warning("SASL logins from %s failed %d times in a row: each further failure "
                        "is answered after a growing delay (%.2f s now, at most %.0f s; "
                        "forgotten after %.0f s without one)", address, failures.count, delay,
                        self.max_delay_s, FORGET_AFTER_S)
        return delay

    def failures(self, address: str) -> int:
        """Failures counted for ``address`` (0 once forgotten)."""
        failures = self._by_address.get(address)
        if failures is None or self._clock() - failures.last_at > FORGET_AFTER_S:
            return 0
        return failures.count
