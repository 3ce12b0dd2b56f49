"""A partition's transactions: open ones, the last stable offset, the aborted index, and
their recovery by replaying the log (real PartitionLogs and Partitions)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slog.core.batch import parse_header
from slog.core.cleaner import LogCleaner
from slog.core.log import PartitionLog
from slog.core.log_config import LogConfig
from slog.core.metadata import PartitionState
from slog.core.records import BatchBuilder, build_batch, decode_records, iter_decoded_batches
from slog.core.transaction_index import (
    AbortedBatches,
    AbortedTransaction,
    Marker,
    PartitionTransactions,
    build_marker,
    marker_commits,
    read_marker,
)
from slog.replication.partition import Partition, ReplicaError

CONFIG = LogConfig(segment_bytes=1024 * 1024, preallocate=False, write_caching=True)


def _txn_batch(producer_id: int, epoch: int, sequence: int, *values: bytes) -> bytes:
    builder = BatchBuilder(producer_id=producer_id, producer_epoch=epoch,
                           base_sequence=sequence, is_transactional=True)
    for value in values:
        builder.append(None, value)
    return builder.build()


def _leader(directory: Path) -> Partition:
    partition = Partition("t", 0, PartitionLog.open(directory, CONFIG), broker_id=1)
    partition.become_leader(PartitionState("t", 0, (1,), (1,), leader=1, leader_epoch=1,
                                           partition_epoch=1))
    return partition


def _append(partition: Partition, records: bytes) -> int:
    return partition.append_as_leader(records, required_acks=1,
                                      min_insync_replicas=1).base_offset


@pytest.mark.parametrize("committed", [True, False])
def test_markers_are_control_batches_kafka_reads(committed: bool) -> None:
    marker = build_marker(5, 2, committed, coordinator_epoch=3, timestamp=1000)
    header, records = decode_records(marker)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch) == (5, 2)
    # Kafka's control record: key (version 0, type: 0 abort, 1 commit), value
    # EndTransactionMarker (version 0, coordinator epoch).
    assert records[0].key == bytes([0, 0, 0, int(committed)])
    assert records[0].value == bytes([0, 0, 0, 0, 0, 3])
    assert marker_commits(marker, 0) is committed
    assert read_marker(marker, 0) == Marker(committed, 3)


def test_a_control_batch_that_is_no_marker_is_not_read_as_one() -> None:
    builder = BatchBuilder(producer_id=1, producer_epoch=0, is_transactional=True,
                           is_control=True)
    builder.append(b"\x00\x00\x00\x07", b"")  # an unknown control type
    assert marker_commits(builder.build(), 0) is None


def test_last_stable_offset_and_aborted_index(tmp_path: Path) -> None:
    partition = _leader(tmp_path / "t-0")
    _append(partition, build_batch([(None, b"plain", (), 1)]))  # offset 0
    first_a = _append(partition, _txn_batch(10, 0, 0, b"a1", b"a2"))  # 1-2
    first_b = _append(partition, _txn_batch(11, 0, 0, b"b1"))  # 3
    assert partition.high_watermark == 4
    assert partition.last_stable_offset == first_a  # the oldest open transaction
    abort_at = _append(partition, build_marker(10, 0, False, 0, 1))  # 4
    assert partition.last_stable_offset == first_b
    _append(partition, build_marker(11, 0, True, 0, 1))  # 5
    assert partition.last_stable_offset == partition.high_watermark == 6
    txns = partition.transactions
    assert txns.aborted == [AbortedTransaction(10, first_a, abort_at)]
    assert txns.aborted_between(0, 6) == [(10, first_a)]
    assert txns.aborted_between(abort_at + 1, 6) == []  # wholly before the read
    assert txns.aborted_between(0, first_a) == []  # wholly after it
    # read_committed reads stop at the LSO, whole batches only.
    _append(partition, _txn_batch(10, 0, 2, b"a3"))  # 6: open again
    fetched = partition.read(0, 1 << 20, committed_only=True, read_committed=True)
    assert fetched.next_offset == 6
    everything = partition.read(0, 1 << 20, committed_only=True)
    assert everything.next_offset == 7


def test_recovery_rebuilds_open_and_aborted_transactions(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    partition = _leader(directory)
    first = _append(partition, _txn_batch(10, 0, 0, b"x"))
    abort_at = _append(partition, build_marker(10, 0, False, 0, 1))
    still_open = _append(partition, _txn_batch(10, 0, 1, b"y"))
    partition.log.close()
    replayed = Partition("t", 0, PartitionLog.open(directory, CONFIG), broker_id=1)
    assert replayed.transactions.aborted == [AbortedTransaction(10, first, abort_at)]
    assert replayed.transactions.ongoing == {10: still_open}
    replayed.log.close()


def test_a_fencing_marker_fences_the_old_epoch(tmp_path: Path) -> None:
    partition = _leader(tmp_path / "t-0")
    _append(partition, _txn_batch(10, 0, 0, b"zombie"))
    _append(partition, build_marker(10, 1, False, 0, 1))  # the coordinator bumped to 1
    with pytest.raises(ReplicaError) as raised:
        _append(partition, _txn_batch(10, 0, 1, b"late"))
    assert raised.value.code.name == "invalid_producer_epoch"
    _append(partition, _txn_batch(10, 2, 0, b"new producer"))  # the next epoch starts at 0


def test_index_ignores_non_transactional_batches_and_forgets_below_the_log_start() -> None:
    txns = PartitionTransactions()
    plain = parse_header(build_batch([(None, b"v", (), 1)]))
    txns.track(plain, 0, None)
    assert txns.first_unstable_offset() is None
    txns.track(parse_header(_txn_batch(1, 0, 0, b"v")), 1, None)
    txns.track(parse_header(build_marker(1, 0, False, 0, 1)), 2, Marker(False, 4))
    assert txns.fences(1, 3) and not txns.fences(1, 4) and not txns.fences(1, -1)
    txns.forget_below(2)
    assert txns.aborted == [AbortedTransaction(1, 1, 2)]
    txns.forget_below(3)
    assert txns.aborted == []


def test_compaction_drops_aborted_records_and_keeps_markers(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=300, preallocate=False, cleanup_policy="compact",
                       write_caching=True)
    directory = tmp_path / "c-0"
    partition = Partition("c", 0, PartitionLog.open(directory, config), broker_id=1)
    partition.become_leader(PartitionState("c", 0, (1,), (1,), leader=1, leader_epoch=1,
                                           partition_epoch=1))

    def keyed(producer_id: int, sequence: int, key: bytes, value: bytes) -> bytes:
        builder = BatchBuilder(producer_id=producer_id, producer_epoch=0,
                               base_sequence=sequence, is_transactional=True)
        builder.append(key, value)
        return builder.build()

    _append(partition, build_batch([(b"k", b"committed", (), 1)]))
    _append(partition, keyed(10, 0, b"k", b"aborted"))
    _append(partition, build_marker(10, 0, False, 0, 1))
    for i in range(6):  # closes the segments above
        _append(partition, build_batch([(b"filler%d" % i, b"x" * 40, (), 1)]))
    open_at = _append(partition, keyed(11, 0, b"j", b"open"))  # may still abort: kept
    for i in range(6):
        _append(partition, build_batch([(b"filler%d" % i, b"y" * 40, (), 1)]))
    assert partition.last_stable_offset == open_at
    assert len(partition.log.segments) > 2
    LogCleaner().clean(partition.log, partition.last_stable_offset, force=True,
                       aborted=AbortedBatches(partition.transactions.aborted))
    data = partition.log.read(0, 1 << 20).tobytes()
    batches = list(iter_decoded_batches(data, allow_partial_tail=False))
    values = [r.value for _, h, records in batches if not h.is_control for r in records]
    assert b"committed" in values and b"aborted" not in values and b"open" in values
    assert sum(1 for _, h, _ in batches if h.is_control) == 1  # the marker stays
    partition.log.close()
    replayed = Partition("c", 0, PartitionLog.open(directory, config), broker_id=1)
    assert replayed.transactions.ongoing == {11: open_at}
    assert replayed.transactions.aborted == []  # nothing of it is left to filter
    replayed.log.close()


def test_the_coordinator_epoch_of_markers_survives_recovery(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    partition = _leader(directory)
    _append(partition, _txn_batch(10, 0, 0, b"x"))
    _append(partition, build_marker(10, 0, True, coordinator_epoch=4, timestamp=1))
    assert partition.transactions.fences(10, 3)  # a deposed coordinator's marker
    partition.log.close()
    replayed = Partition("t", 0, PartitionLog.open(directory, CONFIG), broker_id=1)
    assert replayed.transactions.fences(10, 3) and not replayed.transactions.fences(10, 4)
    replayed.log.close()
