"""A time source tests set by hand: ``clock.now`` is what calling it returns."""

from __future__ import annotations


class FakeClock:
    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now
