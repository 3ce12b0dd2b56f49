"""Fetch: consumers and followers reading partitions, in fetch sessions (KIP-227).

Every fetch runs in a :class:`FetchSession`: a cached one (the client opened
it; an incremental request names only what changed), or a throwaway one for a
sessionless full fetch. The session watches the partitions it reads, so a
fetch with nothing to return parks until one of *its* partitions changes
(a follower: any append; a consumer: the high watermark; everyone:
leadership), and then re-reads only the partitions that changed. An
incremental fetch reads only the partitions its request names and those that
changed since the session's previous answer, and answers with only those that
have something to say (records, an error, a moved high watermark or log
start, a preferred read replica). A partition that still has something to say
after an answer (it returned records or an error, or more is readable) stays
marked, so the next fetch reads it again.

From v13 on topics are named by id, and so are the session's keys; each read
resolves the id to the topic that has it now (UNKNOWN_TOPIC_ID if none).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from slog.broker.access import replica_id_of
from slog.broker.dispatcher import Encoded, RequestContext
from slog.broker.handlers.common import NONE
from slog.broker.handlers.data import check_leader_epoch, leader_hints
from slog.broker.quotas import quota_user
from slog.core.errors import OffsetOutOfRangeError
from slog.core.quotas import CONSUMER_BYTE_RATE
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from slog.protocol.fetch_encoding import (
    FIRST_TOPIC_ID_VERSION,
    FetchPartitionResult,
    FetchTopicResult,
    NodeEndpoint,
    encode_fetch_response,
)
from slog.protocol.shapes import millis
from slog.replication.fetch_sessions import (
    FINAL_EPOCH,
    INVALID_SESSION_ID,
    CachedPartition,
    FetchSession,
    SessionError,
    TopicPartition,
)
from slog.replication.partition import Partition
from slog.replication.replica_selector import (
    NO_PREFERRED_REPLICA,
    ReplicaView,
    preferred_read_replica,
)

FETCH_FROM_FOLLOWER_VERSION = 11  # KIP-392: rack_id and preferred_read_replica
NO_TOPIC_ID = uuid.UUID(int=0)  # kio reads the all-zero id as None
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


class _Read:
    """One partition's answer within one fetch request."""

    __slots__ = ("answer_now", "has_more", "result", "size")

    def __init__(self, result: FetchPartitionResult, size: int = 0, answer_now: bool = False,
                 has_more: bool = False):
        self.result = result
        self.size = size
        self.answer_now = answer_now
        self.has_more = has_more  # the next fetch would read something (stay marked)


class FetchRequestState:
    """One Fetch request being served: its session, what was read, the byte budget."""

    def __init__(self, ctx: RequestContext, request: Any, session: FetchSession):
        self.ctx = ctx
        self.session = session
        self.follower = replica_id_of(request)
        self.budget = request.max_bytes if ctx.version >= 3 else 2**31 - 1
        # A consumer under a byte-rate quota: its user and client id, and at most one
        # sample's worth of its quota per response (slog.broker.quotas).
        self.quota_client: tuple[str, str] | None = None
        if self.follower < 0 and ctx.broker.client_quotas.active:
            client = (quota_user(ctx.session.principal if ctx.session else None),
                      ctx.header.client_id or "")
            window_bytes = ctx.broker.client_quotas.window_bytes(*client)
            if window_bytes is not None:
                self.quota_client = client
                self.budget = min(self.budget, window_bytes)
        self.client_rack = (getattr(request, "rack_id", "") or "") if self.follower < 0 else ""
        # read_committed (v4+): up to the last stable offset, aborted transactions named.
        self.read_committed = self.follower < 0 and \
            getattr(request, "isolation_level", READ_UNCOMMITTED) == READ_COMMITTED
        self.reads: dict[TopicPartition, _Read] = {}
        self.total = 0
        self.answer_now = False

    def read(self, keys: list[TopicPartition] | set[TopicPartition]) -> None:
        session = self.session
        for key in keys:
            cached = session.partitions.get(key)
            if cached is None:
                continue  # forgotten meanwhile
            previous = self.reads.get(key)
            if previous is not None:
                self.total -= previous.size
            # KIP-74: only the response's first data may overshoot the budget (a
            # batch larger than it must still get through); after that, the rest
            # must fit, or a thousand partitions answer a thousand batches.
            left = max(self.budget - self.total, 0)
            done = self._read_one(key, cached, left, min_one=self.total == 0)
            self.reads[key] = done
            self.total += done.size
            self.answer_now |= done.answer_now

    def _read_one(self, key: TopicPartition, cached: CachedPartition, budget: int,
                  min_one: bool) -> _Read:
        ctx = self.ctx
        # A session keyed by topic id (v13+) reads whichever topic has the id now.
        name = ctx.broker.image.topic_name(key[0]) if self.session.by_id else key[0]
        partition = ctx.broker.replicas.get(name, key[1]) if name is not None else None
        self.session.watch(key, partition)
        result = FetchPartitionResult(partition_index=key[1])
        if partition is None:
            result.error_code = _missing_replica_error(ctx, name, key[1])
            return _Read(result, answer_now=True, has_more=True)
        result.high_watermark = partition.high_watermark
        result.last_stable_offset = partition.last_stable_offset
        result.log_start_offset = partition.log.log_start_offset
        if not partition.is_leader:
            why_not = _why_follower_cannot_serve(ctx, partition, self.follower)
            if why_not is not ErrorCode.none:
                result.error_code = why_not
                return _Read(result, answer_now=True, has_more=True)
        result.error_code = check_leader_epoch(partition, cached.current_leader_epoch)
        if result.error_code != NONE:
            return _Read(result, answer_now=True, has_more=True)
        if self.follower >= 0:
            # Only for partitions read: those the request names (their offset moved)
            # and those that changed here (an append; leadership or fencing, after
            # which the leader learns the follower's position again from the
            # session). The others' offsets did not move, and the session's fetch
            # time keeps them caught up (FollowerState.session).
            partition.update_follower(self.follower, cached.fetch_offset,
                                      self.session if self.session.cached else None,
                                      cached.log_start_offset)
            result.high_watermark = partition.high_watermark
        if self.follower < 0 and self.client_rack and partition.is_leader and \
                ctx.broker.config.fetch_from_follower:
            preferred = _preferred_read_replica(ctx, partition, self.client_rack,
                                                cached.fetch_offset)
            if preferred != NO_PREFERRED_REPLICA:
                # KIP-392: no records, only where to read them; the consumer moves there.
                result.preferred_read_replica = preferred
                return _Read(result, answer_now=True, has_more=True)
        try:
            fetched = ctx.broker.replication_throttle.read(  # throttles reassignment copies
                ctx.broker.image, partition, self.follower, cached.fetch_offset,
                min(budget, cached.partition_max_bytes), min_one, self.read_committed)
        except OffsetOutOfRangeError:
            if not partition.is_leader and cached.current_leader_epoch < 0 and \
                    cached.fetch_offset > partition.log.log_end_offset:
                # A consumer without leader epochs (KIP-320) may be here on stale metadata:
                # Kafka answers empty so it retries instead of resetting its position.
                return _Read(result, has_more=True)
            result.error_code = ErrorCode.offset_out_of_range
            return _Read(result, answer_now=True, has_more=True)
        result.records = fetched.views
        result.records_size = fetched.size
        result.high_watermark = partition.high_watermark
        result.last_stable_offset = partition.last_stable_offset
        readable_end = partition.log.log_end_offset if self.follower >= 0 \
            else partition.high_watermark
        if self.read_committed:
            readable_end = result.last_stable_offset
            if fetched.size:
                result.aborted_transactions = partition.transactions.aborted_between(
                    fetched.first_offset, fetched.next_offset)
        # A follower hears of a new high watermark with its next answer (new data, or
        # the end of its wait), as in Kafka: waking it for the HW alone doubled the
        # replication round trips of every acks=all write. A log start moved by
        # DeleteRecords is answered at once: the request waits for the followers to
        # move theirs (the low watermark).
        start_news = self.follower >= 0 and self.session.cached and \
            cached.sent_log_start_offset != result.log_start_offset
        return _Read(result, fetched.size, answer_now=start_news,
                     has_more=fetched.size > 0 or cached.fetch_offset < readable_end)

    def answer(self, full: bool) -> list[FetchTopicResult]:
        """The response's partitions (all for a full fetch, else those with news);
        remembers what was told and which partitions must be read again."""
        session = self.session
        by_topic: dict[str, list[FetchPartitionResult]] = {}
        order = list(session.partitions) if full else list(self.reads)
        for key in order:
            done = self.reads.get(key)
            cached = session.partitions.get(key)
            if done is None or cached is None:
                continue
            r = done.result
            if done.has_more:
                session.dirty.add(key)
            if full or done.size or r.error_code or r.preferred_read_replica >= 0 or \
                    cached.has_news(r.high_watermark, r.last_stable_offset, r.log_start_offset):
                cached.mark_sent(r.high_watermark, r.last_stable_offset, r.log_start_offset)
                by_topic.setdefault(key[0], []).append(r)
        return [FetchTopicResult(topic=t, partitions=parts) for t, parts in by_topic.items()]


def _missing_replica_error(ctx: RequestContext, name: str | None, index: int) -> ErrorCode:
    """No replica here: an unknown topic id, a partition that exists elsewhere (NOT_LEADER,
    so the client looks for its leader, as Kafka answers), or one that does not exist."""
    if name is None:
        return ErrorCode.unknown_topic_id
    topic = ctx.broker.image.topics.get(name)
    if topic is not None and index in topic.partitions:
        return ErrorCode.not_leader_or_follower
    return ErrorCode.unknown_topic_or_partition


def _why_follower_cannot_serve(ctx: RequestContext, partition: Partition, follower: int
                               ) -> ErrorCode:
    """KIP-392: a follower serves consumers that fetch with v11+ (they know to expect it),
    while it is in the ISR; anyone else is sent back to the leader."""
    if follower >= 0 or ctx.version < FETCH_FROM_FOLLOWER_VERSION:
        return ErrorCode.not_leader_or_follower
    if partition.broker_id not in partition.isr:
        # Out of the ISR it may lag without bound: back to the leader, who knows.
        return ErrorCode.not_leader_or_follower
    return ErrorCode.none


def _preferred_read_replica(ctx: RequestContext, partition: Partition, client_rack: str,
                            fetch_offset: int) -> int:
    image = ctx.broker.image
    live = {b.broker_id for b in image.live_brokers()}
    followers = [
        ReplicaView(replica, rack, state.log_end_offset,
                    partition.follower_caught_up_ms(state))
        for replica, state in partition.followers.items()
        if replica in partition.isr and replica in live
        and replica not in partition.fenced_replicas
        and (rack := image.brokers[replica].rack) is not None
    ]
    leader = ReplicaView(ctx.broker.broker_id, ctx.broker.config.rack,
                         partition.log.log_end_offset, 0.0)
    return preferred_read_replica(client_rack, leader, followers, fetch_offset)


def _encode(ctx: RequestContext, error: int, session_id: int,
            topics: list[FetchTopicResult], throttle_ms: int = 0) -> Encoded:
    return Encoded(encode_fetch_response(ctx.header, ctx.version, throttle_ms=throttle_ms,
                                         error_code=error, session_id=session_id,
                                         topics=topics, node_endpoints=_leader_hints(ctx, topics)))


def _leader_hints(ctx: RequestContext, topics: list[FetchTopicResult]) -> list[NodeEndpoint]:
    """KIP-951 (v16+; the encoder writes neither before): partitions answered
    NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH name the current leader."""
    if ctx.version < 16:
        return []
    stale = [t for t in topics
             if any(p.error_code in _STALE_LEADER for p in t.partitions)]
    if not stale:
        return []
    image = ctx.broker.image
    by_name: list[tuple[str | None, list[dict[str, Any]]]] = []
    rows: list[tuple[FetchPartitionResult, dict[str, Any]]] = []
    for t in stale:
        name = image.topic_name(t.topic)  # v16: topics by id
        entries = []
        for p in t.partitions:
            entry: dict[str, Any] = {"partition_index": p.partition_index,
                                     "error_code": p.error_code}
            entries.append(entry)
            rows.append((p, entry))
        by_name.append((name, entries))
    endpoints = leader_hints(ctx, by_name, "partition_index")
    for p, entry in rows:
        leader = entry.get("current_leader")
        if leader is not None:
            p.current_leader = (leader["leader_id"], leader["leader_epoch"])
    return [NodeEndpoint(e["node_id"], e["host"], e["port"], e["rack"]) for e in endpoints]


_STALE_LEADER = (ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch)


def _bandwidth_throttle_ms(state: FetchRequestState) -> int:
    """Count the answer's bytes against the consumer's byte-rate quota; over it, the
    throttle time, and the connection is muted for it once the answer is out.

    Kafka withholds such an answer (empty, its bytes not counted). slog sends it: the
    answer is at most one sample's worth (see FetchRequestState), and a withheld one
    made the consumer wait for bytes it never got, holding it well under its quota."""
    if state.quota_client is None or not state.total:
        return 0
    quotas = state.ctx.broker.client_quotas
    throttle_ms = quotas.record(*state.quota_client, CONSUMER_BYTE_RATE, state.total)
    connection = state.ctx.session
    if throttle_ms > 0 and connection is not None:
        connection.muted_until = max(connection.muted_until,
                                     time.monotonic() + throttle_ms / 1000)
    return throttle_ms


def _topic_key(topic: Any, by_id: bool) -> str:
    """How a session names a request's topic: its name, or (v13+) its id's text."""
    return str(topic.topic_id or NO_TOPIC_ID) if by_id else topic.topic


async def fetch(ctx: RequestContext, request: Any) -> Encoded:
    deadline = time.monotonic() + millis(request.max_wait) / 1000
    sessions = ctx.broker.replicas.fetch_sessions
    by_id = ctx.version >= FIRST_TOPIC_ID_VERSION
    try:
        opened = sessions.open(
            getattr(request, "session_id", INVALID_SESSION_ID),
            getattr(request, "session_epoch", FINAL_EPOCH),  # before v7: no sessions
            replica_id_of(request) >= 0,
            ((_topic_key(t, by_id), t.partitions) for t in request.topics),
            ((_topic_key(f, by_id), f.partitions)
             for f in getattr(request, "forgotten_topics_data", ())),
            by_id)
    except SessionError as exc:
        # The client starts over with a full fetch.
        return _encode(ctx, exc.code, INVALID_SESSION_ID, [])
    session = opened.session
    session.last_fetch_ms = session.last_used_ms
    state = FetchRequestState(ctx, request, session)
    connection = ctx.session
    interrupted = False

    def end_long_poll() -> None:
        # Another request arrived behind this one on the connection (say a consumer's
        # commit or heartbeat): it waits for our answer, so answer now.
        nonlocal interrupted
        interrupted = True
        session.partition_changed(None)

    try:
        to_read: Any = list(session.partitions) if opened.full else session.take_dirty()
        session.dirty.clear()
        while True:
            state.read(to_read)
            remaining = deadline - time.monotonic()
            if state.total >= request.min_bytes or state.answer_now or remaining <= 0 or \
                    interrupted:
                break
            # Parked: only a change to one of this session's partitions wakes us,
            # and then only the partitions that changed are read again.
            if connection is not None:
                connection.end_long_poll = end_long_poll
            await session.wait_for_change(remaining)
            to_read = session.take_dirty()
        throttle_ms = _bandwidth_throttle_ms(state)
        topics = state.answer(opened.full)
    finally:
        if connection is not None:
            connection.end_long_poll = None
        if not session.cached:
            session.close()  # a sessionless fetch stops watching its partitions
    return _encode(ctx, NONE, session.id, topics, throttle_ms)


HANDLERS = {ApiKey.FETCH: fetch}
