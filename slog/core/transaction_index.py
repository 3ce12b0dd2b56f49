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
from collections.abc import Iterable
from typing import NamedTuple

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
        self.aborted: list[AbortedTransaction] = []  # in marker (last offset) order
        # The latest coordinator epoch that wrote a marker for each producer: markers
        # of a deposed coordinator (a lower epoch) are refused.
        self.coordinator_epochs: dict[int, int] = {}

    def track(self, header: BatchHeader, base_offset: int, marker: Marker | None) -> None:
        """A batch stored at ``base_offset``; ``marker``: a control batch's marker."""
        if not header.is_transactional:
            return
        producer_id = header.producer_id
        if not header.is_control:
            self.ongoing.setdefault(producer_id, base_offset)
            return
        first = self.ongoing.pop(producer_id, None)
        if marker is None:
            return
        if marker.coordinator_epoch >= 0:
            self.coordinator_epochs[producer_id] = max(
                marker.coordinator_epoch, self.coordinator_epochs.get(producer_id, -1))
        if not marker.committed and first is not None:
            self.aborted.append(AbortedTransaction(producer_id, first, base_offset))

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
        [start, end): what a read_committed consumer must filter."""
        lasts = [a.last_offset for a in self.aborted]
        found = []
        for entry in self.aborted[bisect.bisect_left(lasts, start):]:
            if entry.first_offset < end:
                found.append((entry.producer_id, entry.first_offset))
        return found

    def hides(self, header: BatchHeader, aborted: AbortedBatches) -> bool:
        """A data batch of a transaction that aborted or is still open."""
        if not header.is_transactional or header.is_control:
            return False
        first = self.ongoing.get(header.producer_id)
        return (first is not None and header.base_offset >= first) or aborted(header)

    def committed_only(self, data: bytes) -> bytes:
        """``data`` (whole batches) without those of aborted or open transactions: what a
        coordinator loading its internal topic may apply."""
        if not self.ongoing and not self.aborted:
            return data
        aborted = AbortedBatches(self.aborted)
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
        if self.aborted and self.aborted[0].last_offset < log_start:
            self.aborted = [a for a in self.aborted if a.last_offset >= log_start]

    def clear(self) -> None:
        self.ongoing.clear()
        self.aborted.clear()
        self.coordinator_epochs.clear()


class AbortedBatches:
    """Whether a stored batch belongs to an aborted transaction (the cleaner drops
    those records, and they never supersede a committed value)."""

    def __init__(self, aborted: Iterable[AbortedTransaction] = ()):
        self._ranges: dict[int, list[tuple[int, int]]] = {}
        for entry in aborted:
            self._ranges.setdefault(entry.producer_id, []).append(
                (entry.first_offset, entry.last_offset))

    def __call__(self, header: BatchHeader) -> bool:
        if not header.is_transactional or header.is_control:
            return False
        ranges = self._ranges.get(header.producer_id, ())
        return any(first <= header.base_offset <= last for first, last in ranges)
