"""The consumer: read records from assigned partitions.

Example::

    consumer = Consumer("127.0.0.1:9092", auto_offset_reset="earliest")
    consumer.assign([TopicPartition("orders", 0)])
    for record in consumer.poll(timeout_ms=1000):
        print(record.offset, record.key, record.value)

Single-threaded like Kafka's consumer: all network work happens inside
``poll()``, which also sends the next Fetch before returning records so it is
in flight while the caller works (see :mod:`slog.client.fetcher`).

Groups. With a ``group_id``, ``subscribe()`` joins the consumer group and the
group assigns the partitions (see :mod:`slog.client.group`); offsets are
committed to the group automatically every ``auto_commit_interval_ms`` or by
``commit()``. Example::

    consumer = Consumer("127.0.0.1:9092", group_id="billing",
                        auto_offset_reset="earliest")
    consumer.subscribe(["orders"])
    for record in consumer:
        handle(record)

Positions. A partition without a position gets one on the next poll: from the
group's committed offset (or the ``committed_offsets`` hook) if there is one,
else from ``auto_offset_reset`` ("earliest", "latest", or "none" to raise).
The same happens when a fetch position falls outside the log
(OFFSET_OUT_OF_RANGE).

Kafka defaults, except ``max_poll_records`` (Kafka: 500), which is raised to
10,000 here because per-poll overhead matters more in Python.
``isolation_level="read_committed"`` reads up to the last stable offset and
drops the records of aborted transactions; transaction markers are never
handed out in either mode.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping

from slog.client.assignors import make_assignors
from slog.client.cluster import ClusterClient, client_tls
from slog.client.consumer_protocol_group import ConsumerProtocolGroup
from slog.client.errors import InvalidArgumentError, KafkaError, OffsetOutOfRangeError
from slog.client.fetcher import Fetcher
from slog.client.group import ConsumerGroup, GroupMetadata, RebalanceListener
from slog.client.group_requests import OffsetAndMetadata
from slog.client.offsets import READ_COMMITTED, READ_UNCOMMITTED, list_offsets
from slog.client.subscription import SubscriptionState
from slog.client.types import ConsumerRecord, OffsetAndTimestamp, TopicPartition

__all__ = ["CommittedOffsets", "Consumer"]

# Given the partitions that need a position, return the committed offset of each
# one that has one (group membership provides this).
CommittedOffsets = Callable[[list[TopicPartition]], dict[TopicPartition, int]]
RESET_STRATEGIES = ("earliest", "latest", "none")
GROUP_PROTOCOLS = ("classic", "consumer")  # KIP-848: "consumer" lets the broker assign


class Consumer:
    def __init__(
        self,
        bootstrap: str | Iterable[str],
        *,
        auto_offset_reset: str = "latest",
        fetch_min_bytes: int = 1,
        fetch_max_wait_ms: int = 500,
        max_partition_fetch_bytes: int = 1024 * 1024,
        fetch_max_bytes: int = 50 * 1024 * 1024,
        max_poll_records: int = 10_000,
        isolation_level: str = "read_uncommitted",
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
        consumer_timeout_ms: float | None = None,
        client_id: str = "slog-consumer",
        subscription: SubscriptionState | None = None,
        committed_offsets: CommittedOffsets | None = None,
        group_id: str | None = None,
        group_instance_id: str | None = None,
        session_timeout_ms: int = 10_000,
        heartbeat_interval_ms: int = 3_000,
        max_poll_interval_ms: int = 300_000,
        partition_assignment_strategy: Iterable[str] = ("range", "cooperative-sticky"),
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5_000,
        metadata_max_age_ms: int = 300_000,
        client_rack: str = "",
        group_protocol: str = "classic",
        group_remote_assignor: str | None = None,
        security_protocol: str | None = None,
        ssl_cafile: str | None = None,
        ssl_certfile: str | None = None,
        ssl_keyfile: str | None = None,
    ):
        if auto_offset_reset not in RESET_STRATEGIES:
            raise InvalidArgumentError(f"auto_offset_reset must be one of {RESET_STRATEGIES}")
        levels = {"read_uncommitted": READ_UNCOMMITTED, "read_committed": READ_COMMITTED}
        if isolation_level not in levels:
            raise InvalidArgumentError(f"isolation_level must be one of {sorted(levels)}")
        if request_timeout_ms <= fetch_max_wait_ms:
            raise InvalidArgumentError("request_timeout_ms must be larger than fetch_max_wait_ms")
        self.auto_offset_reset = auto_offset_reset
        self.max_poll_records = max_poll_records
        self.consumer_timeout_ms = consumer_timeout_ms
        self._isolation_level = levels[isolation_level]
        self._backoff_s = retry_backoff_ms / 1000
        self._cluster = ClusterClient(bootstrap, client_id=client_id,
                                      request_timeout_ms=request_timeout_ms,
                                      tls=client_tls(security_protocol, ssl_cafile,
                                                     ssl_certfile, ssl_keyfile))
        self._subs = subscription or SubscriptionState()
        self._committed = committed_offsets
        self._fetcher = Fetcher(
            self._cluster, self._subs, fetch_min_bytes=fetch_min_bytes,
            fetch_max_wait_ms=fetch_max_wait_ms,
            max_partition_fetch_bytes=max_partition_fetch_bytes,
            fetch_max_bytes=fetch_max_bytes, isolation_level=self._isolation_level,
            retry_backoff_ms=retry_backoff_ms, client_rack=client_rack,
            metadata_max_age_ms=metadata_max_age_ms)
        self._metadata_next = 0.0
        self._closed = False
        if group_protocol not in GROUP_PROTOCOLS:
            raise InvalidArgumentError(f"group_protocol must be one of {GROUP_PROTOCOLS}")
        self._group: ConsumerGroup | None = None
        if group_id is not None:
            # KIP-848: the broker assigns (group_remote_assignor picks its assignor).
            kip848 = {"server_assignor": group_remote_assignor} \
                if group_protocol == "consumer" else {}
            membership = ConsumerProtocolGroup if kip848 else ConsumerGroup
            self._group = membership(
                self._cluster, self._subs, self._fetcher.discard, group_id=group_id,
                group_instance_id=group_instance_id, client_id=client_id,
                session_timeout_ms=session_timeout_ms, max_poll_interval_ms=max_poll_interval_ms,
                heartbeat_interval_ms=heartbeat_interval_ms,
                assignors=make_assignors(list(partition_assignment_strategy)),
                enable_auto_commit=enable_auto_commit,
                auto_commit_interval_ms=auto_commit_interval_ms,
                retry_backoff_ms=retry_backoff_ms, request_timeout_ms=request_timeout_ms,
                metadata_max_age_ms=metadata_max_age_ms,
                require_stable=self._isolation_level == READ_COMMITTED, **kip848)
            if committed_offsets is None:
                self._committed = self._group.committed_offsets

    # -- group membership ----------------------------------------------------------------
    def subscribe(self, topics: Iterable[str] | None = None, *,
                  pattern: str | re.Pattern[str] | None = None,
                  listener: RebalanceListener | None = None) -> None:
        """Join the group and consume the partitions it assigns: of ``topics``, or of
        every topic whose whole name matches ``pattern`` (new ones included)."""
        if self._group is None:
            raise InvalidArgumentError("subscribe() needs a group_id; use assign() without a group")
        if (topics is None) == (pattern is None):
            raise InvalidArgumentError("subscribe to topics or to a pattern, not both")
        if self._subs.assignment() and not self._group.subscription:
            raise InvalidArgumentError(
                "assign() and subscribe() cannot be mixed; unsubscribe() first")
        compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
        self._group.subscribe(None if topics is None else list(topics), compiled, listener)

    def unsubscribe(self) -> None:
        """Give up the assigned partitions (the listener hears of it) and leave the group."""
        if self._group is not None:
            self._group.unsubscribe()

    def subscribed_topics(self) -> set[str]:
        """The topics the group assigns from (a pattern's current matches)."""
        return self._group.subscription if self._group is not None else set()

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
               *, asynchronous: bool = False,
               callback: Callable[..., None] | None = None) -> None:
        """Commit ``offsets`` (default: the position of every assigned partition, i.e. what
        poll() has returned). Synchronous by default; ``asynchronous=True`` returns at
        once and calls ``callback(offsets, error_or_None)`` from a later poll()."""
        group = self._require_group()
        values = None if offsets is None else {
            TopicPartition(*tp): v if isinstance(v, OffsetAndMetadata) else OffsetAndMetadata(v)
            for tp, v in offsets.items()}
        if asynchronous:
            group.commit_async(values, callback)
        else:
            group.commit_sync(values)

    def committed(self, partitions: Iterable[TopicPartition | tuple[str, int]]
                  ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets of ``partitions`` (None where there is none)."""
        return self._require_group().committed([TopicPartition(*tp) for tp in partitions])

    def group_metadata(self) -> GroupMetadata:
        """Group id, generation, member id and instance id (generation -1 until joined)."""
        return self._require_group().metadata()

    def _require_group(self) -> ConsumerGroup:
        if self._group is None:
            raise InvalidArgumentError("this needs a consumer with a group_id")
        return self._group

    # -- assignment and positions -----------------------------------------------------
    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Read exactly these partitions (replacing any earlier assignment)."""
        if self._group is not None and self._group.subscription:
            raise InvalidArgumentError(
                "assign() and subscribe() cannot be mixed; unsubscribe() first")
        tps = [TopicPartition(*tp) for tp in partitions]
        for tp in self._subs.assignment() - set(tps):
            self._fetcher.discard(tp)
        self._subs.assign(tps)
        self._refresh_metadata(force=True)

    def assignment(self) -> set[TopicPartition]:
        return self._subs.assignment()

    def seek(self, tp: TopicPartition | tuple[str, int], offset: int) -> None:
        """The next poll returns records from ``offset`` of ``tp``."""
        tp = TopicPartition(*tp)
        self._subs.seek(tp, offset)
        self._fetcher.discard(tp)

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        self._reset(partitions, "earliest")

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        self._reset(partitions, "latest")

    def _reset(self, partitions: Iterable[TopicPartition] | None, strategy: str) -> None:
        for tp in self._subs.assignment() if partitions is None else partitions:
            tp = TopicPartition(*tp)
            self._subs.request_reset(tp, strategy)
            self._fetcher.discard(tp)

    def position(self, tp: TopicPartition | tuple[str, int], timeout_ms: float = 30_000) -> int:
        """Offset of the next record poll() returns for ``tp`` (looked up if unknown)."""
        tp = TopicPartition(*tp)
        deadline = time.monotonic() + timeout_ms / 1000
        while (position := self._subs.position(tp)) is None:
            self._update_positions()
            if self._subs.position(tp) is None:
                if time.monotonic() >= deadline:
                    raise KafkaError.for_code(7, f"no position for {tp} within {timeout_ms} ms")
                time.sleep(self._backoff_s)
        return position

    def highwater(self, tp: TopicPartition) -> int | None:
        """The high watermark last seen in a Fetch response for ``tp`` (None before one)."""
        state = self._subs.state(TopicPartition(*tp))
        return None if state is None or state.high_watermark < 0 else state.high_watermark

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop returning and fetching records of these partitions until resume()."""
        self._subs.pause(TopicPartition(*tp) for tp in partitions)

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        self._subs.resume(TopicPartition(*tp) for tp in partitions)

    def paused(self) -> set[TopicPartition]:
        return self._subs.paused()

    @property
    def subscription(self) -> SubscriptionState:
        return self._subs

    @property
    def cluster(self) -> ClusterClient:
        return self._cluster

    # -- polling -------------------------------------------------------------------------
    def poll(self, timeout_ms: float = 0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records fetched for the assigned partitions, waiting up to ``timeout_ms`` for some.

        Returns an empty list when none arrived in time. Raises the KafkaError
        of a partition that failed for a non-retriable reason.
        """
        if self._closed:
            raise RuntimeError("poll() on a closed consumer")
        limit = max_records or self.max_poll_records
        deadline = time.monotonic() + timeout_ms / 1000
        fetcher = self._fetcher
        while True:
            fetcher.wait(0)
            self._housekeeping()
            fetcher.send_fetches()
            records = fetcher.collect(limit)
            if records:
                fetcher.send_fetches()  # keep the partitions just drained fetching
                return records
            fetcher.raise_errors()
            left = deadline - time.monotonic()
            if left <= 0:
                return []
            if self._group is not None:  # look at the group again soon
                left = min(left, self._group.wait_slice())
            fetcher.wait(left)

    def _housekeeping(self) -> None:
        fetcher = self._fetcher
        if self._group is not None:
            self._group.poll()
        if fetcher.out_of_range:
            tps, fetcher.out_of_range = fetcher.out_of_range, []
            for tp in tps:
                if self.auto_offset_reset == "none":
                    state = self._subs.state(tp)
                    raise OffsetOutOfRangeError(
                        message=f"fetch position {state.fetch_position if state else None} is "
                        "out of range and auto_offset_reset is 'none'", item=str(tp))
                self._subs.request_reset(tp, self.auto_offset_reset)
                fetcher.discard(tp)
        if fetcher.metadata_needed:
            self._refresh_metadata()
        if self._subs.missing_positions():
            self._update_positions()

    def _refresh_metadata(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now < self._metadata_next:
            return
        self._metadata_next = now + self._backoff_s
        try:
            self._cluster.refresh_metadata({tp.topic for tp in self._subs.assignment()})
            self._fetcher.metadata_needed = False
        except ConnectionError:
            self._fetcher.metadata_needed = True

    def _update_positions(self) -> None:
        missing = self._subs.missing_positions()
        if not missing:
            return
        fresh = [tp for tp in missing if self._subs.reset_strategy(tp) is None]
        if fresh and self._committed is not None:
            for tp, offset in self._committed(fresh).items():
                if offset is not None and offset >= 0:
                    self._subs.seek(tp, offset)
        specs: dict[TopicPartition, str] = {}
        for tp in self._subs.missing_positions():
            strategy = self._subs.reset_strategy(tp) or self.auto_offset_reset
            if strategy == "none":
                raise KafkaError.for_code(
                    1, "no committed offset and auto_offset_reset is 'none'", item=str(tp))
            specs[tp] = strategy
        if not specs:
            return
        try:
            results = list_offsets(self._cluster, specs, isolation_level=self._isolation_level,
                                   attempts=1)
        except ConnectionError:
            return  # the next poll tries again
        for tp, result in results.items():
            state = self._subs.state(tp)
            if state is None or state.position is not None:
                continue
            if isinstance(result, OffsetAndTimestamp):
                self._subs.seek(tp, result.offset)
            elif not result.retriable:
                raise result

    # -- iteration and lifecycle -------------------------------------------------------
    def __iter__(self) -> Iterator[ConsumerRecord]:
        """Yield records forever, or until none arrives for ``consumer_timeout_ms``."""
        idle_since = time.monotonic()
        while True:
            wait_ms = 1000.0 if self.consumer_timeout_ms is None else max(
                self.consumer_timeout_ms - (time.monotonic() - idle_since) * 1000, 0.0)
            records = self.poll(timeout_ms=wait_ms)
            if records:
                yield from records
                idle_since = time.monotonic()
            elif self.consumer_timeout_ms is not None and \
                    (time.monotonic() - idle_since) * 1000 >= self.consumer_timeout_ms:
                return

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._group is not None:
            self._group.close()
        self._fetcher.close()
        self._cluster.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
