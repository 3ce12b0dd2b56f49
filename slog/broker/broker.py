"""The broker process: storage, metadata, controller duty and the Kafka listener.

Start-up order matters: take ``alive.lock`` (refuse to run twice), recover the
logs, replay the metadata log, try for the controller lock, then listen.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass

from slog.core.config import BrokerConfig
from slog.core.datadir import (
    BrokerInfo,
    alive_lock_path,
    known_broker_ids,
    load_or_create_cluster,
    read_broker_info,
    write_broker_info,
)
from slog.core.errors import DataDirError
from slog.core.locks import FileLock, is_locked
from slog.core.log_config import LogConfig
from slog.core.log_manager import LogManager
from slog.core.metadata import MetadataImage
from slog.core.metadata_log import MetadataLogReader, MetadataLogWriter
from slog.core.names import DataDirLayout, ensure_data_dir
from slog.core.producer_ids import ProducerIdAllocator
from slog.protocol.apis import ApiSpec
from slog.replication.controller import Controller
from slog.replication.replica_manager import ReplicaManager

log = logging.getLogger("slog.broker")

CONTROLLER_POLL_S = 0.25
LOG_FLUSH_CHECK_S = 1.0
# Kafka's log.flush.offset.checkpoint.interval.ms default.
RECOVERY_CHECKPOINT_INTERVAL_S = 60.0


@dataclass
class BrokerStats:
    bytes_in: int = 0
    bytes_out: int = 0
    requests: int = 0


class Broker:
    def __init__(self, config: BrokerConfig):
        self.config = config
        self.broker_id = config.broker_id
        self.layout = DataDirLayout(config.data_dir)
        self.image = MetadataImage()
        self.stats = BrokerStats()
        self.cluster_id = ""
        self.controller: Controller | None = None
        self._alive_lock = FileLock(alive_lock_path(self.layout, self.broker_id))
        self._controller_lock = FileLock(self.layout.controller_lock)
        self._metadata_reader = MetadataLogReader(self.layout.metadata_dir)
        self._metadata_writer: MetadataLogWriter | None = None
        self.log_manager: LogManager | None = None
        self.replicas: ReplicaManager | None = None
        self.producer_ids = ProducerIdAllocator(self.layout.root / "producer-id-block")
        self.info: BrokerInfo | None = None
        self.api_table: tuple[ApiSpec, ...] = ()
        self._tasks: list[asyncio.Task[None]] = []

    # -- start-up -------------------------------------------------------------------
    def open(self) -> None:
        """Everything before listening: locks, recovery, metadata replay."""
        ensure_data_dir(self.layout.root)
        self.cluster_id = load_or_create_cluster(self.layout).cluster_id
        if not self._alive_lock.try_acquire():
            other = read_broker_info(self.layout, self.broker_id)
            owner = f" (pid {other.pid}, port {other.port})" if other else ""
            raise DataDirError(
                f"broker {self.broker_id} is already running on {self.layout.root}{owner}; "
                f"stop it with `slog broker stop --id {self.broker_id}` first"
            )
        default_log_config = LogConfig.from_topic_configs(self.config.topic_values({}))
        self.log_manager = LogManager(self.layout.logs_dir(self.broker_id), default_log_config)
        self.log_manager.load()
        self.replicas = ReplicaManager(self.config, self.log_manager)

    def publish(self, port: int) -> None:
        """Write broker.json once the listener's port is known."""
        self.info = BrokerInfo(self.broker_id, self.config.host, port, os.getpid(), time.time())
        write_broker_info(self.layout, self.info)

    def poll_metadata(self) -> bool:
        """Apply new metadata records; returns True when the image changed."""
        changed = False
        for offset, record in self._metadata_reader.poll():
            changed |= self.image.apply(record, offset)
        if changed and self.replicas is not None:
            self.replicas.apply_image(self.image)
        return changed

    # -- controller duty --------------------------------------------------------------
    def try_become_controller(self) -> bool:
        if self.controller is not None:
            return True
        if not self._controller_lock.try_acquire():
            return False
        self.poll_metadata()  # the previous controller's last records first
        self._metadata_writer = MetadataLogWriter(self.layout.metadata_dir)
        self.controller = Controller(
            self.config, self._metadata_writer, lambda: self.image, self.poll_metadata
        )
        self.controller.activate()
        self.register_live_brokers()
        return True

    def register_live_brokers(self) -> None:
        """Controller: (re)register brokers whose alive.lock is held, fence the rest."""
        assert self.controller is not None
        for broker_id in known_broker_ids(self.layout):
            info = read_broker_info(self.layout, broker_id)
            if info is None:
                continue
            lock = alive_lock_path(self.layout, broker_id)
            if broker_id == self.broker_id or is_locked(lock):
                self.controller.register_broker(broker_id, info.host, info.port, info.incarnation)

    async def _controller_loop(self) -> None:
        while True:
            try:
                if self.try_become_controller():
                    self.register_live_brokers()
            except Exception:  # never let a bad tick kill the broker
                log.exception("controller tick failed")
            await asyncio.sleep(CONTROLLER_POLL_S)

    async def _metadata_loop(self) -> None:
        interval = self.config.get_int("metadata.poll.interval.ms") / 1000
        while True:
            try:
                self.poll_metadata()
            except Exception:
                log.exception("applying metadata failed")
            await asyncio.sleep(interval)

    async def _log_maintenance_loop(self) -> None:
        """Kafka's periodic log jobs: flush.ms, recovery-point checkpoints, retention."""
        assert self.log_manager is not None and self.replicas is not None
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
            except Exception:
                log.exception("log maintenance failed")

    def start_background_tasks(self) -> None:
        for loop_fn in (self._controller_loop, self._metadata_loop, self._log_maintenance_loop):
            self._tasks.append(asyncio.create_task(loop_fn(), name=loop_fn.__name__))

    # -- shutdown ---------------------------------------------------------------------
    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.replicas is not None:
            self.replicas.shutdown()  # flushes and writes the clean-shutdown marker
        if self._metadata_writer is not None:
            self._metadata_writer.close()
        self._controller_lock.release()
        self._alive_lock.release()
        log.info("broker %d stopped cleanly", self.broker_id)
