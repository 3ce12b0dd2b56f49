"""The data dir watch: what wakes a broker's metadata and controller loops, and what
must not (a lock probe, a heartbeat). Real files, real inotify, real processes."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slog.broker import liveness
from slog.broker.data_dir_watch import DataDirWakeups
from slog.core.controller_lease import ControllerLease
from slog.core.dir_watch import CREATE, MODIFY, DirWatch
from slog.core.locks import FileLock, is_locked
from slog.core.metadata_log import MetadataLogWriter
from slog.core.metadata_records import ControllerRecord
from slog.core.names import DataDirLayout, ensure_data_dir

pytestmark = pytest.mark.skipif(DirWatch.open() is None, reason="no inotify here")

# Holds lock files until killed: what a broker's alive.lock or controller.lock is.
HOLDER = """
import sys, time
from pathlib import Path
from slog.core.locks import FileLock
locks = [FileLock(Path(path)) for path in sys.argv[1:]]
assert all(lock.try_acquire() for lock in locks)
print("held", flush=True)
time.sleep(60)
"""


@pytest.fixture
def layout(tmp_path: Path) -> DataDirLayout:
    layout = DataDirLayout(tmp_path / "data")
    ensure_data_dir(layout.root)
    for broker_id in (1, 2):
        layout.broker_dir(broker_id).mkdir(parents=True, exist_ok=True)
    return layout


def hold_locks(*paths: Path) -> subprocess.Popen[str]:
    """A process holding the locks of ``paths`` until it is killed."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, *map(str, paths)],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def test_the_watch_names_changed_entries_and_says_when_notices_are_lost(tmp_path: Path) -> None:
    watch = DirWatch.open()
    assert watch is not None
    watched = tmp_path / "w"
    watched.mkdir()
    assert watch.add(watched, CREATE | MODIFY)
    assert watch.read().names == {}
    (watched / "a").write_bytes(b"x")
    changes = watch.read()
    assert changes.in_dir(watched) == {"a"} and not changes.lost
    (watched / "a").unlink()
    watched.rmdir()  # the watch goes with its directory: reported, not silent
    assert watch.read().lost and not watch.watches(watched)
    watch.close()


def test_a_failed_lock_attempt_keeps_its_file_open(layout: DataDirLayout) -> None:
    """A waiter retrying must not close the file at each try: a close is what tells
    the other brokers that the holder let go."""
    path = layout.controller_lock
    holder = hold_locks(path)
    try:
        watch = DirWatch.open()
        assert watch is not None
        waiter = FileLock(path)
        assert not waiter.try_acquire()  # opens the file once
        watch.add(layout.root, 0x008)  # CLOSE_WRITE
        for _ in range(5):
            assert not waiter.try_acquire() and waiter.held_by_another()
        assert watch.read().in_dir(layout.root) == set()
        holder.kill()
        holder.wait()
        assert "controller.lock" in watch.read().in_dir(layout.root)  # the holder died
        assert waiter.try_acquire() and waiter.held
        assert not waiter.held_by_another()  # ours
        waiter.release()
        assert not is_locked(path)
        watch.close()
    finally:
        holder.kill()
        holder.wait()


def test_appends_to_the_metadata_log_wake_the_metadata_loop(layout: DataDirLayout) -> None:
    async def scenario() -> tuple[bool, bool, bool]:
        wakeups = DataDirWakeups(layout)
        wakeups.start()
        try:
            assert wakeups.metadata_watched and wakeups.liveness_watched
            quiet = await wakeups.metadata.sleep(0.2)
            lease = ControllerLease(layout.controller_lease, layout.metadata_append_lock, 9.0)
            with lease.exclusive(1.0):  # what the controller does
                writer = MetadataLogWriter.take_over(layout.metadata_dir, lease, 1, "test", 0)
            sleeping = asyncio.create_task(wakeups.metadata.sleep(10.0))
            await asyncio.sleep(0.05)
            writer.append([ControllerRecord(1)])
            woken = await asyncio.wait_for(sleeping, 5.0)
            writer.close()
            lease.close()
            return quiet, woken, await wakeups.controller.sleep(0.2)
        finally:
            wakeups.close()

    quiet, woken, controller_woken = asyncio.run(scenario())
    assert not quiet and woken and not controller_woken


def test_a_dying_broker_wakes_the_controller_and_probes_do_not(layout: DataDirLayout) -> None:
    holder = hold_locks(layout.broker(2).alive_lock)

    async def scenario() -> tuple[bool, bool, bool, bool]:
        wakeups = DataDirWakeups(layout)
        wakeups.start()
        probe = liveness.LivenessProbe(layout, me=1)
        try:
            await wakeups.controller.sleep(0.1)  # whatever the fixture's files did
            for _ in range(5):  # the controller's liveness checks, and the CLI's probes
                [_, seen] = probe.observe_all()
                assert seen.holds_lock and is_locked(layout.broker(2).alive_lock)
            liveness.beat(layout, 2)  # a heartbeat is only an mtime
            probed = await wakeups.controller.sleep(0.3)
            holder.kill()
            died = await wakeups.controller.sleep(10.0)
            [_, seen] = probe.observe_all()
            layout.broker(2).starting.touch()  # a broker starting again
            starting = await wakeups.controller.sleep(10.0)
            layout.broker_dir(3).mkdir()  # a new broker: its files are watched from now on
            new_broker = await wakeups.controller.sleep(10.0)
            assert wakeups.liveness_watched and not seen.holds_lock
            return probed, died, starting, new_broker
        finally:
            probe.close()
            wakeups.close()

    try:
        started = time.monotonic()
        probed, died, starting, new_broker = asyncio.run(scenario())
    finally:
        holder.kill()
        holder.wait()
    assert not probed, "a lock probe or a heartbeat woke the controller"
    assert died and starting and new_broker
    assert time.monotonic() - started < 10.0
