"""A produce request's acknowledgement wait (``handlers.data._await_commits``) over
real partitions: one wait for all of them, each answered with its own outcome."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from slog.broker.handlers.data import Commit, _await_commits
from slog.core.kafka_errors import ErrorCode
from slog.core.log import PartitionLog
from slog.core.log_config import LogConfig
from slog.core.metadata import PartitionState
from slog.core.records import build_batch
from slog.replication.partition import Partition


def _leader(tmp_path: Path, index: int, replicas: tuple[int, ...],
            config: LogConfig | None = None) -> Partition:
    log = PartitionLog.open(tmp_path / f"w-{index}", config or LogConfig())
    partition = Partition("w", index, log, 1)
    partition.become_leader(_state(index, replicas, replicas))
    return partition


def _state(index: int, replicas: tuple[int, ...], isr: tuple[int, ...],
           leader: int = 1, epoch: int = 0) -> PartitionState:
    return PartitionState("w", index, replicas=replicas, isr=isr, leader=leader,
                          leader_epoch=epoch, partition_epoch=epoch)


def _produce(partition: Partition, acks: int, min_isr: int = 1) -> Commit:
    appended = partition.append_as_leader(build_batch([(None, b"v", (), None)] * 3),
                                          required_acks=acks, min_insync_replicas=min_isr)
    result: dict[str, Any] = {"index": partition.partition, "error_code": ErrorCode.none,
                              "base_offset": appended.base_offset}
    return result, partition, appended.last_offset, min_isr, acks


def _close(*partitions: Partition) -> None:
    for partition in partitions:
        partition.log.close()


def test_each_partition_gets_its_own_outcome_from_one_wait(tmp_path: Path) -> None:
    async def run() -> None:
        synced = _leader(tmp_path, 0, (1,))  # acks=1, write.caching=false: its fsync
        replicated = _leader(tmp_path, 1, (1, 2))  # acks=all: the follower fetches
        stalled = _leader(tmp_path, 2, (1, 2))  # acks=all: the follower never does
        commits = [_produce(synced, 1), _produce(replicated, -1), _produce(stalled, -1)]
        asyncio.get_running_loop().call_later(0.1, replicated.update_follower, 2, 3)
        await _await_commits(commits, 2.0)
        assert [c[0]["error_code"] for c in commits] == [
            ErrorCode.none, ErrorCode.none, ErrorCode.request_timed_out]
        assert commits[0][0]["base_offset"] == 0 and commits[2][0]["base_offset"] == -1
        assert "did not acknowledge offset 2" in commits[2][0]["error_message"]
        assert all(f.cancelled() for _, f in stalled._commit_waiters)  # given up on
        _close(synced, replicated, stalled)

    asyncio.run(run())


def test_nothing_to_wait_for_answers_at_once(tmp_path: Path) -> None:
    async def run() -> None:
        cached = _leader(tmp_path, 0, (1,), LogConfig(write_caching=True))
        commits = [_produce(cached, 1), _produce(cached, -1)]  # the HW is past both
        await asyncio.wait_for(_await_commits(commits, 0.0), 1)
        assert [c[0]["error_code"] for c in commits] == [ErrorCode.none, ErrorCode.none]
        _close(cached)

    asyncio.run(run())


def test_a_shrunk_isr_and_a_moved_leader_say_so(tmp_path: Path) -> None:
    async def run() -> None:
        shrunk = _leader(tmp_path, 0, (1, 2, 3))  # follower 2 stays in the ISR, silent
        moved = _leader(tmp_path, 1, (1, 2))
        commits = [_produce(shrunk, -1, min_isr=3), _produce(moved, -1)]
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, shrunk.become_leader, _state(0, (1, 2, 3), (1, 2)))
        loop.call_later(0.05, moved.become_follower, _state(1, (1, 2), (1, 2), 2, 1))
        await _await_commits(commits, 0.5)
        assert commits[0][0]["error_code"] == ErrorCode.not_enough_replicas_after_append
        assert commits[1][0]["error_code"] == ErrorCode.not_leader_or_follower
        assert commits[1][0]["base_offset"] == -1
        _close(shrunk, moved)

    asyncio.run(run())


def test_a_cancelled_request_stops_waiting(tmp_path: Path) -> None:
    async def run() -> None:
        stalled = _leader(tmp_path, 0, (1, 2))
        waiting = asyncio.ensure_future(_await_commits([_produce(stalled, -1)], 30.0))
        await asyncio.sleep(0.05)
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        assert waiting.cancelled()
        assert [f.cancelled() for _, f in stalled._commit_waiters] == [True]
        _close(stalled)

    asyncio.run(run())


def test_one_partition_waits_alone_with_the_same_outcomes(tmp_path: Path) -> None:
    # One commit takes the single-future path; it must answer as the many-future one.
    async def run() -> None:
        synced = _leader(tmp_path, 0, (1,))
        commits = [_produce(synced, 1)]
        await _await_commits(commits, 2.0)
        assert commits[0][0]["error_code"] == ErrorCode.none
        assert synced.log.durable_offset == 3
        stalled = _leader(tmp_path, 1, (1, 2))
        timed_out = [_produce(stalled, -1)]
        await _await_commits(timed_out, 0.05)
        assert timed_out[0][0]["error_code"] == ErrorCode.request_timed_out
        assert timed_out[0][0]["base_offset"] == -1
        moved = _leader(tmp_path, 2, (1, 2))
        refused = [_produce(moved, -1)]
        asyncio.get_running_loop().call_later(0.05, moved.become_follower,
                                              _state(2, (1, 2), (1, 2), 2, 1))
        await _await_commits(refused, 5.0)
        assert refused[0][0]["error_code"] == ErrorCode.not_leader_or_follower
        _close(synced, stalled, moved)

    asyncio.run(run())
