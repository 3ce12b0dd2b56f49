"""A partition's transaction state from its files: the newest producer-state snapshot,
the segments' ``.txnindex`` files, and a replay of the batch headers after the snapshot.

:func:`seed_state` is the step the broker's rebuild (``Partition._rebuild_producer_state``,
on its own open log) and :func:`read_transactions` share. :func:`read_transactions` reads
a replica's directory from another process (the Spark source's read_committed), as
:mod:`slog.core.segment_reader` does: read-only, no locks, and no file rewritten or
deleted when it does not read back (the broker that owns the files does that at its
load); such a file only makes it replay more. A missing ``.txnindex`` means the segment
holds no ABORT marker (the file is created by its first entry).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path

from slog.core.aborted_txn_index import TXN_INDEX_SUFFIX, AbortedTxn, read_aborted_txns
from slog.core.errors import SlogError
from slog.core.producer_snapshot import (
    SnapshotEntry,
    decode_snapshot,
    parse_snapshot_offset,
    restore_snapshot,
    snapshot_path,
)
from slog.core.producer_state import ProducerStateManager
from slog.core.segment import segment_file_stem
from slog.core.segment_reader import batches_from, segment_bases
from slog.core.transaction_index import PartitionTransactions, read_marker

Snapshot = tuple[int, list[SnapshotEntry]]


def seed_state(snapshot: Snapshot | None, indexed: Iterable[AbortedTxn], start: int,
               producers: ProducerStateManager, transactions: PartitionTransactions) -> int:
    """Load a snapshot (offset, entries) and the aborted transactions the ``.txnindex``
    files hold below it into cleared state; returns where the replay of batch headers
    must begin (the snapshot's offset, or ``start`` without a snapshot).

    A snapshot below ``start`` is no seed (as in Kafka, which deletes such snapshots at
    load): the markers between it and ``start`` are no longer read, so a transaction it
    holds open could stay open for ever and hold the last stable offset back."""
    position = start
    if snapshot is not None and snapshot[0] >= start:
        restore_snapshot(snapshot[1], producers, transactions)
        position = snapshot[0]
    transactions.restore_aborted(e for e in indexed if start <= e.last_offset < position)
    return position


def read_transactions(directory: Path, start: int, end: int, *,
                      settle: bool = False) -> PartitionTransactions:
    """The transactions of the log in ``directory`` after its batches below ``end``:
    those open there, and those aborted with a marker in ``[start, end)``.

    ``start`` is the log start for the partition's whole state (its last stable
    offset). A later ``start`` (a range's) gives what filtering batches from there
    needs: a transaction with no batch at or after ``start`` may be missed. With
    ``settle``, markers past ``end`` are read too until every transaction open at
    ``end`` has ended, so its batches below ``end`` can be judged.
    """
    files = ((base, directory / f"{segment_file_stem(base)}{TXN_INDEX_SUFFIX}")
             for base in segment_bases(directory))
    # A file that does not read back (torn, of an unknown version, or caught
    # mid-write) is left to the broker that owns it: the replay starts below it.
    indexed, damaged = read_aborted_txns(files, unreadable=(OSError, SlogError))
    damaged_from = damaged[0][0] if damaged else None
    # Entries are trusted only below the snapshot the replay starts from: the broker
    # writes every entry before the roll whose snapshot follows them.
    limit = end if damaged_from is None else min(end, damaged_from)
    transactions = PartitionTransactions()
    position = seed_state(_newest_snapshot(directory, start, limit), indexed, start,
                          ProducerStateManager(), transactions)
    for chunk, pos, header in batches_from(directory, position, sys.maxsize if settle else end):
        if header.base_offset >= end:
            if not transactions.ongoing:
                break
            if not header.is_control:
                continue  # a later transaction's data
        transactions.track(header, header.base_offset,
                           read_marker(chunk, pos) if header.is_control else None)
    return transactions


def _newest_snapshot(directory: Path, start: int, limit: int) -> Snapshot | None:
    """The newest snapshot in ``[start, limit]`` that reads back. One below ``start``
    is of no use: the batches between it and ``start`` would not be replayed."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return None
    offsets = sorted(o for name in names if (o := parse_snapshot_offset(name)) is not None)
    for offset in reversed(offsets):
        if not start <= offset <= limit:
            continue
        try:
            return offset, decode_snapshot(snapshot_path(directory, offset).read_bytes())
        except (OSError, SlogError):
            continue  # deleted by retention since the listing, or damaged
    return None
