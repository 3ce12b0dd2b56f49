"""TransactionCoordinator: Kafka's transaction coordinator for the transactional ids
whose ``__transaction_state`` partition this broker leads.

A request goes: check the id's partition is loaded here, validate producer id
and epoch, prepare a change on the id's :class:`TransactionMetadata`, append
it to ``__transaction_state`` and wait until it is replicated, then apply it.
EndTxn answers once PrepareCommit/PrepareAbort is replicated; the markers are
then written to every partition of the transaction (``MarkerWriter``, the
broker's WriteTxnMarkers sender) and CompleteCommit/CompleteAbort recorded.
An AddPartitionsToTxn (or AddOffsetsToTxn) that arrives while the previous
transaction of its id is still being completed waits for that, briefly, instead of
being answered CONCURRENT_TRANSACTIONS at once; its Ongoing record is then
written in one batch with the Complete* record, one replication wait for both.
A new leader of a state partition replays it and finishes the transactions it
finds prepared; open transactions past their timeout are aborted at a bumped
epoch, which fences their producer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Coroutine
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from slog.core.errors import CorruptRecordError
from slog.core.kafka_errors import ErrorCode, KafkaApiError
from slog.core.records import BatchBuilder, iter_decoded_batches
from slog.groups.placement import java_abs, java_string_hash
from slog.transactions.metadata import (
    NO_PRODUCER_EPOCH,
    TopicPartition,
    TransactionError,
    TransactionMetadata,
    TransactionState,
    TxnTransit,
)
from slog.transactions.records import (
    WireFormatError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

log = logging.getLogger("slog.transactions")

TRANSACTION_STATE_TOPIC = "__transaction_state"
MARKER_RETRY_S = 0.1


class TransactionLog(Protocol):
    """The ``__transaction_state`` partitions this broker leads (the broker's
    ``OffsetsTopicLog`` over that topic)."""

    def partition_count(self) -> int | None: ...
    def is_leader(self, partition: int) -> bool: ...
    def becoming_leader(self, partition: int) -> bool: ...
    def leader_epoch(self, partition: int) -> int: ...
    def append(self, partition: int, batch: bytes) -> int: ...
    async def wait_committed(self, partition: int, offset: int) -> None: ...
    def read(self, partition: int, offset: int) -> tuple[bytes, int]: ...


class MarkerWriter(Protocol):
    async def write_markers(self, producer_id: int, producer_epoch: int, commit: bool,
                            coordinator_epoch: int, partitions: set[TopicPartition]
                            ) -> set[TopicPartition]:
        """Have each partition's leader append the marker; returns those still to do.
        ``coordinator_epoch``: the leader epoch of the id's state partition, so leaders
        refuse the markers of a deposed coordinator."""


@dataclass(frozen=True)
class TxnConfig:
    partitions: int = 50  # transaction.state.log.num.partitions
    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    abort_check_interval_ms: int = 10_000  # ...abort.timed.out.transaction.cleanup.interval.ms
    id_expiration_ms: int = 7 * 24 * 3600 * 1000  # transactional.id.expiration.ms
    id_expiration_check_ms: int = 3600 * 1000  # ...remove.expired.transaction.cleanup...
    # How long AddPartitionsToTxn waits for the previous transaction's markers and
    # Complete* record before answering CONCURRENT_TRANSACTIONS (slog's, not Kafka's).
    completion_wait_ms: int = 500


def partition_for(transactional_id: str, partitions: int) -> int:
    """Kafka's placement: ``Utils.abs(transactionalId.hashCode()) % partitions``."""
    return java_abs(java_string_hash(transactional_id)) % partitions


@dataclass
class HeldAdd:
    """An AddPartitionsToTxn waiting for its id's previous transaction to complete;
    the completion writes its Ongoing record too. ``done`` says whether it did."""

    producer_id: int
    producer_epoch: int
    partitions: set[TopicPartition]
    done: asyncio.Future[bool]
    taken: bool = False  # the completion is writing it

    def is_of(self, producer_id: int, producer_epoch: int) -> bool:
        return (self.producer_id, self.producer_epoch) == (producer_id, producer_epoch)

    def open_to(self, producer_id: int, producer_epoch: int) -> bool:
        """Whether an add of this producer may still join the completion's write."""
        return not self.taken and self.is_of(producer_id, producer_epoch)


class TransactionCoordinator:
    def __init__(self, config: TxnConfig, txn_log: TransactionLog, markers: MarkerWriter,
                 next_producer_id: Callable[[], int], wall_ms: Callable[[], int]):
        self.config = config
        self.log = txn_log
        self.markers = markers
        self._next_producer_id = next_producer_id
        self._wall_ms = wall_ms
        self.transactions: dict[str, TransactionMetadata] = {}
        self.owned: set[int] = set()
        self.loading: dict[int, asyncio.Task[None] | None] = {}  # None: not started yet
        self._tasks: set[asyncio.Task[None]] = set()
        self._completing: dict[str, asyncio.Task[None]] = {}  # id -> markers, Complete*
        self._held: dict[str, HeldAdd] = {}  # id -> its next AddPartitionsToTxn

    # -- placement and ownership ---------------------------------------------------------
    def partition_of(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.log.partition_count() or
                             self.config.partitions)

    def _check_owner(self, transactional_id: str) -> int:
        partition = self.partition_of(transactional_id)
        if partition in self.loading or (partition not in self.owned and
                                         self.log.becoming_leader(partition)):
            raise TransactionError(ErrorCode.coordinator_load_in_progress,
                                   f"{TRANSACTION_STATE_TOPIC}-{partition} is loading")
        if partition not in self.owned:
            raise TransactionError(ErrorCode.not_coordinator,
                                   f"this broker does not lead {TRANSACTION_STATE_TOPIC}-"
                                   f"{partition}")
        return partition

    # -- leadership ---------------------------------------------------------------------
    def on_election(self, partition: int) -> None:
        if partition not in self.owned and partition not in self.loading:
            self.loading[partition] = self._start_load(partition)

    def _start_load(self, partition: int) -> asyncio.Task[None] | None:
        """The loading task; None at start-up, before the event loop runs (then
        ``run_timeouts`` starts it)."""
        try:
            return asyncio.get_running_loop().create_task(
                self._load(partition), name=f"load-txn-state-{partition}")
        except RuntimeError:
            return None

    def on_resignation(self, partition: int) -> None:
        task = self.loading.pop(partition, None)
        if task is not None:
            task.cancel()
        self.owned.discard(partition)
        for txn_id in [t for t in self.transactions if self.partition_of(t) == partition]:
            del self.transactions[txn_id]

    async def _load(self, partition: int) -> None:
        found: dict[str, TxnTransit | None] = {}
        offset = 0
        try:
            while True:
                chunk, offset = self.log.read(partition, offset)
                if not chunk:
                    break
                _replay(chunk, found)
                await asyncio.sleep(0)  # a long log must not stall other requests
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading %s-%d failed", TRANSACTION_STATE_TOPIC, partition)
            self.loading.pop(partition, None)
            return
        for txn_id, transit in found.items():
            if transit is None:
                continue
            meta = TransactionMetadata(txn_id, transit.producer_id)
            meta.load(transit)
            self.transactions[txn_id] = meta
        self.loading.pop(partition, None)
        self.owned.add(partition)
        log.info("loaded %s-%d: %d transactional ids", TRANSACTION_STATE_TOPIC, partition,
                 sum(1 for t in found.values() if t is not None))
        for txn_id, meta in list(self.transactions.items()):
            if self.partition_of(txn_id) == partition and meta.state in (
                    TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
                self._complete(txn_id, meta)

    # -- persistence --------------------------------------------------------------------
    async def _write(self, meta: TransactionMetadata, *transits: TxnTransit) -> None:
        """Append ``transits`` for ``meta`` in one batch, wait for the ISR, apply the
        last; on failure the metadata is unchanged and the error (NOT_COORDINATOR, ...)
        raised."""
        partition = self.partition_of(meta.transactional_id)
        builder = BatchBuilder()
        for transit in transits:
            # Dead: the id expired; its tombstone lets compaction forget it.
            value = None if transit.state is TransactionState.DEAD else encode_value(transit)
            builder.append(encode_key(meta.transactional_id), value)
        try:
            if partition not in self.owned:
                raise TransactionError(ErrorCode.not_coordinator, "no longer the coordinator")
            last = self.log.append(partition, builder.build())
            await self.log.wait_committed(partition, last)
        except BaseException:
            meta.abandon()
            raise
        if self.transactions.get(meta.transactional_id) is not meta:
            meta.abandon()  # unloaded meanwhile: the new coordinator replays the record
            raise TransactionError(ErrorCode.not_coordinator, "no longer the coordinator")
        meta.complete(transits[-1])

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _complete(self, transactional_id: str, meta: TransactionMetadata) -> None:
        """Start writing the markers of ``meta``'s prepared transaction, then its
        Complete* record."""
        task = self._spawn(self._send_markers_and_complete(transactional_id, meta))
        self._completing[transactional_id] = task
        task.add_done_callback(partial(self._completed, transactional_id))

    def _completed(self, transactional_id: str, task: asyncio.Task[None]) -> None:
        if self._completing.get(transactional_id) is task:
            del self._completing[transactional_id]
            held = self._held.pop(transactional_id, None)
            if held is not None and not held.done.done():
                held.done.set_result(False)  # not written: it goes the usual way

    async def _added_on_completion(self, transactional_id: str, producer_id: int,
                                   producer_epoch: int, partitions: set[TopicPartition]
                                   ) -> bool:
        """Wait (up to ``completion_wait_ms``) for the previous transaction of this id to
        be completed, and have the completion write these partitions' Ongoing record
        with its Complete* one; True if it did. A producer begins its next transaction
        as soon as EndTxn is answered, before the markers are written; answering its
        AddPartitionsToTxn CONCURRENT_TRANSACTIONS makes it retry every ~20 ms
        (librdkafka) until the Complete* record is in, which costs a transaction up to
        a retry interval and the coordinator a request per retry. Waiting answers as
        the retry would, and sharing the write saves a replication round trip."""
        completion = self._completing.get(transactional_id)
        if completion is None or not self._is_producer_of(transactional_id, producer_id,
                                                          producer_epoch):
            return False  # nothing to wait for, or not its producer: its error is answered
        held = self._held.get(transactional_id)
        if held is not None and not held.open_to(producer_id, producer_epoch):
            await asyncio.wait({completion}, timeout=self._completion_wait_s)
            return False  # too late to share its write
        held = self._hold(transactional_id, producer_id, producer_epoch, partitions)
        return await self._written_with_completion(transactional_id, held)

    def _is_producer_of(self, transactional_id: str, producer_id: int, producer_epoch: int
                        ) -> bool:
        meta = self.transactions.get(transactional_id)
        return meta is not None and (meta.producer_id, meta.producer_epoch) == (
            producer_id, producer_epoch)

    def _hold(self, transactional_id: str, producer_id: int, producer_epoch: int,
              partitions: set[TopicPartition]) -> HeldAdd:
        """The id's held add, made if there is none, with ``partitions`` in it."""
        held = self._held.get(transactional_id)
        if held is None:
            held = HeldAdd(producer_id, producer_epoch, set(partitions),
                           asyncio.get_running_loop().create_future())
            self._held[transactional_id] = held
        else:
            held.partitions |= partitions
        return held

    async def _written_with_completion(self, transactional_id: str, held: HeldAdd) -> bool:
        """Whether the completion wrote ``held``: waited for up to ``completion_wait_ms``,
        then withdrawn (the add is answered CONCURRENT_TRANSACTIONS) unless the
        completion has taken it, whose write is then waited for."""
        try:
            return await asyncio.wait_for(asyncio.shield(held.done), self._completion_wait_s)
        except TimeoutError:
            if held.taken:
                return await held.done  # its write is under way
            if self._held.get(transactional_id) is held:
                del self._held[transactional_id]  # still waiting for the markers
            return False

    @property
    def _completion_wait_s(self) -> float:
        return self.config.completion_wait_ms / 1000

    async def _write_completion(self, meta: TransactionMetadata) -> None:
        """Every marker is written: Complete*, and with it the Ongoing record of the
        next transaction if its AddPartitionsToTxn is waiting."""
        held = self._held.get(meta.transactional_id)
        now = self._wall_ms()
        if held is None or not held.is_of(meta.producer_id, meta.producer_epoch):
            await self._write(meta, meta.prepare_complete(now))
            return
        held.taken = True
        await self._write(meta, *meta.prepare_complete_and_add(held.partitions, now))
        held.done.set_result(True)

    # -- InitProducerId -----------------------------------------------------------------
    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               producer_id: int, producer_epoch: int) -> tuple[int, int]:
        if not transactional_id:
            raise TransactionError(ErrorCode.invalid_request, "empty transactional id")
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            raise TransactionError(
                ErrorCode.invalid_transaction_timeout,
                f"transaction.timeout.ms={timeout_ms} is not in (0, "
                f"transaction.max.timeout.ms={self.config.max_timeout_ms}]")
        self._check_owner(transactional_id)
        meta = self.transactions.get(transactional_id)
        if meta is None:
            meta = TransactionMetadata(transactional_id, self._next_producer_id(),
                                       timeout_ms=timeout_ms)
            self.transactions[transactional_id] = meta
        if meta.pending is not None:
            raise TransactionError(ErrorCode.concurrent_transactions,
                                   f"{transactional_id} is being changed")
        if producer_id >= 0 and not _known_producer(meta, producer_id, producer_epoch):
            # KIP-360: a producer recovering with its id and epoch must still be current.
            raise TransactionError(ErrorCode.producer_fenced,
                                   f"producer {producer_id} epoch {producer_epoch} is not "
                                   f"the current one of {transactional_id}")
        state = meta.state
        if state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT,
                     TransactionState.PREPARE_EPOCH_FENCE):
            raise TransactionError(ErrorCode.concurrent_transactions,
                                   f"{transactional_id} is completing a transaction")
        if state is TransactionState.ONGOING:
            # A new producer instance (or a recovering one): abort what the previous one
            # left open, at a bumped epoch that fences it; the client retries.
            await self._fence_and_abort(meta)
            raise TransactionError(ErrorCode.concurrent_transactions,
                                   f"aborting the open transaction of {transactional_id}")
        if state is TransactionState.DEAD:
            raise TransactionError(ErrorCode.concurrent_transactions,
                                   f"{transactional_id} is being removed")
        now = self._wall_ms()
        new_id = self._next_producer_id() if meta.epoch_exhausted else None
        await self._write(meta, meta.prepare_epoch_bump(timeout_ms, now, new_id))
        return meta.producer_id, meta.producer_epoch

    # -- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------------
    def _current(self, transactional_id: str, producer_id: int, producer_epoch: int
                 ) -> TransactionMetadata:
        self._check_owner(transactional_id)
        meta = self.transactions.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            why = ErrorCode.invalid_producer_id_mapping, \
                f"producer {producer_id} is not {transactional_id}'s"
        elif meta.producer_epoch != producer_epoch:
            why = ErrorCode.producer_fenced, f"epoch {producer_epoch} of " \
                f"{transactional_id} is fenced (current: {meta.producer_epoch})"
        elif meta.pending is not None:
            why = ErrorCode.concurrent_transactions, f"{transactional_id} is being changed"
        else:
            return meta
        raise TransactionError(*why)

    async def add_partitions(self, transactional_id: str, producer_id: int,
                             producer_epoch: int, partitions: set[TopicPartition]) -> None:
        if await self._added_on_completion(transactional_id, producer_id, producer_epoch,
                                           partitions):
            return
        meta = self._current(transactional_id, producer_id, producer_epoch)
        if meta.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
            raise TransactionError(ErrorCode.concurrent_transactions,
                                   f"{transactional_id} is completing a transaction")
        if meta.state is TransactionState.PREPARE_EPOCH_FENCE:
            raise TransactionError(ErrorCode.producer_fenced, f"{transactional_id} is fenced")
        if meta.state is TransactionState.ONGOING and partitions <= meta.partitions:
            return
        await self._write(meta, meta.prepare_add_partitions(partitions, self._wall_ms()))

    # -- EndTxn -------------------------------------------------------------------------
    async def end_transaction(self, transactional_id: str, producer_id: int,
                              producer_epoch: int, commit: bool) -> None:
        meta = self._current(transactional_id, producer_id, producer_epoch)
        state = meta.state
        wanted = TransactionState.COMPLETE_COMMIT if commit else TransactionState.COMPLETE_ABORT
        preparing = TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT
        if state is wanted:
            return  # a retry of an EndTxn that completed
        if state is preparing:
            raise TransactionError(ErrorCode.concurrent_transactions,
                                   f"{transactional_id} is completing this transaction")
        if state is not TransactionState.ONGOING:
            raise TransactionError(
                ErrorCode.invalid_txn_state,
                f"cannot {'commit' if commit else 'abort'}: {transactional_id} is "
                f"{state.kafka_name}")
        await self._write(meta, meta.prepare_end(commit, self._wall_ms()))
        self._complete(transactional_id, meta)

    async def _fence_and_abort(self, meta: TransactionMetadata) -> None:
        await self._write(meta, meta.prepare_fence_and_abort(self._wall_ms()))
        self._complete(meta.transactional_id, meta)

    async def _send_markers_and_complete(self, transactional_id: str,
                                         meta: TransactionMetadata) -> None:
        """Markers to every partition of the transaction, retried until each leader
        took it (or the partition is gone), then CompleteCommit/CompleteAbort."""
        commit = meta.state is TransactionState.PREPARE_COMMIT
        remaining = set(meta.partitions)
        try:
            epoch = self.log.leader_epoch(self.partition_of(transactional_id))
            while remaining:
                if self.transactions.get(transactional_id) is not meta:
                    return  # unloaded: the next coordinator finishes it
                remaining = await self.markers.write_markers(
                    meta.producer_id, meta.producer_epoch, commit, epoch, remaining)
                if remaining:
                    await asyncio.sleep(MARKER_RETRY_S)
            if self.transactions.get(transactional_id) is meta:
                await self._write_completion(meta)
        except KafkaApiError as exc:
            log.info("completing the transaction of %s stopped: %s", transactional_id, exc)
        except Exception:
            log.exception("completing the transaction of %s failed", transactional_id)

    # -- DescribeTransactions / ListTransactions ------------------------------------------
    def describe(self, transactional_id: str) -> TransactionMetadata:
        self._check_owner(transactional_id)
        meta = self.transactions.get(transactional_id)
        if meta is None:
            raise TransactionError(ErrorCode.transactional_id_not_found,
                                   f"no transactional id {transactional_id}")
        return meta

    def list_transactions(self, states: Collection[str], producer_ids: Collection[int],
                          min_duration_ms: int) -> list[TransactionMetadata]:
        """The ids this broker coordinates that pass every filter given (Kafka's
        ListTransactions: states by their names, open longer than ``min_duration_ms``
        when it is not negative); raises COORDINATOR_LOAD_IN_PROGRESS while a partition
        loads."""
        if self.loading:
            raise TransactionError(ErrorCode.coordinator_load_in_progress,
                                   f"{len(self.loading)} partitions are loading")
        now = self._wall_ms()
        return [meta for _, meta in sorted(self.transactions.items())
                if (not states or meta.state.kafka_name in states)
                and (not producer_ids or meta.producer_id in producer_ids)
                and (min_duration_ms < 0 or (meta.start_ms >= 0 and not meta.state.is_complete
                                             and now - meta.start_ms > min_duration_ms))]

    # -- timeouts -----------------------------------------------------------------------
    async def abort_timed_out(self) -> int:
        """Abort (fencing their producers) the open transactions past their timeout."""
        now = self._wall_ms()
        aborted = 0
        for meta in [m for m in self.transactions.values() if m.is_expired(now)]:
            if self.partition_of(meta.transactional_id) not in self.owned:
                continue
            try:
                await self._fence_and_abort(meta)
                aborted += 1
                log.info("aborted the transaction of %s: open longer than %d ms",
                         meta.transactional_id, meta.timeout_ms)
            except KafkaApiError as exc:
                log.info("could not abort the timed-out transaction of %s: %s",
                         meta.transactional_id, exc)
        return aborted

    async def expire_transactional_ids(self) -> int:
        """Forget the ids with no transaction open whose last change is older than
        ``transactional.id.expiration.ms`` (a tombstone in ``__transaction_state``)."""
        now = self._wall_ms()
        expired = 0
        for meta in [m for m in self.transactions.values()
                     if m.pending is None and m.is_expirable(now, self.config.id_expiration_ms)
                     and self.partition_of(m.transactional_id) in self.owned]:
            try:
                await self._write(meta, meta.prepare_dead(now))
            except KafkaApiError as exc:
                log.info("could not expire %s: %s", meta.transactional_id, exc)
                continue
            if self.transactions.get(meta.transactional_id) is meta:
                del self.transactions[meta.transactional_id]
            expired += 1
        return expired

    async def run_timeouts(self) -> None:
        for partition in [p for p, task in self.loading.items() if task is None]:
            self.loading[partition] = self._start_load(partition)
        next_expiry = 0.0
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.config.abort_check_interval_ms / 1000)
            await self.abort_timed_out()
            if loop.time() >= next_expiry:
                next_expiry = loop.time() + self.config.id_expiration_check_ms / 1000
                await self.expire_transactional_ids()

    def shutdown(self) -> None:
        for task in [*self._tasks, *self.loading.values()]:
            if task is not None:
                task.cancel()


def _known_producer(meta: TransactionMetadata, producer_id: int, epoch: int) -> bool:
    """KIP-360: the id and epoch a producer holds, or those just before the latest bump
    (its InitProducerId was answered with a fencing abort or was lost)."""
    if meta.producer_epoch == NO_PRODUCER_EPOCH:
        return False
    current = producer_id == meta.producer_id and epoch == meta.producer_epoch
    previous = producer_id in (meta.producer_id, meta.last_producer_id) and \
        epoch == meta.last_producer_epoch
    return current or previous


def _replay(chunk: bytes, found: dict[str, TxnTransit | None]) -> None:
    """Fold a chunk of ``__transaction_state`` into ``found`` (the latest record wins)."""
    try:
        batches = list(iter_decoded_batches(chunk))
    except CorruptRecordError as exc:
        log.warning("skipping unreadable %s data: %s", TRANSACTION_STATE_TOPIC, exc)
        return
    for _, header, records in batches:
        if header.is_control:
            continue
        for record in records:
            if record.key is None:
                continue
            try:
                txn_id = decode_key(bytes(record.key))
                found[txn_id] = None if record.value is None else \
                    decode_value(bytes(record.value))
            except WireFormatError as exc:
                log.warning("skipping a %s record: %s", TRANSACTION_STATE_TOPIC, exc)
