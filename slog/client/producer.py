"""The producer: ``send()`` records, a background thread delivers them in batches.

Example::

    with Producer("127.0.0.1:9092", linger_ms=5) as producer:
        future = producer.send("orders", b"hello", key=b"alice")
        print(future.result(timeout=10))      # RecordMetadata(topic, partition, offset, ts)

``send()`` only encodes the record into its partition's open batch (see
:mod:`slog.client.accumulator`); :mod:`slog.client.sender` does the network
part on its own thread. Keys and values are bytes (str is utf-8 encoded).

Defaults differ from Kafka's where throughput on one machine wins:
``batch_size`` is 256 KiB (Kafka: 16 KiB) because a Python client pays per
request, not per byte, and a 256 KiB batch still fits Kafka's default
``max.message.bytes`` (1 MiB) and ``max_request_size`` with room to spare.
``partitioner`` picks the key hash (:mod:`slog.client.partitioner`): ``murmur3``
(slog's default), ``murmur2`` to place keys as Java and kafka-python producers
do, ``crc32`` as librdkafka's ``consistent``.
Everything else follows Kafka: ``acks="all"``, idempotence on when acks is
all, ``linger_ms=5``, ``retries`` unbounded within ``delivery_timeout_ms``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from slog.client.accumulator import (
    DeliveryCallback,
    DeliveryFuture,
    ProducerBatch,
    RecordAccumulator,
)
from slog.client.cluster import ClusterClient, client_tls
from slog.client.errors import InvalidArgumentError, KafkaError, KafkaTimeoutError
from slog.client.partitioner import DEFAULT_PARTITIONER, StickyPartitioner, key_partitioner
from slog.client.sender import Sender
from slog.client.transactions import TransactionManager
from slog.client.types import ClusterMetadata, TopicPartition
from slog.core.compression import codec_from_name
from slog.core.records import Header

__all__ = ["DEFAULT_BATCH_SIZE", "DeliveryFuture", "Producer"]

DEFAULT_BATCH_SIZE = 256 * 1024
Acks = Literal["all", 0, 1, -1, "0", "1", "-1"]
MAX_IDEMPOTENT_IN_FLIGHT = 5


def _parse_acks(acks: Acks | int | str) -> int:
    value = {"all": -1, "-1": -1, "0": 0, "1": 1}.get(acks, acks) if isinstance(acks, str) \
        else acks
    if value not in (-1, 0, 1):
        raise InvalidArgumentError(f"acks must be 'all', -1, 0 or 1, not {acks!r}")
    return int(value)


class Producer:
    """Sends records to topics; see the module docstring for the model and defaults.

    ``enable_idempotence`` defaults to True when ``acks`` is all and may not
    be True otherwise (Kafka's rule). With it, retries never duplicate or
    reorder records within a partition. Without it (acks 0 or 1), a retry
    after a lost response can duplicate a batch, and with ``max_in_flight``
    above 1 a retried batch can land after a later one, as in Kafka.
    """

    def __init__(
        self,
        bootstrap: str | Iterable[str],
        *,
        acks: Acks | int | str = "all",
        linger_ms: float = 5,
        batch_size: int = DEFAULT_BATCH_SIZE,
        compression: str = "none",
        enable_idempotence: bool | None = None,
        retries: int = 2_147_483_647,
        delivery_timeout_ms: int = 120_000,
        retry_backoff_ms: int = 100,
        request_timeout_ms: int = 30_000,
        max_in_flight: int = 5,
        partitioner: str = DEFAULT_PARTITIONER,
        max_request_size: int = 1024 * 1024,
        buffer_memory: int = 64 * 1024 * 1024,
        max_block_ms: int = 60_000,
        metadata_max_age_ms: int = 300_000,
        client_id: str = "slog-producer",
        security_protocol: str | None = None,
        ssl_cafile: str | None = None,
        ssl_certfile: str | None = None,
        ssl_keyfile: str | None = None,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60_000,
    ):
        self.acks = _parse_acks(acks)
        if transactional_id is not None and (enable_idempotence is False or self.acks != -1):
            raise InvalidArgumentError("a transactional producer is idempotent: acks='all'")
        if enable_idempotence is None:
            enable_idempotence = self.acks == -1 and max_in_flight <= MAX_IDEMPOTENT_IN_FLIGHT
        elif enable_idempotence and self.acks != -1:
            raise InvalidArgumentError("enable_idempotence requires acks='all'")
        if enable_idempotence and max_in_flight > MAX_IDEMPOTENT_IN_FLIGHT:
            raise InvalidArgumentError(f"enable_idempotence allows at most "
                                       f"{MAX_IDEMPOTENT_IN_FLIGHT} requests in flight")
        if batch_size <= 0 or max_in_flight <= 0:
            raise InvalidArgumentError("batch_size and max_in_flight must be positive")
        self.idempotent = enable_idempotence
        self._key_partition = key_partitioner(partitioner)
        self._max_block_s = max_block_ms / 1000
        self._retry_backoff_s = retry_backoff_ms / 1000
        self._cluster = ClusterClient(bootstrap, client_id=client_id,
                                      request_timeout_ms=request_timeout_ms,
                                      tls=client_tls(security_protocol, ssl_cafile,
                                                     ssl_certfile, ssl_keyfile))
        self._sticky = StickyPartitioner()
        self._counts: dict[str, int] = {}
        self._counts_from: ClusterMetadata | None = None
        self._closed = False
        self._accumulator = RecordAccumulator(
            batch_size=batch_size, linger_ms=linger_ms, compression=codec_from_name(compression),
            buffer_memory=buffer_memory, max_block_ms=max_block_ms,
            on_batch_closed=self._batch_closed, wakeup=self._wakeup)
        self._sender = Sender(
            self._cluster, self._accumulator, acks=self.acks, idempotent=enable_idempotence,
            retries=retries, retry_backoff_ms=retry_backoff_ms,
            delivery_timeout_ms=delivery_timeout_ms, request_timeout_ms=request_timeout_ms,
            max_in_flight=max_in_flight, max_request_size=max_request_size,
            metadata_max_age_ms=metadata_max_age_ms, transactional_id=transactional_id)
        self._sender.start()
        self._txn = None if transactional_id is None else TransactionManager(
            self._cluster, transactional_id, transaction_timeout_ms, self._retry_backoff_s,
            max_wait_s=self._max_block_s)
        self._txn_id: tuple[int, int] | None = None  # from init_transactions()
        self._txn_partitions: set[TopicPartition] | None = None  # None: no transaction open
        self._txn_futures: list[DeliveryFuture] = []

    def _wakeup(self) -> None:
        self._sender.wakeup()

    # -- sending -------------------------------------------------------------------------
    def send(
        self,
        topic: str,
        value: bytes | str | None = None,
        key: bytes | str | None = None,
        *,
        partition: int | None = None,
        headers: Sequence[Header] | None = None,
        timestamp_ms: int | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> DeliveryFuture:
        """Queue one record; returns a future for its RecordMetadata.

        ``on_delivery(metadata, error)`` runs on the sender thread once the
        record is acknowledged or has failed (exactly one of them is None).
        Blocks only when topic metadata is unknown or ``buffer_memory`` is
        full, up to ``max_block_ms``.
        """
        if self._closed:
            raise RuntimeError("send() on a closed producer")
        if self._sender.fatal_error is not None:
            raise self._sender.fatal_error
        if self._counts_from is not self._cluster.metadata:
            self._counts.clear()
            self._counts_from = self._cluster.metadata
        count = self._counts.get(topic)
        if count is None:
            count = self._partition_count(topic)
        if partition is None:
            partition = self._sticky.partition(topic, count) if key is None \
                else self._key_partition(key, count)
        elif not 0 <= partition < count:
            count = self._partition_count(topic, refresh=True)
            if not 0 <= partition < count:
                raise InvalidArgumentError(f"partition {partition} of {topic!r} does not exist "
                                           f"(it has partitions 0..{count - 1})")
        if self._txn is not None:
            self._add_to_transaction(TopicPartition(topic, partition))
        # str keys and values too: the accumulator encodes them on its slow path.
        future = self._accumulator.append(topic, partition, key, value, headers,  # type: ignore[arg-type]
                                          timestamp_ms, on_delivery)
        if self._txn is not None:
            self._txn_futures.append(future)
        return future

    # -- transactions --------------------------------------------------------------------
    def _transactional(self) -> tuple[TransactionManager, tuple[int, int]]:
        if self._txn is None:
            raise InvalidArgumentError("not a transactional producer: give transactional_id")
        if self._txn_id is None:
            raise InvalidArgumentError("call init_transactions() first")
        return self._txn, self._txn_id

    def init_transactions(self) -> None:
        """Get the producer id and epoch of the transactional id from its coordinator,
        fencing any older producer with the same id (its open transaction is aborted)."""
        if self._txn is None:
            raise InvalidArgumentError("not a transactional producer: give transactional_id")
        self._txn_id = self._txn.init_producer_id()
        self._sender.assign_producer_id(*self._txn_id)

    def begin_transaction(self) -> None:
        self._transactional()
        if self._txn_partitions is not None:
            raise InvalidArgumentError("a transaction is already open")
        self._txn_partitions, self._txn_futures = set(), []

    def _add_to_transaction(self, tp: TopicPartition) -> None:
        txn, (producer_id, epoch) = self._transactional()
        if self._txn_partitions is None:
            raise InvalidArgumentError("send() of a transactional producer needs "
                                       "begin_transaction() first")
        if tp not in self._txn_partitions:
            txn.add_partitions(producer_id, epoch, [tp])
            self._txn_partitions.add(tp)

    def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, int],
                                    group_metadata: Any) -> None:
        """Commit a consumer group's offsets (the next offsets to read) with the
        transaction; ``group_metadata``: ``Consumer.group_metadata()``."""
        txn, (producer_id, epoch) = self._transactional()
        if self._txn_partitions is None:
            raise InvalidArgumentError("no transaction is open")
        txn.send_offsets(producer_id, epoch,
                         {TopicPartition(*tp): o for tp, o in offsets.items()}, group_metadata)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Deliver every record of the transaction, then commit it. A record that failed
        raises its error: abort_transaction() then."""
        txn, (producer_id, epoch) = self._transactional()
        if self._txn_partitions is None:
            raise InvalidArgumentError("no transaction is open")
        self.flush(timeout)
        failed = next((e for f in self._txn_futures if (e := f.exception(0)) is not None), None)
        if failed is not None:
            raise failed
        if self._txn_partitions or self._txn_futures:
            txn.end(producer_id, epoch, commit=True)
        self._txn_partitions, self._txn_futures = None, []

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the open transaction: its records are never read by read_committed
        consumers. After a failed record the producer gets a new epoch (KIP-360)."""
        txn, (producer_id, epoch) = self._transactional()
        if self._txn_partitions is None:
            raise InvalidArgumentError("no transaction is open")
        self.flush(timeout)
        failed = any(f.exception(0) is not None for f in self._txn_futures)
        if self._txn_partitions:
            txn.end(producer_id, epoch, commit=False)
        self._txn_partitions, self._txn_futures = None, []
        if failed:  # the sequences are unknown now: start again at a bumped epoch
            self._txn_id = txn.init_producer_id(producer_id, epoch)
            self._sender.assign_producer_id(*self._txn_id)

    def _partition_count(self, topic: str, refresh: bool = False) -> int:
        """Wait (up to max_block_ms) for the topic's partition count; Kafka auto-creates."""
        deadline = time.monotonic() + self._max_block_s
        last_error: Exception | None = None
        while True:
            if refresh or self._cluster.partitions_for(topic) is None:
                try:
                    self._cluster.refresh_metadata([topic], allow_auto_create=True)
                except ConnectionError as exc:
                    last_error = exc
            partitions = self._cluster.partitions_for(topic)
            if partitions:
                self._counts[topic] = len(partitions)
                return len(partitions)
            entry = self._cluster.topic(topic)
            if entry is not None and entry.error_code:
                last_error = KafkaError.for_code(entry.error_code, item=topic)
                if not last_error.retriable:
                    raise last_error
            if time.monotonic() >= deadline:
                if isinstance(last_error, KafkaError):
                    raise last_error
                why = f" ({last_error})" if last_error else ""
                raise KafkaTimeoutError(f"topic {topic!r} not present in metadata after "
                                        f"{self._max_block_s * 1000:.0f} ms{why}") from last_error
            refresh = True
            time.sleep(self._retry_backoff_s)

    def _batch_closed(self, batch: ProducerBatch) -> None:
        self._sticky.batch_closed(batch.topic, batch.partition, self._counts.get(batch.topic, 1))

    def partitions_for(self, topic: str) -> list[int]:
        """Partition ids of ``topic`` (waits for metadata like send())."""
        return list(range(self._partition_count(topic)))

    # -- lifecycle -----------------------------------------------------------------------
    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now and wait until each record is acknowledged or failed.

        Raises KafkaTimeoutError if that takes longer than ``timeout`` seconds;
        delivery errors are reported through the futures, not here.
        """
        pending = self._accumulator.begin_flush()
        try:
            deadline = None if timeout is None else time.monotonic() + timeout
            for batch in pending:
                left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
                if not batch.done.wait(left):
                    raise KafkaTimeoutError(f"flush() did not finish within {timeout} s")
        finally:
            self._accumulator.end_flush()

    def close(self, timeout: float | None = None) -> None:
        """Flush (up to ``timeout`` seconds), stop the sender and close connections.

        Records still undelivered after the timeout fail with a ProduceError.
        """
        if self._closed:
            return
        self._closed = True
        force = False
        try:
            self.flush(timeout)
        except KafkaTimeoutError:
            force = True
        finally:
            self._sender.stop(force=force)
            self._sender.join(None if timeout is None else max(timeout, 1.0))
            self._cluster.close()

    @property
    def producer_id(self) -> tuple[int, int]:
        """(producer id, epoch) of an idempotent producer; (-1, -1) before it has one."""
        return self._sender.producer_id

    @property
    def cluster(self) -> ClusterClient:
        return self._cluster

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Producer acks={self.acks} idempotent={self.idempotent}>"

