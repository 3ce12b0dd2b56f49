"""Liveness from the data dir: what the controller's probe concludes, and the heartbeat thread."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from slog.broker import liveness
from slog.core.datadir import BrokerInfo, write_broker_info
from slog.core.locks import FileLock
from slog.core.names import DataDirLayout, ensure_data_dir

TIMEOUT_S = 9.0


@pytest.fixture
def layout(tmp_path: Path) -> DataDirLayout:
    layout = DataDirLayout(tmp_path / "data")
    ensure_data_dir(layout.root)
    layout.broker_dir(2).mkdir(parents=True, exist_ok=True)
    return layout


def _running(layout: DataDirLayout, broker_id: int = 2) -> FileLock:
    """Broker ``broker_id`` as a real running one leaves it: lock held, broker.json, heartbeat."""
    lock = FileLock(layout.broker(broker_id).alive_lock)
    assert lock.try_acquire()
    write_broker_info(layout, BrokerInfo(broker_id, "127.0.0.1", 1234, os.getpid(), time.time()))
    liveness.beat(layout, broker_id)
    return lock


def _age_heartbeat(layout: DataDirLayout, seconds: float, broker_id: int = 2) -> None:
    then = time.time() - seconds
    os.utime(layout.broker(broker_id).heartbeat, (then, then))


def test_a_running_broker_is_healthy(layout: DataDirLayout) -> None:
    lock = _running(layout)
    seen = liveness.observe(layout, 2, me=1)
    assert seen.holds_lock and not seen.starting and seen.heartbeat_age_s < 1
    assert seen.problem(TIMEOUT_S) is None and seen.healthy(TIMEOUT_S)
    lock.release()


def test_a_free_lock_means_gone_whatever_the_heartbeat(layout: DataDirLayout) -> None:
    _running(layout).release()  # kill -9: the OS drops the lock, the heartbeat is fresh
    seen = liveness.observe(layout, 2, me=1)
    assert seen.problem(TIMEOUT_S) == "alive.lock is free: the process is gone"
    layout.broker(2).starting.touch()
    assert liveness.observe(layout, 2, me=1).problem(TIMEOUT_S) == \
        "alive.lock is free: the process is gone"


def test_a_stale_heartbeat_is_named_with_its_age(layout: DataDirLayout) -> None:
    lock = _running(layout)
    _age_heartbeat(layout, 9.4)
    problem = liveness.observe(layout, 2, me=1).problem(TIMEOUT_S)
    assert problem is not None and problem.startswith("heartbeat 9.") and problem.endswith(" s old")
    assert liveness.observe(layout, 2, me=1).problem(30.0) is None
    lock.release()


def test_a_starting_broker_is_not_judged_by_its_heartbeat(layout: DataDirLayout) -> None:
    lock = _running(layout)
    layout.broker(2).starting.touch()
    _age_heartbeat(layout, 60)
    seen = liveness.observe(layout, 2, me=1)
    assert seen.starting and seen.problem(TIMEOUT_S) is None
    layout.broker(2).starting.unlink()
    assert liveness.observe(layout, 2, me=1).problem(TIMEOUT_S) == "heartbeat 60.0 s old"
    lock.release()


def test_the_heartbeat_thread_beats_while_the_caller_hogs_the_interpreter(
        layout: DataDirLayout) -> None:
    """A pure-Python busy loop (what a long metadata apply is) holds the GIL most of the
    time; the interpreter still hands it to the heartbeat thread every switch interval."""
    heartbeat = liveness.HeartbeatThread(layout, 2, interval_s=0.25)
    heartbeat.start()
    try:
        _age_heartbeat(layout, 60)
        deadline = time.monotonic() + 2.0
        spins = 0
        while time.monotonic() < deadline:  # never yields on purpose
            spins += 1
        age = time.time() - layout.broker(2).heartbeat.stat().st_mtime
        assert age < 1.0, f"heartbeat {age:.1f} s old after a 2 s busy loop ({spins} spins)"
    finally:
        heartbeat.stop()
    _age_heartbeat(layout, 60)
    time.sleep(3 * 0.25)
    age = time.time() - layout.broker(2).heartbeat.stat().st_mtime
    assert age > 50, "the heartbeat went on after stop()"


def test_a_broker_recovering_before_it_listens_counts_as_starting(layout: DataDirLayout) -> None:
    """Between taking its lock and writing broker.json (log recovery) a broker is starting:
    the controller must fence its previous run's registration, not wait for the port."""
    lock = FileLock(layout.broker(2).alive_lock)
    assert lock.try_acquire()
    layout.broker(2).starting.touch()
    seen = liveness.observe(layout, 2, me=1)
    assert seen.info is None and seen.starting and seen.problem(TIMEOUT_S) is None
    layout.broker(2).starting.unlink()
    assert liveness.observe(layout, 2, me=1).problem(TIMEOUT_S) == "no broker.json"
    lock.release()
