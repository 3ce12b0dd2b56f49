"""Keep the cyclic garbage collector's pauses short, whatever the process holds.

CPython's collector holds the GIL while it scans, and a full collection walks
every container object of the process. A broker holding 5,000 replicas has
over 400,000 of them (about 80 a replica); a full collection of those took
0.25 s on an idle machine and longer on a loaded one, during which no
thread ran: not the event loop, not the heartbeat thread. Brokers with a
1.2 s ``broker.session.timeout.ms`` were fenced for it while a topic of
5,000 partitions was being created.

Almost all of those objects are long-lived state (partitions, logs, indexes)
that no collection will ever free. So once such state has been built (a
broker's start-up, every few hundred logs or replicas), :func:`settle` collects what
is new and moves the survivors to the permanent generation (``gc.freeze``),
which collections never scan: later full collections cost what was made
since, not what the broker holds.

A frozen object that later becomes cyclic garbage is not reclaimed while it
is frozen. Deleting replicas is when that happens at scale, so
:func:`discard` thaws everything; the next full collection then reclaims the
garbage, and its survivors are frozen again (one thorough pass per burst of
deletions, however many replicas it deletes). Objects made between settles
(connections, requests, fetch sessions) are frozen only if still alive at
the next settle, so most of their cycles are collected as usual.

Each collection is timed; one longer than ``SLOW_PAUSE_S`` is logged, since
it explains a late heartbeat or a slow request.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from typing import Any

log = logging.getLogger("slog.gc")

OLDEST = 2
SLOW_PAUSE_S = 0.1
# Pieces of long-lived state (replicas, logs) built between two settles: each settle
# collects what is not frozen, so not after every small topic, yet often enough that
# no collection meets more than a few hundred replicas' objects.
SETTLE_EVERY = 250


class _Policy:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._installed = False
        self._started = 0.0
        self._thawed = False  # refreeze after the next full collection
        self._built = 0

    def install(self) -> None:
        with self._lock:
            if not self._installed:
                gc.callbacks.append(self._timed)
                self._installed = True

    def settle(self) -> None:
        with self._lock:
            self._built = 0
            if self._thawed:
                return  # the thaw's full collection will freeze it all
            gc.collect()  # scans only what is not frozen yet: what came since
            gc.freeze()

    def built(self, count: int) -> None:
        with self._lock:
            self._built += count
            due = self._built >= SETTLE_EVERY
        if due:
            self.settle()

    def discard(self) -> None:
        with self._lock:
            if not self._thawed and gc.get_freeze_count():
                self._thawed = True
                gc.unfreeze()

    def _timed(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        took = time.perf_counter() - self._started
        if took > SLOW_PAUSE_S:
            log.warning("garbage collection of generation %d paused the process %.2f s "
                        "(%d objects frozen, not scanned)",
                        info["generation"], took, gc.get_freeze_count())
        if info["generation"] == OLDEST and self._thawed:
            # The thorough pass after a thaw: what survived it is long-lived again.
            self._thawed = False
            gc.freeze()


_POLICY = _Policy()


def install() -> None:
    """Time every collection (once per process; a broker's start calls it)."""
    _POLICY.install()


def settle() -> None:
    """Long-lived state was just built: collect what is new, freeze what survives."""
    _POLICY.settle()


def built(count: int = 1) -> None:
    """``count`` pieces of long-lived state were built: settle once enough have been."""
    _POLICY.built(count)


def discard() -> None:
    """Long-lived state was just dropped: let the next full collection see it all."""
    _POLICY.discard()
