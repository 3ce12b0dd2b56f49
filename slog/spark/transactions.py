"""read_committed over a replica's segment files (dataDir mode).

A partition's last stable offset, and which batches of an offset range belong to
transactions that aborted (or have not ended), from core's read-only view of the
broker's own transaction files (:func:`slog.core.transaction_state.read_transactions`):
the newest producer-state snapshot, the ``.txnindex`` files below it and a replay of
the batch headers after it. No record is decoded here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from slog.core.batch import BatchHeader
from slog.core.transaction_state import read_transactions

HiddenBatches = Callable[[BatchHeader], bool]


def last_stable_offset(directory: Path, start: int, high_watermark: int) -> int:
    """The first offset of the oldest transaction still open below the high watermark (its
    marker, if written at all, is not yet on every in-sync replica), or the high watermark.
    ``start`` is the log start: a transaction may have been open since then."""
    return read_transactions(directory, start, high_watermark).last_stable_offset(high_watermark)


def uncommitted_batches(directory: Path, start: int, end: int) -> HiddenBatches | None:
    """Which data batches of ``[start, end)`` a read_committed reader must drop: those of
    transactions that aborted, or that no marker in the files ends. Markers past ``end``
    are read only until every transaction with batches in the range has its marker (the
    range ends at or below the last stable offset, so they have). None: the range has
    none to drop."""
    txns = read_transactions(directory, start, end, settle=True)
    if not txns.ongoing and not txns.aborted:
        return None
    aborted = txns.aborted_batches()
    return lambda header: txns.hides(header, aborted)
