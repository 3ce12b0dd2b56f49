"""Partition and fetch sessions, without a broker: who is woken, and idle followers in the ISR."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from slog.core.log import PartitionLog
from slog.core.log_config import LogConfig
from slog.core.metadata import PartitionState
from slog.core.records import build_batch
from slog.replication.fetch_sessions import INITIAL_EPOCH, FetchSessionCache
from slog.replication.partition import Partition


def leader(tmp_path: Path, isr: tuple[int, ...] = (1, 2)) -> Partition:
    partition = Partition("w", 0, PartitionLog.open(tmp_path / "w-0", LogConfig()), 1)
    partition.become_leader(PartitionState("w", 0, replicas=(1, 2), isr=isr, leader=1,
                                           leader_epoch=0, partition_epoch=0))
    return partition


def append(partition: Partition, count: int = 1) -> int:
    partition.append_as_leader(build_batch([(None, b"v", (), None)] * count),
                               required_acks=1, min_insync_replicas=1)
    return partition.log.log_end_offset


def session(cache: FetchSessionCache, follower: bool):
    s = cache.open(0, INITIAL_EPOCH, follower, [("w", [_Part()])], []).session
    s.take_dirty()
    return s


class _Part:
    partition = 0
    fetch_offset = 0
    current_leader_epoch = -1
    log_start_offset = -1
    partition_max_bytes = 1024


def test_an_append_wakes_followers_a_new_high_watermark_consumers(tmp_path: Path) -> None:
    partition = leader(tmp_path)
    cache = FetchSessionCache(10)
    follower, consumer = session(cache, True), session(cache, False)
    follower.watch(("w", 0), partition)
    consumer.watch(("w", 0), partition)
    end = append(partition)  # the HW waits for broker 2: only the LEO moved
    assert follower.take_dirty() == {("w", 0)} and consumer.take_dirty() == set()
    partition.update_follower(2, end, follower)  # the HW moves
    # The follower reads it again with its next answer, whatever ends its wait.
    assert consumer.take_dirty() == {("w", 0)} and follower.take_dirty() == {("w", 0)}
    cache.remove(follower.id)
    append(partition)
    assert follower.take_dirty() == set()  # a closed session hears nothing more


def test_a_moved_high_watermark_does_not_end_a_followers_wait(tmp_path: Path) -> None:
    """As in Kafka, a parked follower fetch is answered for new data, not for the HW
    alone: waking it doubled the replication round trips of an acks=all write."""
    partition = leader(tmp_path)
    cache = FetchSessionCache(10)
    follower, consumer = session(cache, True), session(cache, False)
    follower.watch(("w", 0), partition)
    consumer.watch(("w", 0), partition)
    end = append(partition)
    follower.take_dirty()

    async def waits() -> tuple[float, float]:
        async def timed(s, timeout_s: float) -> float:
            started = time.monotonic()
            await s.wait_for_change(timeout_s)
            return time.monotonic() - started

        parked = [asyncio.ensure_future(timed(follower, 0.5)),
                  asyncio.ensure_future(timed(consumer, 5.0))]
        await asyncio.sleep(0.05)
        partition.update_follower(2, end, follower)  # the HW moves
        return tuple(await asyncio.gather(*parked))  # type: ignore[return-value]

    follower_waited, consumer_waited = asyncio.run(waits())
    assert consumer_waited < 1.0  # woken by the HW
    assert follower_waited >= 0.45  # its whole wait: the HW is no news to wake it for
    assert follower.take_dirty() == {("w", 0)}  # but its answer will carry it
    append(partition)
    assert follower.take_dirty() == {("w", 0)}  # new data wakes it as before


def test_leadership_change_wakes_every_session(tmp_path: Path) -> None:
    partition = leader(tmp_path)
    consumer = session(FetchSessionCache(10), False)
    consumer.watch(("w", 0), partition)
    partition.become_follower(PartitionState("w", 0, replicas=(1, 2), isr=(2,), leader=2,
                                             leader_epoch=1, partition_epoch=1))
    assert consumer.take_dirty() == {("w", 0)}


def test_idle_follower_in_a_session_stays_in_the_isr(tmp_path: Path) -> None:
    partition = leader(tmp_path)
    follower = session(FetchSessionCache(10), True)
    end = append(partition, 3)
    partition.update_follower(2, end, follower)
    lag_ms = 50
    time.sleep(0.1)
    # The follower keeps fetching in its session without naming the partition.
    follower.last_fetch_ms = time.monotonic() * 1000
    assert partition.wanted_isr(lag_max_ms=lag_ms) is None  # still caught up
    # Behind the leader's LEO, its session's fetches no longer count.
    append(partition)
    time.sleep(0.1)
    follower.last_fetch_ms = time.monotonic() * 1000
    assert partition.wanted_isr(lag_max_ms=lag_ms) == (1,)


def test_without_a_session_an_unnamed_follower_drops_out(tmp_path: Path) -> None:
    partition = leader(tmp_path)
    end = append(partition, 3)
    partition.update_follower(2, end)
    time.sleep(0.1)
    assert partition.wanted_isr(lag_max_ms=50) == (1,)


# -- DeleteRecords: the low watermark ------------------------------------------------------
def test_delete_records_waits_for_the_followers_log_start(tmp_path: Path) -> None:
    partition = leader(tmp_path)
    append(partition, 10)
    partition.update_follower(2, 10, None, log_start_offset=0)
    assert partition.high_watermark == 10
    cache = FetchSessionCache(10)
    follower_session = session(cache, follower=True)
    follower_session.watch(("w", 0), partition)

    async def scenario() -> tuple[bool, bool, int]:
        assert partition.advance_log_start(6) and partition.log.log_start_offset == 6
        assert follower_session.dirty == {("w", 0)}  # the follower hears of it at once
        assert partition.low_watermark == 0
        timed_out = await partition.wait_for_low_watermark(6, 0.05)
        waiting = asyncio.ensure_future(partition.wait_for_low_watermark(6, 5))
        await asyncio.sleep(0)
        partition.update_follower(2, 10, None, log_start_offset=6)  # its next fetch says so
        return timed_out, await waiting, partition.low_watermark

    assert asyncio.run(scenario()) == (False, True, 6)


def test_a_fenced_follower_or_lost_leadership_ends_the_wait(tmp_path: Path) -> None:
    partition = leader(tmp_path)
    append(partition, 10)
    partition.update_follower(2, 10, None, log_start_offset=0)
    state = partition.state
    assert state is not None

    async def scenario() -> tuple[bool, bool]:
        partition.advance_log_start(4)
        fenced = asyncio.ensure_future(partition.wait_for_low_watermark(4, 5))
        await asyncio.sleep(0)
        partition.become_leader(state, fenced=[2])  # broker 2 declared dead
        first = await fenced
        partition.become_leader(state)
        partition.advance_log_start(8)
        moved = asyncio.ensure_future(partition.wait_for_low_watermark(8, 5))
        await asyncio.sleep(0)
        partition.become_follower(PartitionState("w", 0, replicas=(1, 2), isr=(1, 2),
                                                 leader=2, leader_epoch=1, partition_epoch=1))
        return first, await moved

    assert asyncio.run(scenario()) == (True, False)


def test_a_follower_follows_the_leaders_log_start_up_to_its_own_end(tmp_path: Path) -> None:
    follower = Partition("w", 0, PartitionLog.open(tmp_path / "f-0", LogConfig()), 2)
    follower.become_follower(PartitionState("w", 0, replicas=(1, 2), isr=(1, 2), leader=1,
                                            leader_epoch=0, partition_epoch=0))
    follower.append_as_follower(build_batch([(None, b"v", (), None)] * 5), 5)
    assert follower.follow_log_start(3) and follower.log.log_start_offset == 3
    assert not follower.follow_log_start(2)  # never backwards
    assert follower.follow_log_start(50) and follower.log.log_start_offset == 5
