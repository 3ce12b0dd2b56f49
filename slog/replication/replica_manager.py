"""ReplicaManager: the partitions this broker hosts, driven by the metadata image.

It turns each new :class:`MetadataImage` into local state changes (create a
log, become leader or follower, delete a removed topic's files, start or stop
following a leader) and serves the data path: leader appends, the fetch
session cache (long polls park on their own partitions, see
:mod:`slog.replication.fetch_sessions`), and the periodic ISR check whose
proposals go to the controller.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

from slog.core.checkpoint import FILE_MODE, TEMP_SUFFIX
from slog.core.config import BrokerConfig
from slog.core.log_config import LogConfig
from slog.core.log_manager import LogManager
from slog.core.metadata import MetadataImage, PartitionState
from slog.replication.fetch_sessions import FetchSessionCache
from slog.replication.partition import Partition
from slog.replication.replica_fetcher import ReplicaFetcherManager

log = logging.getLogger("slog.replication")

TopicPartition = tuple[str, int]
# (partition, proposed ISR) → the controller's verdict, raised as an exception on refusal.
AlterIsr = Callable[[Partition, tuple[int, ...]], Awaitable[None]]
LeadershipListener = Callable[[str, int, bool], None]
ISR_CHECK_INTERVAL_S = 0.25


PARTITION_METADATA = "partition.metadata"


def read_topic_id(directory: Path) -> str | None:
    """The topic id a log directory belongs to, or None if it does not say."""
    try:
        lines = (directory / PARTITION_METADATA).read_text().splitlines()
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    found = dict(line.split(": ", 1) for line in lines if ": " in line)
    return found.get("topic_id") or None


def write_topic_id(directory: Path, topic_id: str) -> None:
    """Written once per new log, atomically but without an fsync (a topic with
    thousands of partitions would wait for as many): a file lost in a crash only
    means that log is adopted by the next topic of its name, as before."""
    temp = directory / (PARTITION_METADATA + TEMP_SUFFIX)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    with os.fdopen(fd, "w") as f:
        f.write(f"version: 0\ntopic_id: {topic_id}\n")
    os.replace(temp, directory / PARTITION_METADATA)


class ReplicaManager:
    def __init__(self, config: BrokerConfig, log_manager: LogManager):
        self.config = config
        self.broker_id = config.broker_id
        self.log_manager = log_manager
        self.partitions: dict[TopicPartition, Partition] = {}
        self._image: MetadataImage | None = None
        self.fetch_sessions = FetchSessionCache(
            config.get_int("max.incremental.fetch.session.cache.slots"))
        self.fetchers = ReplicaFetcherManager(self.broker_id)
        # Told (topic, partition, is_leader) whenever this broker's role changes.
        self.leadership_listeners: list[LeadershipListener] = []

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
        follow = {}
        fenced = frozenset(b.broker_id for b in image.brokers.values() if b.fenced)
        for key, state in wanted.items():
            topic_id = image.topics[key[0]].topic_id
            partition = self.partitions.get(key)
            if partition is not None and partition.topic_id != topic_id:
                self._remove(key)  # deleted and created again under the same name
                partition = None
            if partition is None:
                partition = self._open(key, topic_id)
            else:
                partition.log.update_config(self.log_config_for(key[0]))
            was_leader = partition.is_leader
            if state.leader == self.broker_id:
                partition.become_leader(state, fenced)
            else:
                partition.become_follower(state)
                leader = image.brokers.get(state.leader)
                if leader is not None and not leader.fenced:
                    follow[key] = (partition, leader.broker_id, (leader.host, leader.port))
            if was_leader != partition.is_leader:
                for listener in self.leadership_listeners:
                    listener(key[0], key[1], partition.is_leader)
        self.fetchers.assign(follow)

    def _open(self, key: TopicPartition, topic_id: str) -> Partition:
        """Open (or create) a replica's log, never one left by an older same-named topic.

        Each log directory records the id of the topic it belongs to in
        ``partition.metadata`` (Kafka's file, KIP-516). A broker that was down
        while its topic was deleted and re-created finds the old id there and
        starts from an empty log instead of offering the old records as the
        new topic's (its leader-epoch truncation could not tell them apart).
        """
        topic, number = key
        plog = self.log_manager.get_or_create(topic, number, self.log_config_for(topic))
        stored = read_topic_id(plog.directory)
        if stored is not None and stored != topic_id:
            log.warning("%s-%d on disk belongs to a deleted topic of the same name (id %s, "
                        "now %s): deleting it", topic, number, stored, topic_id)
            self.log_manager.delete(topic, number)
            plog = self.log_manager.get_or_create(topic, number, self.log_config_for(topic))
            stored = None
        if stored is None:
            write_topic_id(plog.directory, topic_id)
        partition = Partition(topic, number, plog, self.broker_id)
        partition.topic_id = topic_id
        self.partitions[key] = partition
        return partition

    def _remove(self, key: TopicPartition) -> None:
        removed = self.partitions.pop(key, None)
        if removed is not None:
            removed.notify_watchers()  # its fetches answer UNKNOWN_TOPIC_OR_PARTITION now
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

    async def maintain_isr(self, alter: AlterIsr) -> None:
        """Leaders propose ISR shrinks (laggards) and expansions (caught up), forever."""
        lag_max_ms = self.config.get_int("replica.lag.time.max.ms")
        while True:
            await asyncio.sleep(ISR_CHECK_INTERVAL_S)
            for partition in list(self.partitions.values()):
                wanted = partition.wanted_isr(lag_max_ms)
                if wanted is None:
                    continue
                partition.isr_change_in_flight = True
                partition.propose_isr(wanted)
                try:
                    await alter(partition, wanted)
                except Exception as exc:  # the next tick proposes again
                    partition.proposal_failed()
                    log.info("%s-%d: ISR change to %s refused: %s", partition.topic,
                             partition.partition, list(wanted), exc)
                finally:
                    partition.isr_change_in_flight = False

    async def shutdown(self) -> None:
        await self.fetchers.shutdown()
        self.partitions.clear()
        self.log_manager.shutdown()
