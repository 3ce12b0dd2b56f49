"""Followers pull from leaders: one fetcher task per leader broker.

A fetcher sends the leader ordinary Fetch requests with its own broker id as
``replica_id``; the leader answers up to its LEO and learns our LEO from the
fetch offset. Before a partition's first fetch in a new leader epoch, the
fetcher asks the leader (OffsetForLeaderEpoch, KIP-101/279) where our latest
epoch ends on the leader and truncates there, so replicas never diverge the
way high-watermark truncation allowed.

Each answer carries the leader's log start offset; ours follows it (records
the leader deleted, by DeleteRecords or retention, go here too), and our
next fetch reports our new log start so a DeleteRecords waiting on the
leader's low watermark can answer.

Fetches run in an incremental fetch session (KIP-227): after one full request,
a request names only partitions whose entry changed (our LEO moved, a new
leader epoch, a partition added) and forgets those no longer followed here or
being truncated, so an idle follower's fetch is a few dozen bytes whatever the
partition count. A session error or a failed connection means a full request
next.

Without write.caching the fetch offset we report is what we have fsynced: what
an answer appended is synced (one group-committed fdatasync per log, all logs
at once) before the next fetch, since the leader counts our fetch offset for
its high watermark and acks=all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable
from typing import Any

from slog.core.errors import CorruptRecordError, StorageError
from slog.protocol.apis import ApiKey
from slog.protocol.fetch_session import FetchSessionHandler
from slog.replication.broker_channel import BrokerChannel
from slog.replication.fetch_response import FETCH_RESPONSE_VERSION, decode_fetch_response
from slog.replication.partition import Partition

log = logging.getLogger("slog.replication.fetcher")

FETCH_VERSION = FETCH_RESPONSE_VERSION
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
FETCH_MAX_WAIT_MS = 500  # replica.fetch.wait.max.ms
PARTITION_FETCH_BYTES = 8 * 1024 * 1024
RESPONSE_FETCH_BYTES = 64 * 1024 * 1024
BACKOFF_S = 0.2  # replica.fetch.backoff.ms: after an error, don't spin
METADATA_LAG_BACKOFF_S = 0.02  # ...but a leader change still propagating settles in ~50 ms
UNDEFINED_EPOCH = -1
SWEEP_INTERVAL_S = 30.0  # every entry re-read, for changes no hook reports

TopicPartition = tuple[str, int]


class ReplicaFetcher:
    def __init__(self, broker_id: int, leader_id: int, address: tuple[str, int]):
        self.broker_id = broker_id
        self.leader_id = leader_id
        self.address = address
        self.partitions: dict[TopicPartition, Partition] = {}
        # KIP-227: after the first full request, only partitions that changed are sent.
        # The session is told of changes as they happen (our LEO moved, a truncation, a
        # new assignment), so an idle fetch costs nothing per partition.
        self._session = FetchSessionHandler()
        self._dirty: set[TopicPartition] = set()  # entries to rebuild before the next fetch
        self._truncating: set[TopicPartition] = set()  # kept out of the session meanwhile
        self._swept_at = 0.0
        self._channel = BrokerChannel(*address, client_id=f"replica-fetcher-{broker_id}")
        self._task: asyncio.Task[None] | None = None
        self._leader_behind = False  # the last answer said "not (yet) the leader"

    def follow(self, partitions: dict[TopicPartition, Partition]) -> None:
        """Follow exactly ``partitions`` (a new assignment: every entry is looked at)."""
        gone = self.partitions.keys() - partitions.keys()
        self.partitions = partitions
        self._dirty.update(gone)
        self._dirty.update(partitions)

    def _changed(self, key: TopicPartition) -> None:
        self._dirty.add(key)

    def _refresh_session(self) -> None:
        """Bring the session's entries up to date with the partitions that changed."""
        now = time.monotonic()
        if now - self._swept_at >= SWEEP_INTERVAL_S:
            # Anything no hook reports (retention moving a log start) within a sweep.
            self._swept_at = now
            self._dirty.update(self.partitions)
        dirty, self._dirty = self._dirty, set()
        for key in dirty:
            partition = self.partitions.get(key)
            if partition is None or partition.needs_truncation:
                # Left out (forgotten) while truncating: the leader would otherwise
                # keep sending records we cannot append yet.
                self._session.remove(key)
                if partition is None:
                    self._truncating.discard(key)
                else:
                    self._truncating.add(key)
                continue
            self._truncating.discard(key)
            self._session.update(key, {
                "current_leader_epoch": partition.leader_epoch,
                "fetch_offset": partition.log.log_end_offset, "last_fetched_epoch": -1,
                "log_start_offset": partition.log.log_start_offset,
                "partition_max_bytes": PARTITION_FETCH_BYTES})

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"replica-fetcher {self.broker_id}<-{self.leader_id}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._channel.close()

    async def _run(self) -> None:
        while True:
            if not self.partitions:
                await asyncio.sleep(BACKOFF_S)
                continue
            try:
                await self._truncate_where_needed()
                progressed = await self._fetch_once()
            except asyncio.CancelledError:
                raise
            except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
                log.info("fetching from broker %d at %s:%d failed: %s", self.leader_id,
                         *self.address, exc)
                await asyncio.sleep(BACKOFF_S)
                continue
            except Exception:
                log.exception("replica fetcher from broker %d failed", self.leader_id)
                await asyncio.sleep(BACKOFF_S)
                continue
            if not progressed:
                # The leader not knowing yet that it leads (or at which epoch) is
                # brokers reading the metadata log at their own pace: a poll
                # interval, not a failure worth replica.fetch.backoff.ms.
                await asyncio.sleep(METADATA_LAG_BACKOFF_S if self._leader_behind
                                    else BACKOFF_S)

    # -- truncation ----------------------------------------------------------------------
    async def _truncate_where_needed(self) -> None:
        self._refresh_session()
        pending = {k: p for k in self._truncating
                   if (p := self.partitions.get(k)) is not None and p.needs_truncation}
        if not pending:
            return
        body = {"replica_id": self.broker_id, "topics": _by_topic(
            (topic, {"partition": number, "current_leader_epoch": p.leader_epoch,
                     "leader_epoch": p.log.leader_epoch_cache.latest_epoch})
            for (topic, number), p in pending.items())}
        response = await self._channel.request(ApiKey.OFFSET_FOR_LEADER_EPOCH,
                                               OFFSET_FOR_LEADER_EPOCH_VERSION, body)
        self._leader_behind = False
        for topic in response.topics:
            for result in topic.partitions:
                partition = pending.get((topic.topic, result.partition))
                self._leader_behind |= int(result.error_code) in _METADATA_LAG
                if partition is None or result.error_code != 0:
                    continue
                self._truncate(partition, result.leader_epoch, result.end_offset)
                self._changed((topic.topic, result.partition))

    @staticmethod
    def _truncate(partition: Partition, leader_epoch: int, end_offset: int) -> None:
        cache = partition.log.leader_epoch_cache
        ours = cache.latest_epoch
        leo = partition.log.log_end_offset
        if leader_epoch == UNDEFINED_EPOCH or end_offset < 0:
            target = min(partition.high_watermark, leo)  # no common epoch: HW, as before KIP-101
        elif leader_epoch == ours:
            target = min(end_offset, leo)
        else:
            # KIP-279: the leader knows an older epoch only; cut where ours of that epoch ends.
            _, our_end = cache.end_offset_for(leader_epoch, leo)
            target = min(end_offset, our_end if our_end >= 0 else end_offset, leo)
        if target < leo:
            log.warning("%s-%d: truncating from %d to %d (leader epoch %d ends at %d)",
                        partition.topic, partition.partition, leo, target, leader_epoch,
                        end_offset)
        partition.truncate_to(target)
        partition.needs_truncation = False

    # -- fetching ------------------------------------------------------------------------
    async def _fetch_once(self) -> bool:
        self._refresh_session()
        if len(self._truncating) == len(self.partitions):
            return False
        self._leader_behind = False
        partitions = self.partitions  # follow() replaces it; answers for the old are dropped
        body = {"replica_id": self.broker_id, "max_wait": FETCH_MAX_WAIT_MS, "min_bytes": 1,
                "max_bytes": RESPONSE_FETCH_BYTES, "isolation_level": 0, "rack_id": "",
                **self._session.build()}
        try:
            frame = await self._channel.request_frame(ApiKey.FETCH, FETCH_VERSION, body)
            # Decoded by hand: the records stay slices of the received frame (no copy).
            response = decode_fetch_response(frame)
        except BaseException:
            self._session.reset()  # whatever the leader got, start over with a full request
            raise
        progressed = self._session.handle_response(response.error_code, response.session_id)
        if response.error_code and not progressed:
            log.info("fetch session with broker %d: error %d, sending a full request next",
                     self.leader_id, response.error_code)
        started: Partition | None = None  # one whose log start moved
        appended: list[Partition] = []
        for topic in response.responses:
            for result in topic.partitions:
                key = (topic.topic, result.partition_index)
                partition = partitions.get(key)
                if partition is not None and partition is self.partitions.get(key) and \
                        key not in self._truncating:
                    log_start = partition.log.log_start_offset
                    leo = partition.log.log_end_offset
                    progressed &= self._apply(partition, result)
                    if partition.log.log_end_offset > leo:
                        appended.append(partition)
                    if partition.log.log_start_offset != log_start:
                        started = partition
                    if result.error_code:
                        self._session.resend(key)  # the leader may have dropped it
                    if result.records or partition.needs_truncation or result.error_code or \
                            partition is started:
                        # Our LEO, log start (the leader waits for it: DeleteRecords)
                        # or what we may fetch moved.
                        self._changed(key)
        if started is not None:
            # One checkpoint of the log starts per answer (it holds every log's), written
            # before our next fetch tells the leader.
            self._checkpoint_log_start(started)
        if appended:
            await self._sync(appended)
        return progressed

    async def _sync(self, appended: list[Partition]) -> None:
        """Wait until what we appended is durable (write.caching=false), so that the
        next fetch offset we report is on disk."""
        results = await asyncio.gather(
            *(p.wait_durable(p.log.log_end_offset) for p in appended), return_exceptions=True)
        for partition, result in zip(appended, results, strict=True):
            if isinstance(result, StorageError):
                # Never report what is not on disk: drop what did not sync, fetch it
                # again (a disk refusing fsyncs: Kafka would take the log dir offline).
                log.error("%s-%d: %s", partition.topic, partition.partition, result)
                with contextlib.suppress(StorageError):  # closed, or the disk again
                    partition.truncate_to(partition.durable_end)
                self._changed(partition.key)
                await asyncio.sleep(BACKOFF_S)
            elif isinstance(result, BaseException):
                raise result

    @staticmethod
    def _checkpoint_log_start(partition: Partition) -> None:
        try:
            partition.log.checkpoint_log_start()
        except StorageError as exc:
            log.error("cannot checkpoint log start offsets: %s", exc)

    def _apply(self, partition: Partition, result: Any) -> bool:
        code = int(result.error_code)
        if code == 0:
            records = result.records
            try:
                if records:
                    partition.append_as_follower(records, result.high_watermark)
                else:
                    partition.set_high_watermark(result.high_watermark)
                if result.log_start_offset > partition.log.log_start_offset:
                    partition.follow_log_start(result.log_start_offset, checkpoint=False)
            except (CorruptRecordError, ValueError, StorageError) as exc:
                log.error("%s-%d: cannot append what the leader sent: %s", partition.topic,
                          partition.partition, exc)
                partition.needs_truncation = True
                return False
            return True
        if code == _OFFSET_OUT_OF_RANGE:
            if partition.log.log_end_offset < result.log_start_offset:
                partition.restart_at(result.log_start_offset)  # retention passed us by
            else:
                partition.needs_truncation = True
            return True
        self._leader_behind |= code in _METADATA_LAG
        return False  # not leader / fenced epoch: wait for the metadata to catch up


_OFFSET_OUT_OF_RANGE = 1
# NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH: one of us has
# not read the latest leader change yet.
_METADATA_LAG = frozenset({6, 74, 75})


def _by_topic(items: Iterable[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per-partition request entries grouped into Kafka's topics → partitions shape."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for topic, entry in items:
        grouped.setdefault(topic, []).append(entry)
    return [{"topic": topic, "partitions": parts} for topic, parts in grouped.items()]


class ReplicaFetcherManager:
    """Keeps one fetcher per leader, each following exactly our follower partitions."""

    def __init__(self, broker_id: int):
        self.broker_id = broker_id
        self.fetchers: dict[int, ReplicaFetcher] = {}

    def assign(self, follow: dict[TopicPartition, tuple[Partition, int, tuple[str, int]]]
               ) -> None:
        """``follow``: partition key → (partition, leader id, leader address)."""
        wanted: dict[int, dict[TopicPartition, Partition]] = {}
        addresses: dict[int, tuple[str, int]] = {}
        for key, (partition, leader, address) in follow.items():
            wanted.setdefault(leader, {})[key] = partition
            addresses[leader] = address
        for leader in [lid for lid in self.fetchers if lid not in wanted or
                       self.fetchers[lid].address != addresses.get(lid)]:
            stale = self.fetchers.pop(leader)
            asyncio.get_running_loop().create_task(stale.stop())
        for leader, partitions in wanted.items():
            fetcher = self.fetchers.get(leader)
            if fetcher is None:
                fetcher = ReplicaFetcher(self.broker_id, leader, addresses[leader])
                self.fetchers[leader] = fetcher
                fetcher.start()
            fetcher.follow(partitions)

    async def shutdown(self) -> None:
        fetchers, self.fetchers = list(self.fetchers.values()), {}
        await asyncio.gather(*(f.stop() for f in fetchers), return_exceptions=True)
