"""One refresh: a :class:`ClusterSnapshot` from a few pipelined protocol round trips.

* To the brokers and coordinators of the previous refresh, written before
  anything is read: DescribeLogDirs and ListGroups per broker, one
  DescribeGroups per coordinator and one OffsetFetch per group.
  Also to the leaders of the previous refresh, ListOffsets for the partitions
  each leads (high watermark; log end with Kafka's debugging replica id -2;
  every tenth time the log start).
* Meanwhile, Metadata for every topic (one request); if leaders moved, the
  new leaders are asked again. Only now are the answers read, in order.
* Groups that are new or whose coordinator moved get one more round.
* Transactions ride along: ListTransactions (the open ones) per broker, and a
  ListOffsets read_committed (the LSO) per leader. Ids open at the last refresh
  are described (DescribeTransactions, one per coordinator) in the first round,
  and so are the producers (DescribeProducers, one per leader) of partitions
  whose LSO was below their high watermark; transactions and unstable
  partitions that are new get the extra round. A cluster without transactions
  costs two small requests per broker, and nothing per partition.

With this cluster's data dir, events come from its metadata log and each group's
generation and leader from its ``__consumer_offsets`` files (new bytes only).

So a steady refresh costs about one round trip however large the cluster,
and works against any Kafka (a broker without DescribeLogDirs just shows no
sizes). Parts that fail become warnings on the snapshot; only an unreachable
cluster raises.
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from slog.client.admin import Admin
from slog.client.connection import BrokerConnection
from slog.client.errors import KafkaError
from slog.client.group_requests import fetch_body, fetched_offsets
from slog.client.transaction_admin import (
    ProducerState,
    TransactionDescription,
    describe_producers_body,
    described_producers,
    described_transactions,
    list_transactions_body,
)
from slog.client.types import ClusterMetadata, TopicPartition
from slog.core.consumer_protocol import PROTOCOL_TYPE, WireFormatError, decode_assignment
from slog.core.datadir import read_cluster_id
from slog.core.names import OFFSETS_TOPIC, DataDirLayout
from slog.protocol.apis import ApiKey
from slog.tui.events import Event, MetadataLogEvents
from slog.tui.group_log import GroupMetadataLog
from slog.tui.model import (
    OPEN_TRANSACTION_STATES,
    BrokerInfo,
    ClusterSnapshot,
    GroupInfo,
    GroupOffset,
    MemberInfo,
    PartitionInfo,
    TopicInfo,
    TransactionInfo,
)

CHANNEL = "dashboard"
EARLIEST, LATEST = -2, -1
CONSUMER, DEBUGGING_REPLICA = -1, -2  # Kafka's replica ids: -2 sees the log end offset
READ_UNCOMMITTED, READ_COMMITTED = 0, 1  # ListOffsets' isolation levels (1: the LSO)
# Log start offsets move only with retention or record deletion: ask for them on every
# tenth refresh and whenever a leader changes, not each time (a third of the requests).
LOG_START_EVERY = 10


@dataclass
class Refresh:
    snapshot: ClusterSnapshot
    events: list[Event] = field(default_factory=list)  # from the metadata log, when read


@dataclass
class _Offsets:
    start: dict[TopicPartition, int] = field(default_factory=dict)
    high_watermark: dict[TopicPartition, int] = field(default_factory=dict)
    log_end: dict[TopicPartition, int] = field(default_factory=dict)
    last_stable: dict[TopicPartition, int] = field(default_factory=dict)

    def unstable(self) -> set[TopicPartition]:
        """Partitions whose LSO is below the high watermark: a transaction is open."""
        return {tp for tp, lso in self.last_stable.items()
                if lso < self.high_watermark.get(tp, lso)}


def _list_offsets_body(tps: Iterable[TopicPartition], timestamp: int, replica_id: int,
                       isolation_level: int = READ_UNCOMMITTED) -> dict[str, Any]:
    by_topic: dict[str, list[dict[str, int]]] = defaultdict(list)
    for tp in tps:
        by_topic[tp.topic].append({"partition_index": tp.partition, "current_leader_epoch": -1,
                                   "timestamp": timestamp})
    return {"replica_id": replica_id, "isolation_level": isolation_level,
            "topics": [{"name": t, "partitions": p} for t, p in by_topic.items()]}


def _offsets_from(response: Any) -> dict[TopicPartition, int]:
    return {TopicPartition(t.name, p.partition_index): p.offset
            for t in response.topics for p in t.partitions if not p.error_code}


def _merge_offsets_into(into: dict[TopicPartition, int]) -> Callable[[Any], None]:
    return lambda response: into.update(_offsets_from(response))


class _Exchange:
    """Requests written to many connections first, answers read afterwards."""

    def __init__(self, cluster: Any, warnings: list[str]):
        self._cluster = cluster
        self._warnings = warnings
        self._sent: list[tuple[int, BrokerConnection, Callable[[Any], None]]] = []
        self._broken: set[int] = set()

    def send(self, broker_id: int, api_key: int, body: dict[str, Any],
             on_answer: Callable[[Any], None], version: Callable[[BrokerConnection], int]
             | None = None) -> None:
        if broker_id in self._broken:
            return
        try:
            conn = self._cluster.connection(broker_id, CHANNEL)
            conn.send(api_key, body, version=None if version is None else version(conn))
        except (ConnectionError, KafkaError) as exc:
            self._fail(broker_id, exc)
            return
        self._sent.append((broker_id, conn, on_answer))

    def _fail(self, broker_id: int, exc: Exception) -> None:
        if isinstance(exc, ConnectionError) and broker_id not in self._broken:
            self._broken.add(broker_id)
            self._cluster.close_connection(broker_id, CHANNEL)
        self._warnings.append(f"broker {broker_id}: {exc}")

    def abandon(self) -> None:
        """Close every connection with answers still to read."""
        for broker_id in {b for b, _, _ in self._sent}:
            self._cluster.close_connection(broker_id, CHANNEL)
        self._sent = []

    def run(self) -> None:
        sent, self._sent = self._sent, []
        for broker_id, conn, on_answer in sent:
            if broker_id in self._broken:
                continue
            try:
                on_answer(conn.receive()[1])
            except (ConnectionError, KafkaError) as exc:
                self._fail(broker_id, exc)


def _member(m: Any, consumer: bool) -> MemberInfo:
    assignment: tuple[tuple[str, int], ...] = ()
    if consumer and m.member_assignment:
        with contextlib.suppress(WireFormatError):
            assignment = tuple(sorted(decode_assignment(m.member_assignment).partitions))
    return MemberInfo(m.member_id, m.client_id, m.client_host, assignment)


@dataclass
class _GroupAnswers:
    """What DescribeGroups and OffsetFetch said; a later answer replaces an earlier one."""

    described: dict[str, Any] = field(default_factory=dict)
    committed: dict[str, dict[TopicPartition, int]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def on_describe(self, response: Any) -> None:
        for g in response.groups:
            if not g.error_code or g.group_id not in self.described:
                self.described[g.group_id] = g

    def on_offsets(self, group_id: str) -> Callable[[Any], None]:
        def store(response: Any) -> None:
            try:
                found = fetched_offsets(response, group_id)
            except KafkaError as exc:
                self.errors[group_id] = str(exc)
                return
            self.errors.pop(group_id, None)
            self.committed[group_id] = {tp: o.offset for tp, o in found.items()
                                        if o is not None}
        return store

    def group(self, group_id: str, coordinator: int,
              high_watermarks: dict[TopicPartition, int]) -> GroupInfo:
        return _group(group_id, coordinator, self.described.get(group_id),
                      self.committed.get(group_id, {}), high_watermarks,
                      self.errors.get(group_id))


@dataclass
class _TransactionAnswers:
    """What ListTransactions, DescribeTransactions and DescribeProducers said."""

    listed: dict[str, tuple[int, str, int]] = field(default_factory=dict)  # pid, state, node
    described: dict[str, TransactionDescription] = field(default_factory=dict)
    producers: dict[TopicPartition, list[ProducerState]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def on_list(self, broker_id: int) -> Callable[[Any], None]:
        def store(response: Any) -> None:
            if response.error_code:  # e.g. COORDINATOR_LOAD_IN_PROGRESS: next time
                self.warnings.append(f"broker {broker_id}: ListTransactions: "
                                     f"{KafkaError.for_code(response.error_code)}")
                return
            for t in response.transaction_states:
                self.listed[t.transactional_id] = (t.producer_id, t.transaction_state,
                                                   broker_id)
        return store

    def on_describe(self, node_id: int) -> Callable[[Any], None]:
        # Failed ids (not coordinator any more, ...) stay listed, without detail.
        return lambda response: described_transactions(response, node_id, self.described, {})

    def on_producers(self, response: Any) -> None:
        described_producers(response, self.producers, {})

    def coordinators(self) -> dict[str, int]:
        return {txn_id: node for txn_id, (_, _, node) in self.listed.items()}

    def undescribed(self) -> dict[str, int]:
        """Listed ids not described at the coordinator that listed them."""
        return {txn_id: node for txn_id, node in self.coordinators().items()
                if (d := self.described.get(txn_id)) is None or d.coordinator != node}

    def open_transactions(self) -> tuple[TransactionInfo, ...]:
        found = []
        for txn_id, (producer_id, state, node) in sorted(self.listed.items()):
            d = self.described.get(txn_id)
            if d is None or d.coordinator != node:
                found.append(TransactionInfo(txn_id, producer_id, state, node))
            elif d.state in OPEN_TRANSACTION_STATES:  # it may have ended in between
                found.append(TransactionInfo(
                    txn_id, d.producer_id, d.state, node, d.producer_epoch, d.timeout_ms,
                    d.start_ms, tuple((tp.topic, tp.partition) for tp in d.partitions)))
        return tuple(found)

    def open_on(self, tp: TopicPartition) -> int:
        return sum(p.current_txn_start_offset >= 0 for p in self.producers.get(tp, ()))


class Collector:
    """Builds snapshots of one cluster; keep one for the life of the dashboard (it pools
    connections, and remembers brokers that have gone away so they show as down)."""

    def __init__(self, bootstrap: str, *, data_dir: Path | None = None,
                 request_timeout_ms: int = 5000, clock: Callable[[], float] = time.time):
        self.location = bootstrap
        self._timeout_ms = request_timeout_ms
        self.admin = Admin(bootstrap, client_id="slog-dashboard",
                           request_timeout_ms=request_timeout_ms)
        self._clock = clock
        self._data_dir = data_dir
        self._log_events: MetadataLogEvents | None = None
        self._group_log: GroupMetadataLog | None = None
        self._data_dir_checked = False
        self._seen_brokers: dict[int, BrokerInfo] = {}
        self._refreshes = 0
        self._broker_ids: set[int] = set()  # as of the last refresh
        self._coordinators: dict[str, int] = {}  # group → coordinator, as of the last refresh
        self._group_types: dict[str, str] = {}  # group → classic or consumer (ListGroups v5)
        self._log_starts: dict[TopicPartition, int] = {}
        self._leaders: dict[TopicPartition, int] = {}  # partition → leader, last refresh
        self._open_transactions: dict[str, int] = {}  # id → coordinator, last refresh
        self._unstable: set[TopicPartition] = set()  # LSO < HW at the last refresh

    def close(self) -> None:
        self.admin.close()

    def new_admin(self) -> Admin:
        """A separate client for actions, which run beside refreshes."""
        return Admin(self.location, client_id="slog-dashboard-action",
                     request_timeout_ms=max(self._timeout_ms, 10_000))

    # -- one refresh -------------------------------------------------------------------
    def refresh(self) -> Refresh:
        warnings: list[str] = []
        exchange = _Exchange(self.admin.cluster, warnings)
        log_dirs: dict[int, dict[TopicPartition, Any]] = {}
        coordinators: dict[str, int] = {}
        answers = _GroupAnswers()
        txns = _TransactionAnswers()
        try:
            # What does not depend on fresh metadata goes out first, to the brokers and
            # coordinators of the last refresh, so the brokers work while Metadata runs.
            asked = dict(self._coordinators)
            offsets = _Offsets()
            with_starts = self._refreshes % LOG_START_EVERY == 0
            self._refreshes += 1
            for broker_id in sorted(self._broker_ids):
                self._ask_broker(exchange, broker_id, log_dirs, coordinators, txns)
            self._ask_groups(exchange, asked, answers)
            self._ask_offsets(exchange, self._leaders, offsets, with_starts)
            self._ask_transactions(exchange, self._open_transactions, txns)
            self._ask_producers(exchange, {tp: self._leaders[tp] for tp in self._unstable
                                           if tp in self._leaders}, txns)
            meta = self.admin.cluster.refresh_metadata(None)  # raises when nobody answers
            taken_at = self._clock()
            for broker_id in sorted(set(meta.brokers) - self._broker_ids):
                self._ask_broker(exchange, broker_id, log_dirs, coordinators, txns)
            leaders = _leaders(meta)
            if leaders != self._leaders:  # leaders moved (or first refresh): ask the new ones
                with_starts = True
                self._ask_offsets(exchange, leaders, offsets, with_starts)
            exchange.run()
            # Groups that are new, or whose coordinator moved, and transactions and
            # unstable partitions not described yet: one more round, rarely.
            moved = {g: b for g, b in coordinators.items() if asked.get(g) != b}
            if moved:
                self._ask_groups(exchange, moved, answers)
            self._ask_transactions(exchange, txns.undescribed(), txns)
            self._ask_producers(exchange, {tp: leaders[tp] for tp in offsets.unstable()
                                           if tp in leaders and tp not in txns.producers}, txns)
            exchange.run()
        except BaseException:
            exchange.abandon()  # unread answers must not meet the next refresh's requests
            raise
        self._broker_ids, self._coordinators = set(meta.brokers), coordinators
        if with_starts:
            self._log_starts = offsets.start
        else:  # between the tenth refreshes, the log starts of the last time they were asked
            offsets.start.update(self._log_starts)
        self._leaders = leaders
        self._open_transactions, self._unstable = txns.coordinators(), offsets.unstable()
        self._attach_data_dir(meta.cluster_id)
        events = self._metadata_log_events()
        groups = tuple(replace(answers.group(g, coordinators[g], offsets.high_watermark),
                               group_type=self._group_types.get(g, "classic"))
                       for g in sorted(coordinators))
        snapshot = ClusterSnapshot(
            taken_at=taken_at, cluster_id=meta.cluster_id, controller_id=meta.controller_id,
            brokers=self._brokers(meta), topics=_topics(meta, offsets, log_dirs, txns),
            groups=self._with_generations(meta, groups),
            controller_epoch=self._controller_epoch(),
            broker_bytes={b: sum(r.size for r in replicas.values())
                          for b, replicas in log_dirs.items()},
            warnings=tuple(warnings + txns.warnings),
            transactions=txns.open_transactions())
        return Refresh(self._with_fencing(snapshot), events)

    def _ask_broker(self, exchange: _Exchange, broker_id: int,
                    log_dirs: dict[int, dict[TopicPartition, Any]],
                    coordinators: dict[str, int], txns: _TransactionAnswers) -> None:
        """DescribeLogDirs, ListGroups and ListTransactions (a broker lists the groups and
        the open transactions it coordinates)."""
        versions = self._versions(broker_id)
        if ApiKey.DESCRIBE_LOG_DIRS in versions:
            exchange.send(broker_id, ApiKey.DESCRIBE_LOG_DIRS, {"topics": None},
                          lambda r: log_dirs.__setitem__(broker_id, Admin.log_dirs_from(r)),
                          version=Admin.log_dirs_version)
        def listed(response: Any) -> None:
            for g in response.groups:
                coordinators[g.group_id] = broker_id
                self._group_types[g.group_id] = getattr(g, "group_type", "") or "classic"

        exchange.send(broker_id, ApiKey.LIST_GROUPS, {"states_filter": []}, listed,
                      version=_group_version(ApiKey.LIST_GROUPS))
        if ApiKey.LIST_TRANSACTIONS in versions:
            exchange.send(broker_id, ApiKey.LIST_TRANSACTIONS,
                          list_transactions_body(OPEN_TRANSACTION_STATES),
                          txns.on_list(broker_id))

    def _ask_offsets(self, exchange: _Exchange, leaders: dict[TopicPartition, int],
                     offsets: _Offsets, with_starts: bool) -> None:
        led: dict[int, list[TopicPartition]] = defaultdict(list)
        for tp, broker_id in leaders.items():
            led[broker_id].append(tp)
        kinds = [(offsets.high_watermark, LATEST, CONSUMER, READ_UNCOMMITTED),
                 (offsets.log_end, LATEST, DEBUGGING_REPLICA, READ_UNCOMMITTED),
                 (offsets.last_stable, LATEST, CONSUMER, READ_COMMITTED)]
        if with_starts:
            kinds.append((offsets.start, EARLIEST, CONSUMER, READ_UNCOMMITTED))
        for broker_id, tps in sorted(led.items()):
            for target, timestamp, replica, isolation in kinds:
                exchange.send(broker_id, ApiKey.LIST_OFFSETS,
                              _list_offsets_body(tps, timestamp, replica, isolation),
                              _merge_offsets_into(target))

    def _ask_transactions(self, exchange: _Exchange, coordinators: dict[str, int],
                          txns: _TransactionAnswers) -> None:
        """One DescribeTransactions per coordinator, for the ids it listed."""
        by_node: dict[int, list[str]] = defaultdict(list)
        for txn_id, node in coordinators.items():
            by_node[node].append(txn_id)
        for node, ids in sorted(by_node.items()):
            if ApiKey.DESCRIBE_TRANSACTIONS in self._versions(node):
                exchange.send(node, ApiKey.DESCRIBE_TRANSACTIONS,
                              {"transactional_ids": sorted(ids)}, txns.on_describe(node))

    def _ask_producers(self, exchange: _Exchange, leaders: dict[TopicPartition, int],
                       txns: _TransactionAnswers) -> None:
        """One DescribeProducers per leader, for its partitions with a transaction open."""
        led: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
        for tp, broker_id in sorted(leaders.items()):
            led[broker_id][tp.topic].append(tp.partition)
        for broker_id, topics in sorted(led.items()):
            if ApiKey.DESCRIBE_PRODUCERS in self._versions(broker_id):
                exchange.send(broker_id, ApiKey.DESCRIBE_PRODUCERS,
                              describe_producers_body(topics), txns.on_producers)

    def _versions(self, broker_id: int) -> dict[int, tuple[int, int]]:
        try:
            return self.admin.cluster.connection(broker_id, CHANNEL).versions
        except (ConnectionError, KafkaError):
            return {}

    @staticmethod
    def _ask_groups(exchange: _Exchange, coordinators: dict[str, int],
                    answers: _GroupAnswers) -> None:
        """One DescribeGroups per coordinator and one OffsetFetch per group, pipelined."""
        by_node: dict[int, list[str]] = defaultdict(list)
        for group_id, node in coordinators.items():
            by_node[node].append(group_id)
        for node, ids in sorted(by_node.items()):
            exchange.send(node, ApiKey.DESCRIBE_GROUPS,
                          {"groups": ids, "include_authorized_operations": False},
                          answers.on_describe, version=_group_version(ApiKey.DESCRIBE_GROUPS))
            for group_id in ids:
                exchange.send(node, ApiKey.OFFSET_FETCH, fetch_body(group_id, None),
                              answers.on_offsets(group_id),
                              version=_group_version(ApiKey.OFFSET_FETCH))

    # -- brokers and the data dir ------------------------------------------------------
    def _brokers(self, meta: ClusterMetadata) -> tuple[BrokerInfo, ...]:
        for b in meta.brokers.values():
            self._seen_brokers[b.node_id] = BrokerInfo(b.node_id, b.host, b.port, True,
                                                       rack=b.rack)
        referenced = {r for t in meta.topics.values() for p in t.partitions.values()
                      for r in p.replicas}
        for broker_id in referenced - self._seen_brokers.keys():
            self._seen_brokers[broker_id] = BrokerInfo(broker_id, None, None, False)
        return tuple(b if b.broker_id in meta.brokers else replace(b, alive=False)
                     for _, b in sorted(self._seen_brokers.items()))

    def _attach_data_dir(self, cluster_id: str | None) -> None:
        """Read the data dir's logs from now on, if that data dir is this cluster's."""
        if not self._data_dir_checked and self._data_dir is not None:
            self._data_dir_checked = True
            if read_cluster_id(DataDirLayout(self._data_dir)) == cluster_id:
                self._log_events = MetadataLogEvents(self._data_dir)
                self._group_log = GroupMetadataLog(self._data_dir)

    def _metadata_log_events(self) -> list[Event]:
        """Events from the data dir's metadata log."""
        if self._log_events is None:
            return []
        try:
            return list(self._log_events.poll())
        except (OSError, ValueError):
            return []

    def _with_generations(self, meta: ClusterMetadata, groups: tuple[GroupInfo, ...]
                          ) -> tuple[GroupInfo, ...]:
        """Generation and leader from the group metadata records in the data dir, which
        DescribeGroups does not carry (without the data dir they stay unknown)."""
        if self._group_log is None or not groups:
            return groups
        topic = meta.topics.get(OFFSETS_TOPIC)
        if topic is None or topic.error_code:
            return groups
        self._group_log.poll({p.partition: (p.leader, p.leader_epoch)
                              for p in topic.partitions.values() if p.leader >= 0})
        known = self._group_log.groups(g.group_id for g in groups)
        return tuple(g if (v := known.get(g.group_id)) is None
                     else replace(g, generation=v.generation, leader=v.leader or None)
                     for g in groups)

    @property
    def reads_metadata_log(self) -> bool:
        return self._log_events is not None

    def _controller_epoch(self) -> int | None:
        return self._log_events.image.controller_epoch if self._log_events else None

    def _with_fencing(self, snapshot: ClusterSnapshot) -> ClusterSnapshot:
        """Fenced brokers, which the protocol cannot tell from dead ones, from the log (and
        the address of a broker that was already down when the dashboard started)."""
        if self._log_events is None:
            return snapshot
        registered = self._log_events.image.brokers
        brokers = []
        for b in snapshot.brokers:
            reg = registered.get(b.broker_id)
            if reg is not None:
                b = replace(b, fenced=reg.fenced, host=b.host or reg.host,
                            port=b.port or reg.port)
            brokers.append(b)
        return replace(snapshot, brokers=tuple(brokers))


def _leaders(meta: ClusterMetadata) -> dict[TopicPartition, int]:
    return {TopicPartition(t.name, p.partition): p.leader for t in meta.topics.values()
            for p in t.partitions.values() if p.leader in meta.brokers}


def _group_version(api_key: int) -> Callable[[BrokerConnection], int]:
    from slog.client.group_requests import version

    return lambda conn: version(conn, api_key)


def _topics(meta: ClusterMetadata, offsets: _Offsets,
            log_dirs: dict[int, dict[TopicPartition, Any]],
            txns: _TransactionAnswers) -> tuple[TopicInfo, ...]:
    topics = []
    for name, t in sorted(meta.topics.items()):
        if t.error_code:
            continue
        parts = []
        for index, p in sorted(t.partitions.items()):
            tp = TopicPartition(name, index)
            replica = log_dirs.get(p.leader, {}).get(tp)
            parts.append(PartitionInfo(
                topic=name, partition=index, leader=p.leader, leader_epoch=p.leader_epoch,
                replicas=p.replicas, isr=p.isr,
                offline_replicas=tuple(r for r in p.replicas if r not in meta.brokers),
                log_start=offsets.start.get(tp, -1),
                high_watermark=offsets.high_watermark.get(tp, -1),
                log_end=offsets.log_end.get(tp, -1),
                size=replica.size if replica is not None else -1,
                last_stable=offsets.last_stable.get(tp, -1), open_transactions=txns.open_on(tp)))
        topics.append(TopicInfo(name, t.is_internal, tuple(parts)))
    return tuple(topics)


def _group(group_id: str, coordinator: int, described: Any, committed: dict[TopicPartition, int],
           high_watermarks: dict[TopicPartition, int], error: str | None) -> GroupInfo:
    members: tuple[MemberInfo, ...]
    if described is None or described.error_code:
        state, protocol_type, assignor, members = "Unknown", "", "", ()
    else:
        consumer = described.protocol_type == PROTOCOL_TYPE
        state, protocol_type = described.group_state, described.protocol_type
        assignor = described.protocol_data
        members = tuple(_member(m, consumer) for m in described.members)
    owners = {tp: m.member_id for m in members for tp in m.assignment}
    wanted = set(committed) | {TopicPartition(*tp) for tp in owners}
    offsets = tuple(GroupOffset(tp.topic, tp.partition, committed.get(tp, -1),
                                high_watermarks.get(tp, -1), owners.get(tp))
                    for tp in sorted(wanted))
    return GroupInfo(group_id, state, protocol_type, assignor, coordinator, members, offsets,
                     error=error)
