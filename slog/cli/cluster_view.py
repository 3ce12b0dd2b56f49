"""A read-only picture of a cluster, for ``slog cluster`` and (later) the dashboard.

Two sources give the same :class:`ClusterView`:

* the data dir (:class:`DataDirWatcher`): the metadata log, tailed
  incrementally into a :class:`MetadataImage`, plus a liveness probe of every
  broker's ``alive.lock``. It knows what the protocol cannot: fenced brokers,
  the controller epoch, and brokers that died before the controller noticed.
* the protocol (:func:`view_from_protocol`): one Metadata request, for a
  cluster whose data dir is elsewhere (or a real Kafka). Kafka hides fenced
  brokers from Metadata, so a broker named in a replica list but missing from
  the broker list is reported as not alive.

Partition health is judged against the brokers that are really serving: a
leader that is not live makes its partition offline, and ISR members that are
not live do not count as in sync, even before the controller has caught up.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slog.core.config import TOPIC_CONFIGS
from slog.core.datadir import alive_lock_path, known_broker_ids, read_broker_info
from slog.core.locks import is_locked
from slog.core.metadata import NO_LEADER, MetadataImage
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
    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]  # replicas on brokers that are not serving
    min_insync_replicas: int = DEFAULT_MIN_ISR

    @property
    def live_isr(self) -> tuple[int, ...]:
        return tuple(b for b in self.isr if b not in self.offline_replicas)

    @property
    def offline(self) -> bool:
        return self.leader == NO_LEADER or self.leader in self.offline_replicas

    @property
    def under_replicated(self) -> bool:
        return len(self.live_isr) < len(self.replicas)

    @property
    def under_min_isr(self) -> bool:
        return len(self.live_isr) < self.min_insync_replicas

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


def _health(topic: str, partition: int, leader: int, replicas: Iterable[int],
            isr: Iterable[int], serving: set[int], min_isr: int) -> PartitionHealth:
    replicas = tuple(replicas)
    return PartitionHealth(topic, partition, leader, replicas, tuple(isr),
                           tuple(r for r in replicas if r not in serving), min_isr)


def _min_isr(configs: dict[str, str]) -> int:
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
        try:
            return str(json.loads(self.layout.cluster_file.read_text())["cluster_id"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def poll(self) -> MetadataImage:
        """Apply the metadata records written since the last call."""
        self.image.apply_all(self._reader.poll())
        return self.image

    def running_broker_ids(self) -> list[int]:
        return [b for b in known_broker_ids(self.layout)
                if is_locked(alive_lock_path(self.layout, b))]

    def view(self) -> ClusterView:
        image = self.poll()
        ids = sorted(set(image.brokers) | set(known_broker_ids(self.layout)))
        brokers = [s for s in (self._broker_state(b, image) for b in ids) if s is not None]
        running_controller = next((b for b in brokers if b.controller), None)
        serving = {b.broker_id for b in brokers if b.serving}
        partitions = [
            _health(p.topic, p.partition, p.leader, p.replicas, p.isr, serving,
                    _min_isr(topic.configs))
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
        alive = is_locked(alive_lock_path(self.layout, broker_id))
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


# -- the protocol --------------------------------------------------------------------------

def view_from_protocol(bootstrap: str, request_timeout_ms: int = 5000) -> ClusterView:
    """Ask any broker in ``bootstrap``; client errors propagate (the caller maps them)."""
    from slog.client import Admin

    with Admin(bootstrap, client_id="slog-cli", request_timeout_ms=request_timeout_ms) as admin:
        meta = admin.cluster.refresh_metadata(None)
        listed = set(meta.brokers)
        referenced = {r for t in meta.topics.values() for p in t.partitions.values()
                      for r in p.replicas}
        brokers = [BrokerState(b.node_id, b.host, b.port, None, True, True, False,
                               b.node_id == meta.controller_id, b.rack)
                   for b in sorted(meta.brokers.values(), key=lambda b: b.node_id)]
        brokers += [BrokerState(b, None, None, None, False, False, False, False)
                    for b in sorted(referenced - listed)]
        topics = [t for _, t in sorted(meta.topics.items()) if not t.error_code]
        partitions = [
            _health(t.name, p.partition, p.leader, p.replicas, p.isr, listed, DEFAULT_MIN_ISR)
            for t in topics for _, p in sorted(t.partitions.items())
        ]
        partitions = _with_min_isr(partitions, lambda topic: _configured_min_isr(admin, topic))
    return ClusterView(
        source="protocol", location=bootstrap, cluster_id=meta.cluster_id,
        controller_id=meta.controller_id if meta.controller_id in listed else None,
        controller_epoch=None, brokers=brokers, partitions=partitions, topic_count=len(topics))


def _configured_min_isr(admin: Any, topic: str) -> int:
    from slog.client.errors import KafkaError

    try:
        entry = admin.describe_configs(topic).get(MIN_ISR_KEY)
    except KafkaError:
        return DEFAULT_MIN_ISR
    return _min_isr({MIN_ISR_KEY: entry.value} if entry and entry.value else {})


def _with_min_isr(partitions: list[PartitionHealth], lookup: Callable[[str], int]
                  ) -> list[PartitionHealth]:
    """Fill in min.insync.replicas, asking only about topics that lost a replica
    (one DescribeConfigs per such topic, not per topic of the cluster)."""
    from dataclasses import replace

    cache: dict[str, int] = {}
    out = []
    for p in partitions:
        if p.under_replicated:
            if p.topic not in cache:
                cache[p.topic] = lookup(p.topic)
            p = replace(p, min_insync_replicas=cache[p.topic])
        out.append(p)
    return out
