"""A snapshot of a cluster at one instant: plain, immutable values built by
:mod:`slog.tui.collect` (or by a test), rendered by the app."""

from __future__ import annotations

from dataclasses import dataclass, field

from slog.core import health


@dataclass(frozen=True)
class BrokerInfo:
    broker_id: int
    host: str | None
    port: int | None
    alive: bool  # Metadata lists it (or, from the data dir, its process runs)
    fenced: bool = False
    rack: str | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}" if self.host is not None else "-"

    @property
    def status(self) -> str:
        return "fenced" if self.fenced else "alive" if self.alive else "down"


@dataclass(frozen=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    log_start: int = -1
    high_watermark: int = -1
    log_end: int = -1
    size: int = -1  # the leader's replica, in bytes; -1 when unknown
    last_stable: int = -1  # ListOffsets read_committed: the LSO; -1 when unknown
    open_transactions: int = 0  # producers with a transaction open here (DescribeProducers)

    @property
    def lso_lag(self) -> int:
        """Offsets below the high watermark that read_committed consumers cannot read yet
        (an open transaction holds them back); 0 when unknown."""
        if self.last_stable < 0 or self.high_watermark < 0:
            return 0
        return max(0, self.high_watermark - self.last_stable)

    @property
    def offline(self) -> bool:
        return health.is_offline(self.leader, self.offline_replicas)

    @property
    def out_of_sync(self) -> tuple[int, ...]:
        """Replicas that are not in the ISR, or are on a broker that is down."""
        live = health.live_isr(self.isr, self.offline_replicas)
        return tuple(r for r in self.replicas if r not in live)

    @property
    def under_replicated(self) -> bool:
        return health.is_under_replicated(self.replicas, self.isr, self.offline_replicas)

    @property
    def messages(self) -> int:
        """Records below the high watermark still in the log (0 when unknown)."""
        if self.high_watermark < 0 or self.log_start < 0:
            return 0
        return max(0, self.high_watermark - self.log_start)


@dataclass(frozen=True)
class TopicInfo:
    name: str
    internal: bool
    partitions: tuple[PartitionInfo, ...]

    @property
    def replication_factor(self) -> int:
        return max((len(p.replicas) for p in self.partitions), default=0)

    @property
    def size(self) -> int:
        return sum(max(p.size, 0) for p in self.partitions)

    @property
    def end_offsets(self) -> int:
        """Sum of high watermarks: grows by one per record produced."""
        return sum(max(p.high_watermark, 0) for p in self.partitions)

    @property
    def under_replicated(self) -> int:
        return sum(p.under_replicated for p in self.partitions)

    @property
    def offline(self) -> int:
        return sum(p.offline for p in self.partitions)


@dataclass(frozen=True)
class MemberInfo:
    member_id: str
    client_id: str
    host: str
    assignment: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class GroupOffset:
    topic: str
    partition: int
    committed: int  # -1: nothing committed
    log_end: int  # the partition's high watermark, -1 when unknown
    owner: str | None  # the member id that is assigned it

    @property
    def lag(self) -> int:
        if self.log_end < 0:
            return 0
        return self.log_end - self.committed if self.committed >= 0 else self.log_end


@dataclass(frozen=True)
class GroupInfo:
    group_id: str
    state: str
    protocol_type: str
    assignor: str
    coordinator: int
    members: tuple[MemberInfo, ...] = ()
    offsets: tuple[GroupOffset, ...] = ()
    # Not in the classic DescribeGroups: from the group metadata record in the data
    # dir (slog/tui/group_log.py) when it is this cluster's, else unknown.
    generation: int | None = None
    leader: str | None = None
    error: str | None = None
    group_type: str = "classic"  # "consumer": a KIP-848 group (the broker assigns)

    @property
    def lag(self) -> int:
        return sum(o.lag for o in self.offsets)

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(sorted({o.topic for o in self.offsets}))


OPEN_TRANSACTION_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")


@dataclass(frozen=True)
class TransactionInfo:
    """An open transaction, from its coordinator (ListTransactions, DescribeTransactions)."""

    transactional_id: str
    producer_id: int
    state: str  # Kafka's names: Ongoing, PrepareCommit, ...
    coordinator: int
    producer_epoch: int = -1  # -1 and below: not described (DescribeTransactions failed)
    timeout_ms: int = -1
    start_ms: int = -1  # when its first partition was added
    partitions: tuple[tuple[str, int], ...] = ()

    def age_s(self, at: float) -> float | None:
        return None if self.start_ms <= 0 else max(0.0, at - self.start_ms / 1000)

    def hanging(self, at: float) -> bool:
        """Open longer than its timeout: its coordinator should have aborted it."""
        age = self.age_s(at)
        return (self.state == "Ongoing" and age is not None and self.timeout_ms >= 0
                and age * 1000 > self.timeout_ms)


@dataclass(frozen=True)
class ClusterSnapshot:
    taken_at: float  # seconds since the epoch
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerInfo, ...]
    topics: tuple[TopicInfo, ...]
    groups: tuple[GroupInfo, ...] = ()
    controller_epoch: int | None = None
    # broker id → bytes of every replica it holds (DescribeLogDirs); absent: unknown
    broker_bytes: dict[int, int] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()  # parts of the refresh that failed
    transactions: tuple[TransactionInfo, ...] = ()  # the open ones, by transactional id

    @property
    def partitions(self) -> list[PartitionInfo]:
        return [p for t in self.topics for p in t.partitions]

    @property
    def alive_brokers(self) -> int:
        return sum(b.alive and not b.fenced for b in self.brokers)

    @property
    def under_replicated(self) -> int:
        return sum(t.under_replicated for t in self.topics)

    @property
    def offline(self) -> int:
        return sum(t.offline for t in self.topics)

    def topic(self, name: str) -> TopicInfo | None:
        return next((t for t in self.topics if t.name == name), None)

    def group(self, group_id: str) -> GroupInfo | None:
        return next((g for g in self.groups if g.group_id == group_id), None)

    def broker(self, broker_id: int) -> BrokerInfo | None:
        return next((b for b in self.brokers if b.broker_id == broker_id), None)

    @property
    def hanging_transactions(self) -> int:
        return sum(t.hanging(self.taken_at) for t in self.transactions)

    def leaderships(self, broker_id: int) -> int:
        return sum(p.leader == broker_id and not p.offline for p in self.partitions)

    def group_lag_by_topic(self) -> dict[str, int]:
        lag: dict[str, int] = {}
        for g in self.groups:
            for o in g.offsets:
                lag[o.topic] = lag.get(o.topic, 0) + o.lag
        return lag

    @property
    def health(self) -> str:
        """ok, warn (under-replicated or a broker down) or error (offline, no controller)."""
        return health.cluster_health(
            offline_partitions=self.offline, under_replicated_partitions=self.under_replicated,
            has_controller=self.controller_id >= 0, serving_brokers=self.alive_brokers,
            brokers=len(self.brokers))
