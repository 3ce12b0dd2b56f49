"""TransactionMetadata: one transactional id's state machine (Kafka's names). Pure.

A change is prepared (``prepare_*`` returns the :class:`TxnTransit` to write
to ``__transaction_state`` and marks the metadata pending), then either
completed once the record is replicated or abandoned when the write failed.
One change may be two transitions written in one batch (a completion and the
next transaction's start): the metadata is pending on the second.
While a change is pending, other requests for the id are answered
CONCURRENT_TRANSACTIONS, as Kafka's ``pendingState`` does.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from slog.core.kafka_errors import ErrorCode, KafkaApiError

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_PRODUCER_EPOCH = 32767  # Short.MAX_VALUE: the last usable epoch is one below

TopicPartition = tuple[str, int]


class TransactionState(enum.IntEnum):
    """Kafka's states, numbered as ``TransactionLogValue.TransactionStatus`` stores them."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("_"))

    @property
    def is_complete(self) -> bool:
        return self in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)


S = TransactionState
_VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


class TransactionError(KafkaApiError):
    """A request the state machine refuses; ``code`` is the client's answer."""


@dataclass(frozen=True)
class TxnTransit:
    """What one ``__transaction_state`` record says (TransactionLogValue)."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    start_ms: int
    update_ms: int


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    last_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    timeout_ms: int = 60_000
    state: TransactionState = TransactionState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    update_ms: int = -1
    pending: TxnTransit | None = None

    # -- reading ------------------------------------------------------------------------
    def snapshot(self) -> TxnTransit:
        return TxnTransit(self.producer_id, self.last_producer_id, self.producer_epoch,
                          self.last_producer_epoch, self.timeout_ms, self.state,
                          frozenset(self.partitions), self.start_ms, self.update_ms)

    def is_expired(self, now_ms: int) -> bool:
        """An open transaction past its timeout (the coordinator aborts it)."""
        return self.pending is None and self.state is TransactionState.ONGOING and \
            now_ms - self.start_ms > self.timeout_ms

    def is_expirable(self, now_ms: int, expiration_ms: int) -> bool:
        """No transaction open, and untouched for ``transactional.id.expiration.ms``."""
        return self.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and \
            now_ms - self.update_ms > expiration_ms

    @property
    def epoch_exhausted(self) -> bool:
        return self.producer_epoch >= MAX_PRODUCER_EPOCH - 1

    # -- the two steps of a change -------------------------------------------------------
    def _prepare(self, transit: TxnTransit) -> TxnTransit:
        if self.pending is not None:
            raise TransactionError(ErrorCode.concurrent_transactions,
                                   f"{self.transactional_id} is being changed already")
        if self.state not in _VALID_PREVIOUS[transit.state]:
            raise TransactionError(
                ErrorCode.invalid_txn_state,
                f"{self.transactional_id}: {self.state.kafka_name} cannot become "
                f"{transit.state.kafka_name}")
        self.pending = transit
        return transit

    def complete(self, transit: TxnTransit) -> None:
        """The record of ``transit`` is replicated: it is the state now."""
        self.pending = None
        self.load(transit)

    def load(self, transit: TxnTransit) -> None:
        self.producer_id = transit.producer_id
        self.last_producer_id = transit.last_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.timeout_ms = transit.timeout_ms
        self.state = transit.state
        self.partitions = set(transit.partitions)
        self.start_ms = transit.start_ms
        self.update_ms = transit.update_ms

    def abandon(self) -> None:
        """The write failed: nothing changed (a fencing abort goes back to Ongoing and
        is tried again later)."""
        self.pending = None
        if self.state is S.PREPARE_EPOCH_FENCE:
            self.state = S.ONGOING

    # -- changes ------------------------------------------------------------------------
    def prepare_epoch_bump(self, timeout_ms: int, now_ms: int,
                           new_producer_id: int | None = None) -> TxnTransit:
        """InitProducerId: the next epoch (a new producer id at epoch 0 when
        ``new_producer_id`` is given, as when the epoch is exhausted), Empty."""
        if new_producer_id is not None:
            transit = TxnTransit(new_producer_id, self.producer_id, 0, NO_PRODUCER_EPOCH,
                                 timeout_ms, S.EMPTY, frozenset(), -1, now_ms)
        else:
            transit = TxnTransit(self.producer_id, NO_PRODUCER_ID, self.producer_epoch + 1,
                                 self.producer_epoch, timeout_ms, S.EMPTY, frozenset(), -1,
                                 now_ms)
        return self._prepare(transit)

    def prepare_add_partitions(self, partitions: Iterable[TopicPartition],
                               now_ms: int) -> TxnTransit:
        start = now_ms if self.state is not S.ONGOING else self.start_ms
        return self._prepare(replace(self.snapshot(), state=S.ONGOING,
                                     partitions=frozenset(self.partitions) | set(partitions),
                                     start_ms=start, update_ms=now_ms))

    def prepare_end(self, commit: bool, now_ms: int) -> TxnTransit:
        return self._prepare(replace(self.snapshot(),
                                     state=S.PREPARE_COMMIT if commit else S.PREPARE_ABORT,
                                     update_ms=now_ms))

    def prepare_fence_and_abort(self, now_ms: int) -> TxnTransit:
        """A newer producer with this id, or the timeout: abort the open transaction at
        the next epoch, so the old producer is fenced at every partition leader too.
        (Kafka passes through PrepareEpochFence in memory; the abort is what is written.)"""
        if self.pending is not None:
            raise TransactionError(ErrorCode.concurrent_transactions,
                                   f"{self.transactional_id} is being changed already")
        if self.state is not S.ONGOING:
            raise TransactionError(ErrorCode.invalid_txn_state,
                                   f"{self.transactional_id} has no open transaction")
        self.state = S.PREPARE_EPOCH_FENCE
        epoch = self.producer_epoch if self.epoch_exhausted else self.producer_epoch + 1
        return self._prepare(replace(self.snapshot(), state=S.PREPARE_ABORT,
                                     producer_epoch=epoch,
                                     last_producer_epoch=self.producer_epoch,
                                     update_ms=now_ms))

    def prepare_dead(self, now_ms: int) -> TxnTransit:
        """The id expired: it is removed (a tombstone is written)."""
        return self._prepare(replace(self.snapshot(), state=S.DEAD, partitions=frozenset(),
                                     update_ms=now_ms))

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        """Every marker is written: CompleteCommit or CompleteAbort, no partitions."""
        if self.state is S.PREPARE_COMMIT:
            state = S.COMPLETE_COMMIT
        elif self.state is S.PREPARE_ABORT:
            state = S.COMPLETE_ABORT
        else:
            raise TransactionError(ErrorCode.invalid_txn_state,
                                   f"{self.transactional_id} is not ending a transaction")
        return self._prepare(replace(self.snapshot(), state=state, partitions=frozenset(),
                                     update_ms=now_ms))

    def prepare_complete_and_add(self, partitions: Iterable[TopicPartition], now_ms: int
                                 ) -> tuple[TxnTransit, TxnTransit]:
        """Every marker is written and the producer's next AddPartitionsToTxn is waiting:
        CompleteCommit/CompleteAbort, then Ongoing from it, each checked as its own
        transition; both are written together and the metadata ends Ongoing."""
        complete = self.prepare_complete(now_ms)
        completed = replace(self, pending=None)
        completed.load(complete)
        try:
            begin = completed.prepare_add_partitions(partitions, now_ms)
        finally:
            self.pending = None
        self.pending = begin
        return complete, begin
