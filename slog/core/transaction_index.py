"""A partition's transactions: which are open, which were aborted (Kafka's
ProducerStateManager transaction half and its ``.txnindex``).

A transactional batch opens its producer's transaction at its base offset; the
COMMIT or ABORT control batch the coordinator has the leader write ends it.
The last stable offset is the first offset of the oldest open transaction (or
the high watermark): read_committed consumers read below it only, and are told
which aborted transactions overlap what they read, so they can drop those
records. Rebuilt by replaying batch headers (and each marker's key), like the
idempotence state.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Collection, Iterable, Sequence
from typing import NamedTuple

from slog.core.aborted_txn_index import AbortedTxn
from slog.core.batch import HEADER_SIZE, BatchHeader, parse_header
from slog.core.errors import CorruptRecordError
from slog.core.records import BatchBuilder, decode_varint

CONTROL_KEY_VERSION = 0
ABORT_MARKER, COMMIT_MARKER = 0, 1
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_MARKER_VALUE = struct.Struct(">hi")  # version, coordinator epoch


class AbortedTransaction(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset


def build_marker(producer_id: int, producer_epoch: int, committed: bool,
                 coordinator_epoch: int, timestamp: int) -> bytes:
    """A control batch holding one EndTransactionMarker (offset 0: the leader assigns it)."""
    builder = BatchBuilder(producer_id=producer_id, producer_epoch=producer_epoch,
                           is_transactional=True, is_control=True)
    key = _CONTROL_KEY.pack(CONTROL_KEY_VERSION, COMMIT_MARKER if committed else ABORT_MARKER)
    builder.append(key, _MARKER_VALUE.pack(0, coordinator_epoch), timestamp=timestamp)
    return builder.build()


class Marker(NamedTuple):
    committed: bool
    coordinator_epoch: int  # -1 when the value does not say


def read_marker(buf: bytes | memoryview, pos: int) -> Marker | None:
    """The EndTransactionMarker of the control batch at ``pos``; None when its first
    record is no transaction marker (control batches are never compressed)."""
    at = pos + HEADER_SIZE
    try:
        _, at = decode_varint(buf, at)  # record length
        at += 1  # attributes
        _, at = decode_varint(buf, at)  # timestamp delta
        _, at = decode_varint(buf, at)  # offset delta
        key_length, at = decode_varint(buf, at)
        if key_length < _CONTROL_KEY.size or at + _CONTROL_KEY.size > len(buf):
            return None
        _, kind = _CONTROL_KEY.unpack_from(buf, at)
        if kind not in (ABORT_MARKER, COMMIT_MARKER):
            return None
        value_length, at = decode_varint(buf, at + key_length)
        epoch = -1
        if value_length >= _MARKER_VALUE.size and at + _MARKER_VALUE.size <= len(buf):
            _, epoch = _MARKER_VALUE.unpack_from(buf, at)
    except (CorruptRecordError, struct.error):
        return None
    return Marker(kind == COMMIT_MARKER, epoch)


def marker_commits(buf: bytes | memoryview, pos: int) -> bool | None:
    """True for a COMMIT marker at ``pos``, False for ABORT, None for neither."""
    marker = read_marker(buf, pos)
    return None if marker is None else marker.committed


class PartitionTransactions:
    def __init__(self) -> None:
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open txn
        # Aborted transactions in marker (last offset) order; beside each, its last
        # offset (to bisect) and the last stable offset its marker left (as the
        # .txnindex stores it: where a search for overlapping ones may stop). A
        # read_committed fetch then costs O(log n + what it overlaps), not O(n).
        self._aborted: list[AbortedTransaction] = []
        self._lasts: list[int] = []
        self._stables: list[int] = []
        self._aborted_batches: AbortedBatches | None = None  # built when first asked
        # The latest coordinator epoch that wrote a marker for each producer: markers
        # of a deposed coordinator (a lower epoch) are refused.
        self.coordinator_epochs: dict[int, int] = {}

    @property
    def aborted(self) -> Sequence[AbortedTransaction]:
        return self._aborted

    def track(self, header: BatchHeader, base_offset: int,
              marker: Marker | None) -> AbortedTxn | None:
        """A batch stored at ``base_offset``; ``marker``: a control batch's marker.
        Returns the transaction an ABORT marker ended (for the .txnindex)."""
        if not header.is_transactional:
            return None
        producer_id = header.producer_id
        if not header.is_control:
            self.ongoing.setdefault(producer_id, base_offset)
            return None
        first = self.ongoing.pop(producer_id, None)
        if marker is None:
            return None
        if marker.coordinator_epoch >= 0:
            self.coordinator_epochs[producer_id] = max(
                marker.coordinator_epoch, self.coordinator_epochs.get(producer_id, -1))
        if marker.committed or first is None:
            return None
        first_unstable = self.first_unstable_offset()
        entry = AbortedTxn(producer_id, first, base_offset,
                           base_offset + 1 if first_unstable is None else first_unstable)
        self._add_aborted(entry)
        return entry

    def _add_aborted(self, entry: AbortedTxn) -> None:
        # A stored stable offset past the marker would end searches too early.
        self._aborted.append(AbortedTransaction(*entry[:3]))
        self._lasts.append(entry.last_offset)
        self._stables.append(min(entry.last_stable_offset, entry.last_offset + 1))
        self._aborted_batches = None

    def restore_aborted(self, entries: Iterable[AbortedTxn]) -> None:
        """Replace the aborted transactions (from the segments' .txnindex files)."""
        self._drop_aborted(len(self._aborted))
        for entry in sorted(entries, key=lambda e: e.last_offset):
            self._add_aborted(entry)

    def _drop_aborted(self, count: int) -> None:
        """Forget the ``count`` oldest aborted transactions."""
        if count:
            del self._aborted[:count], self._lasts[:count], self._stables[:count]
            self._aborted_batches = None

    def fences(self, producer_id: int, coordinator_epoch: int) -> bool:
        """A marker from an older coordinator than one that already wrote for the
        producer (-1: an admin's abort, never fenced)."""
        return 0 <= coordinator_epoch < self.coordinator_epochs.get(producer_id, -1)

    def first_unstable_offset(self) -> int | None:
        return min(self.ongoing.values(), default=None)

    def last_stable_offset(self, high_watermark: int) -> int:
        first = self.first_unstable_offset()
        return high_watermark if first is None else min(first, high_watermark)

    def aborted_between(self, start: int, end: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of aborted transactions with records in
        [start, end): what a read_committed consumer must filter.

        Those ending at or past ``start``, up to the first whose marker left a last
        stable offset at or past ``end``: every transaction open then began at or
        past it, and every later one after that marker, so none of those overlaps."""
        found = []
        aborted, stables = self._aborted, self._stables
        for at in range(bisect.bisect_left(self._lasts, start), len(aborted)):
            entry = aborted[at]
            if entry.first_offset < end:
                found.append((entry.producer_id, entry.first_offset))
            if stables[at] >= end:
                break
        return found

    def aborted_batches(self) -> AbortedBatches:
        """An :class:`AbortedBatches` of the aborted transactions held (kept until
        they change)."""
        if self._aborted_batches is None:
            self._aborted_batches = AbortedBatches(self._aborted)
        return self._aborted_batches

    def hides(self, header: BatchHeader, aborted: AbortedBatches) -> bool:
        """A data batch of a transaction that aborted or is still open."""
        if not header.is_transactional or header.is_control:
            return False
        first = self.ongoing.get(header.producer_id)
        return (first is not None and header.base_offset >= first) or aborted(header)

    def committed_only(self, data: bytes) -> bytes:
        """``data`` (whole batches) without those of aborted or open transactions: what a
        coordinator loading its internal topic may apply."""
        if not self.ongoing and not self._aborted:
            return data
        aborted = self.aborted_batches()
        kept = []
        position = 0
        while position + HEADER_SIZE <= len(data):
            header = parse_header(data, position)
            end = position + header.size
            if not self.hides(header, aborted):
                kept.append(data[position:end])
            position = end
        return b"".join(kept)

    def forget_below(self, log_start: int) -> None:
        """Aborted transactions wholly below the log start need no filtering any more."""
        self._drop_aborted(bisect.bisect_left(self._lasts, log_start))

    def forget_markers(self, marker_offsets: Collection[int]) -> None:
        """Forget the aborted transactions whose ABORT markers the cleaner removes. It
        must happen before the removal shows: a reader told of an aborted transaction
        skips its producer's batches until that producer's next ABORT marker, so with
        the marker gone it would skip the producer's later committed records too."""
        entries = [AbortedTxn(*t, stable) for t, stable in zip(self._aborted, self._stables,
                                                                strict=True)
                   if t.last_offset not in marker_offsets]
        if len(entries) != len(self._aborted):
            self.restore_aborted(entries)

    def clear(self) -> None:
        self.ongoing.clear()
        self._drop_aborted(len(self._aborted))
        self.coordinator_epochs.clear()


class AbortedBatches:
    """Whether a stored batch belongs to an aborted transaction (the cleaner drops
    those records, and they never supersede a committed value)."""

    def __init__(self, aborted: Iterable[AbortedTransaction] = ()):
        # Per producer, its aborted transactions' first and last offsets in order: a
        # producer has one transaction open at a time, so they never overlap and a
        # batch is looked up by bisecting (a producer may have aborted thousands).
        self._firsts: dict[int, list[int]] = {}
        self._lasts: dict[int, list[int]] = {}
        for entry in sorted(aborted, key=lambda e: e.last_offset):
            self._firsts.setdefault(entry.producer_id, []).append(entry.first_offset)
            self._lasts.setdefault(entry.producer_id, []).append(entry.last_offset)

    def __call__(self, header: BatchHeader) -> bool:
        if not header.is_transactional or header.is_control:
            return False
        lasts = self._lasts.get(header.producer_id)
        if lasts is None:
            return False
        at = bisect.bisect_left(lasts, header.base_offset)
        return at < len(lasts) and self._firsts[header.producer_id][at] <= header.base_offset
