"""The producer's sender thread: drains batches, sends Produce requests, handles replies.

Each loop: drain the accumulator (closed batches and those past linger), seal
them (idempotence fields, compression) into per-partition queues, group the
head batch of every sendable partition by leader into one Produce request per
broker (up to ``max_request_size``, up to ``max_in_flight`` requests pipelined
per connection), then wait on the sockets for responses.

Retries. A retriable error (Kafka's retriable codes, and any transport
failure) puts the batch back in its partition queue after
``retry_backoff_ms`` and refreshes metadata, until ``delivery_timeout_ms``
after the batch was created. A retried batch keeps its bytes, so it keeps its
producer id, epoch and sequence numbers and the broker drops it if the first
attempt did land.

Idempotence. Sequence numbers are assigned when a batch is drained, per
partition, so they follow the order of ``send()``. After a retriable error a
partition is "recovering": batches are resent in sequence order, one in
flight at a time, until the retried one succeeds; OUT_OF_ORDER_SEQUENCE for a
batch behind a retried one is expected then and retried too. A fatal
sequence or epoch error fails that batch and makes the sender fetch a new
producer id (sequences restart at 0) for what is still queued. A batch the
broker refused outright (INVALID_RECORD, ...) used no sequences: the queued
batches behind it are renumbered to close the gap.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import select
import socket
import threading
import time
from collections import defaultdict, deque
from typing import Any, NamedTuple

from slog.client.accumulator import ProducerBatch, RecordAccumulator
from slog.client.cluster import ClusterClient
from slog.client.connection import BrokerConnection
from slog.client.errors import KafkaError, ProduceError, is_retriable
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

_NETWORK = int(ErrorCode.network_exception)
_TIMED_OUT = int(ErrorCode.request_timed_out)
_OUT_OF_ORDER = int(ErrorCode.out_of_order_sequence_number)
_DUPLICATE = int(ErrorCode.duplicate_sequence_number)
# Errors after which the producer id's sequence state is unusable.
_PRODUCER_STATE_ERRORS = {_OUT_OF_ORDER, int(ErrorCode.invalid_producer_epoch),
                          int(ErrorCode.unknown_producer_id)}
_SEQUENCE_MODULUS = 1 << 31
_CLOSED = int(ErrorCode.unknown_server_error)

TP = tuple[str, int]


class _PartitionQueue:
    """Sealed batches of one partition waiting to be sent, in sequence order."""

    __slots__ = ("batches", "in_flight", "next_sequence", "recovering")

    def __init__(self) -> None:
        self.batches: deque[ProducerBatch] = deque()
        self.in_flight = 0
        self.next_sequence = 0
        self.recovering = False


class _InFlight(NamedTuple):
    batches: dict[TP, ProducerBatch]
    sent_at: float


def _log_append_ms(value: Any) -> int:
    if value is None:
        return -1
    if isinstance(value, int):
        return value
    return int(value.timestamp() * 1000)


class Sender(threading.Thread):
    def __init__(self, cluster: ClusterClient, accumulator: RecordAccumulator, *, acks: int,
                 idempotent: bool, retries: int, retry_backoff_ms: int,
                 delivery_timeout_ms: int, request_timeout_ms: int, max_in_flight: int,
                 max_request_size: int, metadata_max_age_ms: int = 300_000,
                 transactional_id: str | None = None,
                 name: str = "slog-producer-sender"):
        super().__init__(name=name, daemon=True)
        self._cluster = cluster
        self._acc = accumulator
        self._acks = acks
        self._idempotent = idempotent
        self._retries = retries
        self._backoff_s = retry_backoff_ms / 1000
        self._delivery_timeout_s = delivery_timeout_ms / 1000
        self._request_timeout_ms = request_timeout_ms
        self._max_in_flight = max_in_flight
        self._max_request_size = max_request_size
        self._queues: dict[TP, _PartitionQueue] = defaultdict(_PartitionQueue)
        self._in_flight: dict[int, deque[_InFlight]] = defaultdict(deque)
        self._broker_backoff: dict[int, float] = {}
        self._producer_id = -1
        self._producer_epoch = -1
        # A transactional producer's id comes from its coordinator (the caller's thread
        # asks, slog.client.transactions); the sender adopts it on its own thread.
        self._transactional_id = transactional_id
        self._assigned_id: tuple[int, int] | None = None
        self._pid_retry_at = 0.0
        self._metadata_needed = False
        self._metadata_next = 0.0
        self._metadata_max_age_s = metadata_max_age_ms / 1000
        self._metadata_stale_at = time.monotonic() + self._metadata_max_age_s
        self._stopping = False
        self._force = False
        self._sleeping = False
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self.fatal_error: BaseException | None = None

    # -- control from other threads ----------------------------------------------------
    def wakeup(self) -> None:
        if self._sleeping:
            with contextlib.suppress(BlockingIOError, OSError):
                self._wake_w.send(b"\0")

    def stop(self, force: bool = False) -> None:
        self._stopping = True
        self._force = self._force or force
        self._sleeping = True
        self.wakeup()

    @property
    def producer_id(self) -> tuple[int, int]:
        return self._producer_id, self._producer_epoch

    def assign_producer_id(self, producer_id: int, epoch: int) -> None:
        """A transactional producer's id and epoch (from InitProducerId at its coordinator)."""
        self._assigned_id = (producer_id, epoch)
        self._sleeping = True
        self.wakeup()

    # -- the loop ------------------------------------------------------------------------
    def run(self) -> None:
        try:
            while True:
                now = time.monotonic()
                if self._stopping and (self._force or self._idle()):
                    break
                self._run_once(now)
        except BaseException as exc:  # pragma: no cover - a bug; don't hang the producer
            log.exception("producer sender thread died")
            self.fatal_error = exc
        finally:
            self._fail_everything("the producer was closed before the record was delivered")
            self._wake_r.close()
            self._wake_w.close()

    def _idle(self) -> bool:
        return (not self._acc.has_unsent and not any(q.batches for q in self._queues.values())
                and not any(self._in_flight.values()))

    def _run_once(self, now: float) -> None:
        self._sleeping = False
        assigned, self._assigned_id = self._assigned_id, None
        if assigned is not None:
            self._adopt_producer_id(*assigned)
        if self._idempotent and self._producer_id < 0 and (
                self._transactional_id is not None or not self._init_producer_id(now)):
            self._sleeping = True
            self._wait(max(self._pid_retry_at - now, 0.0) if self._transactional_id is None
                       else self._backoff_s)
            return
        for batch in self._acc.drain(now, self._backlogged):
            self._enqueue(batch)
        if now >= self._metadata_stale_at:
            self._metadata_needed = True  # notice new partitions and moved leaders
        if self._metadata_needed and now >= self._metadata_next:
            self._refresh_metadata(now)
        self._expire(now)
        self._check_request_timeouts(now)
        self._send_ready(now)
        self._sleeping = True
        self._wait(self._next_timeout(time.monotonic()))

    # -- producer id -------------------------------------------------------------------
    def _init_producer_id(self, now: float) -> bool:
        if now < self._pid_retry_at:
            return False
        try:
            response = self._cluster.request_any(ApiKey.INIT_PRODUCER_ID, {
                "transactional_id": None, "transaction_timeout": 60_000,
                "producer_id": -1, "producer_epoch": -1})
        except ConnectionError as exc:
            log.debug("InitProducerId failed: %s", exc)
            self._pid_retry_at = now + self._backoff_s
            return False
        if response.error_code:
            error = KafkaError.for_code(response.error_code, "InitProducerId failed")
            if not error.retriable:
                self.fatal_error = error
                self._fail_everything(str(error), int(response.error_code))
            self._pid_retry_at = now + self._backoff_s
            return False
        self._adopt_producer_id(response.producer_id, response.producer_epoch)
        return True

    def _adopt_producer_id(self, producer_id: int, epoch: int) -> None:
        self._producer_id = producer_id
        self._producer_epoch = epoch
        for queue in self._queues.values():
            queue.next_sequence = 0
            queue.recovering = False
            for batch in queue.batches:  # never sent under the old id: renumber
                self._seal(batch, queue)

    def _reset_producer_id(self, error: KafkaError) -> None:
        """The broker lost or rejected our sequence state: start over with a new id."""
        self._producer_id = -1
        for queue in self._queues.values():
            keep: deque[ProducerBatch] = deque()
            for batch in queue.batches:
                if batch.attempts:
                    self._finish(batch, error=error)
                else:
                    keep.append(batch)
            queue.batches = keep

    # -- draining into partition queues ------------------------------------------------
    def _seal(self, batch: ProducerBatch, queue: _PartitionQueue) -> None:
        if self._idempotent and self._producer_id >= 0:
            batch.seal(self._producer_id, self._producer_epoch, queue.next_sequence,
                       self._transactional_id is not None)
            queue.next_sequence = (queue.next_sequence + batch.count) % _SEQUENCE_MODULUS
        else:
            batch.seal()

    def _backlogged(self, tp: TP) -> bool:
        """Batches of ``tp`` wait to be sent: its open batch may keep filling meanwhile."""
        queue = self._queues.get(tp)
        return queue is not None and bool(queue.batches)

    def _enqueue(self, batch: ProducerBatch) -> None:
        queue = self._queues[batch.tp]
        self._seal(batch, queue)
        queue.batches.append(batch)

    def _expire(self, now: float) -> None:
        limit = now - self._delivery_timeout_s
        broken: ProduceError | None = None
        for (topic, partition), queue in self._queues.items():
            expired: list[ProducerBatch] = []
            while queue.batches and queue.batches[0].created <= limit:
                batch = queue.batches.popleft()
                error = ProduceError(
                    _TIMED_OUT,
                    f"{batch.count} record(s) expired: delivery_timeout_ms "
                    f"({self._delivery_timeout_s * 1000:.0f} ms) passed since the batch was "
                    f"created ({batch.attempts} attempt(s))",
                    topic=topic, partition=partition)
                self._finish(batch, error=error)
                expired.append(batch)
            if expired and self._gap_breaks_sequences(expired, queue):
                broken = error
        if broken is not None:  # as Kafka's epoch bump (KIP-360): new sequences for all
            self._reset_producer_id(broken)

    def _gap_breaks_sequences(self, expired: list[ProducerBatch], queue: _PartitionQueue
                              ) -> bool:
        """Expired batches leave a hole in their partition's sequences, so every later
        batch would get OUT_OF_ORDER_SEQUENCE until it expired too. Never sent: the later
        ones take over their numbers. Perhaps written: True (a new producer id is needed)."""
        if not self._idempotent or self._transactional_id is not None or \
                expired[0].producer_id != self._producer_id:
            return False
        if any(b.attempts for b in expired) or queue.in_flight or \
                any(b.attempts for b in queue.batches):
            return True
        self._reuse_sequences(expired[0], queue)
        return False

    # -- sending -------------------------------------------------------------------------
    def _sendable(self, queue: _PartitionQueue, now: float) -> bool:
        if not queue.batches or queue.batches[0].retry_at > now:
            return False
        if self._idempotent:
            if queue.recovering and queue.in_flight:
                return False
            if queue.in_flight >= self._max_in_flight:
                return False
        return True

    def _send_ready(self, now: float) -> None:
        by_leader: dict[int, list[TP]] = defaultdict(list)
        for tp, queue in self._queues.items():
            if not self._sendable(queue, now):
                continue
            leader = self._cluster.leader_for(*tp)
            if leader is None:
                self._metadata_needed = True
            elif self._broker_backoff.get(leader, 0.0) <= now:
                by_leader[leader].append(tp)
        for leader, tps in by_leader.items():
            self._send_to(leader, tps, now)

    def _send_to(self, leader: int, tps: list[TP], now: float) -> None:
        try:
            conn = self._cluster.connection(leader)
        except ConnectionError as exc:
            log.debug("cannot reach broker %s: %s", leader, exc)
            self._broker_backoff[leader] = now + self._backoff_s
            self._metadata_needed = True
            return
        while tps and (self._acks == 0 or conn.in_flight < self._max_in_flight):
            request, tps = self._take_request(tps, now)
            if not request:
                return
            self._send_request(leader, conn, request, now)

    def _take_request(self, tps: list[TP], now: float) -> tuple[dict[TP, ProducerBatch],
                                                                 list[TP]]:
        """Pop one head batch per partition, up to max_request_size; return the rest."""
        request: dict[TP, ProducerBatch] = {}
        size = 0
        remaining: list[TP] = []
        for tp in tps:
            queue = self._queues[tp]
            if not self._sendable(queue, now):
                continue
            head = queue.batches[0]
            assert head.payload is not None
            if request and size + len(head.payload) > self._max_request_size:
                remaining.append(tp)
                continue
            queue.batches.popleft()
            queue.in_flight += 1
            request[tp] = head
            size += len(head.payload)
            if self._sendable(queue, now):
                remaining.append(tp)
        return request, remaining

    def _send_request(self, leader: int, conn: BrokerConnection,
                      batches: dict[TP, ProducerBatch], now: float) -> None:
        topics: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for (topic, partition), batch in batches.items():
            topics[topic].append({"index": partition, "records": batch.payload})
        body = {"transactional_id": self._transactional_id, "acks": self._acks,
                "timeout": self._request_timeout_ms,
                "topic_data": [{"name": t, "partition_data": p} for t, p in topics.items()]}
        try:
            if self._acks == 0:
                conn.send_no_response(ApiKey.PRODUCE, body)
            else:
                conn.send(ApiKey.PRODUCE, body)
        except ConnectionError as exc:
            self._connection_failed(leader, str(exc), now, unsent=_InFlight(batches, now))
            return
        if self._acks == 0:
            for tp, batch in batches.items():
                self._queues[tp].in_flight -= 1
                self._finish(batch, base_offset=-1)
        else:
            self._in_flight[leader].append(_InFlight(batches, now))

    # -- responses -----------------------------------------------------------------------
    def _wait(self, timeout: float | None) -> None:
        conns = {c.fileno(): (broker, c) for broker, c in self._cluster.pooled().items()
                 if self._in_flight.get(broker)}
        wake = self._wake_r.fileno()
        # A TLS socket may already hold a decrypted response select() cannot see.
        buffered = [fd for fd, (_, c) in conns.items() if c.buffered()]
        try:
            readable, _, _ = select.select([wake, *conns], [], [], 0 if buffered else timeout)
            readable = list(dict.fromkeys([*readable, *buffered]))
        except (OSError, ValueError):  # a socket closed under us: go round again
            return
        for fd in readable:
            if fd == wake:
                with contextlib.suppress(BlockingIOError):
                    self._wake_r.recv(4096)
                continue
            broker, conn = conns[fd]
            self._receive(broker, conn)

    def _receive(self, broker: int, conn: BrokerConnection) -> None:
        pending = self._in_flight[broker]
        while pending:
            try:
                _, response = conn.receive()
            except ConnectionError as exc:
                self._connection_failed(broker, str(exc), time.monotonic())
                return
            self._handle_response(pending.popleft(), response, time.monotonic())
            if not pending or not (conn.buffered() or select.select([conn], [], [], 0)[0]):
                return

    def _handle_response(self, sent: _InFlight, response: Any, now: float) -> None:
        batches = dict(sent.batches)
        for topic in response.responses:
            for part in topic.partition_responses:
                batch = batches.pop((topic.name, part.index), None)
                if batch is None:
                    continue
                self._queues[batch.tp].in_flight -= 1
                code = int(part.error_code)
                if code == 0 or code == _DUPLICATE:
                    self._succeeded(batch, part.base_offset if code == 0 else -1,
                                    _log_append_ms(getattr(part, "log_append_time", None)))
                else:
                    self._failed(batch, code, getattr(part, "error_message", None), now)
        for batch in batches.values():  # the broker left it out: try again
            self._queues[batch.tp].in_flight -= 1
            self._failed(batch, _NETWORK, "no answer for this partition in the response", now)

    def _succeeded(self, batch: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        queue = self._queues[batch.tp]
        if queue.recovering and not queue.in_flight and \
                not any(b.attempts for b in queue.batches):
            queue.recovering = False
        self._finish(batch, base_offset=base_offset, log_append_time=log_append_time)

    def _failed(self, batch: ProducerBatch, code: int, message: str | None, now: float) -> None:
        queue = self._queues[batch.tp]
        stale_id = self._idempotent and batch.producer_id != self._producer_id
        retriable = code == _NETWORK or is_retriable(code)
        if code == _OUT_OF_ORDER and self._idempotent and not stale_id and (
                queue.recovering or any(b.base_sequence < batch.base_sequence
                                        for b in queue.batches)):
            retriable = True  # an earlier batch failed; this one follows it again
        expired = batch.created + self._delivery_timeout_s <= now
        if retriable and not expired and not stale_id and batch.attempts < self._retries:
            batch.attempts += 1
            batch.retry_at = now + self._backoff_s
            if self._idempotent:
                keys = [b.base_sequence for b in queue.batches]
                queue.batches.insert(bisect.bisect_left(keys, batch.base_sequence), batch)
                queue.recovering = True
            else:
                queue.batches.appendleft(batch)
            self._metadata_needed = True
            log.debug("retrying %r after %s", batch, KafkaError.for_code(code, message))
            return
        error = ProduceError(code, message, topic=batch.topic, partition=batch.partition)
        self._finish(batch, error=error)
        if self._idempotent and not stale_id:
            if code in _PRODUCER_STATE_ERRORS:
                self._reset_producer_id(error)
            elif not retriable:  # refused for good; a timed-out batch may have landed
                self._reuse_sequences(batch, queue)

    def _reuse_sequences(self, refused: ProducerBatch, queue: _PartitionQueue) -> None:
        """A batch the broker refused (INVALID_RECORD, MESSAGE_TOO_LARGE...) took no sequences.

        Later batches of the partition that were never sent are renumbered from
        its base sequence, so they do not arrive after a gap. One already sent
        keeps its numbers: it gets OUT_OF_ORDER_SEQUENCE and a new producer id.
        """
        if queue.in_flight or any(b.attempts for b in queue.batches):
            return
        queue.next_sequence = refused.base_sequence
        for batch in queue.batches:
            self._seal(batch, queue)

    def _connection_failed(self, broker: int, reason: str, now: float,
                           unsent: _InFlight | None = None) -> None:
        """Every request in flight to ``broker`` (and ``unsent``) failed: retry their batches."""
        log.debug("connection to broker %s failed: %s", broker, reason)
        self._cluster.close_connection(broker)
        self._broker_backoff[broker] = now + self._backoff_s
        requests = list(self._in_flight.pop(broker, ()))
        if unsent is not None:
            requests.append(unsent)
        for sent in requests:
            for batch in sent.batches.values():
                self._queues[batch.tp].in_flight -= 1
                self._failed(batch, _NETWORK, reason, now)

    def _check_request_timeouts(self, now: float) -> None:
        limit = now - self._request_timeout_ms / 1000
        for broker, pending in list(self._in_flight.items()):
            if pending and pending[0].sent_at <= limit:
                self._connection_failed(broker, "request timed out", now)

    def _finish(self, batch: ProducerBatch, *, base_offset: int = -1, log_append_time: int = -1,
                error: KafkaError | None = None) -> None:
        batch.finish(base_offset, log_append_time, error)
        self._acc.release(batch)

    # -- metadata and timing -----------------------------------------------------------
    def _refresh_metadata(self, now: float) -> None:
        topics = {topic for topic, _ in self._queues}
        self._metadata_next = now + self._backoff_s
        self._metadata_needed = False
        try:
            self._cluster.refresh_metadata(topics, allow_auto_create=True)
        except ConnectionError as exc:
            log.debug("metadata refresh failed: %s", exc)
            self._metadata_needed = True
        else:
            self._metadata_stale_at = now + self._metadata_max_age_s
        self._broker_backoff = {b: t for b, t in self._broker_backoff.items() if t > now}

    def _next_timeout(self, now: float) -> float | None:
        deadlines = []
        linger = self._acc.next_linger_deadline(self._backlogged)
        if linger is not None:
            deadlines.append(linger)
        if any(q.batches for q in self._queues.values()):
            deadlines.append(now + self._backoff_s)
        if self._metadata_needed:
            deadlines.append(self._metadata_next)
        oldest = [p[0].sent_at for p in self._in_flight.values() if p]
        if oldest:
            deadlines.append(min(oldest) + self._request_timeout_ms / 1000)
        if self._stopping:
            deadlines.append(now + self._backoff_s)
        if not deadlines:
            return None
        return max(min(deadlines) - now, 0.0)

    def _fail_everything(self, reason: str, code: int = _CLOSED) -> None:
        leftovers = self._acc.abort_all()
        for queue in self._queues.values():
            leftovers.extend(queue.batches)
            queue.batches.clear()
        for pending in self._in_flight.values():
            for sent in pending:
                leftovers.extend(sent.batches.values())
            pending.clear()
        for batch in leftovers:
            if not batch.done.is_set():
                self._finish(batch, error=ProduceError(code, reason, topic=batch.topic,
                                                       partition=batch.partition))
