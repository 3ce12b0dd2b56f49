"""A roll fsyncs the sealed segment off the appending thread; the recovery
point passes that segment only once the fsync is done, truncation included."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from slog.core import log as log_module
from slog.core.log import PartitionLog
from tests.unit.test_log import Clock, config, fill


@pytest.fixture
def fsync_threads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the threads that fsynced a segment's .log file (the real fsync runs)."""
    names: list[str] = []
    real = os.fsync

    def recording(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".log"):
            names.append(threading.current_thread().name)
        real(fd)

    monkeypatch.setattr(log_module.os, "fsync", recording)
    return names


def test_roll_fsyncs_the_sealed_segment_in_the_background(
        tmp_path: Path, fsync_threads: list[str]) -> None:
    log = PartitionLog.open(tmp_path / "t-0", config(), time=Clock())
    fsync_threads.clear()  # opening fsyncs the new, empty segment
    fill(log, 45)  # 20 batches per segment: two rolls
    assert [s.base_offset for s in log.segments] == [0, 20, 40]
    assert log.recovery_point == 40  # waits for the fsyncs in flight
    assert len(fsync_threads) == 2
    assert all(name.startswith("segment-sync") for name in fsync_threads)
    log.close()  # the active segment is fsynced by the closing thread
    assert set(fsync_threads[2:]) == {threading.current_thread().name}


def test_truncation_after_a_roll_keeps_the_recovery_point_within_the_log(
        tmp_path: Path, fsync_threads: list[str]) -> None:
    log = PartitionLog.open(tmp_path / "t-0", config(), time=Clock())
    fill(log, 25)  # one roll at offset 20
    log.truncate_to(10)  # into the sealed segment, right after its fsync was queued
    assert log.log_end_offset == 10
    assert log.recovery_point <= 10
    fill(log, 5)
    # Offsets 10..14 were never fsynced: the earlier segment's sync must not cover them.
    assert log.recovery_point <= 10
    log.flush()
    assert log.recovery_point == log.log_end_offset == 15
    log.close()


def test_reopen_after_rolls_keeps_every_record(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", config(), time=Clock())
    fill(log, 70)
    log.close()
    again = PartitionLog.open(tmp_path / "t-0", config(), time=Clock())
    assert again.log_end_offset == 70
    assert again.recovery_point == 70
    again.close()
