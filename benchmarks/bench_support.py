"""Helpers the benchmark scripts share: a bounded run time, how a run ends, and a
process's CPU time."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
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


def wait_until(condition: Callable[[], object], deadline: Deadline, what: str,
               limit_s: float = 30.0, poll_s: float = 0.01) -> object:
    """``condition()``'s first true value, polled; RuntimeError after ``limit_s`` (or
    BenchTimeout when the whole run's deadline comes first)."""
    end = time.monotonic() + min(limit_s, deadline.left())
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            deadline.left()
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(poll_s)


def common_parser(doc: str, quick: str, timeout_s: float, quick_timeout_s: float
                  ) -> argparse.ArgumentParser:
    """A benchmark's parser with the options they share: --quick (``quick`` says
    what it shortens), --timeout (default ``timeout_s``, ``quick_timeout_s`` with
    --quick; None when not given) and --dir (parent of the temp dirs)."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help=quick)
    parser.add_argument("--timeout", type=float, default=None,
                        help=f"stop everything after this many seconds (default "
                             f"{timeout_s:g}, quick {quick_timeout_s:g})")
    parser.add_argument("--dir", type=Path, default=None, help="parent of the temp dirs")
    parser.set_defaults(timeouts=(timeout_s, quick_timeout_s))
    return parser


def start_run(args: argparse.Namespace, prefix: str) -> tuple[Deadline, Path]:
    """For a :func:`common_parser` benchmark: its deadline and its temp dir; SIGTERM
    exits (so the clean-up runs)."""
    timeout_s, quick_timeout_s = args.timeouts
    deadline = Deadline(args.timeout or (quick_timeout_s if args.quick else timeout_s))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    return deadline, Path(tempfile.mkdtemp(prefix=prefix, dir=args.dir))


CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """CPU time a process has used so far (utime + stime, in 10 ms ticks)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()  # the name in () may hold spaces
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def wait_until_idle(pid: int, deadline: Deadline, window_s: float = 0.2,
                    at_most_s: float = 5.0) -> None:
    """Let a server finish background work (e.g. creating topics) before timing it:
    wait for a window with at most one 10 ms tick of CPU, for ``at_most_s``."""
    give_up = time.monotonic() + at_most_s
    while time.monotonic() < give_up:
        deadline.check()
        before = cpu_seconds(pid)
        time.sleep(window_s)
        if cpu_seconds(pid) - before <= 0.011:
            return
