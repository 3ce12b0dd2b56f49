"""read_committed over a replica's segment files (dataDir mode).

A partition's last stable offset, and which batches of an offset range belong to
transactions that aborted (or have not ended), found by replaying batch headers
and markers into core's :class:`~slog.core.transaction_index.PartitionTransactions`,
as a broker rebuilds its transaction state. Only headers and the first record of
each control batch are read; no record is decoded here.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from slog.core.batch import BatchHeader
from slog.core.transaction_index import PartitionTransactions, read_marker
from slog.spark.segments import batches_from

HiddenBatches = Callable[[BatchHeader], bool]


def last_stable_offset(directory: Path, start: int, high_watermark: int) -> int:
    """The first offset of the oldest transaction still open below the high watermark (its
    marker, if written at all, is not yet on every in-sync replica), or the high watermark.
    Replays from ``start`` (the log start): a transaction may have been open since then."""
    txns = PartitionTransactions()
    for chunk, pos, header in batches_from(directory, start, high_watermark):
        if header.next_offset > high_watermark:
            break  # the uncommitted tail
        txns.track(header, header.base_offset,
                   read_marker(chunk, pos) if header.is_control else None)
    return txns.last_stable_offset(high_watermark)


def uncommitted_batches(directory: Path, start: int, end: int) -> HiddenBatches | None:
    """Which data batches of ``[start, end)`` a read_committed reader must drop: those of
    transactions that aborted, or that no marker in the files ends. Reads on past ``end``
    only until every transaction with batches in the range has its marker (the range ends
    at or below the last stable offset, so they have). None: the range has none to drop."""
    txns = PartitionTransactions()
    for chunk, pos, header in batches_from(directory, start, sys.maxsize):
        if header.base_offset >= end:
            if not txns.ongoing:
                break
            if not header.is_control:
                continue  # a later transaction's data: not in the range
        txns.track(header, header.base_offset,
                   read_marker(chunk, pos) if header.is_control else None)
    if not txns.ongoing and not txns.aborted:
        return None
    aborted = txns.aborted_batches()
    return lambda header: txns.hides(header, aborted)
