"""The broker process: storage, metadata, controller duty and the Kafka listener.

:class:`Broker` builds all its parts when it is made (nothing is ``None`` for the
handlers to check); building touches no file. Start-up order matters: take
``alive.lock`` (refuse to run twice), recover the logs, replay the metadata log,
try for the controller lease, then listen.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from slog.broker import liveness
from slog.broker.controller_channel import ControllerChannel
from slog.broker.controller_election import ControllerElection
from slog.broker.data_dir_watch import DataDirWakeups
from slog.broker.forwarding import FORWARD_TIMEOUT_S
from slog.broker.handlers.cluster import topic_entry
from slog.broker.metadata_cache import MetadataResponseCache
from slog.broker.offsets_topic import build_consumer_group_coordinator, build_group_coordinator
from slog.broker.quotas import ClientQuotas
from slog.broker.security import Security
from slog.broker.topic_creator import TopicCreator
from slog.broker.transaction_state import build_transaction_coordinator
from slog.core.cleaner import LogCleaner
from slog.core.config import BrokerConfig
from slog.core.controller_lease import LeaseBusyError
from slog.core.datadir import (
    BrokerInfo,
    load_or_create_cluster,
    read_broker_info,
    write_broker_info,
)
from slog.core.errors import DataDirError
from slog.core.listeners import Endpoint
from slog.core.locks import FileLock
from slog.core.log_config import LogConfig
from slog.core.log_manager import LogManager
from slog.core.metadata import MetadataImage
from slog.core.metadata_log import MetadataLogReader, MetadataLogWriter
from slog.core.names import DataDirLayout, ensure_data_dir
from slog.core.producer_ids import ProducerIdAllocator
from slog.groups.consumer_coordinator import ConsumerGroupCoordinator
from slog.groups.coordinator import GroupCoordinator
from slog.protocol.apis import ApiKey, ApiSpec
from slog.protocol.errors import ErrorCode
from slog.replication.broker_channel import use_sasl_login
from slog.replication.controller import BrokerStatus, Controller, ControllerError, IsrChange
from slog.replication.log_sync import SYNC_STATS
from slog.replication.partition import Partition
from slog.replication.replica_manager import ReplicaManager
from slog.replication.throttle import ReplicationThrottle
from slog.transactions.coordinator import TransactionCoordinator
from slog.transactions.offsets import PendingTxnOffsets

log = logging.getLogger("slog.broker")

CONTROLLER_POLL_S = 0.25  # liveness and the controller lock, when the data dir is not watched
# With a watch, the loops wake on change; this is only their safety net, in case a
# notice is ever missed (none is known to be).
WATCHED_RECHECK_S = 2.0
CONTROLLED_SHUTDOWN_TIMEOUT_S = 10.0
LOST_DATA_DIR_EXIT = 3  # the process's exit status when its data dir went from under it
ALIVE_LOCK_ATTEMPTS = 10  # probes (is_locked) hold the lock for microseconds
LOG_FLUSH_CHECK_S = 1.0
# Produce re-reads the metadata first when it was last read longer ago than this.
METADATA_STALE_S = 0.5
# Kafka's log.flush.offset.checkpoint.interval.ms default.
RECOVERY_CHECKPOINT_INTERVAL_S = 60.0
# How long the cleaner waits for the event loop to take in removed markers (a loop that
# does not answer is stopping: that log is skipped, its markers kept).
CLEANER_HANDOFF_TIMEOUT_S = 30.0


@dataclass
class BrokerStats:
    requests: int = 0
    by_api: dict[int, int] = field(default_factory=dict)  # api key -> requests

    def count(self, api_key: int) -> None:
        self.by_api[api_key] = self.by_api.get(api_key, 0) + 1

    def summary(self) -> str:
        """``requests=N Fetch=N Metadata=N ...``: what SIGUSR1 writes to the broker log."""
        names = []
        for key, count in sorted(self.by_api.items()):
            try:
                name = ApiKey(key).name.title().replace("_", "")
            except ValueError:
                name = f"api{key}"
            names.append(f"{name}={count}")
        # Group commits (write.caching=false): fsyncs, and records per fsync from them.
        return " ".join([f"requests={self.requests}", *names, SYNC_STATS.summary()])


class Broker:
    def __init__(self, config: BrokerConfig):
        self.config = config
        self.broker_id = config.broker_id
        self.layout = DataDirLayout(config.data_dir)
        self.image = MetadataImage()
        self.stats = BrokerStats()
        self.cluster_id = ""
        self.controller: Controller | None = None
        self._alive_lock = FileLock(self.layout.broker(self.broker_id).alive_lock)
        self._session_timeout_s = config.get_int("broker.session.timeout.ms") / 1000
        self._heartbeat = liveness.HeartbeatThread(
            self.layout, self.broker_id, liveness.heartbeat_interval_s(self._session_timeout_s),
            lost=self._alive_lock.lost, on_lost=self._abandon_lost_data_dir)
        self._liveness = liveness.LivenessProbe(self.layout, me=self.broker_id)
        self.wakeups = DataDirWakeups(self.layout)  # what ends the loops' sleeps
        self._opened_at = time.monotonic()  # for the "caught up after" log line
        self._election = ControllerElection(self.layout, self.broker_id, self._session_timeout_s)
        self._metadata_reader = MetadataLogReader(self.layout.metadata_dir)
        self._metadata_writer: MetadataLogWriter | None = None
        # Storage, replication and groups, built here; open() recovers the logs.
        default_log_config = LogConfig.from_topic_configs(config.topic_values({}))
        self.log_manager = LogManager(self.layout.logs_dir(self.broker_id), default_log_config)
        self._logs_loaded = False  # close() must not checkpoint logs it never opened
        self.replicas = ReplicaManager(config, self.log_manager)
        self.log_cleaner = LogCleaner(config.get_int("log.cleaner.backoff.ms"),
                                      enabled=config.get_bool("log.cleaner.enable"))
        self.producer_ids = ProducerIdAllocator(self.layout.producer_id_block)
        self.replication_throttle = ReplicationThrottle()  # reassignment --throttle
        self.info: BrokerInfo | None = None
        self.bound: list[Endpoint] = []  # the listeners as bound (the real port for port 0)
        self.advertised: list[Endpoint] = []
        self.api_table: tuple[ApiSpec, ...] = ()
        self._tasks: list[asyncio.Task[None]] = []
        self._metadata_polled_at = time.monotonic()
        client_id = f"broker-{self.broker_id}"
        self._isr_channel = ControllerChannel(lambda: self.image, client_id)
        # Forwarded admin requests and auto-created topics (slog.broker.forwarding).
        self.controller_requests = ControllerChannel(lambda: self.image, client_id,
                                                     timeout_s=FORWARD_TIMEOUT_S)
        self.topic_creator = TopicCreator(lambda: self.controller, self.controller_requests,
                                          self.poll_metadata)
        self.security = Security(config)
        self.client_quotas = ClientQuotas(lambda: self.image,  # KIP-546, slog.broker.quotas
                                          config.get_int("quota.window.num"),
                                          config.get_int("quota.window.size.seconds"))
        self.metadata_cache = MetadataResponseCache(topic_entry)
        self.groups: GroupCoordinator = build_group_coordinator(self)
        self.consumer_groups: ConsumerGroupCoordinator = build_consumer_group_coordinator(
            self, self.groups.manager)  # KIP-848 groups beside the classic ones
        self.transactions: TransactionCoordinator = build_transaction_coordinator(self)
        self.pending_txn_offsets = PendingTxnOffsets()  # TxnOffsetCommit, until the marker
        self.groups.manager.txn_offsets = self.pending_txn_offsets  # expiry and deletion

    # -- start-up -------------------------------------------------------------------
    def open(self) -> None:
        """Everything before listening: locks, the heartbeat thread, log recovery."""
        ensure_data_dir(self.layout.root)
        self.security.load_inter_broker_secret()
        use_sasl_login(self.security.inter_broker_login)
        self.cluster_id = load_or_create_cluster(self.layout).cluster_id
        if not self._acquire_alive_lock():
            other = read_broker_info(self.layout, self.broker_id)
            owner = f" (pid {other.pid}, port {other.port})" if other else ""
            raise DataDirError(
                f"broker {self.broker_id} is already running on {self.layout.root}{owner}; "
                f"stop it with `slog broker stop --id {self.broker_id}` first"
            )
        # Not registered until caught_up(): recovery and the first metadata
        # apply may keep this process busy for a long time.
        self.layout.broker(self.broker_id).starting.touch(mode=0o600)
        # The previous run's broker.json names a dead pid and maybe another port:
        # the controller must not register this run until publish() rewrites it.
        self.layout.broker(self.broker_id).info.unlink(missing_ok=True)
        self.layout.broker(self.broker_id).shutting_down.unlink(missing_ok=True)
        self._heartbeat.start()
        self.log_manager.load()
        self._logs_loaded = True

    def _abandon_lost_data_dir(self) -> None:
        """The data dir was removed (or removed and made again) under this process: exit
        at once, as a kill -9 would. A clean stop would write its checkpoints and marker
        files into whatever now lives at those paths, maybe another cluster's broker."""
        log.error("broker %d: its data dir %s was removed or replaced while it ran "
                  "(alive.lock is gone from under it); exiting without writing anything",
                  self.broker_id, self.layout.root)
        logging.shutdown()
        os._exit(LOST_DATA_DIR_EXIT)

    def _acquire_alive_lock(self) -> bool:
        """Take alive.lock, allowing for liveness probes that hold it for an instant."""
        for _ in range(ALIVE_LOCK_ATTEMPTS):
            if self._alive_lock.try_acquire():
                return True
            time.sleep(0.02)
        return False

    def publish(self, endpoints: list[Endpoint], bound: list[Endpoint]) -> None:
        """Write broker.json once the listeners' ports are known. Its host and port are the
        inter-broker listener's (what other brokers connect to); every listener's
        advertised endpoint is listed too."""
        self.bound, self.advertised = bound, endpoints
        inter = next(e for e in endpoints if e.name == self.security.inter_broker.name)
        self.info = BrokerInfo(self.broker_id, inter.host, inter.port, os.getpid(), time.time(),
                               rack=self.config.rack, listeners=[e.to_record() for e in endpoints])
        write_broker_info(self.layout, self.info)

    @property
    def metadata_offset(self) -> int:
        """The next metadata log offset this broker will read: everything before it applied."""
        return self._metadata_reader.next_offset

    def caught_up(self) -> None:
        """Call after the first full metadata apply: the controller may now register us."""
        self.layout.broker(self.broker_id).starting.unlink(missing_ok=True)
        log.info("broker %d caught up with the metadata log: %d partitions, %.1f s after start",
                 self.broker_id, sum(len(t.partitions) for t in self.image.topics.values()),
                 time.monotonic() - self._opened_at)

    def poll_metadata(self) -> bool:
        """Apply new metadata records; returns True when the image changed."""
        self._metadata_polled_at = time.monotonic()
        records = list(self._metadata_reader.poll())
        if not records:
            return False
        topics_before = set(self.image.topics)
        changed = False
        for offset, record in records:
            changed |= self.image.apply(record, offset)
        if changed:
            self._apply_dynamic_config()
        delta = self.image.take_delta()
        self.metadata_cache.invalidate(delta)
        if changed:
            self.replicas.apply_image(self.image, delta)
            if self.controller is not None:
                self.wakeups.controller.set()  # reassignment steps follow ISR changes
        deleted = topics_before - set(self.image.topics)
        if deleted:
            self.groups.remove_offsets_of_deleted_topics(deleted)
            self.consumer_groups.remove_offsets_of_deleted_topics(deleted)
        return changed

    def _apply_dynamic_config(self) -> None:
        """Take in dynamic broker configs from the image. Readers of ``config.values``
        see them at once (max.connections on the next accept, min.insync.replicas on the
        next produce, the controller's election rules); topic logs are rebuilt by the
        replica manager's apply_image; the cleaner's backoff is pushed here."""
        if not self.config.set_dynamic(self.image.dynamic_broker_configs(None),
                                       self.image.dynamic_broker_configs(self.broker_id)):
            return
        self.log_cleaner.backoff_ms = self.config.get_int("log.cleaner.backoff.ms")
        log.info("dynamic broker configs now: default %s, broker %d %s",
                 self.config.dynamic_default, self.broker_id, self.config.dynamic_broker)

    def poll_metadata_if_stale(self) -> None:
        """Catch up with the metadata log if this process stalled (SIGSTOP, swapping).

        A leader paused past its session timeout has been deposed by the time it
        runs again, but requests queued during the pause would otherwise be
        served before the metadata loop's overdue timer fires: a deposed leader
        would acknowledge acks=1 writes that the new leader never sees.
        """
        if time.monotonic() - self._metadata_polled_at > METADATA_STALE_S:
            self.poll_metadata()

    # -- controller duty --------------------------------------------------------------
    def try_become_controller(self) -> bool:
        """Stay the controller while the lease carries our epoch; else take over if the
        lease is vacant (see slog.broker.controller_election). True: we lead."""
        if self.controller is not None:
            if not self.controller.deposed and self._election.leads(self.controller.epoch):
                return True
            self._step_down()
        if self._election.vacancy() is None:
            return False
        try:
            # Takeovers and appends are serialised by the append lock: under it,
            # nobody writes, the lease cannot change, and the log's end is final.
            with self._election.lease.exclusive(0):
                reason = self._election.vacancy()  # another standby may have won
                if reason is None:
                    return False
                self.poll_metadata()  # the previous controller's last records first
                writer = MetadataLogWriter.take_over(
                    self.layout.metadata_dir, self._election.lease, self.broker_id,
                    self._election.incarnation, self.image.controller_epoch)
        except LeaseBusyError:
            return False  # an append or another takeover is in progress: next tick
        log.info("broker %d takes over as controller: %s", self.broker_id, reason)
        self._metadata_writer = writer
        self.controller = Controller(self.config, writer, lambda: self.image,
                                     self.poll_metadata, self.wakeups.controller.set)
        self.controller.activate()
        self.register_live_brokers()
        return True

    def _step_down(self) -> None:
        """The lease passed on (this process was paused, or the disk was slow): leave
        the metadata log, which the new controller owns, untouched."""
        assert self.controller is not None and self._metadata_writer is not None
        lease = self._election.lease.read()
        holder = f"broker {lease.controller} at epoch {lease.epoch}" if lease else "nobody"
        log.warning("broker %d is no longer the controller (epoch %d): the lease is %s's",
                    self.broker_id, self.controller.epoch, holder)
        self._metadata_writer.abandon()
        self._metadata_writer = None
        self.controller = None
        self._election.resign()

    def _hand_over(self) -> None:
        """A clean stop of the controller: close the log while the lease is still ours,
        then release the lease so that a standby takes over at once."""
        if self.controller is None or self._metadata_writer is None:
            return
        try:
            with self._election.lease.exclusive(CONTROLLER_POLL_S):
                if self._election.lease.names(self.controller.epoch):
                    self._metadata_writer.close()
                    self._election.lease.release()
                else:
                    self._metadata_writer.abandon()
        except LeaseBusyError:  # a takeover is under way: the log is no longer ours
            self._metadata_writer.abandon()
        self._metadata_writer = None

    def register_live_brokers(self) -> float:
        """Controller: register healthy brokers, fence dead/paused ones, drain stopping ones.
        Returns the seconds until the next check is due, if nothing wakes it before."""
        assert self.controller is not None
        timeout_s = self._session_timeout_s
        statuses = []
        now = time.time()
        next_check = time.monotonic() + WATCHED_RECHECK_S
        for seen in self._liveness.observe_all():
            if seen.info is None and not seen.starting:
                continue  # never started: nothing to register or fence
            problem = seen.problem(timeout_s)
            if problem is not None and seen.holds_lock:
                # Paused, or between its lock and its files: when it goes on, only
                # an mtime changes, which wakes no one. Look again as often as before.
                next_check = min(next_check, time.monotonic() + CONTROLLER_POLL_S)
            stale_at = seen.heartbeat_deadline(timeout_s, now)
            if problem is None and stale_at is not None:
                next_check = min(next_check, time.monotonic() + stale_at - now)
            # A starting broker may not know its port yet, but its previous run's
            # registration must be fenced now, not after a long log recovery.
            host, port, incarnation = (seen.info.host, seen.info.port, seen.info.incarnation) \
                if seen.info is not None else ("", 0, "")
            statuses.append(BrokerStatus(
                seen.broker_id, host, port, incarnation, problem=problem,
                shutting_down=seen.shutting_down, starting=seen.starting,
                rack=seen.info.rack if seen.info is not None else None,
                endpoints=tuple(Endpoint.from_record(e) for e in seen.info.listeners)
                if seen.info is not None else ()))
        self.controller.sync_liveness(statuses)
        self.controller.tick()  # reassignment steps, auto leader rebalance
        next_check = min(next_check, self.controller.next_tick_due())
        return max(0.0, next_check - time.monotonic())

    async def _controller_loop(self) -> None:
        """Controller duty: take the lock when it is free; on the controller, the
        liveness check. Woken by the data dir watch; without one, every 250 ms."""
        while True:
            wait_s = CONTROLLER_POLL_S
            try:
                if self.try_become_controller():
                    due_s = self.register_live_brokers()
                    if self.wakeups.liveness_watched:
                        wait_s = due_s
                elif self.wakeups.liveness_watched:
                    # A dead holder's close of controller.lock or alive.lock wakes
                    # us; a paused one's lease is looked at when it could expire.
                    wait_s = self._election.standby_wait_s(WATCHED_RECHECK_S)
            except Exception:  # never let a bad tick kill the broker
                log.exception("controller tick failed")
            await self.wakeups.controller.sleep(wait_s)

    async def alter_isr(self, proposals: Sequence[tuple[Partition, tuple[int, ...]]]
                        ) -> list[Exception | None]:
        """Send a leader's ISR proposals to the controller, all in one AlterPartition.
        Returns each proposal's refusal, or None where it was accepted."""
        changes = [IsrChange(p.state.topic, p.state.partition, p.state.leader_epoch,
                             p.state.partition_epoch, isr)
                   for p, isr in proposals if p.state is not None]
        if len(changes) != len(proposals):
            raise ValueError("ISR proposal for a partition without state")
        if self.controller is not None:
            decided = self.controller.alter_partitions(self.broker_id, changes)
            return [o if isinstance(o, ControllerError) else None for o in decided]
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for change in changes:
            topic_id = self.image.topics[change.topic].topic_id
            by_topic.setdefault(topic_id, []).append({
                "partition_index": change.partition, "leader_epoch": change.leader_epoch,
                "new_isr": list(change.new_isr), "leader_recovery_state": 0,
                "partition_epoch": change.partition_epoch})
        response = await self._isr_channel.request(ApiKey.ALTER_PARTITION, 2, {
            "broker_id": self.broker_id, "broker_epoch": -1, "topics": [
                {"topic_id": topic_id, "partitions": partitions}
                for topic_id, partitions in by_topic.items()]})
        if response.error_code:
            raise ConnectionError(f"controller refused: {ErrorCode(response.error_code).name}")
        answered = {(str(t.topic_id), p.partition_index): p.error_code
                    for t in response.topics for p in t.partitions}
        outcomes: list[Exception | None] = []
        for change in changes:
            key = (self.image.topics[change.topic].topic_id, change.partition)
            error = answered.get(key, ErrorCode.unknown_server_error)
            outcomes.append(ConnectionError(f"controller refused: {ErrorCode(error).name}")
                            if error else None)
        return outcomes

    async def _metadata_loop(self) -> None:
        """Apply the metadata log as it grows: woken by the data dir watch at each
        append; without one, every metadata.poll.interval.ms."""
        interval = self.config.get_int("metadata.poll.interval.ms") / 1000
        while True:
            try:
                self.poll_metadata()
            except Exception:
                log.exception("applying metadata failed")
            await self.wakeups.metadata.sleep(
                WATCHED_RECHECK_S if self.wakeups.metadata_watched else interval)

    async def _log_maintenance_loop(self) -> None:
        """Kafka's periodic log jobs: flush.ms, recovery-point checkpoints, retention,
        cleaning. Each costs what is due: flush.ms looks only at logs with a deadline,
        retention runs every log.retention.check.interval.ms, the cleaner every
        log.cleaner.backoff.ms over compacted logs only."""
        retention_every_s = self.config.get_int("log.retention.check.interval.ms") / 1000
        checkpoint_every_s = RECOVERY_CHECKPOINT_INTERVAL_S
        now = time.monotonic()
        next_retention, next_checkpoint = now + retention_every_s, now + checkpoint_every_s
        while True:
            await asyncio.sleep(LOG_FLUSH_CHECK_S)
            now = time.monotonic()
            try:
                self.log_manager.flush_dirty_logs()
                if now >= next_retention:
                    next_retention = now + retention_every_s
                    marks = {key: p.high_watermark for key, p in self.replicas.partitions.items()}
                    self.log_manager.enforce_retention(int(time.time() * 1000),
                                                       high_watermarks=marks)
                if now >= next_checkpoint:
                    next_checkpoint = now + checkpoint_every_s
                    self.log_manager.checkpoint_recovery_points()
                if self.log_cleaner.is_due():
                    await self._clean_compacted_logs()
            except Exception:
                log.exception("log maintenance failed")

    async def _clean_compacted_logs(self) -> None:
        """The cleaner's run, given only the compacted logs (once per its backoff)."""
        compacted = {key: plog for key, plog in self.log_manager.all_logs().items()
                     if plog.config.compact_enabled}
        partitions = {key: p for key in compacted
                      if (p := self.replicas.partitions.get(key)) is not None}
        # Up to the last stable offset: an open transaction may still abort.
        stable = {key: p.last_stable_offset for key, p in partitions.items()}
        aborted = {key: p.transactions.aborted_batches()
                   for key, p in partitions.items() if p.transactions.aborted}
        loop = asyncio.get_running_loop()

        async def forget(key: tuple[str, int], markers: list[int]) -> None:
            if (partition := self.replicas.partitions.get(key)) is not None:
                partition.transactions.forget_markers(markers)

        def forget_aborted(key: tuple[str, int], markers: list[int]) -> None:
            # From the cleaner's thread: the partition's state belongs to the event
            # loop, and must have forgotten the markers before the cleaner goes on.
            asyncio.run_coroutine_threadsafe(forget(key, markers), loop).result(
                CLEANER_HANDOFF_TIMEOUT_S)

        await asyncio.to_thread(self.log_cleaner.maybe_clean, compacted, stable, aborted,
                                forget_aborted)

    def start_background_tasks(self) -> None:
        self.wakeups.start()
        loops = [self._controller_loop(), self._metadata_loop(), self._log_maintenance_loop(),
                 self.replicas.maintain_isr(self.alter_isr), self.groups.run(),
                 self.consumer_groups.run(), self.transactions.run_timeouts()]
        for coroutine in loops:
            task = asyncio.create_task(coroutine)
            task.add_done_callback(_report_crash)
            self._tasks.append(task)

    # -- controlled shutdown ------------------------------------------------------------
    async def controlled_shutdown(self, timeout_s: float = CONTROLLED_SHUTDOWN_TIMEOUT_S) -> None:
        """Hand leadership to other in-sync replicas before stopping, as Kafka does."""
        self.layout.broker(self.broker_id).shutting_down.touch(mode=0o600)
        await self.replicas.fetchers.shutdown()  # don't rejoin ISRs while draining
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.controller is not None:
                self.controller.shutting_down.add(self.broker_id)
                self.controller.controlled_shutdown(self.broker_id)
            self.poll_metadata()
            if not self._leads_replicated_partitions():
                return
            await asyncio.sleep(CONTROLLER_POLL_S)
        log.warning("controlled shutdown timed out; stopping while still leading")

    def _leads_replicated_partitions(self) -> bool:
        live = {b.broker_id for b in self.image.live_brokers()} - {self.broker_id}
        return any(p.leader == self.broker_id and set(p.isr) & live
                   for p in self.image.all_partitions())

    # -- shutdown ---------------------------------------------------------------------
    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        self.transactions.shutdown()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._logs_loaded:
            await self.replicas.shutdown()  # flushes and writes the clean-shutdown marker
        self._isr_channel.close()
        self.controller_requests.close()
        self.layout.broker(self.broker_id).shutting_down.unlink(missing_ok=True)
        self._hand_over()
        self._election.close()
        self._liveness.close()
        self.wakeups.close()
        self._heartbeat.stop()
        self._alive_lock.release()
        log.info("broker %d stopped cleanly", self.broker_id)


def _report_crash(task: asyncio.Task[None]) -> None:
    """A background loop must never die silently."""
    if not task.cancelled() and task.exception() is not None:
        log.error("background task %s died", task.get_name(), exc_info=task.exception())
