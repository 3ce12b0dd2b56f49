"""Group membership for the consumer: Kafka's ConsumerCoordinator (classic protocol).

Two threads share the work, as in the Java client:

* The **heartbeat thread** talks to the coordinator: it finds it, sends
  JoinGroup and SyncGroup (running the assignor when this member leads),
  heartbeats every ``heartbeat_interval_ms``, and leaves the group when
  ``poll()`` has not been called for ``max_poll_interval_ms``. Rebalances
  therefore progress even while the application is busy with records.
* The **application thread**, inside ``Consumer.poll()``, does everything the
  application can observe: it runs the rebalance listener, commits before a
  rebalance (auto-commit), revokes partitions and applies new assignments.

A rebalance, step by step: the heartbeat thread learns one is needed
(REBALANCE_IN_PROGRESS) → ``poll()`` prepares (commits; eager protocols
revoke everything, cooperative ones nothing) and asks to join → the heartbeat
thread joins and syncs → ``poll()`` applies the assignment: eager protocols
assign it whole; cooperative ones revoke only the partitions that moved away
and rejoin at once so the next generation can hand them over.

Losing the generation (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, a poll timeout)
means the partitions may already belong to someone else: they are reported
through ``on_partitions_lost`` and never committed.
"""

from __future__ import annotations

import enum
import logging
import re
import select
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from slog.client.assignors import COOPERATIVE, Assignor
from slog.client.cluster import ClusterClient
from slog.client.connection import BrokerConnection
from slog.client.errors import InvalidArgumentError, KafkaError, KafkaTimeoutError
from slog.client.group_requests import (
    COORDINATOR_MOVED,
    LOADING,
    OffsetAndMetadata,
    commit_body,
    commit_errors,
    fetch_body,
    fetched_offsets,
    find_coordinator,
    request,
    version,
)
from slog.client.subscription import SubscriptionState
from slog.client.types import BrokerMetadata, TopicPartition
from slog.core.consumer_protocol import (
    PROTOCOL_TYPE,
    Assignment,
    Subscription,
    WireFormatError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode

__all__ = ["ConsumerGroup", "GroupMetadata", "RebalanceListener"]

log = logging.getLogger("slog.client.group")

E = ErrorCode
_RESET_MEMBER = {int(E.unknown_member_id), int(E.fenced_instance_id)}
_RESET_GENERATION = {int(E.illegal_generation)} | _RESET_MEMBER
_RETRY_JOIN = {int(E.rebalance_in_progress), int(E.member_id_required), LOADING,
               *COORDINATOR_MOVED}
# Answers that only the user can fix: raised from poll().
_FATAL = {int(E.inconsistent_group_protocol), int(E.invalid_session_timeout),
          int(E.invalid_group_id), int(E.group_authorization_failed),
          int(E.group_max_size_reached), int(E.fenced_instance_id),
          int(E.unsupported_version)}
_COMMIT_REJOIN = {int(E.rebalance_in_progress), *_RESET_GENERATION}


class RebalanceListener:
    """Kafka's ConsumerRebalanceListener; override what you need.

    All three run inside ``poll()`` (or ``close()``/``unsubscribe()``) on the
    application's thread, so they may commit, seek or pause.
    """

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        """Before giving partitions up: a good place to commit what was processed."""

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        """After new partitions were assigned (their positions are not fetched yet)."""

    def on_partitions_lost(self, partitions: set[TopicPartition]) -> None:
        """The partitions may already belong to another member: do not commit them."""
        self.on_partitions_revoked(partitions)


class _State(enum.Enum):
    UNJOINED = "unjoined"
    JOINING = "joining"  # the heartbeat thread is in JoinGroup/SyncGroup
    STABLE = "stable"


class Generation(NamedTuple):
    generation_id: int
    member_id: str
    protocol: str | None


class GroupMetadata(NamedTuple):
    """Kafka's ConsumerGroupMetadata: who this consumer is in its group right now."""

    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None


NO_GENERATION = Generation(-1, "", None)


class _Joined(NamedTuple):
    """A completed rebalance, waiting for poll() to apply it."""

    generation: Generation
    assignment: Assignment


class _Link:
    """A connection to the coordinator for one job, reconnected when needed."""

    def __init__(self, client_id: str, timeout_s: float, tls: Any):
        self._client_id = client_id
        self._tls = tls
        self._timeout_s = timeout_s
        self.conn: BrokerConnection | None = None

    def get(self, node: BrokerMetadata) -> BrokerConnection:
        conn = self.conn
        if conn is None or not conn.connected or (conn.host, conn.port) != (node.host, node.port):
            self.close()
            conn = BrokerConnection(node.host, node.port, client_id=self._client_id,
                                    timeout_s=self._timeout_s, node_id=node.node_id,
                                    tls=self._tls)
            self.conn = conn.connect()
        return conn

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class ConsumerGroup:
    def __init__(self, cluster: ClusterClient, subscription: SubscriptionState,
                 discard: Callable[[TopicPartition], None], *, group_id: str,
                 group_instance_id: str | None, client_id: str, session_timeout_ms: int,
                 max_poll_interval_ms: int, heartbeat_interval_ms: int,
                 assignors: list[Assignor], enable_auto_commit: bool,
                 auto_commit_interval_ms: int, retry_backoff_ms: int,
                 request_timeout_ms: int, metadata_max_age_ms: int,
                 require_stable: bool = False):
        if not assignors:
            raise InvalidArgumentError("at least one partition assignment strategy is needed")
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        self._cluster = cluster
        self._subs = subscription
        self._discard = discard
        self._session_ms = session_timeout_ms
        self._max_poll_s = max_poll_interval_ms / 1000
        self._heartbeat_s = heartbeat_interval_ms / 1000
        self._assignors = {a.name: a for a in assignors}
        self._assignor_order = assignors
        self._auto_commit = enable_auto_commit
        self._auto_commit_s = auto_commit_interval_ms / 1000
        self._backoff_s = retry_backoff_ms / 1000
        self._request_timeout_s = request_timeout_ms / 1000
        self._metadata_age_s = metadata_max_age_ms / 1000
        # read_committed: start where the last transaction left off, not before it (KIP-447)
        self._require_stable = require_stable
        # A JoinGroup may wait for the whole rebalance.
        self._join_link = _Link(client_id, self._request_timeout_s + max_poll_interval_ms / 1000,
                                cluster.tls)
        self._heartbeat_link = _Link(client_id, self._request_timeout_s, cluster.tls)
        self._commit_link = _Link(client_id, self._request_timeout_s, cluster.tls)
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        # Shared with the heartbeat thread, under _lock.
        self._state = _State.UNJOINED
        self._generation = NO_GENERATION
        self._coordinator: BrokerMetadata | None = None
        self._join_requested = False
        self._joined: _Joined | None = None
        self._rejoin_needed = False
        self._prepare_needed = True
        self._fatal: KafkaError | None = None
        self._last_poll = time.monotonic()
        self._closed = False
        # The application thread's own.
        self._topics: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self._listener: RebalanceListener | None = None
        self._last_assignment: list[tuple[str, int]] = []
        self._last_assigned_generation = -1
        self._group_topics: dict[str, int] = {}  # leader: partition counts it assigned from
        self._next_metadata_check = 0.0
        self._next_auto_commit = time.monotonic() + self._auto_commit_s
        self._async_commits: list[tuple[Mapping[TopicPartition, OffsetAndMetadata],
                                        Callable[..., None] | None]] = []

    # ================================================================ subscription
    def subscribe(self, topics: Iterable[str] | None, pattern: re.Pattern[str] | None,
                  listener: RebalanceListener | None) -> None:
        self._topics = set(topics or ())
        self._pattern = pattern
        self._listener = listener
        if pattern is not None:
            self._topics = self._matching_topics()
        self.request_rejoin("subscription changed")
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, daemon=True,
                                            name=f"slog-heartbeat-{self.group_id}")
            self._thread.start()

    @property
    def subscription(self) -> set[str]:
        return set(self._topics)

    def _matching_topics(self) -> set[str]:
        assert self._pattern is not None
        meta = self._cluster.refresh_metadata(None)
        return {name for name, t in meta.topics.items()
                if not t.is_internal and not t.error_code and self._pattern.fullmatch(name)}

    def request_rejoin(self, reason: str) -> None:
        with self._lock:
            if not self._rejoin_needed:
                log.debug("group %s: rejoin requested (%s)", self.group_id, reason)
            self._rejoin_needed = True

    @property
    def generation(self) -> Generation:
        with self._lock:
            return self._generation

    def metadata(self) -> GroupMetadata:
        generation = self.generation
        return GroupMetadata(self.group_id, generation.generation_id, generation.member_id,
                             self.group_instance_id)

    @property
    def rebalancing(self) -> bool:
        with self._lock:
            return self._rejoin_needed or self._state is not _State.STABLE or \
                self._joined is not None

    # ================================================================ poll() side
    def _polled(self) -> float:
        """What every poll() does first: note the time (the heartbeat thread's
        max.poll.interval.ms watch) and raise a fatal error the thread found."""
        now = time.monotonic()
        with self._lock:
            self._last_poll = now
            if self._fatal is not None:
                fatal, self._fatal = self._fatal, None
                raise fatal
        return now

    def poll(self) -> None:
        """Drive the group from the application thread; raises fatal group errors."""
        now = self._polled()
        with self._lock:
            joined, self._joined = self._joined, None
        self._complete_async_commits()
        if joined is not None:
            self._on_join_complete(joined)
        if self._topics or self._pattern is not None:
            self._maybe_check_metadata(now)
            with self._lock:
                start = (self._rejoin_needed or self._state is _State.UNJOINED) and \
                    not self._join_requested and self._joined is None
            if start:
                self._prepare_join()
        with self._lock:
            stable = self._state is _State.STABLE
        if stable and self._auto_commit and now >= self._next_auto_commit:
            self._next_auto_commit = now + self._auto_commit_s
            self.commit_async(None)

    def wait_slice(self) -> float:
        """How long poll() may block on fetches before looking at the group again."""
        return 0.02 if self.rebalancing else 0.1

    def _prepare_join(self) -> None:
        """Kafka's onJoinPrepare, then hand the JoinGroup to the heartbeat thread."""
        with self._lock:
            prepare, self._prepare_needed = self._prepare_needed, False
            generation = self._generation
            protocol = self._assignors.get(generation.protocol or "")
        if prepare:
            owned = self._subs.assignment()
            if generation.generation_id < 0:
                if owned:
                    self._revoke(owned, lost=True)
            else:
                if self._auto_commit:
                    self._commit_quietly(None)
                if protocol is None or protocol.protocol != COOPERATIVE:
                    self._revoke(owned)
                else:
                    self._revoke({tp for tp in owned if tp.topic not in self._topics})
        with self._lock:
            self._rejoin_needed = False
            self._join_requested = True
            self._state = _State.JOINING
        self._wake.set()

    def _on_join_complete(self, joined: _Joined) -> None:
        generation, assignment = joined
        assignor = self._assignors.get(generation.protocol or "")
        assigned = {TopicPartition(*tp) for tp in assignment.partitions}
        owned = self._subs.assignment()
        self._last_assignment = sorted(assigned)
        self._last_assigned_generation = generation.generation_id
        if assignor is not None and assignor.protocol == COOPERATIVE:
            revoked = owned - assigned
            if revoked:
                if self._auto_commit:
                    self._commit_quietly({tp: o for tp, o in self._positions().items()
                                          if tp in revoked})
                self._revoke(revoked)
                self.request_rejoin("partitions were revoked")  # so others can get them
            added = assigned - owned
        else:
            added = assigned - owned
        if any(tp.topic not in self._topics for tp in assigned):
            self.request_rejoin("assigned partitions outside the subscription")
        self._set_assignment(assigned)
        with self._lock:
            self._prepare_needed = True
        self._next_auto_commit = time.monotonic() + self._auto_commit_s
        log.info("group %s generation %d: assigned %s", self.group_id,
                 generation.generation_id, sorted(assigned))
        if self._listener is not None:
            self._listener.on_partitions_assigned(added)

    def _revoke(self, partitions: set[TopicPartition], *, lost: bool = False) -> None:
        if self._listener is not None and partitions:
            if lost:
                self._listener.on_partitions_lost(set(partitions))
            else:
                self._listener.on_partitions_revoked(set(partitions))
        self._set_assignment(self._subs.assignment() - partitions)

    def _set_assignment(self, partitions: set[TopicPartition]) -> None:
        for tp in self._subs.assignment() - partitions:
            self._discard(tp)
        self._subs.assign(sorted(partitions))

    def _maybe_check_metadata(self, now: float) -> None:
        """Pattern subscriptions follow new topics; a leader notices partition changes."""
        if now < self._next_metadata_check:
            return
        self._next_metadata_check = now + self._metadata_age_s
        try:
            if self._pattern is not None:
                topics = self._matching_topics()
                if topics != self._topics:
                    self._topics = topics
                    self.request_rejoin("the pattern matches other topics now")
            if self._group_topics and self._is_leader():
                meta = self._cluster.refresh_metadata(self._group_topics)
                counts = {t: len(meta.topics[t].partitions) for t in self._group_topics
                          if t in meta.topics and not meta.topics[t].error_code}
                if counts != self._group_topics:
                    self.request_rejoin("partitions changed")
        except ConnectionError:
            pass

    def _is_leader(self) -> bool:
        with self._lock:
            return bool(self._group_topics) and self._state is _State.STABLE

    # ================================================================ commits
    def _positions(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return {tp: OffsetAndMetadata(s.position) for tp, s in self._subs.items()
                if s.position is not None}

    def _coordinator_node(self) -> BrokerMetadata:
        with self._lock:
            node = self._coordinator
        if node is None:
            node = find_coordinator(self._cluster, self.group_id)
            with self._lock:
                self._coordinator = node
        return node

    def _coordinator_moved(self) -> None:
        """Forget the coordinator; each link reconnects to the next one when used."""
        with self._lock:
            self._coordinator = None

    def _send_commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        generation = self.generation
        if self._topics or self._pattern is not None:
            gen_id, member = generation.generation_id, generation.member_id
            if gen_id < 0:
                raise KafkaError.for_code(E.rebalance_in_progress,
                                          "not in a generation yet; commit after the rebalance")
        else:  # assign() with a group id: a "simple" consumer only stores offsets
            gen_id, member = -1, ""
        conn = self._commit_link.get(self._coordinator_node())
        conn.send(ApiKey.OFFSET_COMMIT, commit_body(
            self.group_id, gen_id, member, self.group_instance_id, offsets),
            version=version(conn, ApiKey.OFFSET_COMMIT))

    def _receive_commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]
                        ) -> KafkaError | None:
        assert self._commit_link.conn is not None
        _, response = self._commit_link.conn.receive()
        errors = commit_errors(response)
        if not errors:
            return None
        first = next(iter(errors.values()))
        first.errors = {str(tp): e for tp, e in errors.items()}
        if first.code in COORDINATOR_MOVED:
            self._coordinator_moved()
        elif first.code in _COMMIT_REJOIN:
            if first.code in _RESET_GENERATION:
                self._reset_generation(first.code in _RESET_MEMBER)
            self.request_rejoin("a commit was refused")
        return first

    def _complete_async_commits(self, *, block: bool = False) -> None:
        conn = self._commit_link.conn
        while self._async_commits:
            if conn is None or not conn.connected:
                failed, self._async_commits = self._async_commits, []
                for offsets, callback in failed:
                    if callback is not None:
                        callback(offsets, KafkaError.for_code(E.coordinator_not_available))
                return
            if not block and not _readable(conn):
                return
            offsets, callback = self._async_commits.pop(0)
            try:
                error = self._receive_commit(offsets)
            except ConnectionError as exc:
                self._coordinator_moved()
                error = KafkaError.for_code(E.coordinator_not_available, str(exc))
            if error is not None:
                log.info("group %s: async commit failed: %s", self.group_id, error)
            if callback is not None:
                callback(offsets, error)
            conn = self._commit_link.conn

    def commit_async(self, offsets: Mapping[TopicPartition, OffsetAndMetadata] | None,
                     callback: Callable[..., None] | None = None) -> None:
        """Send a commit without waiting; ``callback(offsets, error_or_None)`` runs in a
        later poll(). ``offsets=None``: the current positions."""
        offsets = self._positions() if offsets is None else dict(offsets)
        if not offsets:
            return
        try:
            self._send_commit(offsets)
        except (ConnectionError, KafkaError) as exc:
            if isinstance(exc, ConnectionError):
                self._coordinator_moved()
            if callback is not None:
                callback(offsets, exc)
            return
        self._async_commits.append((offsets, callback))

    def commit_sync(self, offsets: Mapping[TopicPartition, OffsetAndMetadata] | None,
                    timeout_s: float = 30.0) -> None:
        """Commit and wait; retries while the coordinator moves or loads."""
        offsets = self._positions() if offsets is None else dict(offsets)
        if not offsets:
            return
        deadline = time.monotonic() + timeout_s
        while True:
            self._complete_async_commits(block=True)  # responses come back in order
            try:
                self._send_commit(offsets)
                error = self._receive_commit(offsets)
            except ConnectionError as exc:
                self._coordinator_moved()
                error = KafkaError.for_code(E.coordinator_not_available, str(exc))
            if error is None:
                return
            if not error.retriable:
                raise error
            if time.monotonic() + self._backoff_s > deadline:
                raise KafkaTimeoutError(f"commit did not complete in {timeout_s} s: {error}")
            time.sleep(self._backoff_s)

    def _commit_quietly(self, offsets: Mapping[TopicPartition, OffsetAndMetadata] | None
                        ) -> None:
        try:
            self.commit_sync(offsets, timeout_s=self._request_timeout_s)
        except (KafkaError, KafkaTimeoutError, ConnectionError) as exc:
            log.warning("group %s: auto-commit before the rebalance failed: %s",
                        self.group_id, exc)

    def committed(self, partitions: Iterable[TopicPartition] | None,
                  timeout_s: float = 30.0) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets (``None`` for every partition: all of them)."""
        wanted = None if partitions is None else [TopicPartition(*tp) for tp in partitions]
        deadline = time.monotonic() + timeout_s
        while True:
            self._complete_async_commits(block=True)
            try:
                conn = self._commit_link.get(self._coordinator_node())
                body = fetch_body(self.group_id, wanted, self._require_stable)
                return fetched_offsets(request(conn, ApiKey.OFFSET_FETCH, body), self.group_id)
            except ConnectionError:
                self._coordinator_moved()
                error: Exception = KafkaError.for_code(E.coordinator_not_available)
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                if exc.code in COORDINATOR_MOVED:
                    self._coordinator_moved()
                error = exc
            if time.monotonic() + self._backoff_s > deadline:
                raise KafkaTimeoutError(f"no committed offsets within {timeout_s} s: {error}")
            time.sleep(self._backoff_s)

    def committed_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """The consumer's hook: where newly assigned partitions start."""
        return {tp: v.offset for tp, v in self.committed(partitions).items() if v is not None}

    # ================================================================ leaving
    def leave(self, reason: str, link: _Link | None = None) -> None:
        """LeaveGroup now (dynamic members only: a static member keeps its place
        until its session times out, so a restart does not rebalance). ``link``:
        the calling thread's connection (the application's by default)."""
        with self._lock:
            generation, node = self._generation, self._coordinator
            self._generation = NO_GENERATION
            self._state = _State.UNJOINED
            self._join_requested = False
        if self.group_instance_id is not None or not generation.member_id or node is None:
            return
        try:
            request((link or self._commit_link).get(node), ApiKey.LEAVE_GROUP, {
                "group_id": self.group_id, "member_id": generation.member_id,
                "members": [{"member_id": generation.member_id, "group_instance_id": None,
                             "reason": reason}]})
        except (ConnectionError, KafkaError) as exc:
            log.info("group %s: LeaveGroup failed: %s", self.group_id, exc)

    def unsubscribe(self) -> None:
        if self._auto_commit and self._subs.assignment() and self.generation.member_id:
            self._commit_quietly(None)
        self._revoke(self._subs.assignment())
        self.leave("the consumer unsubscribed")
        self._topics, self._pattern = set(), None

    def close(self) -> None:
        if self._topics or self._pattern is not None:
            try:
                self.unsubscribe()
            except Exception as exc:  # a listener may raise; closing goes on
                log.warning("group %s: unsubscribing on close failed: %s", self.group_id, exc)
        with self._lock:
            self._closed = True
        self._wake.set()
        self._join_link.close()  # unblocks a JoinGroup in flight
        if self._thread is not None:
            self._thread.join(timeout=self._request_timeout_s)
        for link in (self._join_link, self._heartbeat_link, self._commit_link):
            link.close()

    # ================================================================ heartbeat thread
    def _run(self) -> None:
        next_heartbeat = 0.0
        last_ok = time.monotonic()
        while True:
            with self._lock:
                if self._closed:
                    return
                join = self._join_requested
                generation, state, last_poll = self._generation, self._state, self._last_poll
            try:
                if join:
                    self._join_and_sync()
                    next_heartbeat = time.monotonic() + self._heartbeat_s
                    last_ok = time.monotonic()
                    continue
                now = time.monotonic()
                if state is _State.STABLE and now - last_poll > self._max_poll_s:
                    log.warning("group %s: poll() was not called for %.0f s "
                                "(max.poll.interval.ms): leaving the group", self.group_id,
                                now - last_poll)
                    self._lose_generation(reset_member=True, leave=True)
                    continue
                if state is _State.STABLE and generation.generation_id >= 0 and \
                        now >= next_heartbeat:
                    next_heartbeat = now + self._heartbeat_s
                    self._heartbeat(generation)
                    last_ok = now
            except (ConnectionError, KafkaError) as exc:
                log.debug("group %s: coordinator unreachable: %s", self.group_id, exc)
                self._coordinator_moved()
                self._heartbeat_link.close()
                if time.monotonic() - last_ok > self._session_ms / 1000:
                    log.info("group %s: no coordinator for a session timeout", self.group_id)
                time.sleep(self._backoff_s)
            except Exception:  # never let the thread die silently
                log.exception("group %s: heartbeat thread error", self.group_id)
                time.sleep(self._backoff_s)
            self._wake.wait(max(0.0, min(next_heartbeat - time.monotonic(), self._heartbeat_s)))
            self._wake.clear()

    def _heartbeat(self, generation: Generation) -> None:
        node = self._coordinator_node()
        response = request(self._heartbeat_link.get(node), ApiKey.HEARTBEAT, {
            "group_id": self.group_id, "generation_id": generation.generation_id,
            "member_id": generation.member_id, "group_instance_id": self.group_instance_id})
        error = int(response.error_code)
        with self._lock:
            if self._generation != generation:
                return  # answered for a generation we already left behind
        if error == E.rebalance_in_progress:
            self.request_rejoin("the coordinator is rebalancing")
        elif error in _RESET_GENERATION:
            if error == E.fenced_instance_id:
                self._set_fatal(error)
            self._lose_generation(reset_member=error in _RESET_MEMBER)
        elif error in COORDINATOR_MOVED:
            self._coordinator_moved()

    def _join_and_sync(self) -> None:
        """One JoinGroup + SyncGroup round, retried until it succeeds or must go back
        to poll() (a lost generation, a fatal error, close())."""
        while True:
            with self._lock:
                if self._closed or not self._join_requested:
                    return
                generation = self._generation
            node = self._coordinator_node()
            conn = self._join_link.get(node)
            response = request(conn, ApiKey.JOIN_GROUP, self._join_body(generation))
            error = int(response.error_code)
            if error == E.member_id_required:
                with self._lock:
                    self._generation = Generation(-1, response.member_id, None)
                continue
            if error:
                if not self._handle_join_error(error, "JoinGroup"):
                    return
                continue
            joined = Generation(response.generation_id, response.member_id,
                                response.protocol_name)
            with self._lock:
                if self._closed or not self._join_requested:
                    return
                self._generation = joined
            leader = response.leader == response.member_id and \
                not getattr(response, "skip_assignment", False)
            assignments = self._assign(joined.protocol, response.members) if leader else {}
            if not leader:
                self._group_topics = {}
            response = request(conn, ApiKey.SYNC_GROUP, {
                "group_id": self.group_id, "generation_id": joined.generation_id,
                "member_id": joined.member_id, "group_instance_id": self.group_instance_id,
                "protocol_type": PROTOCOL_TYPE, "protocol_name": joined.protocol,
                "assignments": [{"member_id": m, "assignment": a}
                                for m, a in assignments.items()]})
            error = int(response.error_code)
            if error:
                if not self._handle_join_error(error, "SyncGroup"):
                    return
                continue
            try:
                assignment = decode_assignment(response.assignment)
            except WireFormatError as exc:
                log.error("group %s: unreadable assignment (%s); rejoining", self.group_id, exc)
                continue
            with self._lock:
                if self._generation != joined:
                    continue
                self._joined = _Joined(joined, assignment)
                self._join_requested = False
                self._state = _State.STABLE
            return

    def _handle_join_error(self, error: int, api: str) -> bool:
        """React to a JoinGroup/SyncGroup error; True to try again right away."""
        log.info("group %s: %s failed: %s", self.group_id, api, KafkaError.for_code(error))
        if error in _FATAL:
            self._set_fatal(error)
            with self._lock:
                self._join_requested = False
                self._state = _State.UNJOINED
            return False
        if error in _RESET_GENERATION:
            self._lose_generation(reset_member=error in _RESET_MEMBER)
            return False
        if error in COORDINATOR_MOVED:
            self._coordinator_moved()
            self._join_link.close()
        if error in COORDINATOR_MOVED or error == LOADING:
            time.sleep(self._backoff_s)
        elif error not in _RETRY_JOIN:
            self._set_fatal(error)
            return False
        return True

    def _join_body(self, generation: Generation) -> dict[str, Any]:
        owned = sorted(self._subs.assignment())
        topics = tuple(sorted(self._topics))
        protocols = []
        for assignor in self._assignor_order:
            user_data = assignor.user_data(self._last_assignment, self._last_assigned_generation)
            subscription = Subscription(topics, user_data, tuple(owned),
                                        self._last_assigned_generation)
            protocols.append({"name": assignor.name,
                              "metadata": encode_subscription(subscription)})
        return {"group_id": self.group_id, "session_timeout": self._session_ms,
                "rebalance_timeout": int(self._max_poll_s * 1000),
                "member_id": generation.member_id, "group_instance_id": self.group_instance_id,
                "protocol_type": PROTOCOL_TYPE, "protocols": protocols, "reason": None}

    def _assign(self, protocol: str | None, members: Any) -> dict[str, bytes]:
        """The leader's job: run the chosen assignor over every member's subscription."""
        assignor = self._assignors[protocol or ""]
        subscriptions = {}
        for m in members:
            try:
                sub = decode_subscription(m.metadata)
            except WireFormatError as exc:
                log.warning("group %s: member %s sent unreadable metadata (%s)",
                            self.group_id, m.member_id, exc)
                sub = Subscription(())
            subscriptions[m.member_id] = assignor.member(
                m.member_id, getattr(m, "group_instance_id", None), sub)
        topics = {t for s in subscriptions.values() for t in s.topics}
        meta = self._cluster.refresh_metadata(topics) if topics else None
        counts = {t: len(meta.topics[t].partitions) for t in topics
                  if meta is not None and t in meta.topics and not meta.topics[t].error_code}
        self._group_topics = counts
        result = assignor.assign(counts, subscriptions)
        log.info("group %s: leader assigned %s", self.group_id,
                 {m: sorted(p) for m, p in result.items()})
        return {m: encode_assignment(Assignment(tuple(parts))) for m, parts in result.items()}

    # ================================================================ shared helpers
    def _reset_generation(self, reset_member: bool) -> None:
        with self._lock:
            member = "" if reset_member else self._generation.member_id
            self._generation = Generation(-1, member, None)

    def _lose_generation(self, *, reset_member: bool, leave: bool = False) -> None:
        """The generation is gone: poll() reports the partitions lost and rejoins."""
        if leave:
            self.leave("poll timeout", self._heartbeat_link)
        self._reset_generation(reset_member)
        with self._lock:
            self._state = _State.UNJOINED
            self._join_requested = False
            self._rejoin_needed = True
            self._prepare_needed = True

    def _set_fatal(self, error: int) -> None:
        with self._lock:
            self._fatal = KafkaError.for_code(error, item=self.group_id)


def _readable(conn: BrokerConnection) -> bool:
    if conn.buffered():
        return True
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError):
        return True  # let receive() report the broken connection
    return bool(readable)
