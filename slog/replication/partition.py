"""One partition replica on this broker: its log plus Kafka's replica state.

Leader side: the leader owns the high watermark, HW = min LEO over the ISR
(its own LEO included; followers report theirs through their fetch offsets).
acks=all produce requests wait here until the HW passes their last offset.
A follower is in sync while it has caught up with the leader's LEO within
``replica.lag.time.max.ms``; the leader proposes ISR changes, the controller
decides them.

Follower side: records arrive from the leader with their offsets and leader
epochs already set; the HW is the leader's, capped at our own LEO.

With ``write.caching=false`` (the default) a replica counts only what it has
fsynced (group commit, :mod:`slog.replication.log_sync`): the leader's own part
of the HW is its durable end, acks=1 waits for it, and a follower fetches again
(reporting its new end) only once what it appended is synced. So the HW never
passes what a power loss would keep.

DeleteRecords moves the leader's log start offset; followers learn it from
fetch responses and move theirs, and report theirs in their fetches. The
leader's low watermark is the lowest log start among itself and the replicas
the controller has not fenced; a DeleteRecords answer waits for it.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Protocol

from slog.core import batch
from slog.core.aborted_txn_index import AbortedTxn
from slog.core.kafka_errors import ErrorCode, KafkaApiError
from slog.core.log import AppendInfo, FetchSlice, PartitionLog
from slog.core.metadata import NO_LEADER, PartitionState
from slog.core.producer_snapshot import snapshot_entries
from slog.core.producer_state import ProducerStateManager, SequenceCheck
from slog.core.transaction_index import PartitionTransactions, read_marker
from slog.core.transaction_state import seed_state
from slog.replication.log_sync import LogSyncer

logger = logging.getLogger(__name__)


class ReplicaError(KafkaApiError):
    """A request this replica cannot serve (not the leader, too few in sync, ...)."""


def _now_ms() -> float:
    return time.monotonic() * 1000


class FetchWatcher(Protocol):
    """A fetch session watching partitions (slog.replication.fetch_sessions)."""

    wants_log_end: bool  # told of every append (a follower), not only HW moves
    last_fetch_ms: float  # its latest fetch, whichever partitions it named

    def partition_changed(self, key: tuple[str, int] | None, wake: bool = True) -> None: ...


class Change(enum.Flag):
    """What moved in a partition, for its fetch watchers."""

    LOG_END = enum.auto()  # an append: followers read it at once
    # What consumers may read: they are woken; a follower only notes it and hears
    # of it with its next answer (new data, or the end of its wait), as in Kafka.
    HIGH_WATERMARK = enum.auto()
    EVERYTHING = LOG_END | HIGH_WATERMARK  # leadership, truncation, the log start


@dataclass
class FollowerState:
    log_end_offset: int = -1  # unknown until its first fetch
    log_start_offset: int = -1  # as its fetches report it (-1: not yet)
    last_caught_up_ms: float = field(default_factory=_now_ms)
    last_fetch_ms: float = 0.0
    leader_leo_at_last_fetch: int = 0
    # The follower's fetch session, if it has one: in an incremental session a
    # partition whose offset did not move is not named, yet is fetched still.
    session: FetchWatcher | None = None

    def caught_up_ms(self, leader_leo: int, leo_before_append: int = -1,
                     appended_ms: float = 0.0) -> float:
        """When it was last caught up: a follower at our LEO that keeps fetching in its
        session is caught up as of its latest fetch, named or not (Kafka reads every
        partition of a session on each fetch; slog only notes the fetch). One that was
        at our LEO until our latest append (``leo_before_append``, at ``appended_ms``)
        was caught up until then, or it would look late the moment an idle partition
        takes a write."""
        if self.session is not None:
            if self.log_end_offset >= leader_leo:
                return max(self.last_caught_up_ms, self.session.last_fetch_ms)
            if self.log_end_offset >= leo_before_append >= 0:
                return max(self.last_caught_up_ms,
                           min(self.session.last_fetch_ms, appended_ms))
        return self.last_caught_up_ms


@dataclass(frozen=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time: int
    log_start_offset: int
    duplicate: bool = False


class Partition:
    def __init__(self, topic: str, partition: int, log: PartitionLog, broker_id: int,
                 *, new_log: bool = False):
        self.topic = topic
        self.partition = partition
        self.log = log
        self.broker_id = broker_id
        self.state: PartitionState | None = None
        self.high_watermark = 0
        self.producers = ProducerStateManager()
        self.transactions = PartitionTransactions()
        self.followers: dict[int, FollowerState] = {}
        self.needs_truncation = False  # a new follower epoch: ask the leader where to cut
        self.isr_change_in_flight = False
        # Replicas this leader proposed adding to the ISR, and the partition epoch it
        # proposed at: they count for the HW until a newer epoch is applied (Kafka's
        # "maximal ISR"), so the controller can never elect one that lacks acked records.
        self.pending_additions: frozenset[int] = frozenset()
        self.pending_since_epoch = -1
        self.fenced_replicas: frozenset[int] = frozenset()
        self.topic_id = ""  # the topic incarnation this log belongs to
        # Told when the ISR may need changing soon (new leadership or ISR, an out-of-sync
        # follower fetching): the replica manager re-checks only partitions it was told of.
        self.isr_watch: Callable[[Partition], None] | None = None
        # The ISR check parked this partition until a follower's session goes quiet;
        # an append must wake it (a follower may now fall behind on it alone).
        self.isr_parked = False
        self._leo_before_append = -1
        self._appended_ms = 0.0
        self._commit_waiters: list[tuple[int, asyncio.Future[None]]] = []
        # DeleteRecords answers waiting for every live replica's log start to pass
        # their offset; each future gets True, or False when leadership moved.
        self._low_watermark_waiters: list[tuple[int, asyncio.Future[bool]]] = []
        # Fetch sessions reading this partition: told when it changes, so a parked
        # fetch wakes for its own partitions only (nothing broker-wide).
        self._watchers: set[FetchWatcher] = set()
        self.key = (topic, partition)
        self._sync = LogSyncer(log, self._durable_moved)
        self._leader_hw = 0  # a follower's HW as the leader last told it
        self._replayed_aborts: list[AbortedTxn] | None = None
        log.producer_state = lambda: snapshot_entries(self.producers, self.transactions)
        if not new_log:  # a log just created holds no batch, snapshot or .txnindex
            self._rebuild_producer_state()

    # -- fetch watchers ------------------------------------------------------------------
    def watch(self, watcher: FetchWatcher) -> None:
        self._watchers.add(watcher)

    def unwatch(self, watcher: FetchWatcher) -> None:
        self._watchers.discard(watcher)

    def notify_watchers(self, change: Change = Change.EVERYTHING) -> None:
        """Something a fetch reads changed (see :class:`Change`)."""
        for watcher in list(self._watchers):
            if not watcher.wants_log_end:
                if Change.HIGH_WATERMARK in change:
                    watcher.partition_changed(self.key)
            elif Change.LOG_END in change:
                watcher.partition_changed(self.key)
            else:
                watcher.partition_changed(self.key, wake=False)

    # -- role ------------------------------------------------------------------------
    @property
    def leader_id(self) -> int:
        return self.state.leader if self.state else NO_LEADER

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch if self.state else -1

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    @property
    def isr(self) -> tuple[int, ...]:
        return self.state.isr if self.state else ()

    def become_leader(self, state: PartitionState, fenced: Collection[int] = ()) -> None:
        """Take leadership at ``state.leader_epoch``; a new epoch starts at our LEO.

        ``fenced``: brokers the controller declared dead or paused. What they
        fetched before (a dead follower's long poll can still be answered) and
        what a replica had before it left the ISR (it may have restarted and
        lost unflushed data since) never count: it rejoins on fresh fetches.
        """
        newly = not self.is_leader or self.leader_epoch != state.leader_epoch
        dropped = (set(self.isr) - set(state.isr)) | set(fenced)
        self.state = state
        self.isr_change_in_flight = False
        self.fenced_replicas = frozenset(fenced)
        if newly:
            self.pending_additions = frozenset()
            self.log.assign_leader_epoch(state.leader_epoch, self.log.log_end_offset)
            self.followers = {r: FollowerState() for r in state.replicas if r != self.broker_id}
        else:
            for replica in state.replicas:
                if replica == self.broker_id:
                    continue
                if replica in dropped:
                    self.followers[replica] = FollowerState()
                else:
                    self.followers.setdefault(replica, FollowerState())
        if not self.log.config.write_caching:
            self._sync.request(self.log.log_end_offset)  # what it appended as a follower
        self._maybe_advance_high_watermark()
        self._check_low_watermark()  # a fenced replica no longer holds it back
        self._watch_isr()
        self.notify_watchers()  # fetches re-read it: a session must not hide a move

    def become_follower(self, state: PartitionState) -> None:
        new_epoch = self.state is None or self.is_leader or \
            state.leader_epoch != self.leader_epoch
        self.state = state
        self.followers = {}
        self.isr_change_in_flight = False
        self.pending_additions = frozenset()
        if new_epoch:
            self.needs_truncation = True
            self._fail_waiters(ErrorCode.not_leader_or_follower,
                               f"{self.topic}-{self.partition}: leadership moved")
        self._release_low_watermark_waiters()
        self.notify_watchers()

    # -- leader data path ----------------------------------------------------------------
    def append_as_leader(
        self, records: bytes | memoryview, *, required_acks: int, min_insync_replicas: int
    ) -> AppendResult:
        if not self.is_leader:
            raise ReplicaError(ErrorCode.not_leader_or_follower,
                               f"{self.topic}-{self.partition}: this broker is not the leader")
        if required_acks == -1 and len(self.isr) < min_insync_replicas:
            raise ReplicaError(
                ErrorCode.not_enough_replicas,
                f"ISR {list(self.isr)} is smaller than min.insync.replicas={min_insync_replicas}",
            )
        # Idempotence is decided on the (cheap, unvalidated) header; the log
        # validates length, magic and CRC once, inside append.
        header = batch.parse_header(records, 0)
        verdict, previous = self.producers.check(header)
        if verdict is SequenceCheck.DUPLICATE and previous is not None:
            return AppendResult(previous.first_offset, previous.last_offset, -1,
                                self.log.log_start_offset, True)
        if verdict is SequenceCheck.OUT_OF_ORDER:
            raise ReplicaError(ErrorCode.out_of_order_sequence_number,
                               f"sequence {header.base_sequence} is out of order")
        if verdict is SequenceCheck.FENCED_EPOCH:
            raise ReplicaError(ErrorCode.invalid_producer_epoch,
                               f"producer epoch {header.producer_epoch} is stale")
        leo = self.log.log_end_offset
        info = self.log.append(records, assign_offsets=True, leader_epoch=self.leader_epoch)
        self._leo_before_append, self._appended_ms = leo, _now_ms()
        self._track_producers(info, records)
        if self.isr_parked:
            self.isr_parked = False
            self._watch_isr()
        if not self.log.config.write_caching:
            self._sync.request(self.log.log_end_offset)
        hw_moved = self._maybe_advance_high_watermark()
        self.notify_watchers(Change.EVERYTHING if hw_moved else Change.LOG_END)
        return AppendResult(info.first_offset, info.last_offset, info.log_append_time,
                            self.log.log_start_offset)

    # -- durability (write.caching) -------------------------------------------------------
    @property
    def durable_end(self) -> int:
        """Where a power loss would cut this replica's log (as a replica counts it):
        the LEO with write.caching, else the end of what is fsynced."""
        if self.log.config.write_caching:
            return self.log.log_end_offset
        return self.log.durable_offset  # set by fsyncs on any thread: always true

    async def wait_durable(self, end: int) -> None:
        """Return once offsets below ``end`` count as durable (at once with
        write.caching); raises StorageError if the fsync failed."""
        waiter = self.durable_waiter(end)
        if waiter is not None:
            await waiter

    def durable_waiter(self, end: int) -> asyncio.Future[None] | None:
        """:meth:`wait_durable` as a future (None: nothing to wait for), so a request
        waiting on many partitions needs no coroutine or task for each."""
        if self.log.config.write_caching:
            return None
        return self._sync.waiter(min(end, self.log.log_end_offset))

    def _durable_moved(self) -> None:
        if self.is_leader:
            if self._maybe_advance_high_watermark():
                self.notify_watchers(Change.HIGH_WATERMARK)
        elif self.state is not None:
            self.set_high_watermark(self._leader_hw)

    async def wait_for_commit(self, last_offset: int, timeout_s: float,
                              min_insync_replicas: int) -> None:
        """acks=all: return once the HW covers ``last_offset``; raise ReplicaError otherwise."""
        waiter = self.commit_waiter(last_offset)
        if waiter is None:
            return
        try:
            await asyncio.wait_for(waiter, timeout_s)
        except TimeoutError:
            raise self.commit_timed_out(last_offset, min_insync_replicas) from None

    def commit_waiter(self, last_offset: int) -> asyncio.Future[None] | None:
        """:meth:`wait_for_commit` as a future without its timeout (None: the HW already
        covers ``last_offset``); it fails with ReplicaError if leadership moves. A
        caller that stops waiting cancels it."""
        if self.high_watermark > last_offset:
            return None
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._commit_waiters.append((last_offset, future))
        return future

    def commit_timed_out(self, last_offset: int, min_insync_replicas: int) -> ReplicaError:
        """Why an acks=all wait for ``last_offset`` ran out of time."""
        if len(self.isr) < min_insync_replicas:
            return ReplicaError(ErrorCode.not_enough_replicas_after_append,
                                f"ISR {list(self.isr)} shrank below min.insync.replicas="
                                f"{min_insync_replicas} after the append")
        return ReplicaError(ErrorCode.request_timed_out,
                            f"replicas did not acknowledge offset {last_offset} in time")

    def _fail_waiters(self, code: ErrorCode, message: str) -> None:
        waiters, self._commit_waiters = self._commit_waiters, []
        for _, future in waiters:
            if not future.done():
                future.set_exception(ReplicaError(code, message))

    def read(self, offset: int, max_bytes: int, *, committed_only: bool,
             min_one: bool = True, read_committed: bool = False) -> FetchSlice:
        """``min_one``: the first batch whole even past ``max_bytes`` (KIP-74), only
        for the first partition of a response that reads anything. ``read_committed``:
        only below the last stable offset."""
        limit = self.high_watermark if committed_only else None
        if read_committed:
            limit = self.last_stable_offset
        return self.log.read(offset, max_bytes, max_offset=limit, min_one_message=min_one)

    @property
    def last_stable_offset(self) -> int:
        """Below the first offset of the oldest open transaction, and the HW."""
        return self.transactions.last_stable_offset(self.high_watermark)

    def update_follower(self, replica_id: int, fetch_offset: int,
                        session: FetchWatcher | None = None,
                        log_start_offset: int = -1) -> bool:
        """A follower fetching at ``fetch_offset`` has everything below it, and its
        log starts at ``log_start_offset`` (-1: an old fetch version that does not say).

        Caught up means: at the LEO now, or at least at the LEO the leader had
        when it answered the follower's previous fetch (Kafka's rule).
        ``session``: the follower's fetch session, which keeps fetching this
        partition without naming it until its offset moves.
        Returns True when the HW moved (fetches are told).
        """
        follower = self.followers.get(replica_id)
        leo = self.log.log_end_offset
        if follower is None or replica_id in self.fenced_replicas or fetch_offset > leo:
            return False  # past our LEO: a diverged log (answered OFFSET_OUT_OF_RANGE)
        now = _now_ms()
        if fetch_offset >= leo:
            follower.last_caught_up_ms = now
        elif fetch_offset >= follower.leader_leo_at_last_fetch:
            follower.last_caught_up_ms = max(follower.last_caught_up_ms, follower.last_fetch_ms)
        follower.log_end_offset = fetch_offset
        if log_start_offset != follower.log_start_offset:
            follower.log_start_offset = log_start_offset
            self._check_low_watermark()
        follower.last_fetch_ms = now
        follower.leader_leo_at_last_fetch = leo
        follower.session = session
        if replica_id not in self.isr:
            self._watch_isr()  # it may have caught up: time to propose adding it
        if self._maybe_advance_high_watermark():
            self.notify_watchers(Change.HIGH_WATERMARK)
            return True
        return False

    def _watch_isr(self) -> None:
        if self.isr_watch is not None:
            self.isr_watch(self)

    def propose_isr(self, isr: tuple[int, ...]) -> None:
        """The leader is about to ask the controller for ``isr``: the replicas it adds
        count for the HW from now on (see ``maximal_isr``)."""
        self.pending_additions = frozenset(isr) - set(self.isr)
        self.pending_since_epoch = self.state.partition_epoch if self.state else -1

    def proposal_failed(self) -> None:
        self.pending_additions = frozenset()

    @property
    def maximal_isr(self) -> frozenset[int]:
        """The ISR, plus replicas proposed to join it whose fate is not applied here yet.

        Between the controller committing an expansion and this leader reading it, the
        controller may already elect the new member; had the HW ignored it meanwhile,
        records acknowledged then would be missing from the new leader and lost.
        """
        isr = frozenset(self.isr)
        if self.state is None or self.state.partition_epoch > self.pending_since_epoch:
            return isr  # the controller's answer is applied: the ISR says it all
        return isr | (self.pending_additions - self.fenced_replicas)

    def _maybe_advance_high_watermark(self) -> bool:
        if not self.is_leader:
            return False
        candidate = self.durable_end
        for replica in self.maximal_isr:
            if replica != self.broker_id:
                follower = self.followers.get(replica)
                candidate = min(candidate, follower.log_end_offset if follower else -1)
        if candidate <= self.high_watermark:
            return False
        self.high_watermark = candidate
        if self._commit_waiters:
            waiting = []
            for last_offset, future in self._commit_waiters:
                if last_offset < candidate:
                    if not future.done():
                        future.set_result(None)
                else:
                    waiting.append((last_offset, future))
            self._commit_waiters = waiting
        return True

    # -- DeleteRecords (leader) -----------------------------------------------------------
    def advance_log_start(self, offset: int, *, checkpoint: bool = True) -> bool:
        """Leader: records below ``offset`` (at most the HW, checked by the caller) are
        deleted; True if the log start moved (``checkpoint``: as in
        ``PartitionLog.maybe_increment_log_start_offset``). Followers hear of it on
        their next fetch, which is answered at once (``notify_watchers``)."""
        if not self.log.maybe_increment_log_start_offset(offset, checkpoint=checkpoint):
            return False
        self.notify_watchers()
        return True

    @property
    def low_watermark(self) -> int:
        """Leader: the lowest log start offset of this replica and the followers the
        controller has not fenced (a dead broker cannot hold deletions back)."""
        low = self.log.log_start_offset
        for replica, follower in self.followers.items():
            if replica not in self.fenced_replicas:
                low = min(low, follower.log_start_offset)
        return low

    async def wait_for_low_watermark(self, offset: int, timeout_s: float) -> bool:
        """True once the low watermark reaches ``offset``; False if it did not in
        ``timeout_s`` or this broker stopped leading meanwhile."""
        if not self.is_leader:
            return False
        if self.low_watermark >= offset:
            return True
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._low_watermark_waiters.append((offset, future))
        try:
            return await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            return False
        finally:
            self._low_watermark_waiters = [
                (o, f) for o, f in self._low_watermark_waiters if f is not future]

    def _check_low_watermark(self) -> None:
        if not self._low_watermark_waiters or not self.is_leader:
            return
        low = self.low_watermark
        for offset, future in self._low_watermark_waiters:
            if offset <= low and not future.done():
                future.set_result(True)

    def _release_low_watermark_waiters(self) -> None:
        for _, future in self._low_watermark_waiters:
            if not future.done():
                future.set_result(False)

    def wanted_isr(self, lag_max_ms: float) -> tuple[int, ...] | None:
        """The ISR the leader should propose now (shrink laggards, add caught-up), or None."""
        if not self.is_leader or self.state is None or self.isr_change_in_flight:
            return None
        now = _now_ms()
        epoch_start = next((e.start_offset for e in self.log.leader_epoch_cache.entries
                            if e.epoch == self.leader_epoch), 0)
        isr = []
        for replica in self.state.replicas:
            if replica == self.broker_id:
                isr.append(replica)
                continue
            follower = self.followers.get(replica)
            if follower is None:
                continue
            caught_up_ms = self.follower_caught_up_ms(follower)
            if replica in self.isr:
                if now - caught_up_ms <= lag_max_ms:
                    isr.append(replica)
            elif follower.log_end_offset >= max(self.high_watermark, epoch_start) and \
                    now - caught_up_ms <= lag_max_ms:
                isr.append(replica)
        wanted = tuple(isr)
        return None if set(wanted) == set(self.isr) else wanted

    def follower_caught_up_ms(self, follower: FollowerState) -> float:
        return follower.caught_up_ms(self.log.log_end_offset, self._leo_before_append,
                                     self._appended_ms)

    def quiet_isr_sessions(self) -> list[FetchWatcher] | None:
        """The sessions of the in-sync followers when every one of them is at our LEO
        and fetching in a session: nothing changes for this partition's ISR until one
        of those sessions goes quiet or we append. None otherwise."""
        if not self.isr_is_full:
            return None
        leo = self.log.log_end_offset
        sessions = []
        for replica, follower in self.followers.items():
            if replica in self.isr:
                if follower.session is None or follower.log_end_offset < leo:
                    return None
                sessions.append(follower.session)
        return sessions

    @property
    def isr_is_full(self) -> bool:
        return self.state is not None and len(self.isr) == len(self.state.replicas)

    def isr_deadline_ms(self, lag_max_ms: float) -> float | None:
        """When ``wanted_isr`` could next shrink the ISR with no fetch happening: the
        earliest in-sync follower's last catch-up plus the allowed lag. None when no
        follower is in the ISR (only a fetch, which calls ``isr_watch``, can change it)."""
        if not self.is_leader:
            return None
        # caught_up_ms, not last_caught_up_ms: an idle follower in an incremental session
        # is not named in its fetches, yet is caught up as of each of them. Using the
        # stored time made every idle partition due again on every tick.
        deadlines = [self.follower_caught_up_ms(follower) + lag_max_ms
                     for replica, follower in self.followers.items() if replica in self.isr]
        return min(deadlines, default=None)

    # -- follower data path --------------------------------------------------------------
    def append_as_follower(self, records: bytes | memoryview, leader_hw: int) -> AppendInfo:
        info = self.log.append(records, assign_offsets=False)
        self._track_producers(info, records)
        if not self.log.config.write_caching:
            self._sync.request(self.log.log_end_offset)
        self.set_high_watermark(leader_hw)
        return info

    def follow_log_start(self, leader_log_start: int, *, checkpoint: bool = True) -> bool:
        """Follower: move our log start up to the leader's (DeleteRecords or its
        retention), never past our own LEO; True if it moved (tell the leader)."""
        target = min(leader_log_start, self.log.log_end_offset)
        if target <= self.log.log_start_offset:
            return False
        return self.log.maybe_increment_log_start_offset(target, checkpoint=checkpoint)

    def set_high_watermark(self, offset: int) -> None:
        """Followers learn the HW from the leader; never beyond their own LEO (or,
        without write.caching, beyond what they have fsynced)."""
        self._leader_hw = offset
        high_watermark = min(offset, self.durable_end)
        if high_watermark != self.high_watermark:
            self.high_watermark = high_watermark
            self.notify_watchers(Change.HIGH_WATERMARK)  # its readers (KIP-392)

    def truncate_to(self, offset: int) -> None:
        if offset < self.log.log_end_offset:
            self.log.truncate_to(offset)
            self._sync.truncated(self.log.log_end_offset)
            self._rebuild_producer_state()
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)
        self.notify_watchers()

    def restart_at(self, offset: int) -> None:
        """Drop the whole local log and continue from ``offset`` (the leader's log start)."""
        self.log.truncate_fully_and_start_at(offset)
        self._sync.truncated(offset)
        self._sync.request(offset)  # an empty log: its new start is durable at once
        self._rebuild_producer_state()
        self.high_watermark = offset
        self.notify_watchers()

    def _track_producers(self, info: AppendInfo, records: bytes | memoryview) -> None:
        position = 0
        for base_offset, appended in info.batches:
            self.producers.update(appended, base_offset)
            self._track_transaction(appended, base_offset, records, position)
            position += appended.size

    def _track_transaction(self, header: batch.BatchHeader, base_offset: int,
                           buf: bytes | memoryview, position: int) -> None:
        if header.is_transactional:
            marker = read_marker(buf, position) if header.is_control else None
            aborted = self.transactions.track(header, base_offset, marker)
            if aborted is not None:
                self._index_abort(aborted)
                # retention or DeleteRecords may have passed old aborted transactions
                self.transactions.forget_below(self.log.log_start_offset)

    def _index_abort(self, entry: AbortedTxn) -> None:
        """Write the aborted transaction to its marker's segment's .txnindex, with the
        last stable offset it leaves (as Kafka's entries carry it)."""
        if self._replayed_aborts is not None:  # a rebuild writes them once it is done
            self._replayed_aborts.append(entry)
        else:
            self.log.append_aborted_txn(entry)

    # -- recovery ------------------------------------------------------------------------
    def _rebuild_producer_state(self) -> None:
        """Restore idempotence and transaction state (at load, truncation, restart_at).

        The newest producer-state snapshot gives the state at its offset and the
        segments' .txnindex files the aborted transactions below it; batch headers
        (no record decoding) are replayed from there to the log end only. Segments
        a load rescanned, or with an unreadable .txnindex, are replayed whole, and
        the entries the replay derives replace what their .txnindex files say past
        its start (no write when they agree, as they do but after a crash).
        """
        self.producers.truncate()
        self.transactions.clear()
        indexed, stale_from = self.log.read_txn_indexes()
        snapshot = self.log.latest_producer_snapshot(limit=stale_from)
        position = seed_state(snapshot, indexed, self.log.log_start_offset,
                              self.producers, self.transactions)
        end = self.log.log_end_offset
        logger.debug("%s-%d: producer state from offset %d (snapshot %s), replaying to %d",
                     self.topic, self.partition, position,
                     None if snapshot is None else snapshot[0], end)
        derived: list[AbortedTxn] = []
        self._replayed_aborts = derived
        try:
            self._replay(position, end)
        finally:
            self._replayed_aborts = None
        self.log.replace_txn_entries(position, derived)
        self.high_watermark = min(self.high_watermark, end)

    def _replay(self, position: int, end: int) -> None:
        """Track the batches in [position, end) from their headers (no record decoding)."""
        while position < end:
            fetched = self.log.read(position, 16 * 1024 * 1024)
            if not fetched.views:
                break
            for view in fetched.views:
                for at, header in iter_headers(view):
                    self.producers.update(header, header.base_offset)
                    self._track_transaction(header, header.base_offset, view, at)
                    position = header.next_offset


def iter_headers(view: memoryview) -> list[tuple[int, batch.BatchHeader]]:
    """Headers of the whole batches in a log view, without CRC checks (already stored)."""
    found = []
    pos = 0
    size = len(view)
    while pos + batch.HEADER_SIZE <= size:
        header = batch.parse_header(view, pos)
        if pos + header.size > size:
            break
        found.append((pos, header))
        pos += header.size
    return found
