"""Helpers the benchmark scripts share: a bounded run time."""

from __future__ import annotations

import time


class BenchTimeout(Exception):
    """The benchmark ran out of its --timeout; everything started is cleaned up."""


class Deadline:
    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            raise BenchTimeout("benchmark time limit reached")
        return left

    def check(self) -> None:
        self.left()
