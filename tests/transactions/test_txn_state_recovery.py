"""Loading a partition's transaction state from producer-state snapshots and .txnindex
files instead of replaying its whole log: clean and unclean reopen, truncation across
a snapshot, retention, a cleaned segment, damaged files (real PartitionLogs and
Partitions on disk; the broker-level kill -9 test is in test_txn_restart.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from slog.core.batch import parse_header
from slog.core.cleaner import LogCleaner
from slog.core.log import FetchSlice, PartitionLog
from slog.core.log_config import LogConfig
from slog.core.metadata import PartitionState
from slog.core.producer_snapshot import snapshot_path
from slog.core.producer_state import SequenceCheck
from slog.core.records import BatchBuilder, build_batch
from slog.core.transaction_index import AbortedBatches, AbortedTransaction, build_marker
from slog.replication.partition import Partition

# Small segments: every few batches roll, and every roll writes a snapshot.
CONFIG = LogConfig(segment_bytes=400, preallocate=False, write_caching=True)


class _RecordedLog(PartitionLog):
    """A real log that notes where each read starts: a rebuild of the producer state
    reads the batches it replays, from the snapshot it loaded (or the log start)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reads: list[int] = []

    def read(self, offset: int, max_bytes: int, **kwargs: Any) -> FetchSlice:
        self.reads.append(offset)
        return super().read(offset, max_bytes, **kwargs)


def _replayed_from(partition: Partition) -> int | None:
    """Where the last rebuild began replaying batches; None if it read none."""
    assert isinstance(partition.log, _RecordedLog)
    return partition.log.reads[0] if partition.log.reads else None


def _open(directory: Path, config: LogConfig = CONFIG, *, recovery_point: int = 0,
          clean_shutdown: bool = False, log_start_offset: int | None = None) -> Partition:
    log = _RecordedLog.open(directory, config, recovery_point=recovery_point,
                            clean_shutdown=clean_shutdown, log_start_offset=log_start_offset)
    partition = Partition("t", 0, log, broker_id=1)
    partition.become_leader(PartitionState("t", 0, (1,), (1,), leader=1, leader_epoch=1,
                                           partition_epoch=1))
    return partition


def _batch(producer_id: int, sequence: int, value: bytes, *, transactional: bool = True,
           key: bytes | None = None) -> bytes:
    builder = BatchBuilder(producer_id=producer_id, producer_epoch=0, base_sequence=sequence,
                           is_transactional=transactional)
    builder.append(key, value)
    return builder.build()


def _append(partition: Partition, records: bytes) -> int:
    return partition.append_as_leader(records, required_acks=1,
                                      min_insync_replicas=1).base_offset


def _state(partition: Partition) -> tuple[object, ...]:
    txns = partition.transactions
    producers = {pid: (e.epoch, e.last_seq) for pid, e in partition.producers.entries()}
    return (dict(txns.ongoing), list(txns.aborted), dict(txns.coordinator_epochs), producers,
            partition.last_stable_offset, txns.aborted_between(0, partition.log.log_end_offset))


def _workload(partition: Partition, rounds: int = 6) -> None:
    """Committed and aborted transactions of two producers across many segments, an
    idempotent producer, and one transaction left open at the end."""
    sequences = {10: 0, 11: 0, 12: 0}
    for i in range(rounds):
        for pid in (10, 11):
            _append(partition, _batch(pid, sequences[pid], b"v%d" % i))
            sequences[pid] += 1
        _append(partition, build_marker(10, 0, True, coordinator_epoch=2, timestamp=1))
        _append(partition, build_marker(11, 0, i % 2 == 0, coordinator_epoch=3, timestamp=1))
        _append(partition, _batch(12, sequences[12], b"idem", transactional=False))
        sequences[12] += 1
    _append(partition, _batch(10, sequences[10], b"open"))


def _written(directory: Path) -> tuple[object, ...]:
    """The workload written and the log closed cleanly; the state it left."""
    partition = _open(directory)
    _workload(partition)
    state = _state(partition)
    partition.log.close()
    return state


def test_a_roll_writes_a_snapshot_and_a_clean_close_one_at_the_log_end(tmp_path: Path) -> None:
    partition = _open(tmp_path / "t-0")
    _workload(partition)
    log = partition.log
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 3
    before = _state(partition)
    assert before[1], "some transactions aborted"
    log.close()
    assert log.snapshot_offsets == [*bases[1:], log.log_end_offset]
    # Each abort is in the .txnindex of its marker's segment.
    indexed = [p for p in (tmp_path / "t-0").iterdir() if p.suffix == ".txnindex"]
    assert indexed
    reopened = _open(tmp_path / "t-0", clean_shutdown=True)
    assert _replayed_from(reopened) is None  # nothing replayed
    assert _state(reopened) == before
    reopened.log.close()


def test_duplicates_are_still_recognised_after_a_restart(tmp_path: Path) -> None:
    partition = _open(tmp_path / "t-0")
    _workload(partition, rounds=2)
    last = _batch(12, 2, b"idem", transactional=False)
    first_offset = _append(partition, last)
    partition.log.close()
    reopened = _open(tmp_path / "t-0", clean_shutdown=True)
    result = reopened.append_as_leader(last, required_acks=1, min_insync_replicas=1)
    assert result.duplicate and result.base_offset == first_offset
    verdict, _ = reopened.producers.check(
        parse_header(_batch(12, 5, b"x", transactional=False)))
    assert verdict is SequenceCheck.OUT_OF_ORDER  # 3 was expected next
    reopened.log.close()


def test_an_unclean_load_replays_from_the_snapshot_before_the_rescanned_segment(
        tmp_path: Path) -> None:
    partition = _open(tmp_path / "t-0")
    _workload(partition)
    before = _state(partition)
    log = partition.log
    active_base = log.segments[-1].base_offset
    log.latest_producer_snapshot()  # waits for the rolls' snapshot writes (a thread's)
    log.flush()
    log.abandon()  # a crash: no close, no snapshot at the log end
    reopened = _open(tmp_path / "t-0", recovery_point=active_base)
    assert _replayed_from(reopened) == active_base
    assert _state(reopened) == before
    reopened.log.close()


def test_damaged_and_future_snapshots_are_deleted_and_an_older_one_used(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    before = _written(directory)
    offsets = PartitionLog.open(directory, CONFIG, clean_shutdown=True).snapshot_offsets
    end = offsets[-1]
    snapshot_path(directory, end).write_bytes(b"\x00\x01garbage")  # a bad CRC
    future = snapshot_path(directory, end + 100)
    future.write_bytes(snapshot_path(directory, offsets[-2]).read_bytes())
    reopened = _open(directory, clean_shutdown=True)
    assert _replayed_from(reopened) == offsets[-2]
    assert not future.exists() and not snapshot_path(directory, end).exists()
    assert _state(reopened) == before
    reopened.log.close()


def test_a_damaged_txnindex_is_derived_again(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    before = _written(directory)
    damaged = sorted(directory.glob("*.txnindex"))[0]
    damaged.write_bytes(damaged.read_bytes()[:-3])  # torn
    reopened = _open(directory, clean_shutdown=True)
    replayed_from = _replayed_from(reopened)
    assert replayed_from is not None and replayed_from <= int(damaged.stem)
    assert _state(reopened) == before
    assert damaged.stat().st_size % 34 == 0  # written again by the replay
    reopened.log.close()


def test_truncation_across_a_snapshot(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    partition = _open(directory)
    _workload(partition)
    log = partition.log
    cut = log.segments[-3].base_offset + 1  # inside an older segment
    partition.become_follower(PartitionState("t", 0, (1, 2), (1, 2), leader=2, leader_epoch=2,
                                             partition_epoch=2))
    assert isinstance(log, _RecordedLog)
    log.reads.clear()
    partition.truncate_to(cut)
    assert all(o <= log.log_end_offset for o in log.snapshot_offsets)
    assert _replayed_from(partition) == log.segments[-1].base_offset  # its roll's snapshot
    truncated = _state(partition)
    # The same state as a load that replays the surviving log from its start.
    log.close()
    for path in directory.glob("*.snapshot"):
        path.unlink()
    for path in directory.glob("*.txnindex"):
        path.unlink()
    replayed = _open(directory, recovery_point=0)
    assert _replayed_from(replayed) == 0
    assert _state(replayed)[:3] == truncated[:3]
    replayed.log.close()


def test_retention_deletes_segments_with_their_txnindex_and_old_snapshots(
        tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    partition = _open(directory)
    _workload(partition, rounds=10)
    log = partition.log
    txn_files = {int(p.stem) for p in directory.glob("*.txnindex")}
    start = log.segments[-2].base_offset
    log.latest_producer_snapshot()  # waits for the snapshot writes of the rolls
    partition.advance_log_start(start)
    assert log.log_start_offset == start
    # The snapshot at the new log start is kept (a load starts there), older ones go.
    assert min(log.snapshot_offsets) == start
    assert {int(p.stem) for p in directory.glob("*.snapshot")} == set(log.snapshot_offsets)
    left = {int(p.stem) for p in directory.glob("*.txnindex")}
    assert left == {b for b in txn_files if b >= start}
    before = _state(partition)
    end = log.log_end_offset
    log.close()
    reopened = _open(directory, clean_shutdown=True, log_start_offset=start)
    after = _state(reopened)
    assert after[0] == before[0] and after[2:5] == before[2:5]
    # Aborted transactions wholly below the log start need no filtering any more.
    assert reopened.transactions.aborted == [
        a for a in partition.transactions.aborted if a.last_offset >= start]
    assert reopened.transactions.aborted_between(start, end) == \
        partition.transactions.aborted_between(start, end)
    reopened.log.close()


def test_a_cleaned_segment_keeps_its_txnindex(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=300, preallocate=False, cleanup_policy="compact",
                       write_caching=True)
    directory = tmp_path / "c-0"
    partition = _open(directory, config)
    _append(partition, build_batch([(b"k", b"committed", (), 1)]))
    aborted_at = _append(partition, _batch(10, 0, b"aborted", key=b"k"))
    marker_at = _append(partition, build_marker(10, 0, False, 0, 1))
    for i in range(12):
        _append(partition, build_batch([(b"filler%d" % i, b"x" * 40, (), 1)]))
    LogCleaner().clean(partition.log, partition.last_stable_offset, force=True,
                       aborted=AbortedBatches(partition.transactions.aborted))
    partition.log.close()
    reopened = _open(directory, config, clean_shutdown=True)
    # A read_committed fetch across the cleaned segment still hears of the abort.
    assert reopened.transactions.aborted == [AbortedTransaction(10, aborted_at, marker_at)]
    assert reopened.transactions.aborted_between(0, marker_at + 1) == [(10, aborted_at)]
    reopened.log.close()


def test_a_snapshot_below_the_log_start_is_not_a_load_seed(tmp_path: Path) -> None:
    """DeleteRecords moved the log start past a transaction's marker but not past the
    snapshot taken while it was open. As in Kafka, such a snapshot is deleted, and a load
    does not start from one a crash brought back: seeded there, it would miss the marker
    and hold the LSO back."""
    directory = tmp_path / "t-0"
    partition = _open(directory)
    _append(partition, _batch(20, 0, b"open across the roll"))
    sequence = 0
    while len(partition.log.segments) < 2:  # roll: a snapshot with producer 20 open
        _append(partition, _batch(21, sequence, b"idem", transactional=False))
        sequence += 1
    log = partition.log
    snapshot = log.segments[-1].base_offset
    marker = _append(partition, build_marker(20, 0, True, coordinator_epoch=1, timestamp=1))
    _append(partition, _batch(21, sequence, b"idem", transactional=False))
    assert len(log.segments) == 2 and marker > snapshot
    log.latest_producer_snapshot()  # waits for the roll's snapshot write
    kept = snapshot_path(directory, snapshot).read_bytes()
    partition.advance_log_start(marker + 1)
    assert snapshot not in log.snapshot_offsets
    # The deletion is not fsynced: a power loss can bring the snapshot back.
    snapshot_path(directory, snapshot).write_bytes(kept)
    end = log.log_end_offset
    assert partition.last_stable_offset == end
    log.flush()
    log.abandon()  # no snapshot at the log end: the load must seed from what is left
    reopened = _open(directory, recovery_point=end, log_start_offset=marker + 1)
    assert reopened.transactions.ongoing == {}
    assert reopened.last_stable_offset == end
    reopened.log.close()
