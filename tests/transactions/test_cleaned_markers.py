"""The cleaner removes COMMIT/ABORT markers once no data of their transaction is left and
their delete horizon has passed (issue 15): the rule on its own (MarkerFilter, no I/O),
then on real PartitionLogs and Partitions: snapshots, .txnindex files and the transaction
state a reload rebuilds (the broker-level test is in test_txn_restart.py)."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pytest

from slog.core.aborted_txn_index import TransactionIndex
from slog.core.batch import BatchHeader, parse_header
from slog.core.cleaner import LogCleaner, MarkerFilter
from slog.core.log import PartitionLog
from slog.core.log_config import LogConfig
from slog.core.records import BatchBuilder, build_batch, iter_decoded_batches
from slog.core.segment import LogSegment
from slog.core.transaction_index import AbortedBatches, AbortedTransaction, build_marker
from slog.replication.partition import Partition
from tests.transactions.test_txn_state_recovery import _append, _batch, _open

RETENTION_MS = 60_000
CONFIG = LogConfig(segment_bytes=300, preallocate=False, cleanup_policy="compact",
                   write_caching=True, delete_retention_ms=RETENTION_MS)


def _header(data: bytes, offset: int) -> BatchHeader:
    return parse_header(data, 0)._replace(base_offset=offset)


def _data(producer_id: int, offset: int) -> BatchHeader:
    builder = BatchBuilder(producer_id=producer_id, producer_epoch=0, base_sequence=0,
                           is_transactional=True)
    builder.append(b"k", b"v")
    return _header(builder.build(), offset)


def _marker(producer_id: int, offset: int) -> BatchHeader:
    return _header(build_marker(producer_id, 0, True, 0, 1), offset)


def test_a_marker_stays_while_its_transaction_kept_data() -> None:
    stamped = MarkerFilter({}, now_ms=0, retention_ms=10)
    stamped.data_batch(_data(1, 0), kept=True)
    stamped.data_batch(_data(2, 1), kept=False)
    assert stamped.keep_marker(_marker(1, 2))  # its data stays: never stamped
    assert stamped.keep_marker(_marker(2, 3))  # nothing left: stamped, not yet removed
    assert stamped.stamped == {3: 10}
    # The next transaction of producer 1 kept nothing: its marker is no longer held.
    assert stamped.keep_marker(_marker(1, 5)) and stamped.stamped == {3: 10, 5: 10}


@pytest.mark.parametrize(("now_ms", "kept"), [(9, True), (10, False)])
def test_a_stamped_marker_goes_at_its_horizon(now_ms: int, kept: bool) -> None:
    markers = MarkerFilter({3: 10}, now_ms=now_ms, retention_ms=10)
    markers.data_batch(_data(2, 1), kept=False)
    assert markers.keep_marker(_marker(2, 3)) is kept
    assert markers.stamped == ({3: 10} if kept else {})
    assert markers.removed_count == (0 if kept else 1)


def test_a_held_pass_removes_no_marker() -> None:
    # An earlier rewrite of this pass was not swapped in: its records may remain.
    markers = MarkerFilter({3: 0}, now_ms=5, retention_ms=10)
    markers.data_batch(_data(2, 1), kept=False)
    markers.hold()
    assert markers.keep_marker(_marker(2, 3)) and markers.stamped == {3: 0}


def test_a_stamp_is_dropped_once_the_transaction_has_data_again() -> None:
    # A stamp names an offset; if that marker's transaction kept data after all (the
    # aborted set was not known), the marker stays and the stamp is forgotten.
    markers = MarkerFilter({3: 0}, now_ms=5, retention_ms=10)
    markers.data_batch(_data(2, 1), kept=True)
    assert markers.keep_marker(_marker(2, 3)) and markers.stamped == {}


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def _markers(log: PartitionLog) -> list[int]:
    data = log.read(log.log_start_offset, 1 << 20).tobytes()
    return [h.base_offset for _, h, _ in iter_decoded_batches(data, allow_partial_tail=False)
            if h.is_control]


def _values(log: PartitionLog) -> list[bytes | None]:
    data = log.read(log.log_start_offset, 1 << 20).tobytes()
    return [r.value for _, h, records in iter_decoded_batches(data, allow_partial_tail=False)
            if not h.is_control for r in records]


def _filler(partition: Partition, count: int, tag: bytes) -> None:
    for i in range(count):
        _append(partition, build_batch([(tag + b"%d" % i, b"x" * 40, (), 1)]))


def _written(directory: Path) -> dict[str, int]:
    """Three finished transactions and one open: A (producer 10) committed a key
    superseded later, B (11) committed a key that stays, C (12) aborted across a
    roll (so a snapshot is taken while it is open)."""
    partition = _open(directory, CONFIG)
    at = {}
    _append(partition, _batch(10, 0, b"a", key=b"ka"))
    at["a_marker"] = _append(partition, build_marker(10, 0, True, 0, 1))
    _append(partition, _batch(11, 0, b"b", key=b"kb"))
    at["b_marker"] = _append(partition, build_marker(11, 0, True, 0, 1))
    at["c_first"] = _append(partition, _batch(12, 0, b"c1", key=b"kc"))
    _filler(partition, 4, b"f")
    _append(partition, _batch(12, 1, b"c2", key=b"kc"))
    at["c_marker"] = _append(partition, build_marker(12, 0, False, 0, 1))
    _append(partition, build_batch([(b"ka", b"a2", (), 1)]))  # supersedes A's record
    _filler(partition, 6, b"g")
    at["open"] = _append(partition, _batch(13, 0, b"open", key=b"kd"))
    _filler(partition, 6, b"h")
    partition.log.close()
    return at


def _clean(partition: Partition, cleaner: LogCleaner) -> list[AbortedTransaction]:
    """One pass over the partition; the aborted transactions it still knows."""
    cleaner.clean(partition.log, partition.last_stable_offset, force=True,
                  aborted=AbortedBatches(partition.transactions.aborted),
                  forget_aborted=partition.transactions.forget_markers)
    return list(partition.transactions.aborted)


class _Stamped(NamedTuple):
    directory: Path
    at: dict[str, int]
    clock: _Clock
    cleaner: LogCleaner
    partition: Partition
    aborted: list[AbortedTransaction]  # what the partition knew after the pass


def _stamped(tmp_path: Path) -> _Stamped:
    """The workload written, reopened and cleaned once: A's and C's markers stamped."""
    directory = tmp_path / "c-0"
    at = _written(directory)
    clock = _Clock()
    cleaner = LogCleaner(time=clock)
    partition = _open(directory, CONFIG, clean_shutdown=True)
    return _Stamped(directory, at, clock, cleaner, partition, _clean(partition, cleaner))


def _assert_transactions_end(partition: Partition, at: dict[str, int]) -> None:
    """Only the open transaction is open, no aborted one is known (its records are gone)."""
    assert partition.transactions.ongoing == {13: at["open"]}
    assert partition.last_stable_offset == at["open"]
    assert partition.transactions.aborted == []
    partition.log.close()


def test_markers_go_past_the_horizon_with_their_snapshots_and_txnindex(tmp_path: Path
                                                                        ) -> None:
    directory, at, clock, cleaner, partition, stamped = _stamped(tmp_path)
    assert stamped == [AbortedTransaction(12, at["c_first"], at["c_marker"])]
    assert _markers(partition.log) == [at["a_marker"], at["b_marker"], at["c_marker"]]
    # The danger the snapshot deletion is for: one taken while C was open.
    danger = max(o for o in partition.log.snapshot_offsets
                 if at["c_first"] < o <= at["c_marker"])

    clock.now += RETENTION_MS / 1000 - 1
    assert _clean(partition, cleaner) == stamped
    assert _markers(partition.log) == [at["a_marker"], at["b_marker"], at["c_marker"]]

    clock.now += 1
    assert _clean(partition, cleaner) == []  # forgotten as the marker went
    log = partition.log
    assert _markers(log) == [at["b_marker"]]
    assert b"b" in _values(log) and b"c1" not in _values(log) and b"open" in _values(log)
    assert all(o > at["c_marker"] for o in log.snapshot_offsets)
    assert all(TransactionIndex(p).entries() == [] for p in directory.glob("*.txnindex"))
    assert danger in [s.base_offset for s in log.segments]
    log.close()
    # Reloads: from the newest snapshot; after a crash whose recovery rescans from
    # the segment at ``danger`` (a load replays from the newest snapshot at or below
    # it: it was that one); with no snapshot at all.
    for mode in ("clean", "crash", "no snapshot"):
        if mode == "no snapshot":
            for path in directory.glob("*.snapshot"):
                path.unlink()
        reopened = _open(directory, CONFIG, clean_shutdown=mode != "crash",
                         recovery_point=danger)
        assert _markers(reopened.log) == [at["b_marker"]]
        _assert_transactions_end(reopened, at)


def test_stamps_are_not_carried_to_another_log_in_the_same_directory(tmp_path: Path
                                                                     ) -> None:
    # A topic deleted and created again reuses its directory, not its markers.
    directory, at, clock, cleaner, partition, _ = _stamped(tmp_path)
    partition.log.close()
    clock.now += RETENTION_MS / 1000
    reopened = _open(directory, CONFIG, clean_shutdown=True)
    _clean(reopened, cleaner)  # stamps again
    assert _markers(reopened.log) == [at["a_marker"], at["b_marker"], at["c_marker"]]
    reopened.log.close()


def test_a_crash_before_the_swap_leaves_a_harmless_marker(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The snapshots, the .txnindex entry and the partition's memory go before the
    swap: a crash then leaves C's marker without its entry, whose records are gone."""
    directory, at, clock, cleaner, partition, _ = _stamped(tmp_path)
    clock.now += RETENTION_MS / 1000
    replace_segment = PartitionLog.replace_segment

    def crash(log: PartitionLog, segment: LogSegment, cleaned: Path | None) -> bool:
        if segment.base_offset <= at["c_marker"] < segment.next_offset:
            raise OSError("crashed before the swap")
        return replace_segment(log, segment, cleaned)

    monkeypatch.setattr(PartitionLog, "replace_segment", crash)
    with pytest.raises(OSError, match="before the swap"):
        _clean(partition, cleaner)
    monkeypatch.undo()
    partition.log.abandon()
    assert all(TransactionIndex(p).entries() == [] for p in directory.glob("*.txnindex"))
    reopened = _open(directory, CONFIG)  # unclean: replays what recovery rescanned
    assert at["c_marker"] in _markers(reopened.log)
    assert at["a_marker"] not in _markers(reopened.log)
    _assert_transactions_end(reopened, at)
