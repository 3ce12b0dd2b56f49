"""TransactionCoordinator over real ``__transaction_state`` logs (no broker): the
request flows, fencing, timeouts, and loading what another coordinator wrote."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from slog.core.kafka_errors import ErrorCode
from slog.core.records import iter_decoded_batches
from slog.transactions.coordinator import TransactionCoordinator, TxnConfig
from slog.transactions.metadata import TopicPartition, TransactionError, TransactionState
from slog.transactions.records import decode_value
from tests.groups.local_log import LocalOffsetsLog

S = TransactionState


class RecordingMarkers:
    """Partition leaders that take every marker, or refuse the first ``refusals``."""

    def __init__(self, refusals: int = 0):
        self.written: list[tuple[int, int, bool, frozenset[TopicPartition]]] = []
        self.refusals = refusals
        self.coordinator_epochs: list[int] = []

    async def write_markers(self, producer_id: int, producer_epoch: int, commit: bool,
                            coordinator_epoch: int, partitions: set[TopicPartition]
                            ) -> set[TopicPartition]:
        self.coordinator_epochs.append(coordinator_epoch)
        if self.refusals:
            self.refusals -= 1
            return set(partitions)
        self.written.append((producer_id, producer_epoch, commit, frozenset(partitions)))
        return set()


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def _coordinator(root: Path, markers: RecordingMarkers, clock: Clock,
                 ids: list[int]) -> tuple[TransactionCoordinator, LocalOffsetsLog]:
    log = LocalOffsetsLog(root, partitions=1)
    coordinator = TransactionCoordinator(TxnConfig(partitions=1, max_timeout_ms=60_000), log,
                                         markers, lambda: ids.pop(0), clock)
    return coordinator, log


async def _loaded(coordinator: TransactionCoordinator) -> None:
    coordinator.on_election(0)
    while coordinator.loading:
        await asyncio.sleep(0.001)


async def _settled(coordinator: TransactionCoordinator) -> None:
    while coordinator._tasks:  # markers and Complete* records being written
        await asyncio.sleep(0.001)


async def _open_transaction(c: TransactionCoordinator, timeout_ms: int = 5_000) -> None:
    """Producer 100 at epoch 0 with a transaction open on t-0."""
    assert await c.init_producer_id("tx", timeout_ms, -1, -1) == (100, 0)
    await c.add_partitions("tx", 100, 0, {("t", 0)})


def _code(exc_info: pytest.ExceptionInfo[TransactionError]) -> ErrorCode:
    return exc_info.value.code


def run(tmp_path: Path, scenario: Callable[[TransactionCoordinator, RecordingMarkers, Clock],
                                           Awaitable[None]], refusals: int = 0) -> None:
    markers, clock = RecordingMarkers(refusals), Clock()
    coordinator, log = _coordinator(tmp_path, markers, clock, [100, 200, 300])

    async def main() -> None:
        await _loaded(coordinator)
        await scenario(coordinator, markers, clock)
        coordinator.shutdown()

    with contextlib.closing(log):
        asyncio.run(main())


def test_commit_and_abort(tmp_path: Path) -> None:
    async def scenario(c: TransactionCoordinator, markers: RecordingMarkers,
                       clock: Clock) -> None:
        assert await c.init_producer_id("tx", 10_000, -1, -1) == (100, 0)
        await c.add_partitions("tx", 100, 0, {("t", 0)})
        await c.add_partitions("tx", 100, 0, {("t", 1), ("t", 0)})
        await c.end_transaction("tx", 100, 0, commit=True)
        # Answered at PrepareCommit; a new transaction waits for the markers.
        assert c.transactions["tx"].state is S.PREPARE_COMMIT
        await _settled(c)
        assert c.transactions["tx"].state is S.COMPLETE_COMMIT
        assert markers.written == [(100, 0, True, frozenset({("t", 0), ("t", 1)}))]
        await c.end_transaction("tx", 100, 0, commit=True)  # a retry: answered NONE
        await c.add_partitions("tx", 100, 0, {("t", 2)})
        await c.end_transaction("tx", 100, 0, commit=False)
        await _settled(c)
        assert markers.written[-1] == (100, 0, False, frozenset({("t", 2)}))
        assert c.transactions["tx"].state is S.COMPLETE_ABORT

    run(tmp_path, scenario)


def test_bad_requests_get_kafkas_errors(tmp_path: Path) -> None:
    async def scenario(c: TransactionCoordinator, markers: RecordingMarkers,
                       clock: Clock) -> None:
        with pytest.raises(TransactionError) as raised:
            await c.init_producer_id("tx", 60_001, -1, -1)
        assert _code(raised) is ErrorCode.invalid_transaction_timeout
        with pytest.raises(TransactionError) as raised:
            await c.init_producer_id("", 1000, -1, -1)
        assert _code(raised) is ErrorCode.invalid_request
        await c.init_producer_id("tx", 1000, -1, -1)
        with pytest.raises(TransactionError) as raised:
            await c.end_transaction("tx", 100, 0, commit=True)  # nothing was added
        assert _code(raised) is ErrorCode.invalid_txn_state
        with pytest.raises(TransactionError) as raised:
            await c.add_partitions("tx", 999, 0, {("t", 0)})
        assert _code(raised) is ErrorCode.invalid_producer_id_mapping
        with pytest.raises(TransactionError) as raised:
            await c.add_partitions("unknown", 100, 0, {("t", 0)})
        assert _code(raised) is ErrorCode.invalid_producer_id_mapping
        await c.add_partitions("tx", 100, 0, {("t", 0)})
        await c.end_transaction("tx", 100, 0, commit=False)
        with pytest.raises(TransactionError) as raised:
            await c.end_transaction("tx", 100, 0, commit=True)  # commit after abort
        assert _code(raised) in (ErrorCode.invalid_txn_state, ErrorCode.concurrent_transactions)
        await _settled(c)
        with pytest.raises(TransactionError) as raised:
            await c.end_transaction("tx", 100, 0, commit=True)
        assert _code(raised) is ErrorCode.invalid_txn_state
        assert c.transactions["tx"].state is S.COMPLETE_ABORT

    run(tmp_path, scenario)


def test_a_new_producer_fences_the_old_one(tmp_path: Path) -> None:
    async def scenario(c: TransactionCoordinator, markers: RecordingMarkers,
                       clock: Clock) -> None:
        await _open_transaction(c)
        # A second instance with the same id: the open transaction is aborted at epoch 1.
        with pytest.raises(TransactionError) as raised:
            await c.init_producer_id("tx", 10_000, -1, -1)
        assert _code(raised) is ErrorCode.concurrent_transactions
        await _settled(c)
        assert markers.written == [(100, 1, False, frozenset({("t", 0)}))]
        assert await c.init_producer_id("tx", 10_000, -1, -1) == (100, 2)
        for attempt in (c.add_partitions("tx", 100, 0, {("t", 1)}),
                        c.end_transaction("tx", 100, 0, commit=True)):
            with pytest.raises(TransactionError) as raised:
                await attempt
            assert _code(raised) is ErrorCode.producer_fenced
        # KIP-360: the old producer cannot recover with its stale epoch either.
        with pytest.raises(TransactionError) as raised:
            await c.init_producer_id("tx", 10_000, 100, 0)
        assert _code(raised) is ErrorCode.producer_fenced
        # The current one can: its epoch is bumped.
        assert await c.init_producer_id("tx", 10_000, 100, 2) == (100, 3)

    run(tmp_path, scenario)


def test_timed_out_transactions_are_aborted_and_fenced(tmp_path: Path) -> None:
    async def scenario(c: TransactionCoordinator, markers: RecordingMarkers,
                       clock: Clock) -> None:
        await _open_transaction(c)
        clock.ms += 5_000
        assert await c.abort_timed_out() == 0
        clock.ms += 1
        assert await c.abort_timed_out() == 1
        await _settled(c)
        assert markers.written == [(100, 1, False, frozenset({("t", 0)}))]
        assert c.transactions["tx"].state is S.COMPLETE_ABORT
        with pytest.raises(TransactionError) as raised:
            await c.end_transaction("tx", 100, 0, commit=True)
        assert _code(raised) is ErrorCode.producer_fenced

    run(tmp_path, scenario)


def test_markers_are_retried_until_the_leaders_take_them(tmp_path: Path) -> None:
    async def scenario(c: TransactionCoordinator, markers: RecordingMarkers,
                       clock: Clock) -> None:
        await _open_transaction(c)
        await c.end_transaction("tx", 100, 0, commit=True)
        assert c.transactions["tx"].state is S.PREPARE_COMMIT
        # The next transaction's first AddPartitionsToTxn waits for the markers (two
        # refusals, 0.2 s of retries) and the CompleteCommit record, then goes ahead.
        await c.add_partitions("tx", 100, 0, {("t", 0)})
        assert markers.refusals == 0 and len(markers.written) == 1
        assert c.transactions["tx"].state is S.ONGOING

    run(tmp_path, scenario, refusals=2)


def test_add_partitions_waits_for_a_completion_only_so_long(tmp_path: Path) -> None:
    async def scenario(c: TransactionCoordinator, markers: RecordingMarkers,
                       clock: Clock) -> None:
        await _open_transaction(c)
        await c.end_transaction("tx", 100, 0, commit=True)
        started = asyncio.get_running_loop().time()
        with pytest.raises(TransactionError) as raised:  # 8 refusals: 0.8 s > 0.5 s
            await c.add_partitions("tx", 100, 0, {("t", 0)})
        assert _code(raised) is ErrorCode.concurrent_transactions
        assert asyncio.get_running_loop().time() - started >= 0.45
        assert c.transactions["tx"].state is S.PREPARE_COMMIT
        await _settled(c)
        assert c.transactions["tx"].state is S.COMPLETE_COMMIT
        await c.add_partitions("tx", 100, 0, {("t", 0)})  # nothing to wait for now
        assert c.transactions["tx"].state is S.ONGOING

    run(tmp_path, scenario, refusals=8)


def test_a_held_add_is_written_with_the_completion_and_loads_after_failover(
        tmp_path: Path) -> None:
    markers, clock = RecordingMarkers(refusals=2), Clock()  # markers take 0.2 s
    first, log = _coordinator(tmp_path, markers, clock, [100])

    async def before_failover() -> None:
        await _loaded(first)
        await _open_transaction(first)
        await first.end_transaction("tx", 100, 0, commit=True)
        appended = log.logs[0].log_end_offset
        # Held until the markers are in, then one append of CompleteCommit + Ongoing.
        await first.add_partitions("tx", 100, 0, {("t", 1)})
        meta = first.transactions["tx"]
        assert (meta.state, meta.partitions) == (S.ONGOING, {("t", 1)})
        chunk, _ = log.read(0, appended)
        batches = list(iter_decoded_batches(chunk))
        assert len(batches) == 1
        assert [decode_value(bytes(r.value or b"")).state for r in batches[0][2]] == \
            [S.COMPLETE_COMMIT, S.ONGOING]
        assert markers.written == [(100, 0, True, frozenset({("t", 0)}))]
        first.on_resignation(0)
        first.shutdown()

    second = TransactionCoordinator(TxnConfig(partitions=1), log, markers, lambda: 999, clock)

    async def after_failover() -> None:
        await _loaded(second)
        meta = second.transactions["tx"]
        assert (meta.state, meta.partitions, meta.pending) == (S.ONGOING, {("t", 1)}, None)
        await second.end_transaction("tx", 100, 0, commit=False)
        await _settled(second)
        assert second.transactions["tx"].state is S.COMPLETE_ABORT
        assert markers.written[-1] == (100, 0, False, frozenset({("t", 1)}))
        second.shutdown()

    with contextlib.closing(log):
        asyncio.run(before_failover())
        asyncio.run(after_failover())


def test_a_held_add_of_a_fenced_producer_is_not_written_with_the_completion(
        tmp_path: Path) -> None:
    async def scenario(c: TransactionCoordinator, markers: RecordingMarkers,
                       clock: Clock) -> None:
        await _open_transaction(c)
        await c.end_transaction("tx", 100, 0, commit=True)
        with pytest.raises(TransactionError) as raised:  # another epoch: answered at once
            await c.add_partitions("tx", 100, 1, {("t", 1)})
        assert _code(raised) is ErrorCode.producer_fenced
        await c.add_partitions("tx", 100, 0, {("t", 1)})
        assert c.transactions["tx"].state is S.ONGOING

    run(tmp_path, scenario, refusals=2)


def test_a_new_coordinator_loads_the_state_and_finishes_prepared_transactions(
        tmp_path: Path) -> None:
    first_markers, clock = RecordingMarkers(refusals=10**6), Clock()  # leaders unreachable
    first, log = _coordinator(tmp_path, first_markers, clock, [100, 101])

    async def before_failover() -> None:
        with pytest.raises(TransactionError) as raised:
            await first.init_producer_id("tx", 5_000, -1, -1)
        assert _code(raised) is ErrorCode.not_coordinator  # not elected yet
        await _loaded(first)
        await first.init_producer_id("tx", 5_000, -1, -1)
        await first.init_producer_id("idle", 5_000, -1, -1)
        await first.add_partitions("tx", 100, 0, {("t", 0)})
        await first.end_transaction("tx", 100, 0, commit=True)
        first.on_resignation(0)
        assert not first.transactions
        first.shutdown()

    markers = RecordingMarkers()
    log.epoch = 1  # the new leader's epoch: the markers carry it
    second = TransactionCoordinator(TxnConfig(partitions=1), log, markers, lambda: 999, clock)

    async def after_failover() -> None:
        second.on_election(0)
        with pytest.raises(TransactionError) as raised:
            await second.init_producer_id("tx", 5_000, -1, -1)
        assert _code(raised) is ErrorCode.coordinator_load_in_progress
        await _loaded(second)
        await _settled(second)
        assert markers.written == [(100, 0, True, frozenset({("t", 0)}))]
        assert markers.coordinator_epochs == [1]
        assert second.transactions["tx"].state is S.COMPLETE_COMMIT
        assert second.transactions["idle"].state is S.EMPTY
        second.shutdown()

    with contextlib.closing(log):
        asyncio.run(before_failover())
        asyncio.run(after_failover())


def test_idle_transactional_ids_expire(tmp_path: Path) -> None:
    async def scenario(c: TransactionCoordinator, markers: RecordingMarkers,
                       clock: Clock) -> None:
        await _open_transaction(c)
        await c.init_producer_id("idle", 5_000, -1, -1)
        clock.ms += c.config.id_expiration_ms + 1
        c.transactions["tx"].timeout_ms = 10**12  # open, not timed out: never expires
        assert await c.expire_transactional_ids() == 1
        assert set(c.transactions) == {"tx"}
        # The tombstone is in the log: a reload does not bring "idle" back.
        c.on_resignation(0)
        await _loaded(c)
        assert set(c.transactions) == {"tx"}
        # A new producer with the expired id starts over with a new producer id.
        assert await c.init_producer_id("idle", 5_000, -1, -1) == (300, 0)

    run(tmp_path, scenario)
