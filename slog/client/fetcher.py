"""The consumer's fetcher: pipelined Fetch requests and lazy record decoding.

One Fetch per broker covers every fetchable partition it leads, and at most
one is in flight per broker. A response is turned into one
:class:`CompletedFetch` per partition, and the partition's fetch position
moves past its last complete batch right away (read from the batch headers,
no record decoding), so the next Fetch can go out while the caller is still
working through the records: that is the prefetch. Up to
``PREFETCH_DEPTH`` completed fetches per partition wait in the buffer.

Each broker's fetches run in an incremental fetch session (KIP-227,
:mod:`slog.protocol.fetch_session`): after a full request, a Fetch names only
the partitions whose position, leader epoch or size changed and forgets those
not fetchable now (paused, buffered full, moved). A session error, a failed
connection or a broker without room for the session means a full request next;
the user never sees those errors.

With ``client_rack`` set (KIP-392), Fetch requests carry it as ``rack_id``; a
leader that answers with ``preferred_read_replica`` sends that partition's
next fetches to the named follower until ``metadata_max_age_ms`` passes or the
follower answers with an error, when the leader is asked again.

Records are decoded only when ``collect()`` hands them out, a batch at a time,
straight into :class:`ConsumerRecord` objects
(:func:`slog.core.records.decode_records_as`): control batches and batches
wholly before the consumer's position are skipped without decoding, records
before the position are dropped from a batch that straddles it, a batch cut off
at the end of a response is left for the next Fetch, every codec is decoded by
:mod:`slog.core.records`. With ``isolation_level=1`` (read_committed) the broker
answers up to the last stable offset and names the aborted transactions the
records overlap; a transactional batch of such a producer, from the aborted
transaction's first offset up to its ABORT marker, is skipped undecoded.
"""

from __future__ import annotations

import logging
import select
import time
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

from slog.client.cluster import ClusterClient
from slog.client.errors import KafkaError
from slog.client.subscription import PartitionState, SubscriptionState
from slog.client.types import ConsumerRecord, TopicPartition
from slog.core.batch import (
    CONTROL_BIT,
    LOG_OVERHEAD,
    BatchHeader,
    parse_header,
    peek_batch_size,
)
from slog.core.errors import CorruptRecordError
from slog.core.records import decode_records_as, iter_valid_batches
from slog.core.transaction_index import marker_commits
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from slog.protocol.fetch_session import FetchSessionHandler

log = logging.getLogger(__name__)

CHANNEL = "fetch"
PREFETCH_DEPTH = 2
_OUT_OF_RANGE = int(ErrorCode.offset_out_of_range)
_CORRUPT = int(ErrorCode.corrupt_message)
_SESSION_ERRORS = frozenset({int(ErrorCode.fetch_session_id_not_found),
                             int(ErrorCode.invalid_fetch_session_epoch)})
NO_PREFERRED_REPLICA = -1


def complete_batches_end(data: bytes) -> tuple[int | None, int]:
    """(next offset after the last complete batch or None, size of a cut-off batch or 0)."""
    pos, end, next_offset = 0, len(data), None
    while end - pos >= LOG_OVERHEAD:
        size = peek_batch_size(data, pos)
        if pos + size > end:
            return next_offset, size
        next_offset = parse_header(data, pos).next_offset
        pos += size
    return next_offset, 0


class CompletedFetch:
    """One partition's data from one Fetch response, decoded a batch at a time."""

    __slots__ = ("_aborted", "_aborting", "_batch_end", "_batches", "_data", "_index",
                 "_records", "exhausted", "generation", "tp")

    def __init__(self, tp: TopicPartition, generation: int, data: bytes,
                 aborted: Iterable[tuple[int, int]] = ()):
        self.tp = tp
        self.generation = generation
        self._data = data
        self._batches: Iterator[tuple[int, BatchHeader]] = iter_valid_batches(data)
        self._records: list[ConsumerRecord] | None = None
        self._index = 0
        self._batch_end = 0
        self.exhausted = False
        # (first offset, producer id) of aborted transactions, oldest first, and the
        # producers whose aborted transaction the batches read so far are inside.
        self._aborted = deque(sorted((first, pid) for pid, first in aborted))
        self._aborting: set[int] = set()

    def _in_aborted_transaction(self, pos: int, header: BatchHeader) -> bool:
        while self._aborted and self._aborted[0][0] <= header.last_offset:
            self._aborting.add(self._aborted.popleft()[1])
        if not self._aborting or not header.is_transactional:
            return False
        if header.is_control:
            if marker_commits(self._data, pos) is False:
                self._aborting.discard(header.producer_id)  # its aborted transaction ends
            return False
        return header.producer_id in self._aborting

    def take(self, out: list[ConsumerRecord], limit: int, state: PartitionState) -> int:
        """Append up to ``limit`` records at or after the position; advance the position."""
        taken = 0
        topic, partition = self.tp
        while taken < limit:
            records = self._records
            if records is None:
                item = next(self._batches, None)
                if item is None:
                    self.exhausted = True
                    self._data = b""
                    break
                pos, header = item
                next_offset = header.base_offset + header.last_offset_delta + 1
                position = state.position or 0
                aborted = (self._aborted or self._aborting) and \
                    self._in_aborted_transaction(pos, header)
                if aborted or header.attributes & CONTROL_BIT or next_offset <= position:
                    # Aborted records, transaction markers, or records already consumed:
                    # not decoded.
                    state.position = max(position, next_offset)
                    continue
                # ConsumerRecords straight from the bytes, no intermediate Record.
                records = decode_records_as(self._data, pos, header, ConsumerRecord,
                                            topic, partition)
                if header.base_offset < position:  # the batch starts before the position
                    records = [r for r in records if r.offset >= position]
                self._records, self._index, self._batch_end = records, 0, next_offset
            start = self._index
            stop = start + limit - taken
            if start == 0 and stop >= len(records):
                out += records
            else:
                out += records[start:stop]
            if stop >= len(records):
                taken += len(records) - start
                self._records = None
                state.position = max(state.position or 0, self._batch_end)
            else:
                taken += stop - start
                self._index = stop
                state.position = records[stop - 1].offset + 1
        return taken


class Fetcher:
    def __init__(self, cluster: ClusterClient, subscription: SubscriptionState, *,
                 fetch_min_bytes: int, fetch_max_wait_ms: int, max_partition_fetch_bytes: int,
                 fetch_max_bytes: int, isolation_level: int, retry_backoff_ms: int,
                 client_rack: str = "", metadata_max_age_ms: int = 300_000):
        self._cluster = cluster
        self._subs = subscription
        self._min_bytes = fetch_min_bytes
        self._max_wait_ms = fetch_max_wait_ms
        self._partition_bytes = max_partition_fetch_bytes
        self._max_bytes = fetch_max_bytes
        self._isolation_level = isolation_level
        self._backoff_s = retry_backoff_ms / 1000
        self._client_rack = client_rack
        self._preferred_max_age_s = metadata_max_age_ms / 1000
        # tp -> (follower to read from, until when): KIP-392's preferred read replica
        self._preferred: dict[TopicPartition, tuple[int, float]] = {}
        self._completed: deque[CompletedFetch] = deque()
        self._buffered: dict[TopicPartition, int] = {}
        # broker -> {tp: (generation, fetch offset)} of its one in-flight Fetch
        self._in_flight: dict[int, dict[TopicPartition, tuple[int, int]]] = {}
        self._size_override: dict[TopicPartition, int] = {}
        self._broker_backoff: dict[int, float] = {}
        self._sessions: dict[int, FetchSessionHandler] = {}  # broker -> its fetch session
        self._errors: list[KafkaError] = []
        self.out_of_range: list[TopicPartition] = []
        self.metadata_needed = False

    # -- sending ---------------------------------------------------------------------
    def send_fetches(self) -> None:
        now = time.monotonic()
        by_leader: dict[int, list[tuple[TopicPartition, PartitionState]]] = {}
        busy = {tp for pending in self._in_flight.values() for tp in pending}
        for tp, state in self._subs.fetchable():
            if tp in busy or self._buffered.get(tp, 0) >= PREFETCH_DEPTH:
                continue
            leader = self._cluster.leader_for(*tp)
            if leader is None:
                self.metadata_needed = True
                continue
            node = self._read_replica(tp, leader, now)
            if node not in self._in_flight and self._broker_backoff.get(node, 0) <= now:
                by_leader.setdefault(node, []).append((tp, state))
        for node, parts in by_leader.items():
            self._send(node, parts, now)

    def _read_replica(self, tp: TopicPartition, leader: int, now: float) -> int:
        """The broker to fetch ``tp`` from: a live preferred read replica, else the leader."""
        preferred = self._preferred.get(tp)
        if preferred is None:
            return leader
        node, until = preferred
        if until <= now or node not in self._cluster.metadata.brokers:
            del self._preferred[tp]
            return leader
        return node

    def _send(self, leader: int, parts: list[tuple[TopicPartition, PartitionState]],
              now: float) -> None:
        wanted: dict[tuple[str, int], dict[str, Any]] = {}
        pending: dict[TopicPartition, tuple[int, int]] = {}
        for tp, state in parts:
            assert state.fetch_position is not None
            meta = self._cluster.partition(*tp)
            wanted[(tp.topic, tp.partition)] = {
                "current_leader_epoch": meta.leader_epoch if meta is not None else -1,
                "fetch_offset": state.fetch_position,
                "last_fetched_epoch": -1,
                "log_start_offset": -1,
                "partition_max_bytes": self._size_override.get(tp, self._partition_bytes),
            }
            # The session fetches exactly these: named or not, any may answer.
            pending[tp] = (state.generation, state.fetch_position)
        session = self._sessions.setdefault(leader, FetchSessionHandler())
        body = {"replica_id": -1, "max_wait": self._max_wait_ms, "min_bytes": self._min_bytes,
                "max_bytes": self._max_bytes, "isolation_level": self._isolation_level,
                "rack_id": self._client_rack, **session.build(wanted)}
        try:
            self._cluster.connection(leader, CHANNEL).send(ApiKey.FETCH, body)
        except ConnectionError as exc:
            self._connection_failed(leader, str(exc), now)
            return
        self._in_flight[leader] = pending

    # -- receiving -------------------------------------------------------------------
    def wait(self, timeout: float) -> bool:
        """Read whatever Fetch responses arrive within ``timeout`` s; True if any did."""
        conns = {c.fileno(): (b, c) for b, c in self._cluster.pooled(CHANNEL).items()
                 if b in self._in_flight}
        if not conns:
            if timeout > 0:
                time.sleep(min(timeout, self._backoff_s))
            return False
        # A TLS socket may already hold a decrypted response select() cannot see.
        readable = [fd for fd, (_, c) in conns.items() if c.buffered()]
        try:
            if not readable:
                readable, _, _ = select.select(list(conns), [], [], max(timeout, 0.0))
        except (OSError, ValueError):
            return False
        for fd in readable:
            node, conn = conns[fd]
            pending = self._in_flight.pop(node)
            try:
                _, response = conn.receive()
            except ConnectionError as exc:
                self._connection_failed(node, str(exc), time.monotonic())
                continue
            self._handle_response(pending, response, node)
        return bool(readable)

    def _handle_response(self, pending: dict[TopicPartition, tuple[int, int]],
                         response: Any, node: int) -> None:
        session = self._sessions.setdefault(node, FetchSessionHandler())
        if not session.handle_response(response.error_code, response.session_id):
            if response.error_code in _SESSION_ERRORS:
                log.debug("fetch session with broker %s: error %s, full fetch next", node,
                          response.error_code)
            else:
                self._errors.append(KafkaError.for_code(response.error_code, "fetch failed"))
            return
        for topic in response.responses:
            for part in topic.partitions:
                tp = TopicPartition(topic.topic, part.partition_index)
                sent = pending.get(tp)
                state = self._subs.state(tp)
                if sent is None or state is None or (state.generation, state.fetch_position) \
                        != sent:
                    continue  # moved (seek, reset, re-assignment) since the request
                self._handle_partition(tp, state, part, node)

    def _handle_partition(self, tp: TopicPartition, state: PartitionState, part: Any,
                          node: int) -> None:
        code = int(part.error_code)
        if code and self._preferred.get(tp, (None, 0.0))[0] == node:
            del self._preferred[tp]
            return  # the follower could not serve it: the leader is asked next
        preferred = getattr(part, "preferred_read_replica", NO_PREFERRED_REPLICA)
        if not code and preferred >= 0 and preferred != node:
            self._preferred[tp] = (preferred, time.monotonic() + self._preferred_max_age_s)
            return  # the leader sent no records, only where to read them
        if code:
            if code == _OUT_OF_RANGE:
                self.out_of_range.append(tp)
            elif KafkaError.for_code(code).retriable:
                self.metadata_needed = True
            else:
                self._errors.append(KafkaError.for_code(code, item=str(tp)))
            return
        state.high_watermark = part.high_watermark
        state.log_start_offset = getattr(part, "log_start_offset", -1)
        data = part.records
        if not data:
            return
        next_offset, cut_size = complete_batches_end(data)
        if next_offset is None:
            # A single batch bigger than we asked for: ask for all of it next time.
            self._size_override[tp] = max(cut_size, self._partition_bytes)
            return
        self._size_override.pop(tp, None)
        state.fetch_position = next_offset
        aborted = getattr(part, "aborted_transactions", None) or ()
        self._completed.append(CompletedFetch(
            tp, state.generation, data,
            [(a.producer_id, a.first_offset) for a in aborted]))
        self._buffered[tp] = self._buffered.get(tp, 0) + 1

    def _connection_failed(self, node: int, reason: str, now: float) -> None:
        log.debug("fetch connection to broker %s failed: %s", node, reason)
        self._cluster.close_connection(node, CHANNEL)
        self._in_flight.pop(node, None)
        session = self._sessions.get(node)
        if session is not None:
            session.reset()  # the broker may or may not have seen the request
        self._broker_backoff[node] = now + self._backoff_s
        self._preferred = {tp: p for tp, p in self._preferred.items() if p[0] != node}
        self.metadata_needed = True

    # -- handing out records ---------------------------------------------------------
    def raise_errors(self) -> None:
        if self._errors:
            error = self._errors.pop(0)
            raise error

    def collect(self, max_records: int) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        keep: deque[CompletedFetch] = deque()
        completed = self._completed
        while completed and len(out) < max_records:
            fetch = completed.popleft()
            state = self._subs.state(fetch.tp)
            if state is not None and state.paused and state.generation == fetch.generation:
                keep.append(fetch)
                continue
            if state is not None and state.generation == fetch.generation:
                try:
                    fetch.take(out, max_records - len(out), state)
                except CorruptRecordError as exc:
                    # Re-fetch from the bad batch: the error repeats until the caller seeks.
                    self._drop(fetch)
                    self._subs.seek(fetch.tp, state.position or 0)
                    raise KafkaError.for_code(_CORRUPT, str(exc), item=str(fetch.tp)) from exc
                if not fetch.exhausted:
                    keep.append(fetch)
                    break
            self._drop(fetch)
        keep.extend(completed)
        self._completed = keep
        return out

    def _drop(self, fetch: CompletedFetch) -> None:
        left = self._buffered.get(fetch.tp, 1) - 1
        if left > 0:
            self._buffered[fetch.tp] = left
        else:
            self._buffered.pop(fetch.tp, None)

    def discard(self, tp: TopicPartition) -> None:
        """Drop buffered data of ``tp`` (its position was moved from outside)."""
        self._completed = deque(f for f in self._completed if f.tp != tp)
        self._buffered.pop(tp, None)
        self._size_override.pop(tp, None)

    def in_flight(self) -> bool:
        return bool(self._in_flight)

    def close(self) -> None:
        for leader in list(self._in_flight):
            self._cluster.close_connection(leader, CHANNEL)
        self._in_flight.clear()
        self._sessions.clear()
        self._completed.clear()
        self._buffered.clear()
