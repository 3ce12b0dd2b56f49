"""Producer-state snapshots: Kafka's ``<offset>.snapshot`` files (format version 1).

A snapshot at offset N holds what a partition knows of its producers after
replaying every batch below N: per producer its epoch, its last batch
(sequence, offsets, timestamp), the coordinator epoch of its latest marker and
the first offset of its open transaction. Loading the newest snapshot and
replaying only the batches after it restores the state without reading the
whole log.

Layout (big-endian): version int16, crc32c uint32 of everything after it, then
an int32 count and per producer: producer id int64, epoch int16, last sequence
int32, last offset int64, offset delta int32, timestamp int64, coordinator
epoch int32, current transaction first offset int64 (-1: none).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

import crc32c

from slog.core.batch import NO_SEQUENCE
from slog.core.errors import SlogError
from slog.core.producer_state import SEQUENCE_MODULUS, BatchMetadata, ProducerStateManager
from slog.core.transaction_index import PartitionTransactions

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_HEADER = struct.Struct(">hI")  # version, crc
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")


class CorruptSnapshotError(SlogError):
    """A snapshot file that is torn, of an unknown version or fails its CRC."""


class SnapshotEntry(NamedTuple):
    producer_id: int
    epoch: int
    last_sequence: int  # -1: no data batch remembered (only markers)
    last_offset: int
    offset_delta: int  # last offset - first offset of the last batch
    timestamp: int
    coordinator_epoch: int  # -1: no marker seen
    current_txn_first_offset: int  # -1: no open transaction


def encode_snapshot(entries: Iterable[SnapshotEntry]) -> bytes:
    rows = list(entries)
    body = bytearray(_COUNT.pack(len(rows)))
    for row in rows:
        body += _ENTRY.pack(*row)
    return _HEADER.pack(SNAPSHOT_VERSION, crc32c.crc32c(body)) + bytes(body)


def decode_snapshot(data: bytes) -> list[SnapshotEntry]:
    """The entries of a snapshot file's bytes; CorruptSnapshotError if it is not one."""
    if len(data) < _HEADER.size + _COUNT.size:
        raise CorruptSnapshotError(f"{len(data)} bytes is too short for a snapshot")
    version, crc = _HEADER.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"unknown snapshot version {version}")
    body = memoryview(data)[_HEADER.size:]
    if crc32c.crc32c(body) != crc:
        raise CorruptSnapshotError("CRC mismatch")
    (count,) = _COUNT.unpack_from(body, 0)
    if count < 0 or len(body) != _COUNT.size + count * _ENTRY.size:
        raise CorruptSnapshotError(f"{len(body)} bytes cannot hold {count} entries")
    return [SnapshotEntry(*_ENTRY.unpack_from(body, _COUNT.size + i * _ENTRY.size))
            for i in range(count)]


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def parse_snapshot_offset(file_name: str) -> int | None:
    """The offset of a ``<20 digits>.snapshot`` name, None for any other file."""
    stem, dot, suffix = file_name.partition(".")
    if dot and "." + suffix == SNAPSHOT_SUFFIX and len(stem) == 20 and stem.isdigit():
        return int(stem)
    return None


def snapshot_entries(producers: ProducerStateManager,
                     transactions: PartitionTransactions) -> list[SnapshotEntry]:
    """A partition's producer state as snapshot entries (only each producer's last
    batch: duplicates of older ones are recognised again once replay passes them)."""
    rows = []
    for producer_id, entry in producers.entries():
        last = entry.batches[-1] if entry.batches else None
        rows.append(SnapshotEntry(
            producer_id, entry.epoch,
            last.last_seq if last else NO_SEQUENCE,
            last.last_offset if last else -1,
            last.last_offset - last.first_offset if last else 0,
            last.timestamp if last else -1,
            transactions.coordinator_epochs.get(producer_id, -1),
            transactions.ongoing.get(producer_id, -1)))
    return rows


def restore_snapshot(entries: Iterable[SnapshotEntry], producers: ProducerStateManager,
                     transactions: PartitionTransactions) -> None:
    """Load snapshot entries into cleared producer and transaction state."""
    for row in entries:
        last = None
        if row.last_sequence != NO_SEQUENCE:
            last = BatchMetadata(
                first_seq=(row.last_sequence - row.offset_delta) % SEQUENCE_MODULUS,
                last_seq=row.last_sequence,
                first_offset=row.last_offset - row.offset_delta,
                last_offset=row.last_offset,
                timestamp=row.timestamp)
        producers.restore(row.producer_id, row.epoch, last)
        if row.coordinator_epoch >= 0:
            transactions.coordinator_epochs[row.producer_id] = row.coordinator_epoch
        if row.current_txn_first_offset >= 0:
            transactions.ongoing[row.producer_id] = row.current_txn_first_offset
