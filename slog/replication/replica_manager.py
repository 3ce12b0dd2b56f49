"""ReplicaManager: the partitions this broker hosts, driven by the metadata image.

It turns each new :class:`MetadataImage` into local state changes (create a
log, become leader or follower, delete a removed topic's files) and serves the
data path: leader appends and fetches with long-poll wake-ups.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable

from slog.core.config import BrokerConfig
from slog.core.log_config import LogConfig
from slog.core.log_manager import LogManager
from slog.core.metadata import MetadataImage, PartitionState
from slog.replication.partition import Partition

log = logging.getLogger("slog.replication")

TopicPartition = tuple[str, int]


class ReplicaManager:
    def __init__(self, config: BrokerConfig, log_manager: LogManager):
        self.config = config
        self.broker_id = config.broker_id
        self.log_manager = log_manager
        self.partitions: dict[TopicPartition, Partition] = {}
        self._data_arrived = asyncio.Event()
        self._image: MetadataImage | None = None

    # -- metadata ---------------------------------------------------------------
    def log_config_for(self, topic: str) -> LogConfig:
        overrides = self._image.topics[topic].configs if self._image and topic in \
            self._image.topics else {}
        return LogConfig.from_topic_configs(self.config.topic_values(overrides))

    def topic_setting(self, topic: str, name: str) -> str:
        overrides = {}
        if self._image is not None and topic in self._image.topics:
            overrides = self._image.topics[topic].configs
        return self.config.topic_values(overrides)[name]

    def apply_image(self, image: MetadataImage) -> None:
        """Bring local replicas in line with ``image`` (idempotent)."""
        self._image = image
        wanted: dict[TopicPartition, PartitionState] = {
            (p.topic, p.partition): p
            for p in image.all_partitions()
            if self.broker_id in p.replicas
        }
        for key in [k for k in self.partitions if k not in wanted]:
            self._remove(key)
        self._remove_orphan_logs(wanted)
        for key, state in wanted.items():
            partition = self.partitions.get(key)
            if partition is None:
                partition = self._open(key)
            else:
                partition.log.update_config(self.log_config_for(key[0]))
            if state.leader == self.broker_id:
                partition.become_leader(state)
            else:
                partition.become_follower(state)
        self.notify()

    def _open(self, key: TopicPartition) -> Partition:
        topic, number = key
        plog = self.log_manager.get_or_create(topic, number, self.log_config_for(topic))
        partition = Partition(topic, number, plog, self.broker_id)
        self.partitions[key] = partition
        return partition

    def _remove(self, key: TopicPartition) -> None:
        self.partitions.pop(key, None)
        self.log_manager.delete(*key)
        log.info("deleted replica %s-%d", *key)

    def _remove_orphan_logs(self, wanted: Iterable[TopicPartition]) -> None:
        """Logs on disk for partitions the image no longer places here (deleted while down)."""
        keep = set(wanted)
        for plog_key in [k for k in self.log_manager.all_logs() if k not in keep]:
            self.log_manager.delete(*plog_key)
            log.info("deleted stale replica %s-%d found on disk", *plog_key)

    # -- data path --------------------------------------------------------------
    def get(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    def notify(self) -> None:
        """Wake every long-polling fetch: new data or a new high watermark."""
        self._data_arrived.set()
        self._data_arrived = asyncio.Event()

    async def wait_for_data(self, timeout_s: float) -> None:
        event = self._data_arrived
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout_s)

    def shutdown(self) -> None:
        self.partitions.clear()
        self.log_manager.shutdown()
