"""Helpers the benchmark scripts share: a bounded run time, and how a run ends."""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path


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


def measure_and_report(measure: Callable[[], None], report: Callable[[], bool], root: Path,
                       stops: tuple[type[Exception], ...] = (BenchTimeout,)) -> int:
    """Run ``measure``, then ``report`` what it measured; the exit status: 0 when the
    report's targets are met, 1 when not, 2 when a ``stops`` error ended the run
    early (what was measured so far is still reported). ``root`` is removed."""
    try:
        measure()
    except stops as exc:
        print(f"error: {exc}", file=sys.stderr)
        report()
        return 2
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0 if report() else 1
