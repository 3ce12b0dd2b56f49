"""Broker liveness from the shared data dir, for the controller and for each broker.

A broker is alive while it holds ``brokers/<id>/alive.lock`` (the OS drops
the lock the instant the process dies) and keeps touching
``brokers/<id>/heartbeat``: a process paused with SIGSTOP still holds its
lock, but its heartbeat goes stale, and after ``broker.session.timeout.ms``
the controller fences it. ``brokers/<id>/shutting-down`` asks the controller
to move leadership away before a clean stop (controlled shutdown).

The heartbeat comes from a thread, not from the event loop: a loop busy for
seconds (applying a metadata image with thousands of partitions) is busy,
not dead. SIGSTOP still stops every thread, so a paused broker goes stale.
It beats every ``broker.session.timeout.ms / 8``, at most once a second (Kafka's
brokers heartbeat every 2 s against a 9 s session): eight chances per session.

``brokers/<id>/starting`` exists from the moment a broker takes its lock
until it has caught up with the metadata log and created its replicas. The
controller neither registers such a broker (no leadership, no ISR places)
nor fences it for heartbeat age: Kafka's fenced-until-caught-up broker
registration.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from slog.core.datadir import BrokerInfo, known_broker_ids, read_broker_info
from slog.core.locks import FileLock, is_locked
from slog.core.names import DataDirLayout

log = logging.getLogger("slog.broker")

HEARTBEAT_INTERVAL_S = 1.0  # the longest; shorter sessions beat more often
BEATS_PER_SESSION = 8
LATE_BEATS = 3  # a beat this many intervals late is worth a warning


def heartbeat_interval_s(session_timeout_s: float) -> float:
    return min(HEARTBEAT_INTERVAL_S, session_timeout_s / BEATS_PER_SESSION)


def beat(layout: DataDirLayout, broker_id: int) -> None:
    """Refresh this broker's heartbeat (an mtime: no content to tear)."""
    path = layout.broker(broker_id).heartbeat
    try:
        os.utime(path)
    except FileNotFoundError:
        path.touch(mode=0o600)


class HeartbeatThread:
    """Touches the heartbeat every ``interval_s`` whatever the event loop does.

    Before each beat it asks ``lost()`` whether this process still holds the alive.lock
    at its path. When it does not (the data dir was removed, or removed and made again
    under a running broker), it stops beating, so a new broker of the same id is not
    taken for this one, and calls ``on_lost``.
    """

    def __init__(self, layout: DataDirLayout, broker_id: int,
                 interval_s: float = HEARTBEAT_INTERVAL_S,
                 lost: Callable[[], bool] = lambda: False,
                 on_lost: Callable[[], None] = lambda: None):
        self._layout = layout
        self._broker_id = broker_id
        self._interval_s = interval_s
        self._lost = lost
        self._on_lost = on_lost
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{broker_id}",
                                        daemon=True)

    def start(self) -> None:
        beat(self._layout, self._broker_id)  # fresh before anyone can look
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        failing = False
        last = time.monotonic()
        while not self._stop.wait(self._interval_s):
            now = time.monotonic()
            if now - last > LATE_BEATS * self._interval_s:
                # Not this broker's doing: the thread was not given the CPU (an overloaded
                # machine) or the GIL. Say so: it explains a fencing that follows.
                log.warning("heartbeat thread ran %.2f s after the last beat (every %.2f s "
                            "is due): this process was starved of CPU",
                            now - last, self._interval_s)
            if self._lost():
                self._on_lost()
                return
            try:
                started = time.monotonic()
                beat(self._layout, self._broker_id)
                if time.monotonic() - started > LATE_BEATS * self._interval_s:
                    log.warning("heartbeat write took %.2f s: the data dir's disk is slow",
                                time.monotonic() - started)
                last = time.monotonic()
                failing = False
            except OSError as exc:
                if not failing:  # once per failure streak, not at every beat
                    log.warning("cannot write heartbeat: %s", exc)
                failing = True


@dataclass(frozen=True)
class BrokerObservation:
    broker_id: int
    info: BrokerInfo | None
    holds_lock: bool
    heartbeat_age_s: float
    shutting_down: bool
    starting: bool = False

    def problem(self, session_timeout_s: float) -> str | None:
        """Why this broker must be fenced, or None. A starting broker only for a lost lock."""
        if not self.holds_lock:
            return "alive.lock is free: the process is gone"
        if self.info is None and not self.starting:
            return "no broker.json"
        if not self.starting and self.heartbeat_age_s > session_timeout_s:
            return f"heartbeat {self.heartbeat_age_s:.1f} s old"
        return None

    def healthy(self, session_timeout_s: float) -> bool:
        return self.problem(session_timeout_s) is None

    def heartbeat_deadline(self, session_timeout_s: float, now: float) -> float | None:
        """When (``time.time()``) this broker's heartbeat goes stale if it stops
        now; None when its heartbeat is not judged (gone, starting, or this broker)."""
        if not self.holds_lock or self.starting or self.info is None \
                or self.heartbeat_age_s == float("inf"):
            return None
        return now - self.heartbeat_age_s + session_timeout_s


def observe(layout: DataDirLayout, broker_id: int, *, me: int,
            lock: FileLock | None = None) -> BrokerObservation:
    """What broker ``broker_id``'s files say. ``lock``: a probe kept for that broker's
    alive.lock (see :class:`LivenessProbe`); without it the file is opened for once."""
    # broker.json before the marker: a broker writes them in the other order,
    # so seeing its info and then no marker means it really has caught up.
    info = read_broker_info(layout, broker_id)
    starting = layout.broker(broker_id).starting.exists()
    if broker_id == me:
        holds_lock = True
    elif lock is not None:
        holds_lock = lock.held_by_another()
    else:
        holds_lock = is_locked(layout.broker(broker_id).alive_lock)
    try:
        age = time.time() - layout.broker(broker_id).heartbeat.stat().st_mtime
    except FileNotFoundError:
        age = float("inf")
    if broker_id == me:
        age = 0.0  # we are obviously running
    return BrokerObservation(broker_id, info, holds_lock, max(age, 0.0),
                             layout.broker(broker_id).shutting_down.exists(), starting)


def observe_all(layout: DataDirLayout, *, me: int) -> list[BrokerObservation]:
    return [observe(layout, broker_id, me=me) for broker_id in known_broker_ids(layout)]


class LivenessProbe:
    """The controller's :func:`observe_all`, asked at every liveness check: each
    other broker's alive.lock stays open between checks, so a check closes no
    file. Brokers watch those files for a close (a broker died or stopped), and
    a probe that closed them would wake its own watch."""

    def __init__(self, layout: DataDirLayout, me: int):
        self._layout = layout
        self._me = me
        self._locks: dict[int, FileLock] = {}

    def observe_all(self) -> list[BrokerObservation]:
        seen = []
        for broker_id in known_broker_ids(self._layout):
            lock = None
            if broker_id != self._me:
                lock = self._locks.get(broker_id)
                if lock is None:
                    lock = self._locks[broker_id] = \
                        FileLock(self._layout.broker(broker_id).alive_lock)
            seen.append(observe(self._layout, broker_id, me=self._me, lock=lock))
        return seen

    def close(self) -> None:
        for lock in self._locks.values():
            lock.release()
        self._locks.clear()
