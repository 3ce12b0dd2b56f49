"""Fetch sessions (KIP-227) without I/O: the broker's cache and the fetcher's handler."""

from __future__ import annotations

import asyncio
import random
from types import SimpleNamespace

import pytest

from slog.protocol.errors import ErrorCode
from slog.protocol.fetch_session import FetchSessionHandler
from slog.replication.fetch_sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    FetchSessionCache,
    SessionError,
    next_epoch,
)
from tests.fake_clock import FakeClock


def part(index: int, offset: int = 0, epoch: int = 0, max_bytes: int = 1024) -> SimpleNamespace:
    return SimpleNamespace(partition=index, fetch_offset=offset, current_leader_epoch=epoch,
                           log_start_offset=-1, partition_max_bytes=max_bytes)


def cache(slots: int = 10, clock: FakeClock | None = None) -> FetchSessionCache:
    return FetchSessionCache(slots, clock=clock or FakeClock(1_000_000.0), rng=random.Random(7))


class FakePartition:
    """What a session needs of a Partition: watch/unwatch (the real one calls back)."""

    def __init__(self, key: tuple[str, int]):
        self.key = key
        self.watchers: set = set()

    def watch(self, watcher) -> None:
        self.watchers.add(watcher)

    def unwatch(self, watcher) -> None:
        self.watchers.discard(watcher)

    def change(self) -> None:
        for watcher in list(self.watchers):
            watcher.partition_changed(self.key)


def test_next_epoch_wraps_to_one() -> None:
    assert next_epoch(0) == 1
    assert next_epoch(41) == 42
    assert next_epoch(2**31 - 1) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_sessionless_full_fetch_is_not_cached() -> None:
    c = cache()
    opened = c.open(0, FINAL_EPOCH, False, [("t", [part(0), part(1)])], [])
    assert opened.full and not opened.session.cached
    assert opened.named == [("t", 0), ("t", 1)]
    assert len(c) == 0


def test_full_fetch_opens_a_session_and_incremental_updates_it() -> None:
    c = cache()
    opened = c.open(0, INITIAL_EPOCH, False, [("t", [part(0), part(1)])], [])
    session = opened.session
    assert session.cached and session.epoch == 1 and len(c) == 1
    assert session.dirty == {("t", 0), ("t", 1)}  # a full fetch reads everything
    session.take_dirty()
    # Incremental: partition 1 moved, partition 2 is new, partition 0 is forgotten.
    again = c.open(session.id, 1, False, [("t", [part(1, offset=5), part(2)])], [("t", [0])])
    assert again.session is session and not again.full
    assert again.named == [("t", 1), ("t", 2)]
    assert list(session.partitions) == [("t", 1), ("t", 2)]
    assert session.partitions[("t", 1)].fetch_offset == 5
    assert session.dirty == {("t", 1), ("t", 2)}
    assert session.epoch == 2


def test_unknown_session_and_wrong_epoch_are_kafkas_errors() -> None:
    c = cache()
    session = c.open(0, INITIAL_EPOCH, False, [("t", [part(0)])], []).session
    with pytest.raises(SessionError) as not_found:
        c.open(session.id + 1, 1, False, [], [])
    assert not_found.value.code == ErrorCode.fetch_session_id_not_found
    with pytest.raises(SessionError) as stale:
        c.open(session.id, 5, False, [], [])
    assert stale.value.code == ErrorCode.invalid_fetch_session_epoch
    assert c.open(session.id, 1, False, [], []).session is session  # still usable


def test_final_epoch_closes_and_initial_epoch_replaces() -> None:
    c = cache()
    first = c.open(0, INITIAL_EPOCH, False, [("t", [part(0)])], []).session
    p = FakePartition(("t", 0))
    first.watch(("t", 0), p)
    second = c.open(first.id, INITIAL_EPOCH, False, [("t", [part(0)])], []).session
    assert second.id != first.id and list(c.sessions) == [second.id]
    assert first not in p.watchers  # a closed session stops watching
    closing = c.open(second.id, FINAL_EPOCH, False, [("t", [part(0)])], [])
    assert closing.full and not closing.session.cached and len(c) == 0


def test_a_follower_cannot_use_a_consumers_session() -> None:
    c = cache()
    session = c.open(0, INITIAL_EPOCH, False, [("t", [part(0)])], []).session
    with pytest.raises(SessionError):
        c.open(session.id, 1, True, [], [])


def test_full_cache_evicts_a_stale_session_first() -> None:
    clock = FakeClock(1_000_000.0)
    c = cache(slots=2, clock=clock)
    old = c.open(0, INITIAL_EPOCH, True, [("t", [part(0)])], []).session
    clock.now += 1000
    busy = c.open(0, INITIAL_EPOCH, True, [("t", [part(1)])], []).session
    clock.now += c.eviction_ms  # old: idle past the eviction time; busy: not quite
    new = c.open(0, INITIAL_EPOCH, False, [("t", [part(2)])], []).session
    assert new.cached and set(c.sessions) == {busy.id, new.id}
    assert old.id not in c.sessions and c.evictions == 1


def test_full_cache_values_followers_then_bigger_sessions() -> None:
    c = cache(slots=2)
    small = c.open(0, INITIAL_EPOCH, False, [("t", [part(0)])], []).session
    big = c.open(0, INITIAL_EPOCH, False, [("t", [part(0), part(1), part(2)])], []).session
    # A consumer no bigger than the smallest: no session, it fetches sessionless.
    equal = c.open(0, INITIAL_EPOCH, False, [("u", [part(0)])], []).session
    assert not equal.cached and set(c.sessions) == {small.id, big.id}
    # A bigger consumer takes the smallest consumer's slot.
    bigger = c.open(0, INITIAL_EPOCH, False, [("u", [part(0), part(1)])], []).session
    assert bigger.cached and set(c.sessions) == {big.id, bigger.id}
    # A follower beats any consumer; followers are never evicted by size.
    f1 = c.open(0, INITIAL_EPOCH, True, [("v", [part(0)])], []).session
    f2 = c.open(0, INITIAL_EPOCH, True, [("v", [part(1)])], []).session
    assert set(c.sessions) == {f1.id, f2.id}
    f3 = c.open(0, INITIAL_EPOCH, True, [("v", [part(0), part(1), part(2)])], []).session
    assert not f3.cached and set(c.sessions) == {f1.id, f2.id}


def test_zero_slots_turns_sessions_off() -> None:
    c = cache(slots=0)
    opened = c.open(0, INITIAL_EPOCH, True, [("t", [part(0)])], [])
    assert opened.full and not opened.session.cached


def test_watched_partition_marks_dirty_and_wakes_a_parked_fetch() -> None:
    c = cache()
    session = c.open(0, INITIAL_EPOCH, True, [("t", [part(0), part(1)])], []).session
    session.take_dirty()
    p0, p1 = FakePartition(("t", 0)), FakePartition(("t", 1))
    session.watch(("t", 0), p0)
    session.watch(("t", 1), p1)

    async def park_then_change() -> float:
        loop = asyncio.get_running_loop()
        start = loop.time()
        loop.call_later(0.05, p1.change)
        await session.wait_for_change(5.0)
        return loop.time() - start

    assert asyncio.run(park_then_change()) < 2.0
    assert session.take_dirty() == {("t", 1)}  # only the partition that changed
    session.forget(("t", 1))
    assert session not in p1.watchers and session in p0.watchers


def test_parked_fetch_times_out_without_changes() -> None:
    session = cache().open(0, INITIAL_EPOCH, False, [("t", [part(0)])], []).session
    session.take_dirty()
    asyncio.run(session.wait_for_change(0.05))
    assert not session.dirty


# -- the fetcher's side -------------------------------------------------------------------
def entry(offset: int, epoch: int = 0) -> dict:
    return {"current_leader_epoch": epoch, "fetch_offset": offset, "last_fetched_epoch": -1,
            "log_start_offset": -1, "partition_max_bytes": 1024}


def names(body: dict) -> set[tuple[str, int]]:
    return {(t["topic"], p["partition"]) for t in body["topics"] for p in t["partitions"]}


def forgotten(body: dict) -> set[tuple[str, int]]:
    return {(t["topic"], p) for t in body["forgotten_topics_data"] for p in t["partitions"]}


def test_handler_sends_full_then_only_changes() -> None:
    h = FetchSessionHandler()
    first = h.build({("t", 0): entry(0), ("t", 1): entry(0)})
    assert (first["session_id"], first["session_epoch"]) == (0, 0)
    assert names(first) == {("t", 0), ("t", 1)}
    assert h.handle_response(0, 77)
    idle = h.build({("t", 0): entry(0), ("t", 1): entry(0)})
    assert (idle["session_id"], idle["session_epoch"]) == (77, 1)
    assert names(idle) == set() and forgotten(idle) == set()
    assert h.handle_response(0, 77)
    moved = h.build({("t", 0): entry(3), ("u", 0): entry(0)})
    assert moved["session_epoch"] == 2
    assert names(moved) == {("t", 0), ("u", 0)} and forgotten(moved) == {("t", 1)}


def test_handler_starts_over_after_session_errors() -> None:
    h = FetchSessionHandler()
    h.build({("t", 0): entry(0)})
    h.handle_response(0, 77)
    h.build({("t", 0): entry(0)})
    assert not h.handle_response(int(ErrorCode.invalid_fetch_session_epoch), 0)
    retry = h.build({("t", 0): entry(0)})
    # A full request that also closes the broken session on the broker.
    assert (retry["session_id"], retry["session_epoch"]) == (77, 0)
    assert names(retry) == {("t", 0)}
    assert not h.handle_response(int(ErrorCode.fetch_session_id_not_found), 0)
    assert h.build({("t", 0): entry(0)})["session_id"] == 0


def test_handler_without_a_session_keeps_sending_full_requests() -> None:
    h = FetchSessionHandler()
    h.build({("t", 0): entry(0)})
    assert h.handle_response(0, 0)  # the broker had no room
    again = h.build({("t", 0): entry(0)})
    assert (again["session_id"], again["session_epoch"]) == (0, 0)
    assert names(again) == {("t", 0)}


def test_handler_names_a_partition_again_after_an_error() -> None:
    # A partition the broker answered with an error may be gone from its session
    # (deleted and created again meanwhile): its unchanged entry must be sent again.
    h = FetchSessionHandler()
    h.build({("t", 0): entry(0), ("t", 1): entry(0)})
    assert h.handle_response(0, 77)
    h.resend(("t", 0))
    again = h.build()
    assert names(again) == {("t", 0)} and forgotten(again) == set()
    assert h.handle_response(0, 77)
    assert names(h.build()) == set()
