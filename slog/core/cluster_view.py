"""A read-only picture of a cluster, for ``slog cluster`` and the chaos harness.

Two sources give the same :class:`ClusterView`:

* the data dir (:class:`DataDirWatcher`, here): the metadata log, tailed
  incrementally into a :class:`MetadataImage`, plus a liveness probe of every
  broker's ``alive.lock``. It knows what the protocol cannot: fenced brokers,
  the controller epoch, and brokers that died before the controller noticed.
* the protocol (``slog.cli.cluster_view.view_from_protocol``): one Metadata
  request, for a cluster whose data dir is elsewhere (or a real Kafka).

Partitions are judged by :mod:`slog.core.health` against the brokers that are
really serving.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slog.core import health
from slog.core.config import TOPIC_CONFIGS
from slog.core.datadir import (
    known_broker_ids,
    read_broker_info,
    read_cluster_id,
)
from slog.core.health import NO_LEADER
from slog.core.locks import is_locked
from slog.core.metadata import MetadataImage
from slog.core.metadata_log import MetadataLogReader
from slog.core.names import DataDirLayout

MIN_ISR_KEY = "min.insync.replicas"
DEFAULT_MIN_ISR = int(TOPIC_CONFIGS[MIN_ISR_KEY].default)


@dataclass(frozen=True)
class BrokerState:
    broker_id: int
    host: str | None
    port: int | None
    pid: int | None  # of the running process; None when it is not running (or unknown)
    alive: bool  # the process runs (data dir) / Metadata lists it (protocol)
    registered: bool  # the controller registered this incarnation
    fenced: bool
    controller: bool
    rack: str | None = None  # broker.rack

    @property
    def address(self) -> str | None:
        return f"{self.host}:{self.port}" if self.host is not None else None

    @property
    def serving(self) -> bool:
        return self.alive and self.registered and not self.fenced

    @property
    def status(self) -> str:
        """alive, fenced, starting (not registered yet) or dead (gone, not fenced yet)."""
        if self.fenced:
            return "fenced"
        if not self.alive:
            return "dead"
        return "alive" if self.registered else "starting"

    def to_json(self) -> dict[str, Any]:
        return {"id": self.broker_id, "host": self.host, "port": self.port, "pid": self.pid,
                "alive": self.alive, "fenced": self.fenced, "controller": self.controller,
                "status": self.status, "rack": self.rack}


@dataclass(frozen=True)
class PartitionHealth:
    """One partition as the serving brokers see it, judged by :mod:`slog.core.health`."""

    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]  # replicas on brokers that are not serving
    min_insync_replicas: int = DEFAULT_MIN_ISR

    @classmethod
    def judge(cls, topic: str, partition: int, leader: int, replicas: Iterable[int],
              isr: Iterable[int], serving: set[int], min_insync_replicas: int
              ) -> PartitionHealth:
        """A partition as the brokers in ``serving`` see it."""
        replicas = tuple(replicas)
        return cls(topic, partition, leader, replicas, tuple(isr),
                   health.offline_replicas(replicas, serving), min_insync_replicas)

    @property
    def live_isr(self) -> tuple[int, ...]:
        return health.live_isr(self.isr, self.offline_replicas)

    @property
    def offline(self) -> bool:
        return health.is_offline(self.leader, self.offline_replicas)

    @property
    def under_replicated(self) -> bool:
        return health.is_under_replicated(self.replicas, self.isr, self.offline_replicas)

    @property
    def under_min_isr(self) -> bool:
        return health.is_under_min_isr(self.isr, self.offline_replicas,
                                       self.min_insync_replicas)

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition,
                "leader": None if self.leader == NO_LEADER else self.leader,
                "replicas": list(self.replicas), "isr": list(self.isr),
                "offline_replicas": list(self.offline_replicas),
                "min_insync_replicas": self.min_insync_replicas}


@dataclass(frozen=True)
class ClusterView:
    source: str  # "data-dir" or "protocol"
    location: str  # the data dir, or the bootstrap list
    cluster_id: str | None
    controller_id: int | None  # None: no live controller
    controller_epoch: int | None  # None: unknown (the protocol does not say)
    brokers: list[BrokerState]
    partitions: list[PartitionHealth] = field(default_factory=list)
    topic_count: int = 0

    def broker(self, broker_id: int) -> BrokerState | None:
        return next((b for b in self.brokers if b.broker_id == broker_id), None)

    @property
    def offline_partitions(self) -> list[PartitionHealth]:
        return [p for p in self.partitions if p.offline]

    @property
    def under_replicated_partitions(self) -> list[PartitionHealth]:
        return [p for p in self.partitions if p.under_replicated]

    @property
    def under_min_isr_partitions(self) -> list[PartitionHealth]:
        return [p for p in self.partitions if p.under_min_isr]

    def problems(self) -> list[str]:
        """Why the cluster is unhealthy, one phrase each; empty when it is healthy."""
        if not any(b.alive for b in self.brokers):
            return ["no broker is running"]  # everything else follows from it
        found = []
        if self.controller_id is None:
            found.append("no controller")
        for b in self.brokers:
            if b.fenced:
                found.append(f"broker {b.broker_id} is fenced")
            elif not b.alive:
                found.append(f"broker {b.broker_id} is not running")
            elif not b.registered:
                found.append(f"broker {b.broker_id} is not registered yet")
        for label, parts in (("offline", self.offline_partitions),
                             ("under-replicated", self.under_replicated_partitions),
                             ("under min ISR", self.under_min_isr_partitions)):
            if parts:
                noun = "partition" if len(parts) == 1 else "partitions"
                found.append(f"{len(parts)} {label} {noun}")
        return found

    @property
    def healthy(self) -> bool:
        return not self.problems()

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "location": self.location,
            "cluster_id": self.cluster_id,
            "healthy": self.healthy,
            "problems": self.problems(),
            "controller": {"id": self.controller_id, "epoch": self.controller_epoch},
            "brokers": [b.to_json() for b in self.brokers],
            "topics": self.topic_count,
            "partitions": len(self.partitions),
            "offline_partitions": [
                {"topic": p.topic, "partition": p.partition} for p in self.offline_partitions],
            "under_replicated_partitions": [
                {"topic": p.topic, "partition": p.partition, "replicas": list(p.replicas),
                 "isr": list(p.isr), "offline_replicas": list(p.offline_replicas)}
                for p in self.under_replicated_partitions],
            "under_min_isr_partitions": [
                {"topic": p.topic, "partition": p.partition, "isr": list(p.isr),
                 "live_isr": list(p.live_isr), "min_insync_replicas": p.min_insync_replicas}
                for p in self.under_min_isr_partitions],
        }


def min_isr_of(configs: dict[str, str]) -> int:
    """A topic's min.insync.replicas; the default when unset or not a number."""
    try:
        return int(configs.get(MIN_ISR_KEY, DEFAULT_MIN_ISR))
    except ValueError:
        return DEFAULT_MIN_ISR


# -- the data dir --------------------------------------------------------------------------

class DataDirWatcher:
    """Follows one data dir; :meth:`view` is cheap to call repeatedly (polling)."""

    def __init__(self, data_dir: Path):
        self.layout = DataDirLayout(data_dir)
        self.image = MetadataImage()
        self._reader = MetadataLogReader(self.layout.metadata_dir)

    @property
    def has_cluster(self) -> bool:
        return self.layout.cluster_file.exists()

    def cluster_id(self) -> str | None:
        return read_cluster_id(self.layout)

    def poll(self) -> MetadataImage:
        """Apply the metadata records written since the last call."""
        self.image.apply_all(self._reader.poll())
        return self.image

    def running_broker_ids(self) -> list[int]:
        return [b for b in known_broker_ids(self.layout)
                if is_locked(self.layout.broker(b).alive_lock)]

    def view(self) -> ClusterView:
        image = self.poll()
        ids = sorted(set(image.brokers) | set(known_broker_ids(self.layout)))
        brokers = [s for s in (self._broker_state(b, image) for b in ids) if s is not None]
        running_controller = next((b for b in brokers if b.controller), None)
        serving = {b.broker_id for b in brokers if b.serving}
        partitions = [
            PartitionHealth.judge(p.topic, p.partition, p.leader, p.replicas, p.isr, serving,
                                  min_isr_of(topic.configs))
            for topic in image.topics.values() for p in topic.partitions.values()
        ]
        partitions.sort(key=lambda p: (p.topic, p.partition))
        return ClusterView(
            source="data-dir", location=str(self.layout.root), cluster_id=self.cluster_id(),
            controller_id=running_controller.broker_id if running_controller else None,
            controller_epoch=image.controller_epoch or None,
            brokers=brokers, partitions=partitions, topic_count=len(image.topics))

    def _broker_state(self, broker_id: int, image: MetadataImage) -> BrokerState | None:
        info = read_broker_info(self.layout, broker_id)
        registration = image.brokers.get(broker_id)
        if info is not None:
            host, port = info.host, info.port
        elif registration is not None:
            host, port = registration.host, registration.port
        else:
            return None  # a directory left by a broker that never got as far as listening
        alive = is_locked(self.layout.broker(broker_id).alive_lock)
        registered = registration is not None and (
            info is None or registration.incarnation == info.incarnation)
        return BrokerState(
            broker_id=broker_id, host=host, port=port,
            pid=info.pid if info is not None and alive else None,
            alive=alive, registered=registered,
            fenced=registration is not None and registration.fenced,
            # The image names the latest controller; it is current only while it runs.
            controller=alive and image.controller_id == broker_id,
            rack=info.rack if info is not None else registration.rack if registration else None)
