"""The admin client: topics, partitions, configs, offsets and the cluster.

Error style, the same for every method: a method returns its result when
everything worked and raises a :class:`KafkaError` otherwise. When a call
covers several items (topics, partitions) and some fail, the error of the
first failed item is raised (so ``except TopicAlreadyExistsError`` reads
naturally for one topic); its ``errors`` maps every failed item to its error,
and its ``results`` holds the results of the items that worked, in the shape
the method would have returned.

Requests that change metadata (CreateTopics, DeleteTopics, CreatePartitions,
IncrementalAlterConfigs, AlterPartitionReassignments, ElectLeaders,
AlterClientQuotas) go to the
controller named in fresh metadata (any broker would forward them; this saves
the hop) and are retried once after NOT_CONTROLLER (the controller moved). A
cluster naming no controller, or one it does not list (KRaft, proxies), gets
them on any broker.
Everything else goes to any broker, or to partition leaders for ListOffsets and
DeleteRecords, or to the broker itself for its configs.
For elections, ELECTION_NOT_NEEDED is an outcome, not a failure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from slog.client.cluster import ClusterClient, client_tls
from slog.client.delete_records import delete_records
from slog.client.errors import InvalidArgumentError, KafkaError, raise_for_items
from slog.client.offsets import READ_COMMITTED, OffsetSpec, list_offsets
from slog.client.types import (
    ClusterDescription,
    ConfigEntry,
    CreatedTopic,
    NewTopic,
    OffsetAndTimestamp,
    PartitionDescription,
    TopicDescription,
    TopicListing,
    TopicPartition,
)
from slog.core.quotas import ComponentFilter as QuotaFilter
from slog.core.quotas import QuotaEntity, describe_entity
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode

__all__ = ["Admin", "ElectionResult", "PartitionReassignment", "ReplicaLogDir"]

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_GROUP = 32
OP_SET, OP_DELETE = 0, 1
CONFIG_SOURCES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG",
    8: "GROUP_CONFIG",
}
_NOT_CONTROLLER = int(ErrorCode.not_controller)
_UNKNOWN_TOPIC = int(ErrorCode.unknown_topic_or_partition)
_ELECTION_NOT_NEEDED = int(ErrorCode.election_not_needed)
ELECTION_TYPES = {"preferred": 0, "unclean": 1}


@dataclass(frozen=True)
class PartitionReassignment:
    """A reassignment in progress: ``replicas`` is the full current list."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


@dataclass(frozen=True)
class ElectionResult:
    """Partitions that got a new leader, and those whose leader was already right."""

    elected: list[TopicPartition] = field(default_factory=list)
    not_needed: list[TopicPartition] = field(default_factory=list)


@dataclass(frozen=True)
class ReplicaLogDir:
    """One replica as DescribeLogDirs reports it: bytes on disk, and how far its log
    end is behind the high watermark its broker knows."""

    size: int
    offset_lag: int
    log_dir: str = ""  # the directory on its broker that holds it


def _replicas(target: Sequence[int] | None) -> list[int] | None:
    return None if target is None else list(target)


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = {}
    for topic, partition in partitions:  # TopicPartition or a plain (topic, partition)
        grouped.setdefault(topic, []).append(partition)
    return grouped


def _broker_resource(broker_id: int | None) -> str:
    return "" if broker_id is None else str(broker_id)


def _config_entries(result: Any) -> dict[str, ConfigEntry]:
    return {c.name: ConfigEntry(name=c.name, value=c.value,
                                source=CONFIG_SOURCES.get(getattr(c, "config_source", 0),
                                                          "UNKNOWN"),
                                read_only=c.read_only, sensitive=c.is_sensitive)
            for c in result.configs}


def _item_errors(rows: Iterable[Any], name: Callable[[Any], str]) -> dict[str, KafkaError]:
    return {name(r): KafkaError.for_code(r.error_code, getattr(r, "error_message", None),
                                         item=name(r))
            for r in rows if r.error_code}


class Admin:
    """Administer a Kafka-compatible cluster (slog or Kafka)."""

    def __init__(self, bootstrap: str | Iterable[str], *, client_id: str = "slog-admin",
                 request_timeout_ms: int = 30_000, security_protocol: str | None = None,
                 ssl_cafile: str | None = None, ssl_certfile: str | None = None,
                 ssl_keyfile: str | None = None):
        self.timeout_ms = request_timeout_ms
        self._cluster = ClusterClient(bootstrap, client_id=client_id,
                                      request_timeout_ms=request_timeout_ms,
                                      tls=client_tls(security_protocol, ssl_cafile,
                                                     ssl_certfile, ssl_keyfile))

    @property
    def cluster(self) -> ClusterClient:
        return self._cluster

    def _to_controller(self, api_key: int, body: dict[str, Any],
                       rows: Callable[[Any], Iterable[Any]]) -> Any:
        """Send to the controller; once more after a refresh if it says NOT_CONTROLLER."""
        response = None
        for _ in range(2):
            try:
                response = self._cluster.controller_request(api_key, body)
            except ConnectionError:
                response = None
                continue
            if not any(r.error_code == _NOT_CONTROLLER for r in rows(response)):
                return response
        if response is None:
            return self._cluster.controller_request(api_key, body)  # raise its error
        return response

    # -- topics ----------------------------------------------------------------------
    def create_topics(self, topics: Iterable[NewTopic], validate_only: bool = False
                      ) -> dict[str, CreatedTopic]:
        """Create topics; returns what was created, by name (raises as the module says)."""
        specs = list(topics)
        body = {
            "topics": [{
                "name": t.name,
                "num_partitions": t.partitions,
                "replication_factor": t.replication_factor,
                "assignments": [{"partition_index": p, "broker_ids": list(ids)}
                                for p, ids in sorted((t.assignment or {}).items())],
                "configs": [{"name": k, "value": v} for k, v in t.configs.items()],
            } for t in specs],
            "timeout": self.timeout_ms,
            "validate_only": validate_only,
        }
        response = self._to_controller(ApiKey.CREATE_TOPICS, body, lambda r: r.topics)
        created = {
            r.name: CreatedTopic(
                r.name,
                str(r.topic_id) if getattr(r, "topic_id", None) else None,
                getattr(r, "num_partitions", -1),
                getattr(r, "replication_factor", -1))
            for r in response.topics if not r.error_code
        }
        raise_for_items(_item_errors(response.topics, lambda r: r.name), created)
        return created

    def delete_topics(self, names: Iterable[str]) -> None:
        names = list(names)
        body = {"topics": [{"name": n} for n in names], "topic_names": names,
                "timeout": self.timeout_ms}
        response = self._to_controller(ApiKey.DELETE_TOPICS, body, lambda r: r.responses)
        raise_for_items(_item_errors(response.responses, lambda r: r.name))

    def create_partitions(self, topic: str, total: int,
                          assignment: list[list[int]] | None = None,
                          validate_only: bool = False) -> None:
        """Grow ``topic`` to ``total`` partitions (``assignment``: replicas of each new one)."""
        body = {
            "topics": [{"name": topic, "count": total,
                        "assignments": None if assignment is None else
                        [{"broker_ids": ids} for ids in assignment]}],
            "timeout": self.timeout_ms,
            "validate_only": validate_only,
        }
        response = self._to_controller(ApiKey.CREATE_PARTITIONS, body, lambda r: r.results)
        raise_for_items(_item_errors(response.results, lambda r: r.name))

    def list_topics(self, include_internal: bool = False) -> list[TopicListing]:
        """Every topic, sorted by name."""
        meta = self._cluster.refresh_metadata(None)
        return [
            TopicListing(t.name, t.topic_id, len(t.partitions), t.is_internal)
            for name, t in sorted(meta.topics.items())
            if not t.error_code and (include_internal or not t.is_internal)
        ]

    def describe_topics(self, names: Iterable[str] | None = None,
                        include_internal: bool = False) -> list[TopicDescription]:
        """Partitions of each topic with leaders, replicas, ISR and offsets.

        ``log_end_offset`` is the high watermark: Kafka shows the real LEO
        only to replicas. ``names=None`` describes every topic.
        """
        wanted = None if names is None else list(names)
        meta = self._cluster.refresh_metadata(wanted)
        topics = [meta.topics[n] for n in (wanted if wanted is not None else sorted(meta.topics))
                  if n in meta.topics]
        failures = {t.name: KafkaError.for_code(t.error_code, item=t.name)
                    for t in topics if t.error_code}
        for name in wanted or ():
            if name not in meta.topics:
                failures[name] = KafkaError.for_code(_UNKNOWN_TOPIC, item=name)
        good = [t for t in topics if not t.error_code
                and (include_internal or wanted is not None or not t.is_internal)]
        tps = [TopicPartition(t.name, p) for t in good for p in sorted(t.partitions)]
        starts = list_offsets(self._cluster, dict.fromkeys(tps, "earliest")) if tps else {}
        ends = list_offsets(self._cluster, dict.fromkeys(tps, "latest")) if tps else {}
        stable = list_offsets(self._cluster, dict.fromkeys(tps, "latest"),
                              isolation_level=READ_COMMITTED) if tps else {}

        def offset(result: Any) -> int:
            return result.offset if isinstance(result, OffsetAndTimestamp) else -1

        described = []
        for t in good:
            parts = []
            for index, p in sorted(t.partitions.items()):
                tp = TopicPartition(t.name, index)
                hw = offset(ends.get(tp))
                parts.append(PartitionDescription(
                    partition=index, leader=p.leader, leader_epoch=p.leader_epoch,
                    replicas=p.replicas, isr=p.isr, offline_replicas=p.offline_replicas,
                    log_start_offset=offset(starts.get(tp)), high_watermark=hw,
                    log_end_offset=hw, last_stable_offset=offset(stable.get(tp))))
            described.append(TopicDescription(t.name, t.topic_id, t.is_internal, parts))
        raise_for_items(failures, described)
        return described

    # -- configs ---------------------------------------------------------------------
    def describe_configs(self, topic: str) -> dict[str, ConfigEntry]:
        """Every config of ``topic`` with its value and where it comes from."""
        return self.describe_topic_configs([topic])[topic]

    def describe_topic_configs(self, topics: Iterable[str], keys: Iterable[str] | None = None
                               ) -> dict[str, dict[str, ConfigEntry]]:
        """The configs (all, or just ``keys``) of several topics in one request."""
        wanted = None if keys is None else list(keys)
        body = {"resources": [{"resource_type": RESOURCE_TOPIC, "resource_name": topic,
                               "configuration_keys": wanted} for topic in topics],
                "include_synonyms": False, "include_documentation": False}
        response = self._cluster.request_any(ApiKey.DESCRIBE_CONFIGS, body)
        found = {r.resource_name: _config_entries(r) for r in response.results
                 if not r.error_code}
        raise_for_items(_item_errors(response.results, lambda r: r.resource_name), found)
        return found

    def describe_broker_configs(self, broker_id: int | None = None) -> dict[str, ConfigEntry]:
        """Every setting of broker ``broker_id`` with its source, asked of that broker (only
        it knows its static settings); with None, the cluster-wide dynamic defaults."""
        if broker_id is not None:
            self._cluster.refresh_metadata([])
        return self._describe_one(RESOURCE_BROKER, _broker_resource(broker_id), broker_id)

    def describe_group_configs(self, group: str) -> dict[str, ConfigEntry]:
        """A group's configs (Kafka 4's GROUP resource): its own overrides and, for the
        rest, what the broker gives every group. A group need not exist to have them."""
        return self._describe_one(RESOURCE_GROUP, group)

    def _describe_one(self, resource_type: int, name: str, broker_id: int | None = None
                      ) -> dict[str, ConfigEntry]:
        body = {"resources": [{"resource_type": resource_type, "resource_name": name,
                               "configuration_keys": None}],
                "include_synonyms": False, "include_documentation": False}
        if broker_id is None:
            response = self._cluster.request_any(ApiKey.DESCRIBE_CONFIGS, body)
        else:
            response = self._cluster.connection(broker_id).request(ApiKey.DESCRIBE_CONFIGS, body)
        [result] = response.results
        if result.error_code:
            raise KafkaError.for_code(result.error_code, result.error_message,
                                      item=result.resource_name)
        return _config_entries(result)

    def alter_configs(self, topic: str, set: Mapping[str, str] | None = None,
                      delete: Iterable[str] = (), validate_only: bool = False) -> None:
        """Set and/or delete (back to the default) topic configs, incrementally."""
        self._alter_incrementally(RESOURCE_TOPIC, topic, set, delete, validate_only)

    def alter_broker_configs(self, broker_id: int | None, set: Mapping[str, str] | None = None,
                             delete: Iterable[str] = (), validate_only: bool = False) -> None:
        """Set and/or delete dynamic configs of broker ``broker_id`` or, with None, the
        cluster-wide default; they take effect without a restart."""
        self._alter_incrementally(RESOURCE_BROKER, _broker_resource(broker_id), set, delete,
                                  validate_only)

    def alter_group_configs(self, group: str, set: Mapping[str, str] | None = None,
                            delete: Iterable[str] = (), validate_only: bool = False) -> None:
        """Set and/or delete (back to the broker's value) a group's config overrides."""
        self._alter_incrementally(RESOURCE_GROUP, group, set, delete, validate_only)

    def _alter_incrementally(self, resource_type: int, name: str,
                             set: Mapping[str, str] | None, delete: Iterable[str],
                             validate_only: bool) -> None:
        ops = [{"name": k, "config_operation": OP_SET, "value": str(v)}
               for k, v in (set or {}).items()]
        ops += [{"name": k, "config_operation": OP_DELETE, "value": None} for k in delete]
        body = {"resources": [{"resource_type": resource_type, "resource_name": name,
                               "configs": ops}],
                "validate_only": validate_only}
        response = self._to_controller(ApiKey.INCREMENTAL_ALTER_CONFIGS, body,
                                       lambda r: r.responses)
        raise_for_items(_item_errors(response.responses, lambda r: r.resource_name))

    # -- client quotas (KIP-546) ---------------------------------------------------------
    def describe_client_quotas(self, components: Iterable[QuotaFilter] = (),
                               strict: bool = False) -> dict[QuotaEntity, dict[str, float]]:
        """The quotas of the entities matching every component (none: all entities);
        ``strict``: only entities with no other component."""
        body = {"components": [{"entity_type": c.entity_type, "match_type": c.match_type,
                                "match": c.match} for c in components],
                "strict": strict}
        response = self._cluster.request_any(ApiKey.DESCRIBE_CLIENT_QUOTAS, body)
        if response.error_code:
            raise KafkaError.for_code(response.error_code, response.error_message)
        return {tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)):
                {v.key: float(v.value) for v in entry.values}
                for entry in response.entries or ()}

    def alter_client_quotas(self, changes: Mapping[QuotaEntity, Mapping[str, float | None]],
                            validate_only: bool = False) -> None:
        """Set quota keys of entities (a value of None removes the key)."""
        entries = [{"entity": [{"entity_type": kind, "entity_name": name}
                               for kind, name in entity],
                    "ops": [{"key": key, "value": 0.0 if value is None else float(value),
                             "remove": value is None} for key, value in ops.items()]}
                   for entity, ops in changes.items()]
        response = self._to_controller(ApiKey.ALTER_CLIENT_QUOTAS,
                                       {"entries": entries, "validate_only": validate_only},
                                       lambda r: r.entries)
        raise_for_items(_item_errors(response.entries, lambda r: describe_entity(
            tuple(sorted((e.entity_type, e.entity_name) for e in r.entity)))))

    # -- reassignments and elections ---------------------------------------------------
    def alter_partition_reassignments(
            self, targets: Mapping[TopicPartition, Sequence[int] | None],
            allow_replication_factor_change: bool = True) -> None:
        """Move partitions to new replica lists; a target of None cancels a reassignment.

        Returns once the controller has accepted them; the data moves in the
        background (see ``list_partition_reassignments``). Without
        ``allow_replication_factor_change`` a broker that knows KIP-860 (v1) refuses a
        target with another replica count (INVALID_REPLICATION_FACTOR); an older one
        never sees the flag.
        """
        topics = [
            {"name": topic, "partitions": [
                {"partition_index": p, "replicas": _replicas(targets[TopicPartition(topic, p)])}
                for p in numbers]}
            for topic, numbers in _by_topic(targets).items()]
        body = {"timeout": self.timeout_ms, "topics": topics,
                "allow_replication_factor_change": allow_replication_factor_change}
        response = self._to_controller(ApiKey.ALTER_PARTITION_REASSIGNMENTS, body,
                                       lambda r: [r])
        if response.error_code:
            raise KafkaError.for_code(response.error_code, response.error_message)
        failures: dict[str, KafkaError] = {}
        for t in response.responses:
            for p in t.partitions:
                if p.error_code:
                    item = str(TopicPartition(t.name, p.partition_index))
                    failures[item] = KafkaError.for_code(p.error_code, p.error_message, item=item)
        raise_for_items(failures)

    def list_partition_reassignments(self, partitions: Iterable[TopicPartition] | None = None
                                     ) -> dict[TopicPartition, PartitionReassignment]:
        """Reassignments in progress (of ``partitions``, or all of them)."""
        topics = None if partitions is None else [
            {"name": topic, "partition_indexes": numbers}
            for topic, numbers in _by_topic(partitions).items()]
        response = self._to_controller(ApiKey.LIST_PARTITION_REASSIGNMENTS,
                                       {"timeout": self.timeout_ms, "topics": topics},
                                       lambda r: [r])
        if response.error_code:
            raise KafkaError.for_code(response.error_code, response.error_message)
        return {TopicPartition(t.name, p.partition_index): PartitionReassignment(
                    tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas))
                for t in response.topics for p in t.partitions}

    def elect_leaders(self, election_type: Literal["preferred", "unclean"] = "preferred",
                      partitions: Iterable[TopicPartition] | None = None) -> ElectionResult:
        """Preferred (back to the first replica) or unclean (any live replica of an
        offline partition) elections, for ``partitions`` or every partition.

        With ``partitions=None`` the broker reports only partitions that needed
        an election. Failures raise as the module says, with the result attached.
        """
        if election_type not in ELECTION_TYPES:
            raise InvalidArgumentError(f"election_type must be one of {sorted(ELECTION_TYPES)}")
        topics = None if partitions is None else [
            {"topic": topic, "partitions": numbers}
            for topic, numbers in _by_topic(partitions).items()]
        body = {"election_type": ELECTION_TYPES[election_type], "topic_partitions": topics,
                "timeout": self.timeout_ms}
        response = self._to_controller(ApiKey.ELECT_LEADERS, body, lambda r: [r])
        if getattr(response, "error_code", 0):
            raise KafkaError.for_code(response.error_code)
        result = ElectionResult()
        failures: dict[str, KafkaError] = {}
        for topic in response.replica_election_results:
            for p in topic.partition_result:
                tp = TopicPartition(topic.topic, p.partition_id)
                if p.error_code == 0:
                    result.elected.append(tp)
                elif p.error_code == _ELECTION_NOT_NEEDED:
                    result.not_needed.append(tp)
                else:
                    failures[str(tp)] = KafkaError.for_code(p.error_code, p.error_message,
                                                            item=str(tp))
        raise_for_items(failures, result)
        return result

    # -- offsets and cluster -----------------------------------------------------------
    def list_offsets(self, specs: Mapping[TopicPartition, OffsetSpec], *,
                     isolation_level: int = 0) -> dict[TopicPartition, OffsetAndTimestamp]:
        """Offsets by ``"earliest"``, ``"latest"``, ``"max_timestamp"`` or a timestamp (ms).

        For a timestamp, the offset is that of the first record at or after
        it, or -1 if there is none.
        """
        results = list_offsets(self._cluster, specs, isolation_level=isolation_level)
        found = {tp: r for tp, r in results.items() if isinstance(r, OffsetAndTimestamp)}
        raise_for_items({str(tp): r for tp, r in results.items() if isinstance(r, KafkaError)},
                        found)
        return found

    def delete_records(self, offsets: Mapping[TopicPartition, int], *,
                       timeout_ms: int | None = None) -> dict[TopicPartition, int]:
        """Delete every record below each partition's offset (-1: below its high
        watermark); returns each partition's low watermark (its replicas' lowest log
        start offset) afterwards.

        Leaders wait up to ``timeout_ms`` (half the request timeout by default) for
        their followers; REQUEST_TIMED_OUT means the leader deleted but a follower
        had not caught up yet. An offset past the high watermark is
        OFFSET_OUT_OF_RANGE.
        """
        wait_ms = self.timeout_ms // 2 if timeout_ms is None else timeout_ms
        results = delete_records(self._cluster, offsets, timeout_ms=wait_ms)
        done = {tp: r for tp, r in results.items() if isinstance(r, int)}
        raise_for_items({str(tp): r for tp, r in results.items() if isinstance(r, KafkaError)},
                        done)
        return done

    def describe_cluster(self) -> ClusterDescription:
        meta = self._cluster.refresh_metadata([])
        return ClusterDescription(meta.cluster_id, meta.controller_id,
                                  sorted(meta.brokers.values(), key=lambda b: b.node_id))

    def close(self) -> None:
        self._cluster.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- log dirs (appended) -------------------------------------------------------------
    DESCRIBE_LOG_DIRS_VERSION = 4  # v4 adds a top-level error code; v5 directory ids

    @classmethod
    def log_dirs_version(cls, conn: Any) -> int:
        """The DescribeLogDirs version to use on ``conn`` (raises if it has none we speak)."""
        from slog.client.connection import UnsupportedApiError

        offered = conn.versions.get(ApiKey.DESCRIBE_LOG_DIRS, (0, -1))
        chosen = min(cls.DESCRIBE_LOG_DIRS_VERSION, offered[1])
        if chosen < max(offered[0], 1):
            raise UnsupportedApiError(ApiKey.DESCRIBE_LOG_DIRS, conn.address, offered,
                                      (1, cls.DESCRIBE_LOG_DIRS_VERSION))
        return chosen

    @staticmethod
    def log_dirs_from(response: Any) -> dict[TopicPartition, ReplicaLogDir]:
        """The replicas of one DescribeLogDirs response (every log dir of that broker)."""
        if getattr(response, "error_code", 0):
            raise KafkaError.for_code(response.error_code)
        return {TopicPartition(t.name, p.partition_index):
                ReplicaLogDir(p.partition_size, p.offset_lag, result.log_dir)
                for result in response.results if not result.error_code
                for t in result.topics for p in t.partitions if not p.is_future_key}

    def describe_log_dirs(self, broker_ids: Iterable[int] | None = None
                          ) -> dict[int, dict[TopicPartition, ReplicaLogDir]]:
        """Every replica's size on each broker (all brokers by default), asking them all
        at once. A broker that cannot answer maps to its error in the raised error."""
        meta = self._cluster.refresh_metadata([])
        ids = sorted(meta.brokers) if broker_ids is None else list(broker_ids)
        sent, found, failures = [], {}, {}
        for broker_id in ids:
            try:
                conn = self._cluster.connection(broker_id, "log-dirs")
                conn.send(ApiKey.DESCRIBE_LOG_DIRS, {"topics": None},
                          version=self.log_dirs_version(conn))
                sent.append((broker_id, conn))
            except (ConnectionError, KafkaError) as exc:
                failures[f"broker {broker_id}"] = _as_kafka_error(exc, broker_id)
        for broker_id, conn in sent:
            try:
                found[broker_id] = self.log_dirs_from(conn.receive()[1])
            except (ConnectionError, KafkaError) as exc:
                self._cluster.close_connection(broker_id, "log-dirs")
                failures[f"broker {broker_id}"] = _as_kafka_error(exc, broker_id)
        raise_for_items(failures, found)
        return found


def _as_kafka_error(exc: Exception, broker_id: int) -> KafkaError:
    if isinstance(exc, KafkaError):
        return exc
    return KafkaError.for_code(int(ErrorCode.broker_not_available), str(exc),
                               item=f"broker {broker_id}")
