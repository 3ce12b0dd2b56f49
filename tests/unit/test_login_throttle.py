"""The per-address hold on failed SASL logins, on a hand-driven clock."""

from __future__ import annotations

import pytest

from slog.broker import login_throttle
from slog.broker.login_throttle import FORGET_AFTER_S, FailedLoginThrottle


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _one_at_a_time(throttle: FailedLoginThrottle, clock: Clock, address: str, n: int
                   ) -> list[float]:
    """n failures, each sent once the previous answer arrived."""
    delays = []
    for _ in range(n):
        delay = throttle.failure_delay(address)
        delays.append(delay)
        clock.now += delay + 0.01
    return delays


def test_the_hold_doubles_after_the_free_failures_up_to_the_ceiling() -> None:
    clock = Clock()
    throttle = FailedLoginThrottle(8.0, clock)
    assert _one_at_a_time(throttle, clock, "10.0.0.1", 10) == \
        [0, 0, 0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    assert _one_at_a_time(throttle, clock, "10.0.0.2", 1) == [0]  # per address


def test_parallel_guesses_are_answered_no_faster_than_one_per_hold() -> None:
    clock = Clock()
    throttle = FailedLoginThrottle(8.0, clock)
    _one_at_a_time(throttle, clock, "10.0.0.1", 3)
    burst = [throttle.failure_delay("10.0.0.1") for _ in range(5)]
    assert burst == [0.25, 0.75, 1.75, 3.75, 7.75]  # queued behind each other
    assert throttle.failure_delay("10.0.0.1") == 8.0  # never past the ceiling


def test_a_quiet_address_is_forgotten_and_zero_turns_the_hold_off() -> None:
    clock = Clock()
    throttle = FailedLoginThrottle(8.0, clock)
    _one_at_a_time(throttle, clock, "10.0.0.1", 6)
    assert throttle.failures("10.0.0.1") == 6
    clock.now += FORGET_AFTER_S + 1
    assert throttle.failures("10.0.0.1") == 0
    assert _one_at_a_time(throttle, clock, "10.0.0.1", 4) == [0, 0, 0, 0.25]
    off = FailedLoginThrottle(0, clock)
    assert _one_at_a_time(off, clock, "10.0.0.1", 8) == [0] * 8


def test_the_table_of_addresses_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(login_throttle, "MAX_ADDRESSES", 3)
    clock = Clock()
    throttle = FailedLoginThrottle(8.0, clock)
    for address in ["a", "b", "c", "d"]:
        throttle.failure_delay(address)
    assert throttle.failures("a") == 0 and throttle.failures("d") == 1
