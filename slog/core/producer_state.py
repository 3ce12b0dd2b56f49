"""Idempotent-producer bookkeeping for one partition (Kafka's ProducerStateManager).

For each producer id the leader remembers the epoch and the last few batches
(sequence range and offsets). A retried batch whose sequences match one of them
is answered with its original offset instead of being appended twice.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from enum import Enum

from slog.core.batch import NO_PRODUCER_ID, NO_SEQUENCE, BatchHeader

# Kafka keeps the metadata of the last five batches per producer, which is
# why max.in.flight.requests.per.connection may be at most 5 with idempotence.
BATCHES_REMEMBERED = 5
SEQUENCE_MODULUS = 1 << 31


class SequenceCheck(Enum):
    NEW = "new"
    DUPLICATE = "duplicate"
    OUT_OF_ORDER = "out_of_order_sequence"
    FENCED_EPOCH = "fenced_epoch"


@dataclass(frozen=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass
class ProducerEntry:
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_REMEMBERED))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE


class ProducerStateManager:
    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}

    def __len__(self) -> int:
        return len(self._producers)

    def check(self, header: BatchHeader) -> tuple[SequenceCheck, BatchMetadata | None]:
        """Classify an incoming batch before it is appended."""
        if header.producer_id == NO_PRODUCER_ID:
            return SequenceCheck.NEW, None
        entry = self._producers.get(header.producer_id)
        if entry is None:
            return SequenceCheck.NEW, None
        if header.producer_epoch < entry.epoch:
            # Also a transaction marker (no sequence) of an older epoch: a late
            # marker, or an admin abort naming a producer that has moved on.
            return SequenceCheck.FENCED_EPOCH, None
        if header.base_sequence == NO_SEQUENCE:
            return SequenceCheck.NEW, None
        if header.producer_epoch > entry.epoch:
            # A bumped epoch restarts the sequence at zero.
            ok = header.base_sequence == 0
            return (SequenceCheck.NEW if ok else SequenceCheck.OUT_OF_ORDER), None
        for meta in entry.batches:
            if meta.first_seq == header.base_sequence and meta.last_seq == header.last_sequence:
                return SequenceCheck.DUPLICATE, meta
        expected = (entry.last_seq + 1) % SEQUENCE_MODULUS
        if entry.last_seq != NO_SEQUENCE and header.base_sequence != expected:
            return SequenceCheck.OUT_OF_ORDER, None
        return SequenceCheck.NEW, None

    def update(self, header: BatchHeader, first_offset: int) -> None:
        """Record a batch that was appended at ``first_offset`` (leader or replay)."""
        if header.producer_id == NO_PRODUCER_ID:
            return
        entry = self._producers.get(header.producer_id)
        if entry is None or header.producer_epoch > entry.epoch:
            entry = ProducerEntry(epoch=header.producer_epoch)
            self._producers[header.producer_id] = entry
        if header.base_sequence == NO_SEQUENCE:
            return
        entry.batches.append(
            BatchMetadata(
                first_seq=header.base_sequence,
                last_seq=header.last_sequence,
                first_offset=first_offset,
                last_offset=first_offset + header.last_offset_delta,
                timestamp=header.max_timestamp,
            )
        )

    def entries(self) -> list[tuple[int, ProducerEntry]]:
        """(producer id, entry) of every producer this partition knows (DescribeProducers)."""
        return sorted(self._producers.items())

    def restore(self, producer_id: int, epoch: int, last: BatchMetadata | None) -> None:
        """A producer as a snapshot left it: its epoch and last batch (if any)."""
        entry = ProducerEntry(epoch=epoch)
        if last is not None:
            entry.batches.append(last)
        self._producers[producer_id] = entry

    def truncate(self) -> None:
        """Forget everything; the caller replays the log's surviving batches."""
        self._producers.clear()
