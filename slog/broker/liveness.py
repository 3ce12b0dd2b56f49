"""Broker liveness from the shared data dir, for the controller and for each broker.

A broker is alive while it holds ``brokers/<id>/alive.lock`` (the OS drops
the lock the instant the process dies) and keeps touching
``brokers/<id>/heartbeat``: a process paused with SIGSTOP still holds its
lock, but its heartbeat goes stale, and after ``broker.session.timeout.ms``
the controller fences it. ``brokers/<id>/shutting-down`` asks the controller
to move leadership away before a clean stop (controlled shutdown).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from slog.core.datadir import BrokerInfo, alive_lock_path, known_broker_ids, read_broker_info
from slog.core.locks import is_locked
from slog.core.names import DataDirLayout

HEARTBEAT_INTERVAL_S = 0.25


def heartbeat_path(layout: DataDirLayout, broker_id: int) -> Path:
    return layout.broker_dir(broker_id) / "heartbeat"


def shutdown_marker(layout: DataDirLayout, broker_id: int) -> Path:
    return layout.broker_dir(broker_id) / "shutting-down"


def beat(layout: DataDirLayout, broker_id: int) -> None:
    """Refresh this broker's heartbeat (an mtime: no content to tear)."""
    path = heartbeat_path(layout, broker_id)
    try:
        os.utime(path)
    except FileNotFoundError:
        path.touch(mode=0o600)


@dataclass(frozen=True)
class BrokerObservation:
    broker_id: int
    info: BrokerInfo | None
    holds_lock: bool
    heartbeat_age_s: float
    shutting_down: bool

    def healthy(self, session_timeout_s: float) -> bool:
        return self.holds_lock and self.info is not None and \
            self.heartbeat_age_s <= session_timeout_s


def observe(layout: DataDirLayout, broker_id: int, *, me: int) -> BrokerObservation:
    info = read_broker_info(layout, broker_id)
    holds_lock = broker_id == me or is_locked(alive_lock_path(layout, broker_id))
    try:
        age = time.time() - heartbeat_path(layout, broker_id).stat().st_mtime
    except FileNotFoundError:
        age = float("inf")
    if broker_id == me:
        age = 0.0  # we are obviously running
    return BrokerObservation(broker_id, info, holds_lock, max(age, 0.0),
                             shutdown_marker(layout, broker_id).exists())


def observe_all(layout: DataDirLayout, *, me: int) -> list[BrokerObservation]:
    return [observe(layout, broker_id, me=me) for broker_id in known_broker_ids(layout)]
