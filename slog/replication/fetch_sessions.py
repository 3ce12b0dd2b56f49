"""Incremental fetch sessions (KIP-227): the broker's side, free of I/O.

A fetcher (a consumer, or another broker's replica fetcher) that opens a
session sends its partitions once; later requests name only what changed
(a partition added, or its fetch offset, leader epoch or size moved) and what
to drop (``forgotten_topics_data``). The broker remembers the rest, and its
answer to an incremental request lists only partitions with something to say.

Request metadata, as Kafka's ``FetchMetadata``:

* ``session_id`` 0, epoch -1: a full fetch without a session;
* epoch 0: a full fetch that opens a session (closing ``session_id`` if set);
* epoch -1 with a ``session_id``: a full fetch that closes that session;
* any other epoch: an incremental fetch, which must carry the session's next
  epoch (else INVALID_FETCH_SESSION_EPOCH; an unknown id is
  FETCH_SESSION_ID_NOT_FOUND). Either error makes the client start over with a
  full fetch.

The cache holds ``max.incremental.fetch.session.cache.slots`` sessions. When it
is full, a new session takes the slot of a session unused for
``EVICTION_MS``, else of the least valuable consumer session: a follower's
session beats any consumer's, a consumer's beats one with fewer partitions;
otherwise the fetch is answered without a session (session id 0) and the
client keeps sending full requests.

From Fetch v13 on, requests name topics by id (KIP-516), and so does the
session: its keys are (topic id, partition) and the fetch resolves each id
to the topic that has it now, so a topic deleted and created again under the
same name is not mistaken for the old one. A session is keyed one way for
its whole life; a request of the other kind is FETCH_SESSION_TOPIC_ID_ERROR.

A session also watches its partitions (see ``Partition.watch``) so that an
idle fetch costs nothing per partition: a partition that changes marks itself
dirty in the session and wakes its parked fetch, and the next incremental
fetch reads only the dirty partitions and those the request names.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from slog.core.kafka_errors import ErrorCode, KafkaApiError

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
EVICTION_MS = 120_000  # Kafka's minimum idle time before any session may be evicted
_MAX_EPOCH = 2**31 - 1

TopicPartition = tuple[str, int]


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``: 1, 2, ... wrapping past int32's maximum to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch >= _MAX_EPOCH else epoch + 1


def _now_ms() -> float:
    return time.monotonic() * 1000


class SessionError(KafkaApiError):
    """A session request the broker refuses; ``code`` goes in the top-level error."""


@dataclass(slots=True)
class CachedPartition:
    """One partition of a session: what the fetcher last told us, what we last told it."""

    fetch_offset: int
    current_leader_epoch: int
    log_start_offset: int
    partition_max_bytes: int
    # Sent in our last answer that listed it; an incremental answer lists the
    # partition again only when one of these moved (or it has records or an error).
    high_watermark: int = -1
    last_stable_offset: int = -1
    sent_log_start_offset: int = -1
    watched: Any = None  # the Partition this session is registered on, if any

    def update(self, request: Any) -> None:
        self.fetch_offset = request.fetch_offset
        self.current_leader_epoch = getattr(request, "current_leader_epoch", -1)
        self.log_start_offset = getattr(request, "log_start_offset", -1)
        self.partition_max_bytes = request.partition_max_bytes

    @classmethod
    def of(cls, request: Any) -> CachedPartition:
        return cls(request.fetch_offset, getattr(request, "current_leader_epoch", -1),
                   getattr(request, "log_start_offset", -1), request.partition_max_bytes)

    def has_news(self, high_watermark: int, last_stable_offset: int,
                 log_start_offset: int) -> bool:
        return (high_watermark != self.high_watermark
                or last_stable_offset != self.last_stable_offset
                or log_start_offset != self.sent_log_start_offset)

    def mark_sent(self, high_watermark: int, last_stable_offset: int,
                  log_start_offset: int) -> None:
        self.high_watermark = high_watermark
        self.last_stable_offset = last_stable_offset
        self.sent_log_start_offset = log_start_offset


class FetchSession:
    """A fetcher's partitions and the ones that changed since it last looked.

    Also the object partitions call back when they change: ``wants_log_end``
    (a follower) asks to hear of every append, a consumer only of a moved high
    watermark (and of leadership changes, which every watcher hears of).
    """

    __slots__ = ("_aliases", "_waiter", "by_id", "dirty", "epoch", "id", "last_fetch_ms",
                 "last_used_ms", "partitions", "privileged", "wants_log_end")

    def __init__(self, privileged: bool, now_ms: float, by_id: bool = False):
        self.id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH  # the epoch the next request must carry
        self.privileged = privileged  # a follower (replica id >= 0)
        self.wants_log_end = privileged
        self.partitions: OrderedDict[TopicPartition, CachedPartition] = OrderedDict()
        self.dirty: set[TopicPartition] = set()
        self.last_used_ms = now_ms
        # The follower's latest fetch of any kind: its partitions the request did
        # not name are still being fetched (at their cached offsets) as of then.
        self.last_fetch_ms = now_ms
        self._waiter: asyncio.Future[None] | None = None
        self.by_id = by_id  # keys name topics by id (Fetch v13+)
        # A watched partition reports changes under its (name, index); the session's
        # key for it, where the two differ (sessions keyed by topic id).
        self._aliases: dict[TopicPartition, TopicPartition] = {}

    @property
    def size(self) -> int:
        return len(self.partitions)

    @property
    def cached(self) -> bool:
        return self.id != INVALID_SESSION_ID

    # -- what the fetcher sent --------------------------------------------------------
    def add_or_update(self, topic: str, request: Any) -> TopicPartition:
        key = (topic, request.partition)
        cached = self.partitions.get(key)
        if cached is None:
            self.partitions[key] = CachedPartition.of(request)
        else:
            cached.update(request)
        return key

    def forget(self, key: TopicPartition) -> None:
        cached = self.partitions.pop(key, None)
        self.dirty.discard(key)
        if cached is not None:
            self._unwatch(cached)

    def _unwatch(self, cached: CachedPartition) -> None:
        if cached.watched is not None:
            cached.watched.unwatch(self)
            self._aliases.pop(cached.watched.key, None)
            cached.watched = None

    def close(self) -> None:
        """Stop watching every partition (the session is gone)."""
        for cached in self.partitions.values():
            self._unwatch(cached)
        self.dirty.clear()
        self.partition_changed(None)  # a parked fetch answers now

    # -- watching partitions ---------------------------------------------------------
    def watch(self, key: TopicPartition, partition: Any) -> None:
        """Be told when ``partition`` (now serving ``key``) changes."""
        cached = self.partitions[key]
        if cached.watched is partition:
            return
        self._unwatch(cached)
        cached.watched = partition
        if partition is not None:
            partition.watch(self)
            if partition.key != key:
                self._aliases[partition.key] = key

    def partition_changed(self, key: TopicPartition | None, wake: bool = True) -> None:
        """``key`` is read again by the parked fetch, at once if ``wake``, else when
        it is answered for another reason (a follower's news of a moved HW)."""
        if key is not None:
            self.dirty.add(self._aliases.get(key, key))
        if not wake:
            return
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait_for_change(self, timeout_s: float) -> None:
        """Park until a watched partition changes (or ``timeout_s`` passes)."""
        if self.dirty or timeout_s <= 0:
            return
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._waiter, timeout_s)
        finally:
            self._waiter = None

    def take_dirty(self) -> set[TopicPartition]:
        dirty, self.dirty = self.dirty, set()
        return dirty


@dataclass(slots=True)
class OpenedSession:
    session: FetchSession
    full: bool  # answer with every partition (else only those with news)
    named: list[TopicPartition]  # the partitions the request itself names


class FetchSessionCache:
    """The broker's sessions, at most ``max_slots``, least recently used first."""

    def __init__(self, max_slots: int, eviction_ms: float = EVICTION_MS,
                 clock: Callable[[], float] = _now_ms, rng: random.Random | None = None):
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self._clock = clock
        self._rng = rng or random.Random()
        self.sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self.evictions = 0

    def __len__(self) -> int:
        return len(self.sessions)

    def open(self, session_id: int, epoch: int, privileged: bool,
             topics: Iterable[tuple[str, Iterable[Any]]],
             forgotten: Iterable[tuple[str, Iterable[int]]], by_id: bool = False
             ) -> OpenedSession:
        """The session a Fetch request runs in (raises SessionError).

        ``by_id``: the request names topics by id (the keys' first halves are ids)."""
        now = self._clock()
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)  # unknown ids are fine: the client starts over
            fresh = FetchSession(privileged, now, by_id)
            named = [fresh.add_or_update(topic, p) for topic, parts in topics for p in parts]
            fresh.dirty.update(fresh.partitions)
            if epoch == INITIAL_EPOCH and self._make_room(fresh, now):
                fresh.id = self._new_id()
                fresh.epoch = next_epoch(INITIAL_EPOCH)
                self.sessions[fresh.id] = fresh
            return OpenedSession(fresh, True, named)
        session = self.sessions.get(session_id)
        if session is None:
            raise SessionError(ErrorCode.fetch_session_id_not_found,
                               f"fetch session {session_id} not found")
        if session.epoch != epoch:
            raise SessionError(ErrorCode.invalid_fetch_session_epoch,
                               f"fetch session {session_id} expected epoch {session.epoch}, "
                               f"got {epoch}")
        if session.privileged != privileged:
            raise SessionError(ErrorCode.fetch_session_id_not_found,
                               f"fetch session {session_id} belongs to another kind of fetcher")
        if session.by_id != by_id:
            raise SessionError(ErrorCode.fetch_session_topic_id_error,
                               f"fetch session {session_id} names topics "
                               f"{'by id' if session.by_id else 'by name'}, this request not")
        for topic, indexes in forgotten:
            for index in indexes:
                session.forget((topic, index))
        named = [session.add_or_update(topic, p) for topic, parts in topics for p in parts]
        session.dirty.update(named)
        session.epoch = next_epoch(epoch)
        session.last_used_ms = now
        self.sessions.move_to_end(session_id)
        return OpenedSession(session, False, named)

    def remove(self, session_id: int) -> FetchSession | None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            session.close()
        return session

    def _new_id(self) -> int:
        while True:
            candidate = self._rng.randint(1, _MAX_EPOCH)
            if candidate not in self.sessions:
                return candidate

    def _make_room(self, new: FetchSession, now: float) -> bool:
        if len(self.sessions) < self.max_slots:
            return True
        if not self.sessions:
            return False  # max_slots is 0: sessions are off
        oldest_id, oldest = next(iter(self.sessions.items()))
        if now - oldest.last_used_ms > self.eviction_ms:
            self._evict(oldest_id)
            return True
        consumers = [s for s in self.sessions.values() if not s.privileged]
        if not consumers:
            return False  # followers' sessions go only when idle
        victim = min(consumers, key=lambda s: (s.size, s.last_used_ms))
        if new.privileged or new.size > victim.size:
            self._evict(victim.id)
            return True
        return False

    def _evict(self, session_id: int) -> None:
        self.evictions += 1
        self.remove(session_id)
