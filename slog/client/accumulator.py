"""The producer's record accumulator: one open RecordBatch v2 per partition.

``send()`` appends straight into the open :class:`BatchBuilder` of its
partition (no per-record objects for plain bytes; a record costs one encode and
a list append for its timestamp). A batch closes when it reaches
``batch_size`` bytes; the sender thread drains closed batches, and open ones
whose ``linger_ms`` has passed (or all of them while flushing).

The accumulator is shared by the caller's threads and the sender thread; a
single lock guards it. Back-pressure: when closed-but-unfinished batches hold
more than ``buffer_memory`` bytes, opening a new batch blocks up to
``max_block_ms``.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from slog.client.errors import KafkaError, KafkaTimeoutError
from slog.client.types import RecordMetadata
from slog.core.batch import NO_SEQUENCE
from slog.core.records import BatchBuilder, Header

DeliveryCallback = Callable[[RecordMetadata | None, KafkaError | None], Any]
_time_ns = time.time_ns
_monotonic = time.monotonic


class ProducerBatch:
    """Records for one partition, built into one RecordBatch v2 and sent as a unit."""

    __slots__ = (
        "add",
        "attempts",
        "base_offset",
        "base_sequence",
        "builder",
        "callbacks",
        "created",
        "done",
        "error",
        "log_append_time",
        "partition",
        "payload",
        "producer_epoch",
        "producer_id",
        "retry_at",
        "size",
        "timestamps",
        "topic",
    )

    def __init__(self, topic: str, partition: int, builder: BatchBuilder):
        self.topic = topic
        self.partition = partition
        self.builder = builder
        self.add = builder.append
        self.timestamps: list[int] = []
        self.callbacks: list[tuple[int, DeliveryCallback]] = []
        self.created = _monotonic()
        self.size = 0
        self.payload: bytes | None = None
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = NO_SEQUENCE
        self.attempts = 0
        self.retry_at = 0.0
        self.base_offset = -1
        self.log_append_time = -1
        self.error: KafkaError | None = None
        self.done = threading.Event()

    def __repr__(self) -> str:
        return (f"<ProducerBatch {self.topic}-{self.partition} records={self.count} "
                f"seq={self.base_sequence} attempts={self.attempts}>")

    @property
    def count(self) -> int:
        return len(self.timestamps)

    @property
    def tp(self) -> tuple[str, int]:
        return self.topic, self.partition

    def seal(self, producer_id: int = -1, producer_epoch: int = -1,
             base_sequence: int = NO_SEQUENCE, transactional: bool = False) -> bytes:
        """Build the batch bytes, with idempotence fields when a producer id is given."""
        if producer_id >= 0:
            self.builder.set_producer_state(producer_id, producer_epoch, base_sequence,
                                            transactional)
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.payload = self.builder.build()
        return self.payload

    def metadata(self, index: int) -> RecordMetadata:
        offset = self.base_offset + index if self.base_offset >= 0 else -1
        timestamp = self.log_append_time if self.log_append_time >= 0 else self.timestamps[index]
        return RecordMetadata(self.topic, self.partition, offset, timestamp)

    def finish(self, base_offset: int, log_append_time: int = -1,
               error: KafkaError | None = None) -> None:
        """Record the outcome, wake waiters and run delivery callbacks (sender thread)."""
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self.error = error
        self.builder = self.add = None  # type: ignore[assignment]  # free the buffer early
        self.payload = None
        self.done.set()
        for index, callback in self.callbacks:
            try:
                if error is None:
                    callback(self.metadata(index), None)
                else:
                    callback(None, error)
            except Exception:  # a user callback must not kill the sender
                import logging

                logging.getLogger(__name__).exception("delivery callback failed")


class DeliveryFuture:
    """The outcome of one ``send()``: ``result()`` waits for the broker's acknowledgement."""

    __slots__ = ("_batch", "_index")

    def __init__(self, batch: ProducerBatch, index: int):
        self._batch = batch
        self._index = index

    def done(self) -> bool:
        return self._batch.done.is_set()

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """RecordMetadata once delivered; raises the ProduceError, or KafkaTimeoutError."""
        batch = self._batch
        if not batch.done.wait(timeout):
            raise KafkaTimeoutError(f"record to {batch.topic}-{batch.partition} not acknowledged "
                                    f"within {timeout} s")
        if batch.error is not None:
            raise batch.error
        return batch.metadata(self._index)

    def exception(self, timeout: float | None = None) -> KafkaError | None:
        batch = self._batch
        if not batch.done.wait(timeout):
            raise KafkaTimeoutError(f"record to {batch.topic}-{batch.partition} not acknowledged "
                                    f"within {timeout} s")
        return batch.error


def _as_bytes(data: Any) -> Any:
    return data.encode() if isinstance(data, str) else data


class RecordAccumulator:
    def __init__(self, *, batch_size: int, linger_ms: float, compression: int,
                 buffer_memory: int, max_block_ms: int,
                 on_batch_closed: Callable[[ProducerBatch], None],
                 wakeup: Callable[[], None]):
        self.batch_size = batch_size
        self.linger_s = linger_ms / 1000
        self.compression = compression
        self.buffer_memory = buffer_memory
        self.max_block_s = max_block_ms / 1000
        self._on_batch_closed = on_batch_closed
        self._wakeup = wakeup
        self._lock = threading.Lock()
        self._space = threading.Condition(self._lock)
        self._open: dict[tuple[str, int], ProducerBatch] = {}
        self._closed: deque[ProducerBatch] = deque()
        self._incomplete: set[ProducerBatch] = set()
        self._buffered = 0
        self._flushing = 0

    # -- the hot path ------------------------------------------------------------------
    def append(self, topic: str, partition: int, key: bytes | None, value: bytes | None,
               headers: Sequence[Header] | None, timestamp: int | None,
               callback: DeliveryCallback | None) -> DeliveryFuture:
        if timestamp is None:
            timestamp = _time_ns() // 1_000_000
        with self._lock:
            batch = self._open.get((topic, partition)) or self._new_batch(topic, partition)
            try:
                size = batch.add(key, value, headers or (), timestamp)
            except TypeError:
                size = self._append_converted(batch, key, value, headers, timestamp)
            timestamps = batch.timestamps
            index = len(timestamps)
            timestamps.append(timestamp)
            if callback is not None:
                batch.callbacks.append((index, callback))
            if size >= self.batch_size:
                self._close(batch)
                self._wakeup()
        return DeliveryFuture(batch, index)

    def _append_converted(self, batch: ProducerBatch, key: Any, value: Any,
                          headers: Sequence[Header] | None, timestamp: int) -> int:
        """The slow path: str keys/values are utf-8 encoded; anything else is refused."""
        try:
            return batch.add(_as_bytes(key), _as_bytes(value), headers or (), timestamp)
        except Exception:
            if not batch.count:  # do not leave an empty batch behind
                del self._open[(batch.topic, batch.partition)]
                self._incomplete.discard(batch)
            raise

    def _new_batch(self, topic: str, partition: int) -> ProducerBatch:
        if self._buffered >= self.buffer_memory:
            deadline = _monotonic() + self.max_block_s
            while self._buffered >= self.buffer_memory:
                left = deadline - _monotonic()
                if left <= 0:
                    raise KafkaTimeoutError(
                        f"buffer_memory ({self.buffer_memory} bytes) stayed full for "
                        f"max_block_ms ({self.max_block_s * 1000:.0f} ms): the brokers are not "
                        "keeping up or not reachable")
                self._space.wait(left)
        batch = ProducerBatch(topic, partition, BatchBuilder(compression=self.compression))
        self._open[(topic, partition)] = batch
        self._incomplete.add(batch)
        if len(self._open) == 1 or self.linger_s <= 0:
            self._wakeup()  # the sender may be sleeping with no linger deadline
        return batch

    def _close(self, batch: ProducerBatch) -> None:
        del self._open[(batch.topic, batch.partition)]
        batch.size = batch.builder.size_estimate()
        self._buffered += batch.size
        self._closed.append(batch)
        self._on_batch_closed(batch)

    # -- the sender's side -------------------------------------------------------------
    def drain(self, now: float, held: Callable[[tuple[str, int]], bool] = lambda tp: False
              ) -> list[ProducerBatch]:
        """Closed batches, plus open ones whose linger passed (all of them when flushing).

        An open batch of a partition for which ``held`` is true stays open: the sender
        cannot send it before what it already queued there, and meanwhile the batch
        keeps filling (after an outage the backlog goes out in full batches, not in
        thousands of one-record batches sent one round trip each)."""
        with self._lock:
            if self._open:
                cutoff = now if self._flushing else now - self.linger_s
                for batch in [b for b in self._open.values()
                              if b.created <= cutoff and not held(b.tp)]:
                    self._close(batch)
            drained = list(self._closed)
            self._closed.clear()
            return drained

    def next_linger_deadline(self, held: Callable[[tuple[str, int]], bool] = lambda tp: False
                             ) -> float | None:
        """When :meth:`drain` (with the same ``held``) next has something to give."""
        with self._lock:
            if self._closed:
                return 0.0
            lingering = [b.created for b in self._open.values() if not held(b.tp)]
            if not lingering:
                return None
            return 0.0 if self._flushing else min(lingering) + self.linger_s

    def release(self, batch: ProducerBatch) -> None:
        """A batch is finished (delivered or failed): free its buffer space."""
        with self._lock:
            self._incomplete.discard(batch)
            self._buffered -= batch.size
            self._space.notify_all()

    def begin_flush(self) -> list[ProducerBatch]:
        """Make every open batch drainable now; returns the batches to wait for."""
        with self._lock:
            self._flushing += 1
            pending = list(self._incomplete)
        self._wakeup()
        return pending

    def end_flush(self) -> None:
        with self._lock:
            self._flushing -= 1

    def abort_all(self) -> list[ProducerBatch]:
        """Take every batch not yet handed to the sender (used when closing)."""
        with self._lock:
            batches = list(self._closed) + list(self._open.values())
            self._closed.clear()
            self._open.clear()
            return batches

    @property
    def has_unsent(self) -> bool:
        with self._lock:
            return bool(self._open or self._closed)
