"""Group commit (write.caching=false): the pure state machine, then a real log's
``sync_data`` and a partition whose high watermark and acks=1 wait for it."""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
from pathlib import Path

import pytest

import slog.core.log as core_log
from slog.core.errors import StorageError
from slog.core.group_commit import GroupCommit, SyncRounds
from slog.core.log import PartitionLog
from slog.core.log_config import LogConfig
from slog.core.metadata import PartitionState
from slog.core.records import build_batch
from slog.replication import log_sync
from slog.replication.partition import Partition


# -- the state machine ------------------------------------------------------------------
def test_the_first_need_starts_a_sync_and_later_ones_wait_for_the_next() -> None:
    commit: GroupCommit[str] = GroupCommit(durable=0)
    assert commit.need(1, "a") is True  # nothing running: sync now
    assert commit.need(2, "b") is False  # one in flight: wait
    assert commit.need(3, "c") is False
    released, again = commit.done(1)  # the first sync covered only what it saw
    assert released == ["a"] and again is True and commit.running
    released, again = commit.done(3)  # the second covers both waiters at once
    assert released == ["b", "c"] and again is False and not commit.running
    assert commit.durable == 3 and commit.syncs == 2 and commit.synced_offsets == 3


def test_a_sync_that_covers_more_than_asked_releases_everyone_and_stops() -> None:
    commit: GroupCommit[int] = GroupCommit(durable=10)
    assert commit.need(11, 1)
    assert not commit.need(15, 2)
    released, again = commit.done(20)  # appends that arrived before it started
    assert released == [1, 2] and not again and commit.waiting == 0


def test_nothing_to_sync_below_the_durable_offset() -> None:
    commit: GroupCommit[int] = GroupCommit(durable=5)
    assert commit.need(5, 1) is False and commit.waiting == 0
    assert commit.need(3) is False and not commit.running


def test_a_need_without_a_waiter_still_syncs() -> None:
    commit: GroupCommit[int] = GroupCommit()
    assert commit.need(4)
    assert commit.done(4) == ([], False)
    assert commit.durable == 4


def test_a_failed_sync_fails_every_waiter_and_a_new_need_retries() -> None:
    commit: GroupCommit[int] = GroupCommit()
    commit.need(1, 1)
    commit.need(2, 2)
    assert commit.failed() == [1, 2]
    assert not commit.running and commit.durable == 0
    assert commit.need(2, 3) is True  # asked again: a new sync


def test_truncation_fails_the_waiters_above_the_new_end() -> None:
    commit: GroupCommit[str] = GroupCommit(durable=8)
    commit.need(10, "kept")
    commit.need(14, "gone")
    assert commit.truncated(10) == ["gone"]
    assert commit.durable == 8
    released, again = commit.done(10)
    assert released == ["kept"] and not again
    assert commit.truncated(6) == [] and commit.durable == 6


def test_the_durable_offset_never_goes_back_on_a_late_answer() -> None:
    commit: GroupCommit[int] = GroupCommit(durable=9)
    commit.need(12)
    commit.done(7)  # e.g. a sync that started before a flush moved the log further
    assert commit.durable == 9


def test_one_pass_at_a_time_covers_every_log_that_asked_meanwhile() -> None:
    rounds: SyncRounds[str] = SyncRounds()
    assert rounds.want("a") is True  # nothing running: a pass now
    assert rounds.take() == ["a"]
    assert rounds.want("b") is False and rounds.want("c") is False
    assert rounds.want("b") is False  # asked twice: synced once
    assert rounds.done() is True and rounds.running  # b and c asked during it
    assert rounds.take() == ["b", "c"]
    assert rounds.done() is False and not rounds.running and rounds.passes == 2
    assert rounds.want("a") is True  # idle again: the next ask starts a pass


# -- a real log -------------------------------------------------------------------------
def _batch(count: int = 1) -> bytes:
    return build_batch([(None, b"v" * 10, (), None)] * count)


def test_sync_data_makes_the_end_durable_without_moving_the_recovery_point(
        tmp_path: Path) -> None:
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig())
    plog.append(_batch(3))
    assert plog.durable_offset == 0
    assert plog.sync_data() == 3
    assert plog.durable_offset == 3
    assert plog.recovery_point == 0  # indexes are not synced: recovery still rescans
    plog.flush()
    assert plog.durable_offset == plog.recovery_point == 3
    plog.close()


def test_sync_data_covers_a_segment_rolled_away_from(tmp_path: Path) -> None:
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=200))
    for _ in range(6):
        plog.append(_batch(2))
    assert len(plog.segments) > 1
    assert plog.sync_data() == 12
    plog.close()


def _paused_fdatasync(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event,
                                                                  threading.Event]:
    """fdatasync that waits (on its worker thread) until the test releases it."""
    entered, release = threading.Event(), threading.Event()
    fdatasync = core_log.os.fdatasync

    def paused(fd: int) -> None:
        entered.set()
        release.wait(10)
        fdatasync(fd)

    monkeypatch.setattr(core_log.os, "fdatasync", paused)
    return entered, release


def _sync_in_thread(plog: PartitionLog) -> tuple[threading.Thread, list[int]]:
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(plog.sync_data()))
    thread.start()
    return thread, result


def test_a_truncation_during_a_sync_keeps_it_from_vouching_for_later_appends(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig())
    plog.append(_batch(4))
    plog.sync_data()
    plog.append(_batch(4))
    entered, release = _paused_fdatasync(monkeypatch)
    thread, result = _sync_in_thread(plog)  # it means to cover 0..7
    assert entered.wait(10)
    plog.truncate_to(4)  # 4..7 go (a follower diverged) ...
    plog.append(_batch(4))  # ... and other records take their offsets, unsynced
    release.set()
    thread.join(10)
    assert result == [4] and plog.durable_offset == 4
    monkeypatch.undo()
    assert plog.sync_data() == 8
    plog.close()


def test_appends_and_reads_go_on_while_a_sync_runs(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig())
    plog.append(_batch())
    entered, release = _paused_fdatasync(monkeypatch)
    thread, result = _sync_in_thread(plog)
    assert entered.wait(10)
    plog.append(_batch())  # the log's lock is free while the disk works
    assert plog.read(0, 1 << 20).size > 0
    release.set()
    thread.join(10)
    assert result == [1]  # it covered what it saw when it started
    assert plog.durable_offset == 1
    plog.close()


# -- a partition --------------------------------------------------------------------------
def _leader(tmp_path: Path, config: LogConfig, replicas: tuple[int, ...] = (1,)) -> Partition:
    partition = Partition("d", 0, PartitionLog.open(tmp_path / "d-0", config), 1)
    partition.become_leader(PartitionState("d", 0, replicas=replicas, isr=replicas, leader=1,
                                           leader_epoch=0, partition_epoch=0))
    return partition


def test_the_leaders_high_watermark_waits_for_its_fsync(tmp_path: Path) -> None:
    async def run() -> None:
        partition = _leader(tmp_path, LogConfig())
        appended = partition.append_as_leader(_batch(5), required_acks=1, min_insync_replicas=1)
        # The sync pass runs on another thread and may already be done, so the HW is
        # either still 0 or has moved with the fsync; it never runs ahead of it (read
        # the HW first: the durable end only grows meanwhile).
        hw_before_sync = partition.high_watermark
        assert hw_before_sync in (0, 5) and hw_before_sync <= partition.durable_end
        await asyncio.wait_for(partition.wait_durable(appended.last_offset + 1), 10)
        assert partition.durable_end == 5
        assert partition.high_watermark == 5
        await asyncio.wait_for(partition.wait_for_commit(4, 10, 1), 10)
        partition.log.close()

    asyncio.run(run())


def test_with_write_caching_the_high_watermark_moves_at_once(tmp_path: Path) -> None:
    async def run() -> None:
        before = log_sync.SYNC_STATS.fsyncs
        partition = _leader(tmp_path, LogConfig(write_caching=True))
        partition.append_as_leader(_batch(5), required_acks=1, min_insync_replicas=1)
        assert partition.high_watermark == 5
        await partition.wait_durable(5)  # nothing to wait for
        assert log_sync.SYNC_STATS.fsyncs == before
        partition.log.close()

    asyncio.run(run())


def test_a_followers_fetch_offset_caps_the_high_watermark_as_before(tmp_path: Path) -> None:
    async def run() -> None:
        partition = _leader(tmp_path, LogConfig(), replicas=(1, 2))
        partition.append_as_leader(_batch(5), required_acks=-1, min_insync_replicas=1)
        await asyncio.wait_for(partition.wait_durable(5), 10)
        assert partition.high_watermark == 0  # the follower has not fetched yet
        partition.update_follower(2, 3)
        assert partition.high_watermark == 3
        partition.update_follower(2, 5)
        assert partition.high_watermark == 5
        partition.log.close()

    asyncio.run(run())


def test_many_appends_share_few_fsyncs(tmp_path: Path) -> None:
    async def run() -> None:
        partition = _leader(tmp_path, LogConfig())
        before = log_sync.SYNC_STATS.fsyncs
        waits = []
        for _ in range(200):
            info = partition.append_as_leader(_batch(), required_acks=1, min_insync_replicas=1)
            waits.append(partition.wait_durable(info.last_offset + 1))
        await asyncio.wait_for(asyncio.gather(*waits), 30)
        fsyncs = log_sync.SYNC_STATS.fsyncs - before
        assert 1 <= fsyncs <= 2  # all appended before the first sync returned
        assert partition.high_watermark == 200
        partition.log.close()

    asyncio.run(run())


def test_a_failed_fsync_fails_the_acknowledgement(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(fd: int) -> None:
        raise OSError(5, "Input/output error")

    async def run() -> None:
        partition = _leader(tmp_path, LogConfig())
        monkeypatch.setattr(core_log.os, "fdatasync", broken)
        partition.append_as_leader(_batch(), required_acks=1, min_insync_replicas=1)
        with pytest.raises(StorageError, match="Input/output error"):
            await asyncio.wait_for(partition.wait_durable(1), 10)
        assert partition.high_watermark == 0
        monkeypatch.undo()
        partition.append_as_leader(_batch(), required_acks=1, min_insync_replicas=1)
        await asyncio.wait_for(partition.wait_durable(2), 10)  # a new append retries
        assert partition.high_watermark == 2
        partition.log.close()

    asyncio.run(run())


# -- passes across logs -------------------------------------------------------------------
def _logs(tmp_path: Path, count: int) -> list[PartitionLog]:
    logs = [PartitionLog.open(tmp_path / f"t-{i}", LogConfig()) for i in range(count)]
    for i, plog in enumerate(logs):
        plog.append(_batch(i + 1))
    return logs


def _counting_syncfs(monkeypatch: pytest.MonkeyPatch,
                     fail: OSError | None = None) -> list[int]:
    calls: list[int] = []
    real = log_sync._syncfs

    def counted(fd: int) -> None:
        calls.append(fd)
        if fail is not None:
            raise fail
        if real is not None:
            real(fd)
        else:  # a platform without syncfs: the test still checks the batching
            os.fsync(fd)

    monkeypatch.setattr(log_sync, "_syncfs", counted)
    return calls


def test_a_pass_over_many_logs_makes_them_durable_with_one_syncfs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    logs = _logs(tmp_path, log_sync.SYNCFS_MIN_LOGS)
    calls = _counting_syncfs(monkeypatch)
    fdatasyncs: list[int] = []
    monkeypatch.setattr(core_log.os, "fdatasync", fdatasyncs.append)
    result = log_sync.sync_logs(logs)
    assert len(calls) == 1 and fdatasyncs == [] and result.syncfs == 1
    assert result.outcomes == [i + 1 for i in range(len(logs))]
    assert [plog.durable_offset for plog in logs] == result.outcomes
    assert log_sync.sync_logs(logs).syncfs == 0  # nothing new: no sync at all
    for plog in logs:
        plog.close()


def test_a_syncfs_pass_duplicates_one_descriptor_not_one_per_log(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Each system call on the sync thread hands the GIL to the event loop and waits
    # to get it back: a pass over a thousand logs must not make one per log.
    logs = _logs(tmp_path, 3 * log_sync.SYNCFS_MIN_LOGS)
    calls = _counting_syncfs(monkeypatch)
    dups: list[int] = []
    real_dup = os.dup

    def counted_dup(fd: int) -> int:
        dups.append(fd)
        return real_dup(fd)

    monkeypatch.setattr(os, "dup", counted_dup)
    result = log_sync.sync_logs(logs)
    assert len(calls) == 1 and len(dups) == 1
    assert result.outcomes == [i + 1 for i in range(len(logs))]
    for plog in logs:
        plog.close()


def test_a_log_whose_directory_is_gone_fails_alone(tmp_path: Path) -> None:
    logs = _logs(tmp_path, log_sync.SYNCFS_MIN_LOGS + 1)
    shutil.rmtree(logs[0].directory)  # deleted under the broker: its own error
    result = log_sync.sync_logs(logs)
    assert isinstance(result.outcomes[0], OSError)
    assert result.outcomes[1:] == [i + 2 for i in range(len(logs) - 1)]
    for plog in logs[1:]:
        plog.close()


def test_a_pass_over_a_few_logs_fdatasyncs_each(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    logs = _logs(tmp_path, log_sync.SYNCFS_MIN_LOGS - 1)
    calls = _counting_syncfs(monkeypatch)
    result = log_sync.sync_logs(logs)
    assert calls == [] and result.fdatasyncs == len(logs)
    assert [plog.durable_offset for plog in logs] == [i + 1 for i in range(len(logs))]
    for plog in logs:
        plog.close()


def test_a_failed_syncfs_fails_every_log_of_the_pass_and_a_closed_log_only_itself(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    logs = _logs(tmp_path, log_sync.SYNCFS_MIN_LOGS + 1)
    logs[0].close()  # deleted meanwhile: its own error, the others go on
    _counting_syncfs(monkeypatch, fail=OSError(5, "Input/output error"))
    result = log_sync.sync_logs(logs)
    assert "closed" in str(result.outcomes[0])
    assert all(isinstance(o, StorageError) and "syncfs" in str(o) for o in result.outcomes[1:])
    assert all(plog.durable_offset == 0 for plog in logs[1:])
    monkeypatch.undo()
    assert log_sync.sync_logs(logs[1:]).outcomes == [i + 2 for i in range(len(logs) - 1)]
    for plog in logs[1:]:
        plog.close()


def test_a_truncation_during_a_pass_keeps_it_from_vouching_for_that_log(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    logs = _logs(tmp_path, log_sync.SYNCFS_MIN_LOGS)
    entered, release = threading.Event(), threading.Event()

    def paused(fd: int) -> None:
        entered.set()
        release.wait(10)

    monkeypatch.setattr(log_sync, "_syncfs", paused)
    results: list[log_sync.PassResult] = []
    thread = threading.Thread(target=lambda: results.append(log_sync.sync_logs(logs)))
    thread.start()
    assert entered.wait(10)
    last = logs[-1]  # it means to cover 0..7 of this one
    last.truncate_to(2)
    last.append(_batch(6))  # other records take the removed offsets, unsynced
    release.set()
    thread.join(10)
    assert results[0].outcomes[:-1] == [i + 1 for i in range(len(logs) - 1)]
    assert results[0].outcomes[-1] == 0 and last.durable_offset == 0
    for plog in logs:
        plog.close()


def test_partitions_of_one_loop_share_passes(tmp_path: Path) -> None:
    async def run() -> None:
        partitions = [Partition("d", i, PartitionLog.open(tmp_path / f"d-{i}", LogConfig()), 1)
                      for i in range(50)]
        for i, partition in enumerate(partitions):
            partition.become_leader(PartitionState("d", i, replicas=(1,), isr=(1,), leader=1,
                                                   leader_epoch=0, partition_epoch=0))
        passes = log_sync.SYNC_STATS.passes
        waits = []
        for _ in range(4):
            for partition in partitions:
                info = partition.append_as_leader(_batch(), required_acks=1,
                                                  min_insync_replicas=1)
                waits.append(partition.wait_durable(info.last_offset + 1))
        await asyncio.wait_for(asyncio.gather(*waits), 30)
        # 200 appends to 50 logs, all before the first pass returned: two passes
        # (the first began with the first append), not one sync per log.
        assert 1 <= log_sync.SYNC_STATS.passes - passes <= 2
        assert all(p.high_watermark == 4 for p in partitions)
        for partition in partitions:
            partition.log.close()

    asyncio.run(run())


def test_fdatasyncs_side_by_side_report_each_logs_failure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    logs = _logs(tmp_path, 3)
    broken = os.open(logs[1].segments[-1].log_path, os.O_RDONLY)
    real = core_log.os.fdatasync
    fds: list[int] = []

    def failing_for_one(fd: int) -> None:
        fds.append(fd)
        if os.path.samestat(os.fstat(fd), os.fstat(broken)):
            raise OSError(5, "Input/output error")
        real(fd)

    monkeypatch.setattr(core_log.os, "fdatasync", failing_for_one)
    result = log_sync.sync_logs(logs)
    assert len(fds) == 3 and result.fdatasyncs == 3
    assert result.outcomes[0] == 1 and result.outcomes[2] == 3
    assert isinstance(result.outcomes[1], StorageError)
    assert logs[1].durable_offset == 0
    os.close(broken)
    for plog in logs:
        plog.close()
