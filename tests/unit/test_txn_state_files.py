"""The two files of persisted transaction state: producer-state snapshots
(``.snapshot``, Kafka's format version 1) and a segment's ``.txnindex``."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c
import pytest

from slog.core import aborted_txn_index as txnindex
from slog.core import producer_snapshot as snapshots

ENTRIES = [snapshots.SnapshotEntry(7, 2, 41, 1000, 4, 1_700_000_000_000, 3, 990),
           snapshots.SnapshotEntry(8, 0, -1, -1, 0, -1, -1, -1)]


def test_a_snapshot_round_trips_in_kafkas_layout() -> None:
    data = snapshots.encode_snapshot(ENTRIES)
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, count) == (1, 2)
    assert crc == crc32c.crc32c(data[6:])  # over everything after the CRC
    # id, epoch, last sequence, last offset, offset delta, timestamp, coordinator
    # epoch, current transaction first offset: 46 bytes per producer
    assert len(data) == 10 + 2 * 46
    assert struct.unpack_from(">qhiqiqiq", data, 10) == tuple(ENTRIES[0])
    assert snapshots.decode_snapshot(data) == ENTRIES
    assert snapshots.decode_snapshot(snapshots.encode_snapshot([])) == []


@pytest.mark.parametrize("damage", ["crc", "truncated", "version", "empty", "count"])
def test_a_damaged_snapshot_is_refused(damage: str) -> None:
    data = bytearray(snapshots.encode_snapshot(ENTRIES))
    if damage == "crc":
        data[20] ^= 0xFF
    elif damage == "truncated":
        del data[-5:]
    elif damage == "version":
        data[1] = 9
    elif damage == "empty":
        data = bytearray()
    else:  # a count that does not match the bytes, with a right CRC
        data[6:10] = struct.pack(">i", 5)
        data[2:6] = struct.pack(">I", crc32c.crc32c(bytes(data[6:])))
    with pytest.raises(snapshots.CorruptSnapshotError):
        snapshots.decode_snapshot(bytes(data))


def test_snapshot_file_names() -> None:
    path = snapshots.snapshot_path(Path("/d"), 1234)
    assert path.name == "00000000000000001234.snapshot"
    assert snapshots.parse_snapshot_offset(path.name) == 1234
    assert snapshots.parse_snapshot_offset("00000000000000001234.log") is None
    assert snapshots.parse_snapshot_offset("1234.snapshot") is None


def test_txnindex_entries_are_kafkas_34_bytes() -> None:
    entry = txnindex.AbortedTxn(producer_id=5, first_offset=10, last_offset=20,
                                last_stable_offset=21)
    data = txnindex.encode_entry(entry)
    assert len(data) == txnindex.ENTRY_SIZE == 34
    assert struct.unpack(">hqqqq", data) == (0, 5, 10, 20, 21)
    assert txnindex.decode_entries(data * 2) == [entry, entry]


@pytest.mark.parametrize("data", [b"\x00" * 33, b"\x00\x01" + b"\x00" * 32])
def test_a_torn_or_unknown_txnindex_is_refused(data: bytes) -> None:
    with pytest.raises(txnindex.CorruptTxnIndexError):
        txnindex.decode_entries(data)


def test_txnindex_file_appends_truncates_and_deletes(tmp_path: Path) -> None:
    index = txnindex.TransactionIndex(tmp_path / "00000000000000000000.txnindex")
    assert index.entries() == [] and not index.path.exists()  # created by the first entry
    entries = [txnindex.AbortedTxn(1, 0, 5, 6), txnindex.AbortedTxn(2, 3, 9, 10),
               txnindex.AbortedTxn(1, 10, 12, 13)]
    for entry in entries:
        index.append(entry)
    index.flush()
    assert index.entries() == entries
    index.truncate_to(9)  # the markers at 9 and after are gone
    assert index.entries() == entries[:1]
    assert index.path.stat().st_size == txnindex.ENTRY_SIZE
    index.append(entries[2])  # appends continue after the cut
    assert txnindex.TransactionIndex(index.path).entries() == [entries[0], entries[2]]
    index.truncate_to(0)
    assert index.entries() == [] and index.path.stat().st_size == 0
    index.append(entries[0])
    index.delete()
    assert not index.path.exists()
