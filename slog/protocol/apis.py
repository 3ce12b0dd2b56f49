"""The Kafka APIs slog speaks, their version ranges, and kio schema lookups.

Version ranges follow two rules:

* **Low minimums.** librdkafka (and kafka-python / aiokafka) only enable a
  feature when the client's range and the broker's range overlap, so we go as
  low as kio has schemas for. Old versions cost nothing: kio decodes them all
  into version-specific dataclasses.
* **Honest maximums.** The maximum is the highest version whose *semantics* a
  simple single-machine broker honours, clamped to what kio 0.6.5 ships. The
  reason for each cap is written next to it.

The broker advertises only the subset it implements, via `api_versions_table`.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Iterable
from typing import Any, NamedTuple

from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map

from slog.protocol.errors import UnsupportedVersionError

__all__ = [
    "ALL_APIS",
    "API_BY_KEY",
    "ApiKey",
    "ApiSpec",
    "api_versions_table",
    "is_flexible_request",
    "kio_version_range",
    "request_class",
    "response_class",
    "warm_up",
]


class ApiKey(enum.IntEnum):
    """Kafka API keys slog knows about (Kafka's numbering)."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_QUORUM = 55
    DESCRIBE_CLUSTER = 60
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    ALTER_PARTITION = 56
    ENVELOPE = 58
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    LIST_CONFIG_RESOURCES = 74
    DESCRIBE_TOPIC_PARTITIONS = 75


class ApiSpec(NamedTuple):
    """One row of the ApiVersions table."""

    api_key: int
    name: str
    min_version: int
    max_version: int

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


# (key, min, max) with the reason for each maximum. "kio: a-b" notes what kio
# 0.6.5 ships when it is narrower or wider than what we advertise.
_RANGES: tuple[tuple[ApiKey, int, int], ...] = (
    # v3 is the first flexible version (KIP-511 client software name/version);
    # v4 (KIP-1022) only lets a supported feature's min version be 0, and slog
    # advertises no features.
    (ApiKey.API_VERSIONS, 0, 4),
    # v10 adds topic ids, v12 nullable topic names, v13 a top-level error code
    # (KIP-1102 rebootstrap; always NONE here).
    (ApiKey.METADATA, 0, 13),
    # Kafka 4 dropped v0-2. v9 is the first flexible version; v10 adds KIP-951
    # leader hints (current_leader, node_endpoints) on NOT_LEADER_OR_FOLLOWER;
    # v11 may answer TRANSACTION_ABORTABLE and v12 is transactions v2 (KIP-890):
    # slog's transactions are the classic protocol (the client adds partitions
    # with AddPartitionsToTxn), so neither changes an answer. v13 names topics
    # by id (KIP-516; an unknown id is UNKNOWN_TOPIC_ID).
    (ApiKey.PRODUCE, 3, 13),
    # v12 is the first flexible version; v13 names topics by id (KIP-516; fetch
    # sessions are keyed by id), v14 only adds an error slog never sends
    # (tiered storage), v15 moves the replica id into replica_state (KIP-903),
    # v16 adds KIP-951 leader hints, v17 a replica directory id slog ignores
    # (one log dir). v18 (KIP-1166) is newer than Kafka 4.1.
    (ApiKey.FETCH, 4, 17),
    # v7 adds MAX_TIMESTAMP (-3) lookups (KIP-734), v8 EARLIEST_LOCAL (-4,
    # KIP-405), v9 LATEST_TIERED (-5, KIP-1005): with no tiered storage the log
    # start and -1. v10's timeout bounds remote lookups, which slog never makes.
    # v11 (-6, pending upload) is newer than Kafka 4.1.
    (ApiKey.LIST_OFFSETS, 1, 10),
    # kio: 0-6. v3 adds KIP-360's producer id and epoch, v4 answers PRODUCER_FENCED
    # (KIP-588; INVALID_PRODUCER_EPOCH before). v5+ is KIP-890 (transactions v2,
    # which slog does not implement), v6 KIP-939 (2PC).
    (ApiKey.INIT_PRODUCER_ID, 0, 4),
    # Transactions (slog.transactions), classic protocol only: v4+ of
    # AddPartitionsToTxn is the brokers' batched verification form and v4+ of the
    # others may answer TRANSACTION_ABORTABLE (KIP-890), EndTxn v5 is transactions
    # v2. Each v2 (v3 for TxnOffsetCommit) answers PRODUCER_FENCED (KIP-588).
    (ApiKey.ADD_PARTITIONS_TO_TXN, 0, 3),
    (ApiKey.ADD_OFFSETS_TO_TXN, 0, 3),
    (ApiKey.END_TXN, 0, 3),
    # KIP-664: hanging transactions. ListTransactions v1 filters by duration
    # (KIP-994); v2's transactional id pattern (KIP-1152) is a regular expression
    # Kafka runs with RE2J (linear time): Python's backtracking re would let one
    # request stall the broker, so v2 is not offered.
    (ApiKey.DESCRIBE_PRODUCERS, 0, 0),
    (ApiKey.DESCRIBE_TRANSACTIONS, 0, 0),
    (ApiKey.LIST_TRANSACTIONS, 0, 1),
    # Inter-broker: the transaction coordinator has partition leaders write markers.
    # kio: 1-2 (Kafka 4 dropped v0); v2 (KIP-1228) is newer than Kafka 4.1.
    (ApiKey.WRITE_TXN_MARKERS, 1, 1),
    # v3 adds the member's id, generation and instance id (KIP-447).
    (ApiKey.TXN_OFFSET_COMMIT, 0, 3),
    # kio: 2-7 (Kafka 4 dropped v0-1).
    (ApiKey.CREATE_TOPICS, 2, 7),
    # kio: 1-6 (Kafka 4 dropped v0). v6 accepts topic ids as well as names.
    (ApiKey.DELETE_TOPICS, 1, 6),
    # Sent to partition leaders; v2 is the first flexible version.
    (ApiKey.DELETE_RECORDS, 0, 2),
    (ApiKey.CREATE_PARTITIONS, 0, 3),
    # kio: 1-4 (Kafka 4 dropped v0).
    (ApiKey.DESCRIBE_CONFIGS, 1, 4),
    # Legacy (replace-all) AlterConfigs: librdkafka and kafka-python still use it.
    (ApiKey.ALTER_CONFIGS, 0, 2),
    (ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1),
    # kio: 1-2 (Kafka 4 dropped v0). A slog broker has one log dir: a move to it is a
    # no-op, to another LOG_DIR_NOT_FOUND.
    (ApiKey.ALTER_REPLICA_LOG_DIRS, 1, 2),
    # Kafka 4 dropped v0. v4 adds total/usable bytes. v5 (is_cordoned, KIP-1066) is
    # newer than Kafka 4.1: kafka-python took slog for Kafka 4.3 when it was offered.
    (ApiKey.DESCRIBE_LOG_DIRS, 1, 4),
    # v1 adds key_type (1: transactional ids), v4 batches coordinator keys
    # (KIP-699); v5 may answer TRANSACTION_ABORTABLE (KIP-890), which slog never
    # sends, v6 takes the share-group key type (KIP-932): slog has no share
    # groups, so that key type gets an error per key.
    (ApiKey.FIND_COORDINATOR, 0, 6),
    (ApiKey.JOIN_GROUP, 0, 9),
    (ApiKey.SYNC_GROUP, 0, 5),
    (ApiKey.HEARTBEAT, 0, 4),
    (ApiKey.LEAVE_GROUP, 0, 5),
    # v9 (KIP-848) carries a classic group's generation or a consumer group's
    # member epoch (checked: STALE_MEMBER_EPOCH) and answers GROUP_ID_NOT_FOUND
    # for a member's commit to an unknown group. v10 (topics by id) is newer than
    # Kafka 4.1: clients infer the broker's release from these maxima.
    (ApiKey.OFFSET_COMMIT, 2, 9),
    # v9 adds member id and epoch, which only consumer groups check. v10 (topics
    # by id) is newer than Kafka 4.1.
    (ApiKey.OFFSET_FETCH, 1, 9),
    # v6 (KIP-1043): an unknown group is GROUP_ID_NOT_FOUND with an error
    # message (Dead with no error before).
    (ApiKey.DESCRIBE_GROUPS, 0, 6),
    # v4 filters by state, v5 by group type (KIP-848) and reports each group's
    # type: "classic" or "consumer".
    (ApiKey.LIST_GROUPS, 0, 5),
    (ApiKey.DELETE_GROUPS, 0, 2),
    # KIP-848 consumer-protocol groups. Heartbeat v1 makes the member id the
    # client's own (required, never generated); Describe v1 adds member_type.
    (ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1),
    (ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1),
    (ApiKey.OFFSET_DELETE, 0, 0),
    # KIP-546. v1 is the flexible version of v0.
    (ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, 1),
    (ApiKey.ALTER_CLIENT_QUOTAS, 0, 1),
    (ApiKey.ELECT_LEADERS, 0, 2),
    # v1 adds AllowReplicationFactorChange (KIP-860).
    (ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 1),
    (ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0),
    # kio: 2-4 only (Kafka 4 dropped v0-1), so the brief's 0-4 is clamped to 2.
    # librdkafka needs v2+ anyway (KIP-320 leader epochs).
    (ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, 4),
    (ApiKey.SASL_HANDSHAKE, 0, 1),
    (ApiKey.SASL_AUTHENTICATE, 0, 2),
    # kio: 1-3 (Kafka 4 dropped v0; v1 adds pattern types, KIP-290). v2 is flexible.
    (ApiKey.DESCRIBE_ACLS, 1, 3),
    (ApiKey.CREATE_ACLS, 1, 3),
    (ApiKey.DELETE_ACLS, 1, 3),
    # KIP-554: SCRAM users managed by admin clients (only v0 exists).
    (ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0),
    (ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0),
    # The metadata log as a KRaft quorum (broker/handlers/quorum.py): v1 adds the
    # voters' timestamps, v2 the nodes' listeners and error messages (KIP-853).
    (ApiKey.DESCRIBE_QUORUM, 0, 2),
    # v1 adds the endpoint type (KIP-919), v2 include_fenced_brokers (KIP-1073).
    (ApiKey.DESCRIBE_CLUSTER, 0, 2),
    # v0 is KIP-714's ListClientMetricsResources (slog has no client metrics); v1
    # (KIP-1142) lists the resources of any config type: every topic and broker.
    (ApiKey.LIST_CONFIG_RESOURCES, 0, 1),
    # KIP-966: Metadata's topic half with cursor paging (only v0 exists).
    (ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, 0),
    # Inter-broker: leaders ask the controller for ISR changes. kio: 2-3 (topic
    # ids); v3 adds broker epochs per ISR member, which slog does not track.
    (ApiKey.ALTER_PARTITION, 2, 2),
    # Inter-broker (KIP-590): a non-controller forwards admin writes to the
    # controller. Decoded by the dispatcher itself, so never in ApiVersions.
    (ApiKey.ENVELOPE, 0, 0),
)


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


ALL_APIS: tuple[ApiSpec, ...] = tuple(
    sorted(
        (ApiSpec(int(key), _camel(api_key_map[key]), lo, hi) for key, lo, hi in _RANGES),
        key=lambda spec: spec.api_key,
    )
)
"""Every API slog can decode, with the ranges above (sorted by key)."""

API_BY_KEY: dict[int, ApiSpec] = {spec.api_key: spec for spec in ALL_APIS}


def api_versions_table(enabled_keys: Iterable[int]) -> tuple[ApiSpec, ...]:
    """The rows to advertise for the API keys the broker actually implements.

    Unknown keys are ignored (the broker can only advertise what this codec
    can decode). ApiVersions itself is always included: without it no client
    can even start.
    """
    wanted = {int(key) for key in enabled_keys}
    wanted.add(ApiKey.API_VERSIONS)
    return tuple(spec for spec in ALL_APIS if spec.api_key in wanted)


# --- kio schema lookups ----------------------------------------------------------


@functools.cache  # keys are int16, so this is bounded even for hostile input
def kio_version_range(api_key: int) -> tuple[int, int] | None:
    """(min, max) version kio has schemas for, or None for an unknown key."""
    name = api_key_map.get(api_key)
    if name is None:
        return None
    versions = schema_name_map[name]
    return min(versions), max(versions)


# kio resolves classes by importing one module per (api, version, kind), which
# costs about a millisecond the first time; the caches make every later lookup
# a dict hit.
@functools.cache
def request_class(api_key: int, version: int) -> Any:
    """The kio request dataclass for (api_key, version).

    Raises `UnsupportedVersionError` if kio has no schema for it.
    """
    try:
        return load_request_schema(api_key, version)
    except Exception as exc:  # kio raises KioIndexError subclasses
        raise UnsupportedVersionError(api_key, version) from exc


@functools.cache
def response_class(api_key: int, version: int) -> Any:
    """The kio response dataclass for (api_key, version)."""
    try:
        return load_response_schema(api_key, version)
    except Exception as exc:
        raise UnsupportedVersionError(api_key, version) from exc


# First flexible version per known api key (None: never flexible). Filled
# lazily and only for keys kio knows, so hostile (key, version) pairs cannot
# grow it.
_FLEXIBLE_FROM: dict[int, int | None] = {}


def _flexible_from(api_key: int, lo: int, hi: int) -> int | None:
    if api_key not in _FLEXIBLE_FROM:
        first = next((v for v in range(lo, hi + 1) if request_class(api_key, v).__flexible__), None)
        _FLEXIBLE_FROM[api_key] = first
    return _FLEXIBLE_FROM[api_key]


def is_flexible_request(api_key: int, version: int) -> bool:
    """Whether a request uses the flexible (v2) request header.

    Kafka's flexibleVersions are always open-ended ("N+"), so a version is
    flexible iff it is at least the first flexible version kio knows. That
    also covers versions kio has no schema for: ApiVersions v9 from a future
    client is flexible (so we can parse its header and answer it, KIP-511),
    Produce v2 (removed in Kafka 4) is not. Unknown keys are treated as
    non-flexible: we only need their correlation id.
    """
    bounds = kio_version_range(api_key)
    if bounds is None:
        return False
    first = _flexible_from(api_key, *bounds)
    return first is not None and version >= first


def warm_up(specs: Iterable[ApiSpec] = ALL_APIS) -> None:
    """Import every schema module up front (broker start-up), so the first
    request of each kind does not pay for it. `slog.protocol.warm_up` (from
    codec) does this and also builds kio's readers and our guards; prefer it."""
    for spec in specs:
        for version in range(spec.min_version, spec.max_version + 1):
            request_class(spec.api_key, version)
            response_class(spec.api_key, version)
