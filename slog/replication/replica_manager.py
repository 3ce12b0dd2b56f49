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
import functools
import logging
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from slog.core import gc_policy
from slog.core.checkpoint import FILE_MODE, write_atomically
from slog.core.config import BrokerConfig
from slog.core.due import WakingDueSchedule
from slog.core.log import PartitionLog
from slog.core.log_config import LogConfig
from slog.core.log_manager import LogManager, NewLog
from slog.core.metadata import MetadataDelta, MetadataImage, PartitionState
from slog.replication.fetch_sessions import FetchSessionCache
from slog.replication.partition import FetchWatcher, Partition
from slog.replication.replica_fetcher import ReplicaFetcherManager

log = logging.getLogger("slog.replication")

TopicPartition = tuple[str, int]
IsrProposal = tuple[Partition, tuple[int, ...]]
# Proposed ISRs, sent together → the controller's verdict on each: None (accepted) or
# the refusal as an exception.
AlterIsr = Callable[[Sequence[IsrProposal]], Awaitable[Sequence[Exception | None]]]
LeadershipListener = Callable[[str, int, bool], None]
ISR_CHECK_INTERVAL_S = 0.25
# With nothing due the ISR timer sleeps until a session that leaders are parked on
# could go quiet (its last fetch + replica.lag.time.max.ms), at most this long.
ISR_IDLE_CHECK_S = 30.0
# Up to this many new replicas are created on the event loop (cheaper than a thread
# hop, and a small topic is served as soon as its metadata is applied); more go to a
# worker thread so that a topic of thousands of partitions does not stall the broker.
INLINE_CREATE_MAX = 16
# New replicas taking their roles between two turns of the event loop.
ROLE_SLICE = 500
# A follower is out of sync once strictly more than replica.lag.time.max.ms has passed.
ISR_DEADLINE_SLACK_MS = 1.0


PARTITION_METADATA = "partition.metadata"


def read_topic_id(directory: Path) -> str | None:
    """The topic id a log directory belongs to, or None if it does not say.

    Only a whole file counts: one cut short by a power loss (written without an
    fsync by bulk creation) is "does not say", never a shorter, different id,
    which would get the log deleted as a deleted topic's.
    """
    try:
        text = (directory / PARTITION_METADATA).read_text()
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    found = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)
    topic_id = found.get("topic_id", "")
    if not topic_id or text != _topic_id_file(topic_id):
        return None  # empty or cut short (the file ends with the id's newline)
    return topic_id


def _topic_id_file(topic_id: str) -> str:
    return f"version: 0\ntopic_id: {topic_id}\n"


def write_topic_id(directory: Path, *, topic_id: str, durable: bool = True) -> None:
    """Written once per new log; durably (temp, fsync, rename, fsync dir) unless
    ``durable=False``. Bulk creation passes that: an fsync per file of a topic of
    thousands of partitions was a journal commit each, which stalled heartbeats
    long enough to fence a busy broker. Then a power cut may leave the file
    empty or cut short: :func:`read_topic_id` says "unknown" and the log is kept
    for the topic of its name, which is right after a power loss, since every
    broker went down with it and no topic could be deleted and re-created."""
    path = directory / PARTITION_METADATA
    if durable:
        write_atomically(path, _topic_id_file(topic_id).encode())
    else:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        with os.fdopen(fd, "w") as out:
            out.write(_topic_id_file(topic_id))


def _monotonic_ms() -> float:
    return time.monotonic() * 1000


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
        # Leaders whose ISR may need a change, by when (see maintain_isr).
        self._isr_due: WakingDueSchedule[TopicPartition] = WakingDueSchedule(
            _monotonic_ms, ISR_CHECK_INTERVAL_S, ISR_IDLE_CHECK_S)
        # Told (topic, partition, is_leader) whenever this broker's role changes.
        self.leadership_listeners: list[LeadershipListener] = []
        self._log_configs: dict[str, LogConfig] = {}  # per topic, dropped when it changes
        self._follow: dict[TopicPartition, tuple[Partition, int, tuple[str, int]]] = {}
        self._fetchers_stale = False
        # Idle leaders parked on their followers' fetch sessions (see _park).
        self._isr_parked: dict[FetchWatcher, set[TopicPartition]] = {}
        self._creating: set[TopicPartition] = set()  # logs a worker thread is creating
        self._role_tasks: set[asyncio.Task[None]] = set()

    # -- metadata ---------------------------------------------------------------
    def log_config_for(self, topic: str) -> LogConfig:
        """The topic's log settings, built once per topic and metadata change."""
        config = self._log_configs.get(topic)
        if config is None:
            overrides = self._image.topics[topic].configs if self._image and topic in \
                self._image.topics else {}
            config = LogConfig.from_topic_configs(self.config.topic_values(overrides))
            self._log_configs[topic] = config
        return config

    def topic_setting(self, topic: str, name: str) -> str:
        overrides = {}
        if self._image is not None and topic in self._image.topics:
            overrides = self._image.topics[topic].configs
        return self.config.topic_values(overrides)[name]

    def apply_image(self, image: MetadataImage, delta: MetadataDelta | None = None) -> None:
        """Bring local replicas in line with ``image``.

        With ``delta`` only the partitions it touched are visited (and, for a
        broker whose registration or fencing changed, the partitions it leads or
        follows here); without one, every partition (the first apply, after
        start-up). New replicas' logs are created in bulk on a worker thread when
        there are many (:data:`INLINE_CREATE_MAX`): the event loop keeps serving,
        and each becomes leader or follower once its files exist.
        """
        first = self._image is None
        self._image = image
        if delta is None or first or delta.broker_configs:
            self._log_configs.clear()
            keys = {(p.topic, p.partition) for p in image.all_partitions()} | set(self.partitions)
        else:
            for topic in delta.topics:
                self._log_configs.pop(topic, None)
            keys = self._affected(image, delta)
        if first:
            self._remove_orphan_logs(image)
        fenced = frozenset(b.broker_id for b in image.brokers.values() if b.fenced)
        new: dict[TopicPartition, PartitionState] = {}
        for key in keys:
            if key in self._creating:
                continue  # settled with the then-current image when its files exist
            state = image.partition(*key)
            if state is None or self.broker_id not in state.replicas:
                if key in self.partitions:
                    self._remove(key)
                continue
            topic_id = image.topics[key[0]].topic_id
            partition = self.partitions.get(key)
            if partition is not None and partition.topic_id != topic_id:
                self._remove(key)  # deleted and created again under the same name
                partition = None
            if partition is None and self.log_manager.get(*key) is None:
                new[key] = state
                continue
            if partition is None:
                partition = self._open(key, topic_id)
            else:
                partition.log.update_config(self.log_config_for(key[0]))
            self._take_role(key, partition, state, image, fenced)
        if new:
            self._create(new, image)
        self._assign_fetchers()

    def _affected(self, image: MetadataImage, delta: MetadataDelta) -> set[TopicPartition]:
        """The partitions ``delta`` may change here."""
        keys = set(delta.partitions)
        for topic in delta.topics:
            found = image.topics.get(topic)
            if found is not None:
                keys.update((topic, number) for number in found.partitions)
            keys.update(k for k in self.partitions if k[0] == topic)
        if delta.brokers:
            # A follower's leader moved address or was fenced; a leader's follower was
            # fenced (become_leader forgets what it fetched before).
            keys.update(key for key, partition in self.partitions.items()
                        if partition.state is not None and
                        not delta.brokers.isdisjoint(partition.state.replicas))
        return keys

    def _take_role(self, key: TopicPartition, partition: Partition, state: PartitionState,
                   image: MetadataImage, fenced: frozenset[int]) -> None:
        was_leader = partition.is_leader
        before = self._follow.pop(key, None)
        if state.leader == self.broker_id:
            partition.become_leader(state, fenced)
        else:
            partition.become_follower(state)
            leader = image.brokers.get(state.leader)
            if leader is not None and not leader.fenced:
                self._follow[key] = (partition, leader.broker_id, (leader.host, leader.port))
        # A new leader epoch under the same leader is news to its fetcher too: it
        # must truncate before fetching again.
        if self._follow.get(key) != before or partition.needs_truncation:
            self._fetchers_stale = True
        if was_leader != partition.is_leader:
            for listener in self.leadership_listeners:
                listener(key[0], key[1], partition.is_leader)

    def _assign_fetchers(self) -> None:
        if self._fetchers_stale:
            self._fetchers_stale = False
            self.fetchers.assign(dict(self._follow))

    def _create(self, states: dict[TopicPartition, PartitionState], image: MetadataImage) -> None:
        """Create new replicas' logs: inline when few, else on a worker thread."""
        topic_ids = {key: image.topics[key[0]].topic_id for key in states}
        specs = {}
        for key, state in states.items():
            epoch = state.leader_epoch if state.leader == self.broker_id else None
            specs[key] = NewLog(self.log_config_for(key[0]), epoch,
                                functools.partial(write_topic_id, topic_id=topic_ids[key],
                                                  durable=False))
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None or len(specs) <= INLINE_CREATE_MAX:
            self._created(topic_ids, self.log_manager.create_logs(specs))
            return
        self._creating.update(specs)
        log.info("creating %d replica logs in the background", len(specs))
        future = loop.run_in_executor(None, self.log_manager.create_logs, specs)
        future.add_done_callback(functools.partial(self._creation_done, topic_ids))

    async def settled(self, poll_s: float = 0.02) -> None:
        """Wait until every replica the image gave us exists and has its role (the
        logs a worker thread creates, and their role slices, included)."""
        while self._creating or self._role_tasks:
            await asyncio.sleep(poll_s)

    def _creation_done(self, topic_ids: dict[TopicPartition, str],
                       future: asyncio.Future[dict[TopicPartition, PartitionLog]]) -> None:
        if future.cancelled() or future.exception() is not None:
            self._creating.difference_update(topic_ids)
            if not future.cancelled():
                # Those created so far are registered; the rest are retried by the
                # next change of their partitions, or at restart.
                log.error("creating %d replica logs failed", len(topic_ids),
                          exc_info=future.exception())
            return
        task = asyncio.get_running_loop().create_task(
            self._take_roles_of_created(topic_ids, future.result()))
        self._role_tasks.add(task)
        task.add_done_callback(self._role_tasks.discard)

    async def _take_roles_of_created(self, topic_ids: dict[TopicPartition, str],
                                     logs: dict[TopicPartition, PartitionLog]) -> None:
        """Make the new logs replicas a slice at a time, so that requests are
        served in between even when a request created thousands."""
        keys = list(topic_ids)
        for start in range(0, len(keys), ROLE_SLICE):
            chunk = {key: topic_ids[key] for key in keys[start:start + ROLE_SLICE]}
            self._creating.difference_update(chunk)
            self._created(chunk, {key: logs[key] for key in chunk if key in logs})
            self._assign_fetchers()
            await asyncio.sleep(0)

    def _created(self, topic_ids: dict[TopicPartition, str],
                 logs: dict[TopicPartition, PartitionLog]) -> None:
        """Make replicas of new logs, with the image as it is now (it may have moved
        on while a worker thread was creating the files)."""
        image = self._image
        assert image is not None
        fenced = frozenset(b.broker_id for b in image.brokers.values() if b.fenced)
        recreated = set()
        for key, topic_id in topic_ids.items():
            state = image.partition(*key)
            here = state is not None and self.broker_id in state.replicas
            if not here or image.topics[key[0]].topic_id != topic_id:
                if key in logs:
                    self.log_manager.delete(*key)  # deleted or moved away meanwhile
                if here:
                    recreated.add(key)  # deleted and created again meanwhile
                continue
            assert state is not None
            if key in self.partitions:
                continue
            if key in logs:
                partition = Partition(key[0], key[1], logs[key], self.broker_id, new_log=True)
                partition.topic_id = topic_id
                partition.isr_watch = self.check_isr_soon
                self.partitions[key] = partition
            else:  # its directory was on disk already
                partition = self._open(key, topic_id)
            self._take_role(key, partition, state, image, fenced)
            gc_policy.built()
        if recreated:
            self.apply_image(image, MetadataDelta(partitions=recreated))

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
            write_topic_id(plog.directory, topic_id=topic_id)
        partition = Partition(topic, number, plog, self.broker_id)
        partition.topic_id = topic_id
        partition.isr_watch = self.check_isr_soon
        self.partitions[key] = partition
        return partition

    def _remove(self, key: TopicPartition) -> None:
        removed = self.partitions.pop(key, None)
        if removed is not None:
            removed.notify_watchers()  # its fetches answer UNKNOWN_TOPIC_OR_PARTITION now
        if self._follow.pop(key, None) is not None:
            self._fetchers_stale = True
        self.log_manager.delete(*key)
        log.info("deleted replica %s-%d", *key)

    def _remove_orphan_logs(self, image: MetadataImage) -> None:
        """Logs on disk for partitions the image no longer places here (deleted while down)."""
        keep = {(p.topic, p.partition) for p in image.partitions_of(self.broker_id)}
        for plog_key in [k for k in self.log_manager.all_logs() if k not in keep]:
            self.log_manager.delete(*plog_key)
            log.info("deleted stale replica %s-%d found on disk", *plog_key)

    # -- data path --------------------------------------------------------------
    def get(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    def check_isr_soon(self, partition: Partition) -> None:
        """Have the next ISR tick look at ``partition`` (it may be able to change)."""
        self._isr_due.schedule((partition.topic, partition.partition), 0.0)

    async def maintain_isr(self, alter: AlterIsr) -> None:
        """Leaders propose ISR shrinks (laggards) and expansions (caught up), forever."""
        lag_max_ms = self.config.get_int("replica.lag.time.max.ms")
        while True:
            await self._isr_due.sleep_until_due(also_at=self._parked_deadline_ms(lag_max_ms))
            try:
                proposals = self.due_isr_changes(lag_max_ms, _monotonic_ms())
                if proposals:
                    await self._propose_isrs(alter, proposals)
            except Exception:  # a bad tick must not stop ISR maintenance for good
                log.exception("ISR check failed")

    def due_isr_changes(self, lag_max_ms: float, now_ms: float) -> list[IsrProposal]:
        """The ISR changes wanted now, looking only at partitions due for a check.

        A leader whose in-sync followers keep fetching is looked at once per
        replica.lag.time.max.ms (its earliest follower's lag deadline, pushed
        back at each look); an out-of-sync follower's fetch or a new leadership
        or ISR makes it due at once (``Partition.isr_watch``).
        """
        self._wake_parked(lag_max_ms, now_ms)
        proposals = []
        for key in self._isr_due.pop_due(now_ms):
            partition = self.partitions.get(key)
            if partition is None or not partition.is_leader:
                continue  # becoming leader again makes it due again
            if partition.isr_change_in_flight:
                continue  # _propose_isrs reschedules it when the answer comes
            deadline = partition.isr_deadline_ms(lag_max_ms)
            if deadline is not None and deadline > now_ms and partition.isr_is_full:
                # Nobody to add and nobody late yet (the usual idle case): no need to
                # work out the wanted ISR. Park it on its followers' sessions when it
                # can, else look again at the new deadline.
                sessions = partition.quiet_isr_sessions()
                if sessions:
                    self._park(key, partition, sessions)
                else:
                    self._isr_due.schedule(key, deadline + ISR_DEADLINE_SLACK_MS)
                continue
            wanted = partition.wanted_isr(lag_max_ms)
            if wanted is not None:
                proposals.append((partition, wanted))
                continue
            deadline = partition.isr_deadline_ms(lag_max_ms)
            if deadline is not None:
                self._isr_due.schedule(key, deadline + ISR_DEADLINE_SLACK_MS)
        return proposals

    def _park(self, key: TopicPartition, partition: Partition,
              sessions: list[FetchWatcher]) -> None:
        """Idle leaders cost nothing per tick: a parked partition is looked at again
        only when one of its in-sync followers' sessions goes quiet, or on an append."""
        partition.isr_parked = True
        for session in sessions:
            self._isr_parked.setdefault(session, set()).add(key)

    def _parked_deadline_ms(self, lag_max_ms: float) -> float | None:
        """When the quietest session that leaders are parked on could have been quiet
        for the allowed lag (most have fetched again by then: look again then)."""
        if not self._isr_parked:
            return None
        quietest = min(session.last_fetch_ms for session in self._isr_parked)
        return quietest + lag_max_ms + ISR_DEADLINE_SLACK_MS

    def _wake_parked(self, lag_max_ms: float, now_ms: float) -> None:
        """Partitions parked on a session that has not fetched for the allowed lag are
        due now (their follower is late on every one of them)."""
        quiet = [session for session in self._isr_parked
                 if session.last_fetch_ms + lag_max_ms + ISR_DEADLINE_SLACK_MS <= now_ms]
        for session in quiet:
            for key in self._isr_parked.pop(session):
                partition = self.partitions.get(key)
                if partition is not None:
                    partition.isr_parked = False
                self._isr_due.schedule(key, now_ms)

    async def _propose_isrs(self, alter: AlterIsr, proposals: list[IsrProposal]) -> None:
        """One AlterPartition for every ISR change of this tick."""
        for partition, wanted in proposals:
            partition.isr_change_in_flight = True
            partition.propose_isr(wanted)
        try:
            outcomes: Sequence[Exception | None] = await alter(proposals)
        except Exception as exc:  # the controller unreachable: every proposal failed
            outcomes = [exc] * len(proposals)
        if len(outcomes) != len(proposals):
            outcomes = [RuntimeError("AlterPartition answered another partition count")] * \
                len(proposals)
        retry_at = (time.monotonic() + ISR_CHECK_INTERVAL_S) * 1000
        for (partition, wanted), outcome in zip(proposals, outcomes, strict=True):
            partition.isr_change_in_flight = False
            if outcome is not None:
                partition.proposal_failed()
                log.info("%s-%d: ISR change to %s refused: %s", partition.topic,
                         partition.partition, list(wanted), outcome)
            # Look again next tick, as before: proposed again if still wanted and the
            # controller's answer has not reached the image yet (it checks epochs).
            self._isr_due.schedule((partition.topic, partition.partition), retry_at)

    async def shutdown(self) -> None:
        for task in list(self._role_tasks):
            task.cancel()
        await self.fetchers.shutdown()
        self.partitions.clear()
        self.log_manager.shutdown()
