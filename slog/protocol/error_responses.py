"""Error responses: a version-correct answer to any request, with one error code throughout.

When a request fails as a whole (it could not be decoded, it is not
authorized, the broker is not ready) Kafka still answers in the request's own
response layout, with the error on every topic, partition or group the
request named. One builder per response shape fills it; `error_response`
picks the builder by API key. ApiVersions errors are the exception: KIP-511
says they go out in v0 layout (`api_versions_fallback_response`).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable
from dataclasses import MISSING, Field, fields
from typing import Any

from kio.static.constants import uuid_zero

from slog.protocol.apis import ApiKey, ApiSpec, response_class
from slog.protocol.codec import Entity, encode_response
from slog.protocol.errors import ErrorCode, UnsupportedVersionError
from slog.protocol.guard import field_schema
from slog.protocol.headers import RequestHeader

__all__ = ["api_versions_fallback_response", "api_versions_response", "error_response"]


def _neutral(f: Field[Any]) -> Any:
    """The value Kafka's generated *Data classes hold for a field with no default."""
    schema = field_schema(f)
    if schema.optional:
        return None
    if schema.is_array:
        return ()
    if schema.entity is not None:
        return _fill(schema.entity)
    return _NEUTRAL_BY_TYPE.get(schema.kafka_type or "", 0)


_NEUTRAL_BY_TYPE: dict[str, Any] = {
    "string": "",
    "bytes": b"",
    "records": b"",
    "bool": False,
    "uuid": uuid_zero,
    "error_code": ErrorCode.none,
    "timedelta_i32": datetime.timedelta(0),
    "timedelta_i64": datetime.timedelta(0),
    "datetime_i64": datetime.datetime.fromtimestamp(0, datetime.UTC),
    "float64": 0.0,
}


def _fill(cls: type, **values: Any) -> Entity:
    """Instantiate `cls` from `values`, ignoring names the class lacks.

    Fields change between versions (throttle_time appears in v1, etc.), so
    builders pass a superset and let each version keep what it has. Missing
    required fields get Kafka's neutral values.
    """
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        if f.name in values:
            kwargs[f.name] = values[f.name]
        elif f.default is MISSING and f.default_factory is MISSING:
            kwargs[f.name] = _neutral(f)
    return cls(**kwargs)


def _item(cls: type, name: str) -> type:
    """The entity class of field `name` (array element or nested struct)."""
    for f in fields(cls):
        if f.name == name:
            entity = field_schema(f).entity
            if entity is not None:
                return entity
            break
    raise KeyError(f"{cls.__name__} has no struct field {name!r}")


def _has(cls: type, name: str) -> bool:
    return any(f.name == name for f in fields(cls))


def api_versions_response(
    version: int,
    table: Iterable[ApiSpec],
    *,
    error_code: ErrorCode = ErrorCode.none,
    throttle_ms: int = 0,
) -> Entity:
    """Build an ApiVersions response entity of `version` advertising `table`."""
    cls = response_class(ApiKey.API_VERSIONS, version)
    row = _item(cls, "api_keys")
    return _fill(
        cls,
        error_code=error_code,
        api_keys=tuple(
            row(api_key=s.api_key, min_version=s.min_version, max_version=s.max_version)
            for s in table
        ),
        throttle_time=datetime.timedelta(milliseconds=throttle_ms),
    )


def api_versions_fallback_response(
    correlation_id: int,
    table: Iterable[ApiSpec],
    error_code: ErrorCode = ErrorCode.unsupported_version,
) -> bytes:
    """KIP-511: the answer to an ApiVersions request of a version we don't support.

    Encoded as a v0 response (v0 header, no tagged fields) with
    UNSUPPORTED_VERSION and the whole table, so any client can read it and
    retry with a version from the ApiVersions row. (Kafka itself only
    includes the ApiVersions row; sending all of them is a superset clients
    accept.)

    Use it for *every* ApiVersions error, whatever version was asked for:
    kafka-python (and librdkafka for UNSUPPORTED_VERSION) parse an
    ApiVersions body with a non-zero error code as v0, so an error answered
    in v1-v3 layout would be misread.
    """
    response = api_versions_response(0, table, error_code=error_code)
    return encode_response(RequestHeader(ApiKey.API_VERSIONS, 0, correlation_id, None), response)


_NO_TIME = datetime.timedelta(0)
_Builder = Callable[[type, Any, ErrorCode, int], Entity | None]
Row = dict[str, Any]


def _rows(cls: type, field: str, rows: Iterable[Row]) -> tuple[Entity, ...]:
    """One array of a response, one entity per row of fields."""
    row_cls = _item(cls, field)
    return tuple(_fill(row_cls, **row) for row in rows)


def _by_topic(cls: type, topics_field: str, partitions_field: str,
              topics: Iterable[tuple[Row, Iterable[Row]]]) -> tuple[Entity, ...]:
    """The topic → partition rows of a response, from (topic fields, partitions' fields)."""
    topic_cls = _item(cls, topics_field)
    part_cls = _item(topic_cls, partitions_field)
    return tuple(
        _fill(topic_cls, **topic, **{partitions_field: tuple(_fill(part_cls, **p) for p in parts)})
        for topic, parts in topics
    )


def _topic_key(topic: Any, name_field: str) -> Row:
    """How a request's topic entry names its topic: by name, or by id (Fetch v13+,
    Produce v13); the response names it the same way."""
    return {name_field: getattr(topic, name_field, None),
            "topic_id": getattr(topic, "topic_id", None)}


def _produce(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    return _fill(cls, throttle_time=_NO_TIME, responses=_by_topic(
        cls, "responses", "partition_responses",
        ((_topic_key(t, "name"), ({"index": p.index, "error_code": e, "base_offset": -1}
                             for p in t.partition_data))
         for t in req.topic_data)))


def _fetch(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    empty = {"error_code": e, "high_watermark": -1, "aborted_transactions": None, "records": b""}
    return _fill(cls, throttle_time=_NO_TIME, error_code=e, session_id=0, responses=_by_topic(
        cls, "responses", "partitions",
        ((_topic_key(t, "topic"), ({"partition_index": p.partition, **empty}
                                    for p in t.partitions))
         for t in req.topics)))


def _list_offsets(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    return _fill(cls, throttle_time=_NO_TIME, topics=_by_topic(
        cls, "topics", "partitions",
        (({"name": t.name}, ({"partition_index": p.partition_index, "error_code": e}
                             for p in t.partitions))
         for t in req.topics)))


def _delete_records(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    return _fill(cls, throttle_time=_NO_TIME, topics=_by_topic(
        cls, "topics", "partitions",
        (({"name": t.name}, ({"partition_index": p.partition_index, "error_code": e,
                              "low_watermark": -1} for p in t.partitions))
         for t in req.topics)))


def _metadata(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    return _fill(cls, throttle_time=_NO_TIME, brokers=(), topics=_rows(cls, "topics", (
        {"error_code": e, "name": t.name, "partitions": (),
         "topic_id": getattr(t, "topic_id", None) or uuid_zero}
        for t in req.topics or ())))


def _describe_topic_partitions(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    return _fill(cls, throttle_time=_NO_TIME, topics=_rows(cls, "topics", (
        {"error_code": e, "name": t.name, "topic_id": None, "partitions": ()}
        for t in req.topics)))


def _init_producer_id(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    return _fill(cls, throttle_time=_NO_TIME, error_code=e, producer_id=-1, producer_epoch=-1)


def _add_partitions_to_txn(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    return _fill(cls, throttle_time=_NO_TIME, results_by_topic_v3_and_below=_by_topic(
        cls, "results_by_topic_v3_and_below", "results_by_partition",
        (({"name": t.name}, ({"partition_index": p, "partition_error_code": e}
                             for p in t.partitions))
         for t in req.v3_and_below_topics)))


def _write_txn_markers(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    return _fill(cls, markers=_rows(cls, "markers", (
        {"producer_id": m.producer_id, "topics": _by_topic(
            _item(cls, "markers"), "topics", "partitions",
            (({"name": t.name}, ({"partition_index": p, "error_code": e}
                                 for p in t.partition_indexes))
             for t in m.topics))}
        for m in req.markers)))


def _describe_transactions(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    return _fill(cls, throttle_time=_NO_TIME, transaction_states=_rows(
        cls, "transaction_states",
        ({"error_code": e, "transactional_id": t, "transaction_state": "", "topics": ()}
         for t in req.transactional_ids)))


def _describe_producers(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    return _fill(cls, throttle_time=_NO_TIME, topics=_by_topic(
        cls, "topics", "partitions",
        (({"name": t.name}, ({"partition_index": p, "error_code": e, "active_producers": ()}
                             for p in t.partition_indexes))
         for t in req.topics)))


def _create_topics(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    return _fill(cls, throttle_time=_NO_TIME, topics=_rows(
        cls, "topics", ({"name": t.name, "error_code": e} for t in req.topics)))


def _delete_topics(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    if _has(type(req), "topics"):  # v6+: by name or id
        rows = ({"name": t.name, "topic_id": t.topic_id or uuid_zero, "error_code": e}
                for t in req.topics)
    else:
        rows = ({"name": name, "error_code": e} for name in req.topic_names)
    return _fill(cls, throttle_time=_NO_TIME, responses=_rows(cls, "responses", rows))


def _create_partitions(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    return _fill(cls, throttle_time=_NO_TIME, results=_rows(
        cls, "results", ({"name": t.name, "error_code": e} for t in req.topics)))


def _describe_configs(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    return _fill(cls, throttle_time=_NO_TIME, results=_rows(cls, "results", (
        {"error_code": e, "resource_type": r.resource_type, "resource_name": r.resource_name,
         "configs": ()}
        for r in req.resources)))


def _incremental_alter_configs(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    return _fill(cls, throttle_time=_NO_TIME, responses=_rows(cls, "responses", (
        {"error_code": e, "resource_type": r.resource_type, "resource_name": r.resource_name}
        for r in req.resources)))


def _find_coordinator(cls: type, req: Any, e: ErrorCode, v: int) -> Entity | None:
    nowhere = {"node_id": -1, "host": "", "port": -1, "error_code": e}
    if _has(cls, "coordinators"):  # v4+: one row per requested key
        if req is None:
            return None
        return _fill(cls, throttle_time=_NO_TIME, coordinators=_rows(
            cls, "coordinators", ({"key": k, **nowhere} for k in req.coordinator_keys)))
    return _fill(cls, throttle_time=_NO_TIME, **nowhere)


def _join_group(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    return _fill(cls, throttle_time=_NO_TIME, error_code=e, generation_id=-1, members=())


def _top_level(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    """APIs whose response is just an error code plus empty payload fields."""
    return _fill(cls, throttle_time=_NO_TIME, error_code=e)


def _create_acls(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    return _fill(cls, throttle_time=_NO_TIME, results=_rows(
        cls, "results", ({"error_code": e} for _ in req.creations)))


def _delete_acls(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    return _fill(cls, throttle_time=_NO_TIME, filter_results=_rows(
        cls, "filter_results", ({"error_code": e} for _ in req.filters)))


def _alter_user_scram_credentials(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    users = dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions])
    return _fill(cls, throttle_time=_NO_TIME, results=_rows(
        cls, "results", ({"user": user, "error_code": e} for user in users)))


def _alter_client_quotas(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    entity_cls = _item(_item(cls, "entries"), "entity")
    return _fill(cls, throttle_time=_NO_TIME, entries=_rows(cls, "entries", (
        {"error_code": e, "entity": tuple(
            _fill(entity_cls, entity_type=x.entity_type, entity_name=x.entity_name)
            for x in entry.entity)} for entry in req.entries)))


def _describe_log_dirs(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    # v1-3 have no top-level error code: one log-dir result carries it.
    result = _fill(_item(cls, "results"), error_code=e, log_dir="", topics=(),
                   total_bytes=-1, usable_bytes=-1)
    return _fill(cls, throttle_time=_NO_TIME, error_code=e, results=(result,))


def _alter_replica_log_dirs(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    topics: dict[str, list[int]] = {}
    for wanted in req.dirs:
        for t in wanted.topics:
            topics.setdefault(t.name, []).extend(t.partitions)
    return _fill(cls, throttle_time=_NO_TIME, results=_by_topic(
        cls, "results", "partitions",
        (({"topic_name": name}, ({"partition_index": p, "error_code": e} for p in parts))
         for name, parts in topics.items())))


def _offset_commit(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    # Topics → partitions with an error code each; v10 names topics by id.
    return _fill(cls, throttle_time=_NO_TIME, topics=_by_topic(
        cls, "topics", "partitions",
        ((_topic_key(t, "name"), ({"partition_index": p.partition_index, "error_code": e}
                                  for p in t.partitions))
         for t in req.topics)))


def _offset_fetch(cls: type, req: Any, e: ErrorCode, v: int) -> Entity | None:
    if _has(cls, "groups"):  # v8+: batched groups
        if req is None:
            return None
        return _fill(cls, throttle_time=_NO_TIME, groups=_rows(
            cls, "groups", ({"group_id": g.group_id, "error_code": e} for g in req.groups)))
    if _has(cls, "error_code") and (req is None or req.topics is None):
        return _fill(cls, throttle_time=_NO_TIME, error_code=e, topics=())
    if req is None:
        return None
    unknown = {"committed_offset": -1, "metadata": "", "error_code": e}
    return _fill(cls, throttle_time=_NO_TIME, error_code=e, topics=_by_topic(
        cls, "topics", "partitions",
        (({"name": t.name}, ({"partition_index": i, **unknown} for i in t.partition_indexes))
         for t in req.topics)))


def _describe_groups(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    return _fill(cls, throttle_time=_NO_TIME, groups=_rows(
        cls, "groups", ({"error_code": e, "group_id": g, "members": ()} for g in req.groups)))


def _consumer_group_describe(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    return _fill(cls, throttle_time=_NO_TIME, groups=_rows(cls, "groups", (
        {"error_code": e, "group_id": g, "group_state": "Dead", "members": ()}
        for g in req.group_ids)))


def _delete_groups(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    return _fill(cls, throttle_time=_NO_TIME, results=_rows(
        cls, "results", ({"group_id": g, "error_code": e} for g in req.groups_names)))


def _elect_leaders(cls: type, req: Any, e: ErrorCode, v: int) -> Entity | None:
    if req is None:
        # v1+ has a top-level error code; v0 can only report per partition.
        return _top_level(cls, req, e, v) if _has(cls, "error_code") else None
    return _fill(cls, throttle_time=_NO_TIME, error_code=e, replica_election_results=_by_topic(
        cls, "replica_election_results", "partition_result",
        (({"topic": t.topic}, ({"partition_id": p, "error_code": e} for p in t.partitions))
         for t in (req.topic_partitions or ()))))


def _offset_for_leader_epoch(cls: type, req: Any, e: ErrorCode, v: int) -> Entity:
    return _fill(cls, throttle_time=_NO_TIME, topics=_by_topic(
        cls, "topics", "partitions",
        (({"topic": t.topic}, ({"partition": p.partition, "error_code": e} for p in t.partitions))
         for t in req.topics)))


# (builder, needs_request): builders that mirror request arrays can't run without one.
_ERROR_BUILDERS: dict[int, tuple[_Builder, bool]] = {
    ApiKey.PRODUCE: (_produce, True),
    ApiKey.FETCH: (_fetch, True),
    ApiKey.LIST_OFFSETS: (_list_offsets, True),
    ApiKey.METADATA: (_metadata, True),
    ApiKey.OFFSET_COMMIT: (_offset_commit, True),
    ApiKey.OFFSET_FETCH: (_offset_fetch, False),
    ApiKey.FIND_COORDINATOR: (_find_coordinator, False),
    ApiKey.JOIN_GROUP: (_join_group, False),
    ApiKey.HEARTBEAT: (_top_level, False),
    ApiKey.LEAVE_GROUP: (_top_level, False),
    ApiKey.SYNC_GROUP: (_top_level, False),
    ApiKey.DESCRIBE_GROUPS: (_describe_groups, True),
    ApiKey.LIST_GROUPS: (_top_level, False),
    ApiKey.SASL_HANDSHAKE: (_top_level, False),
    # ApiVersions errors must be sent in v0 layout: api_versions_fallback_response.
    ApiKey.CREATE_TOPICS: (_create_topics, True),
    ApiKey.DELETE_TOPICS: (_delete_topics, True),
    ApiKey.DELETE_RECORDS: (_delete_records, True),
    ApiKey.INIT_PRODUCER_ID: (_init_producer_id, False),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (_offset_for_leader_epoch, True),
    ApiKey.DESCRIBE_CONFIGS: (_describe_configs, True),
    ApiKey.DESCRIBE_LOG_DIRS: (_describe_log_dirs, False),
    ApiKey.ALTER_REPLICA_LOG_DIRS: (_alter_replica_log_dirs, True),
    ApiKey.DESCRIBE_ACLS: (_top_level, False),
    ApiKey.CREATE_ACLS: (_create_acls, True),
    ApiKey.DELETE_ACLS: (_delete_acls, True),
    ApiKey.SASL_AUTHENTICATE: (_top_level, False),
    ApiKey.CREATE_PARTITIONS: (_create_partitions, True),
    ApiKey.DELETE_GROUPS: (_delete_groups, True),
    ApiKey.ELECT_LEADERS: (_elect_leaders, False),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (_incremental_alter_configs, True),
    ApiKey.ALTER_CONFIGS: (_incremental_alter_configs, True),  # the same response shape
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (_top_level, False),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (_top_level, False),
    ApiKey.OFFSET_DELETE: (_top_level, False),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (_top_level, False),
    ApiKey.ALTER_CLIENT_QUOTAS: (_alter_client_quotas, True),
    ApiKey.DESCRIBE_CLUSTER: (_top_level, False),
    ApiKey.DESCRIBE_QUORUM: (_top_level, False),
    ApiKey.LIST_CONFIG_RESOURCES: (_top_level, False),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (_top_level, False),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (_alter_user_scram_credentials, True),
    ApiKey.ALTER_PARTITION: (_top_level, False),
    ApiKey.ENVELOPE: (_top_level, False),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (_describe_topic_partitions, True),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (_top_level, False),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (_consumer_group_describe, True),
    # Transactions: three answer with one top-level error code.
    **dict.fromkeys((ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.END_TXN, ApiKey.LIST_TRANSACTIONS),
                    (_top_level, False)),
    ApiKey.ADD_PARTITIONS_TO_TXN: (_add_partitions_to_txn, True),
    ApiKey.WRITE_TXN_MARKERS: (_write_txn_markers, True),
    ApiKey.TXN_OFFSET_COMMIT: (_list_offsets, True),  # the same response shape
    ApiKey.DESCRIBE_TRANSACTIONS: (_describe_transactions, True),
    ApiKey.DESCRIBE_PRODUCERS: (_describe_producers, True),
}


def error_response(
    header: RequestHeader, request: Entity | None, error_code: ErrorCode | int
) -> Entity | None:
    """A version-correct response where every topic/partition/group carries `error_code`.

    `request` may be None (the body failed to decode); then only APIs with a
    top-level error code can be answered. Returns None when no meaningful
    response can be built: the broker should close the connection, which is
    what Kafka does for requests it cannot parse. ApiVersions is always None:
    answer its errors with `api_versions_fallback_response`.
    """
    entry = _ERROR_BUILDERS.get(header.api_key)
    if entry is None:
        return None
    builder, needs_request = entry
    if needs_request and request is None:
        return None
    try:
        cls = response_class(header.api_key, header.api_version)
    except UnsupportedVersionError:
        return None
    return builder(cls, request, ErrorCode(error_code), header.api_version)
