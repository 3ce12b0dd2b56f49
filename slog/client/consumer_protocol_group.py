"""Group membership over KIP-848's consumer protocol (``group_protocol="consumer"``).

The broker assigns; the member only heartbeats (ConsumerGroupHeartbeat) and
reconciles. Compared with the classic :class:`~slog.client.group.ConsumerGroup`,
whose commits, committed-offset lookups and close this class keeps:

* the **heartbeat thread** sends a heartbeat every interval the coordinator
  names (at once when the member has something to report): epoch 0 to join,
  then the member epoch it was given, its subscription when it changed, and
  the partitions it owns whenever they changed. The answer may carry a new
  assignment, which it hands to ``poll()``;
* ``poll()`` reconciles on the application thread: partitions that left the
  assignment are committed (auto-commit) and revoked through the listener,
  new ones assigned, and the heartbeat thread is woken to tell the coordinator.
  The coordinator gives a partition to a new owner only after the old owner's
  heartbeat said it let it go, so no two members consume it at once;
* FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID mean the partitions may already be
  someone else's: they are reported lost and the member joins again (epoch 0);
* leaving is a heartbeat with epoch -1 (-2 for a static member, which keeps its
  place until its session times out).

A subscription pattern is sent as ``subscribed_topic_regex``: the broker matches
it (slog's broker uses Python's ``re.fullmatch``; Kafka's uses RE2).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping
from typing import Any

from slog.client.errors import KafkaError
from slog.client.group import ConsumerGroup, Generation, _State
from slog.client.group_requests import COORDINATOR_MOVED, LOADING, OffsetAndMetadata, commit_body
from slog.client.types import TopicPartition
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode

__all__ = ["ConsumerProtocolGroup"]

log = logging.getLogger("slog.client.group")

E = ErrorCode
JOIN, LEAVE, STATIC_LEAVE = 0, -1, -2
HEARTBEAT_VERSION = 1  # the client names its member id
COMMIT_VERSION = 9  # the first to carry a member epoch
_LOST = {int(E.fenced_member_epoch), int(E.unknown_member_id)}
_FATAL = {int(E.group_id_not_found), int(E.unsupported_assignor), int(E.invalid_request),
          int(E.unreleased_instance_id), int(E.group_max_size_reached),
          int(E.invalid_regular_expression), int(E.group_authorization_failed),
          int(E.fenced_instance_id), int(E.unsupported_version)}


class ConsumerProtocolGroup(ConsumerGroup):
    def __init__(self, *args: Any, server_assignor: str | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._server_assignor = server_assignor
        self._member_id = str(uuid.uuid4())
        self._epoch = JOIN
        self._interval_s = self._heartbeat_s
        # Heartbeat thread -> poll(): the newest assignment (topic id, partition).
        self._target: frozenset[tuple[str, int]] | None = None
        # poll() -> heartbeat thread: what the member owns now (None: nothing to report).
        self._report: frozenset[tuple[str, int]] | None = frozenset()
        self._lost = False
        self._names: dict[str, str] = {}  # topic id -> name

    # ================================================================ poll() side
    def poll(self) -> None:
        now = self._polled()
        with self._lock:
            target, self._target = self._target, None
            lost, self._lost = self._lost, False
        self._complete_async_commits()
        if lost:
            self._revoke(self._subs.assignment(), lost=True)
            with self._lock:
                self._report = frozenset()
        if target is not None:
            self._reconcile(target)
        with self._lock:
            stable = self._state is _State.STABLE and self._epoch > 0
        if stable and self._auto_commit and now >= self._next_auto_commit:
            self._next_auto_commit = now + self._auto_commit_s
            self.commit_async(None)

    def _reconcile(self, target: frozenset[tuple[str, int]]) -> None:
        wanted = {TopicPartition(name, p) for topic_id, p in target
                  if (name := self._topic_name(topic_id)) is not None}
        owned = self._subs.assignment()
        revoked, added = owned - wanted, wanted - owned
        if revoked:
            if self._auto_commit:
                self._commit_quietly({tp: o for tp, o in self._positions().items()
                                      if tp in revoked})
            self._revoke(revoked)
        self._set_assignment(wanted)
        log.info("group %s epoch %d: assigned %s", self.group_id, self._epoch, sorted(wanted))
        if self._listener is not None and added:
            self._listener.on_partitions_assigned(added)
        ids = {name: topic_id for topic_id, name in self._names.items()}
        with self._lock:
            self._report = frozenset((ids[tp.topic], tp.partition) for tp in wanted
                                     if tp.topic in ids)
        self._wake.set()  # tell the coordinator now

    def _topic_name(self, topic_id: str) -> str | None:
        if topic_id not in self._names:
            meta = self._cluster.refresh_metadata(None)
            self._names = {t.topic_id: name for name, t in meta.topics.items()
                           if t.topic_id is not None}
        return self._names.get(topic_id)

    @property
    def rebalancing(self) -> bool:
        with self._lock:
            return self._target is not None or self._epoch <= 0

    # ================================================================ commits
    def _send_commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        with self._lock:
            epoch, member = self._epoch, self._member_id
        if epoch <= 0:
            raise KafkaError.for_code(E.rebalance_in_progress,
                                      "not in the group yet; commit after joining")
        conn = self._commit_link.get(self._coordinator_node())
        conn.send(ApiKey.OFFSET_COMMIT, commit_body(
            self.group_id, epoch, member, self.group_instance_id, offsets),
            version=COMMIT_VERSION)

    def commit_sync(self, offsets: Mapping[TopicPartition, OffsetAndMetadata] | None,
                    timeout_s: float = 30.0) -> None:
        """As the classic member's, and again after STALE_MEMBER_EPOCH: the epoch moved
        on while the commit was under way, and the next heartbeat brings the new one."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                super().commit_sync(offsets, max(0.0, deadline - time.monotonic()))
                return
            except KafkaError as exc:
                if exc.code != E.stale_member_epoch or time.monotonic() >= deadline:
                    raise
            self._wake.set()
            time.sleep(self._backoff_s)

    @property
    def generation(self) -> Generation:
        with self._lock:
            return Generation(self._epoch, self._member_id, None)

    # ================================================================ leaving
    def leave(self, reason: str, link: Any = None) -> None:
        with self._lock:
            epoch, node = self._epoch, self._coordinator
            self._epoch = JOIN
            self._state = _State.UNJOINED
        if epoch <= 0 or node is None:
            return
        leaving = STATIC_LEAVE if self.group_instance_id is not None else LEAVE
        try:
            self._commit_link.get(node).request(ApiKey.CONSUMER_GROUP_HEARTBEAT, {
                "group_id": self.group_id, "member_id": self._member_id,
                "member_epoch": leaving, "instance_id": self.group_instance_id,
                "topic_partitions": None}, version=HEARTBEAT_VERSION)
        except (ConnectionError, KafkaError) as exc:
            log.info("group %s: leaving failed (%s): %s", self.group_id, reason, exc)

    # ================================================================ heartbeat thread
    def _run(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    return
                subscribed = bool(self._topics) or self._pattern is not None
            if subscribed:
                try:
                    self._heartbeat_once()
                except (ConnectionError, KafkaError) as exc:
                    log.debug("group %s: coordinator unreachable: %s", self.group_id, exc)
                    self._coordinator_moved()
                    self._heartbeat_link.close()
                    time.sleep(self._backoff_s)
                    continue
                except Exception:  # never let the thread die silently
                    log.exception("group %s: heartbeat thread error", self.group_id)
            self._wake.wait(self._interval_s)
            self._wake.clear()

    def _heartbeat_body(self) -> dict[str, Any]:
        with self._lock:
            epoch, report = self._epoch, self._report
            self._report = None
        body: dict[str, Any] = {
            "group_id": self.group_id, "member_id": self._member_id, "member_epoch": epoch,
            "instance_id": self.group_instance_id, "rebalance_timeout": -1,
            "subscribed_topic_names": None, "subscribed_topic_regex": None,
            "server_assignor": self._server_assignor, "topic_partitions": None}
        if epoch == JOIN:
            body["rebalance_timeout"] = int(self._max_poll_s * 1000)
            report = frozenset()
        if epoch == JOIN or self._rejoin_needed:
            # The whole subscription: on joining, and when it changed since.
            self._rejoin_needed = False
            if self._pattern is not None:
                body["subscribed_topic_regex"] = self._pattern.pattern
            else:
                body["subscribed_topic_names"] = sorted(self._topics)
        if report is not None:
            by_topic: dict[str, list[int]] = {}
            for topic_id, p in report:
                by_topic.setdefault(topic_id, []).append(p)
            body["topic_partitions"] = [{"topic_id": t, "partitions": sorted(ps)}
                                        for t, ps in sorted(by_topic.items())]
        return body

    def _heartbeat_once(self) -> None:
        node = self._coordinator_node()
        body = self._heartbeat_body()
        response = self._heartbeat_link.get(node).request(
            ApiKey.CONSUMER_GROUP_HEARTBEAT, body, version=HEARTBEAT_VERSION)
        error = int(response.error_code)
        if error:
            with self._lock:
                if body["topic_partitions"] is not None and self._report is None:
                    self._report = frozenset(
                        (str(t["topic_id"]), p) for t in body["topic_partitions"]
                        for p in t["partitions"])  # say it again next time
            self._on_error(error, response.error_message)
            return
        with self._lock:
            self._epoch = response.member_epoch
            self._state = _State.STABLE
            if response.heartbeat_interval is not None:
                self._interval_s = max(0.01, response.heartbeat_interval.total_seconds())
            if response.assignment is not None:
                self._target = frozenset(
                    (str(t.topic_id), p) for t in response.assignment.topic_partitions
                    for p in t.partitions)

    def _on_error(self, error: int, message: str | None) -> None:
        log.info("group %s: ConsumerGroupHeartbeat failed: %s %s", self.group_id,
                 KafkaError.for_code(error), message or "")
        if error in _LOST:
            with self._lock:
                self._epoch = JOIN
                self._state = _State.UNJOINED
                self._lost = True
            self._wake.set()
        elif error in COORDINATOR_MOVED:
            self._coordinator_moved()
            self._heartbeat_link.close()
            time.sleep(self._backoff_s)
        elif error == LOADING or KafkaError.for_code(error).retriable:
            time.sleep(self._backoff_s)
        elif error in _FATAL:
            self._set_fatal(error)
            with self._lock:
                self._topics, self._pattern = set(), None
        else:
            self._set_fatal(error)
