"""When a standby may take over (slog.broker.controller_election), on real files.

The lease holder's process is played by a real process holding its broker's
alive.lock (and controller.lock), so "gone" is what the OS says when it dies.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from slog.broker.controller_election import ControllerElection
from slog.core.locks import FileLock
from slog.core.names import DataDirLayout, ensure_data_dir
from tests.unit.test_data_dir_watch import hold_locks

SESSION_S = 2.0


@pytest.fixture
def layout(tmp_path: Path) -> DataDirLayout:
    layout = DataDirLayout(tmp_path / "data")
    ensure_data_dir(layout.root)
    layout.broker_dir(2).mkdir(parents=True)
    return layout


@pytest.fixture
def standby(layout: DataDirLayout) -> Iterator[ControllerElection]:
    election = ControllerElection(layout, 1, SESSION_S)
    yield election
    election.close()


@pytest.fixture
def holder(layout: DataDirLayout) -> Iterator[subprocess.Popen[str]]:
    """Broker 2's process, holding its alive.lock and controller.lock."""
    process = hold_locks(layout.broker(2).alive_lock, layout.controller_lock)
    yield process
    process.kill()
    process.wait()


def _write_lease(layout: DataDirLayout, controller: int, epoch: int, age_s: float = 0.0,
                 incarnation: str = "other") -> None:
    layout.controller_lease.write_text(json.dumps(
        {"controller": controller, "epoch": epoch, "incarnation": incarnation}))
    when = time.time() - age_s
    os.utime(layout.controller_lease, (when, when))


def test_no_lease_is_vacant_unless_controller_lock_is_held(
        layout: DataDirLayout, standby: ControllerElection) -> None:
    holder = hold_locks(layout.controller_lock)  # a controller that writes no lease
    try:
        assert standby.vacancy() is None
    finally:
        holder.kill()
        holder.wait()
    assert standby.vacancy() == "no controller lease"


def test_a_live_lease_is_vacant_once_expired_released_or_its_holder_died(
        layout: DataDirLayout, standby: ControllerElection,
        holder: subprocess.Popen[str]) -> None:
    _write_lease(layout, 2, 7, age_s=0.5)
    assert standby.vacancy() is None
    # The standby sleeps until the lease could expire, no longer than it was told.
    assert 1.0 < standby.standby_wait_s(5.0) <= 1.6
    assert standby.standby_wait_s(0.5) == 0.5
    # Not renewed (its holder is paused), though the holder keeps both locks.
    _write_lease(layout, 2, 7, age_s=SESSION_S + 0.5)
    reason = standby.vacancy()
    assert reason is not None and "lease of broker 2 (epoch 7) expired" in reason
    os.utime(layout.controller_lease, (0, 0))  # a clean stop
    assert standby.vacancy() == "broker 2 released the lease (epoch 7)"
    _write_lease(layout, 1, 8)  # this broker's id, another process
    assert standby.vacancy() == "the lease (epoch 8) names an earlier run of this broker"
    # Renewed, but its holder dies: vacant at once, not after the session timeout.
    _write_lease(layout, 2, 9)
    assert standby.vacancy() is None
    holder.kill()
    holder.wait()
    assert standby.vacancy() == "broker 2, the lease holder (epoch 9), is gone"


def test_the_lock_is_handed_back_to_a_live_lease_holder_that_lacks_it(
        layout: DataDirLayout, standby: ControllerElection) -> None:
    # Broker 2 took over by expiry; the deposed controller let go of controller.lock.
    alive = hold_locks(layout.broker(2).alive_lock)
    try:
        _write_lease(layout, 2, 7)
        assert standby.vacancy() is None
        lease_holder = FileLock(layout.controller_lock)  # broker 2, at its next tick
        assert lease_holder.try_acquire()
        lease_holder.release()
    finally:
        alive.kill()
        alive.wait()
