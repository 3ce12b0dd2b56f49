"""Periodic work driven by what is due: the DueSchedule, and the ISR and flush.ms
jobs built on it (no brokers: real logs in a temporary directory)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from slog.core.config import BrokerConfig
from slog.core.due import DueSchedule, Wakeup, WakingDueSchedule
from slog.core.log_config import LogConfig
from slog.core.log_manager import LogManager
from slog.core.metadata import PartitionState
from slog.replication.partition import Partition
from slog.replication.replica_manager import IsrProposal, ReplicaManager
from tests.fake_clock import FakeClock
from tests.unit.batchgen import make_sized_batch

LAG_MS = 10_000

# ==================================================================== DueSchedule


def test_pops_only_what_is_due_earliest_first() -> None:
    due: DueSchedule[str] = DueSchedule()
    due.schedule("b", 20)
    due.schedule("a", 10)
    due.schedule("c", 30)
    assert due.pop_due(5) == []
    assert due.pop_due(20) == ["a", "b"]
    assert len(due) == 1 and "c" in due and "a" not in due
    assert due.next_deadline() == 30


def test_a_key_keeps_its_earliest_deadline() -> None:
    due: DueSchedule[str] = DueSchedule()
    due.schedule("k", 50)
    due.schedule("k", 80)  # later: the sooner check stays
    assert due.deadline("k") == 50
    due.schedule("k", 10)  # sooner: replaces it
    assert due.pop_due(10) == ["k"]
    assert due.pop_due(100) == []  # the superseded entries are skipped, not popped twice


def test_cancel_and_reschedule() -> None:
    due: DueSchedule[str] = DueSchedule()
    due.schedule("k", 10)
    due.cancel("k")
    assert due.next_deadline() is None and due.pop_due(100) == []
    due.schedule("k", 10)  # same time as the cancelled entry: still popped once
    assert due.pop_due(100) == ["k"]


def test_heap_stays_bounded_under_constant_rescheduling() -> None:
    due: DueSchedule[int] = DueSchedule()
    for step in range(10_000):
        due.schedule(step % 10, 1_000_000 - step)  # always sooner: a new heap entry
    assert len(due) == 10
    assert len(due._heap) <= 4 * 10 + 64
    assert sorted(due.pop_due(10**9)) == list(range(10))


def test_unhashable_comparison_not_needed() -> None:
    due: DueSchedule[object] = DueSchedule()
    a, b = object(), object()  # not orderable: ties must not compare keys
    due.schedule(a, 1)
    due.schedule(b, 1)
    assert set(due.pop_due(1)) == {a, b}


# ==================================================================== ISR


@pytest.fixture
def replicas(tmp_path: Path) -> ReplicaManager:
    logs = LogManager(tmp_path / "logs", LogConfig())
    logs.load()
    return ReplicaManager(BrokerConfig(1, tmp_path), logs)


def lead(manager: ReplicaManager, number: int, isr: tuple[int, ...],
         replicas: tuple[int, ...] = (1, 2, 3)) -> Partition:
    """Make broker 1 the leader of t-<number>, as apply_image would."""
    partition = Partition("t", number, manager.log_manager.get_or_create("t", number), 1)
    partition.isr_watch = manager.check_isr_soon
    manager.partitions[("t", number)] = partition
    partition.become_leader(PartitionState("t", number, replicas, isr, leader=1,
                                           leader_epoch=1, partition_epoch=1))
    return partition


def now_ms() -> float:
    return time.monotonic() * 1000


def test_in_sync_leaders_are_looked_at_once_per_lag_deadline(replicas: ReplicaManager) -> None:
    partitions = [lead(replicas, n, (1, 2, 3)) for n in range(20)]
    assert replicas.due_isr_changes(LAG_MS, now_ms()) == []  # new leaders: looked at once
    assert len(replicas._isr_due) == 20
    for partition in partitions:
        deadline = replicas._isr_due.deadline(("t", partition.partition))
        caught_up = min(f.last_caught_up_ms for f in partition.followers.values())
        assert deadline == pytest.approx(caught_up + LAG_MS, abs=5)
    # A tick before the earliest deadline pops nothing: no partition is looked at.
    earliest = replicas._isr_due.next_deadline()
    assert earliest is not None
    assert replicas._isr_due.pop_due(earliest - 1) == []


def test_a_follower_past_its_lag_deadline_is_shrunk(replicas: ReplicaManager) -> None:
    partition = lead(replicas, 0, (1, 2, 3))
    replicas.due_isr_changes(LAG_MS, now_ms())
    follower = partition.followers[3]
    follower.last_caught_up_ms -= LAG_MS + 50  # broker 3 stopped fetching long ago
    partition.update_follower(2, 0)  # broker 2 keeps fetching (and stays caught up)
    deadline = replicas._isr_due.deadline(("t", 0))
    assert deadline is not None
    assert replicas.due_isr_changes(LAG_MS, deadline) == [(partition, (1, 2))]


class Session:
    """A follower's fetch session as the leader sees it (FetchWatcher)."""

    wants_log_end = True

    def __init__(self, last_fetch_ms: float):
        self.last_fetch_ms = last_fetch_ms

    def partition_changed(self, key: tuple[str, int] | None, wake: bool = True) -> None:
        pass


def idle_in_sessions(replicas: ReplicaManager) -> tuple[Partition, Session, float]:
    """A leader whose followers sit at its LEO, fetching in one session, with a
    last_caught_up_ms gone stale (an incremental session names no idle partition)."""
    partition = lead(replicas, 0, (1, 2, 3))
    replicas.due_isr_changes(LAG_MS, now_ms())
    fetched_at = now_ms()
    session = Session(fetched_at)
    for follower in partition.followers.values():
        follower.log_end_offset = partition.log.log_end_offset
        follower.last_caught_up_ms = fetched_at - 10 * LAG_MS
        follower.session = session
    replicas.check_isr_soon(partition)
    return partition, session, fetched_at


def test_idle_leaders_park_on_their_followers_sessions(replicas: ReplicaManager) -> None:
    partition, session, fetched_at = idle_in_sessions(replicas)
    assert replicas.due_isr_changes(LAG_MS, fetched_at) == []  # caught up as of the fetch
    assert len(replicas._isr_due) == 0 and partition.isr_parked  # nothing to look at
    # ...but the timer wakes when the session could have gone quiet for the allowed lag
    assert replicas._parked_deadline_ms(LAG_MS) == pytest.approx(fetched_at + LAG_MS, abs=5)
    assert replicas.due_isr_changes(LAG_MS, now_ms()) == []
    # the session goes quiet for the allowed lag: its followers are late everywhere
    session.last_fetch_ms -= LAG_MS + 50
    assert replicas.due_isr_changes(LAG_MS, now_ms()) == [(partition, (1,))]


def test_an_append_wakes_a_parked_leader(replicas: ReplicaManager) -> None:
    partition, session, fetched_at = idle_in_sessions(replicas)
    replicas.due_isr_changes(LAG_MS, fetched_at)
    partition.append_as_leader(make_sized_batch(0, 100), required_acks=1,
                               min_insync_replicas=1)
    assert not partition.isr_parked and ("t", 0) in replicas._isr_due
    # Behind by that append only: caught up until it, not late since long ago.
    assert replicas.due_isr_changes(LAG_MS, now_ms()) == []
    assert replicas._isr_due.deadline(("t", 0)) == pytest.approx(
        min(session.last_fetch_ms, now_ms()) + LAG_MS, abs=50)


def test_a_caught_up_follower_is_added_at_once(replicas: ReplicaManager) -> None:
    partition = lead(replicas, 0, (1, 2))
    replicas.due_isr_changes(LAG_MS, now_ms())
    partition.log.append(make_sized_batch(0, 100))
    partition.update_follower(2, partition.log.log_end_offset)
    assert replicas.due_isr_changes(LAG_MS, now_ms()) == []  # an ISR member: no wake-up
    partition.update_follower(3, partition.log.log_end_offset)  # out of the ISR: wakes it
    assert replicas.due_isr_changes(LAG_MS, now_ms()) == [(partition, (1, 2, 3))]


def test_a_tick_s_changes_go_in_one_request(replicas: ReplicaManager) -> None:
    first, second = lead(replicas, 0, (1, 2)), lead(replicas, 1, (1, 2))
    calls: list[list[IsrProposal]] = []

    async def alter(proposals: Sequence[IsrProposal]) -> list[Exception | None]:
        calls.append(list(proposals))
        assert all(p.isr_change_in_flight for p, _ in proposals)
        return [None, ConnectionError("refused")]

    proposals = [(first, (1, 2, 3)), (second, (1, 2, 3))]
    asyncio.run(replicas._propose_isrs(alter, proposals))
    assert calls == [proposals]
    assert not first.isr_change_in_flight and not second.isr_change_in_flight
    assert first.pending_additions == {3}  # accepted: counts for the HW until applied
    assert second.pending_additions == frozenset()  # refused: proposed again next tick
    assert ("t", 0) in replicas._isr_due and ("t", 1) in replicas._isr_due


def test_followers_are_not_looked_at(replicas: ReplicaManager) -> None:
    partition = lead(replicas, 0, (1, 2, 3))
    partition.become_follower(PartitionState("t", 0, (1, 2, 3), (1, 2, 3), leader=2,
                                             leader_epoch=2, partition_epoch=2))
    assert replicas.due_isr_changes(LAG_MS, now_ms()) == []
    assert len(replicas._isr_due) == 0


# ==================================================================== flush.ms


def test_flush_ms_looks_only_at_logs_with_a_deadline(tmp_path: Path) -> None:
    clock = FakeClock()
    logs = LogManager(tmp_path / "logs", LogConfig(), time=clock)
    logs.load()
    for number in range(50):  # no flush.ms (the default): never scheduled
        logs.get_or_create("quiet", number).append(make_sized_batch(0, 100))
    assert len(logs._flush_due) == 0
    timed = logs.get_or_create("timed", 0, LogConfig(flush_ms=2000))
    timed.append(make_sized_batch(0, 100))
    assert len(logs._flush_due) == 1 and timed.recovery_point == 0
    clock.now += 1.0
    logs.flush_dirty_logs()
    assert timed.recovery_point == 0  # not due yet
    clock.now += 1.5
    logs.flush_dirty_logs()
    assert timed.recovery_point == 1
    assert len(logs._flush_due) == 0  # nothing unflushed: off the schedule
    timed.append(make_sized_batch(0, 100))  # new data: a new deadline
    assert len(logs._flush_due) == 1
    logs.shutdown()


def test_setting_flush_ms_later_schedules_the_unflushed_log(tmp_path: Path) -> None:
    clock = FakeClock()
    logs = LogManager(tmp_path / "logs", LogConfig(), time=clock)
    logs.load()
    plog = logs.get_or_create("t", 0)
    plog.append(make_sized_batch(0, 100))
    plog.update_config(LogConfig(flush_ms=0))
    logs.flush_dirty_logs()
    assert plog.recovery_point == 1
    logs.shutdown()


# ==================================================================== the waking timer


def test_the_timer_sleeps_until_the_earliest_deadline() -> None:
    clock = time.monotonic

    async def scenario() -> list[float]:
        due: WakingDueSchedule[str] = WakingDueSchedule(lambda: clock() * 1000, 0.01, 0.5)
        slept = []
        started = clock()
        await due.sleep_until_due()  # nothing due: the idle wake-up
        slept.append(clock() - started)
        due.schedule("a", clock() * 1000 + 100)
        started = clock()
        await due.sleep_until_due()  # until "a"
        slept.append(clock() - started)
        assert due.pop_due(clock() * 1000) == ["a"]
        started = clock()
        await due.sleep_until_due(also_at=clock() * 1000 + 100)  # a deadline kept elsewhere
        slept.append(clock() - started)

        async def poke() -> None:
            await asyncio.sleep(0.05)
            due.schedule("b", 0.0)  # due at once: wakes the sleeper

        due.schedule("c", clock() * 1000 + 10_000)
        started = clock()
        await asyncio.gather(due.sleep_until_due(), poke())
        slept.append(clock() - started)
        return slept

    idle, until_a, until_also, poked = asyncio.run(scenario())
    assert 0.45 <= idle < 2.0
    assert 0.09 <= until_a < 0.45
    assert 0.09 <= until_also < 0.45
    assert 0.05 <= poked < 0.45


def test_a_wakeup_ends_a_sleep_and_keeps_a_set_made_during_the_work() -> None:
    async def scenario() -> tuple[bool, bool, bool, float]:
        wakeup = Wakeup()
        timed_out = await wakeup.sleep(0.05)  # nobody sets it: a timeout
        asyncio.get_running_loop().call_later(0.05, wakeup.set)
        started = time.monotonic()
        woken = await wakeup.sleep(10.0)
        waited = time.monotonic() - started
        wakeup.set()  # set while the loop works: the next sleep ends at once
        again = await wakeup.sleep(10.0)
        return timed_out, woken, again, waited

    timed_out, woken, again, waited = asyncio.run(scenario())
    assert (timed_out, woken, again) == (False, True, True)
    assert waited < 5.0
