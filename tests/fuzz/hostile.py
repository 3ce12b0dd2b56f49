"""Hostile Kafka requests for fuzzing a live broker, and the oracle that judges the answers.

Shared by the CI fuzz tests (tests/integration/test_broker_fuzz.py) and the
soak (benchmarks/fuzz.py). Every API and version the broker advertises is
covered automatically: the cases come from `api_versions_table(all_handlers())`,
so an API added to the broker is fuzzed without touching this file (and a test
checks the table matches what the live broker advertises).

Request bodies are built from kio's schema for each (api, version): every
field gets a value drawn from its Kafka type, biased to hostile values. On top
of that, frames are broken in targeted ways (a length field replaced by a
count far larger than the frame, null where the schema forbids it, unknown
tagged fields, a body of one version under the header of another) and at
random (bit flips, truncations, extensions, random bytes).

Against a broker that requires SASL, ``exchange(..., pre_auth=True)`` also
checks that nothing but ApiVersions, SaslHandshake and SaslAuthenticate is
answered before login; tests/fuzz/hostile_sasl.py builds whole hostile SASL
exchanges on top of it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import socket
import struct
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

from hypothesis import HealthCheck
from hypothesis import strategies as st

from slog.protocol.apis import ApiKey, is_flexible_request, request_class
from slog.protocol.codec import decode_request, decode_response, encode_request
from slog.protocol.errors import ErrorCode, ProtocolError
from slog.protocol.guard import field_schema
from slog.protocol.headers import encode_request_header, parse_request_header, write_uvarint
from slog.protocol.shapes import millis
from tests.brokers import BrokerProcess
from tests.compat.clients import (
    CANARY_TOPIC,
    RECENT_MS,
    Rec,
    Wire,
    assert_serving,
    create_topic,
    process_alive,
    process_rss_kb,
    slog_connection,
    slog_consume,
    slog_produce,
)

GROUP_WAITS = (ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP)
ANSWER_TIMEOUT_S = 5.0
PROBE_CORRELATION_ID = 0x7EADBEEF
_PROBE_BODY = struct.pack(">hhih", ApiKey.API_VERSIONS, 0, PROBE_CORRELATION_ID, 5) + b"probe"
PROBE = struct.pack(">i", len(_PROBE_BODY)) + _PROBE_BODY
# What a connection may send before it has authenticated on a SASL listener (the
# oracle's own statement of the rule, not the broker's table).
PRE_AUTH_APIS = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
# Sent after the probe on a connection that must still be unauthenticated: a
# Metadata request (every topic), which must close the connection unanswered.
_GUARD_BODY = struct.pack(">hhih", ApiKey.METADATA, 0, PROBE_CORRELATION_ID + 1, 5) \
    + b"guard" + struct.pack(">i", 0)
GUARD = struct.pack(">i", len(_GUARD_BODY)) + _GUARD_BODY
KEEP_TOPIC = "fz-keep"  # records the fuzzer must never be able to change
# The broker config a fuzz target runs with: no auto-creation, so random
# Metadata names cannot fill the disk with topics.
# Small, unpreallocated segments keep the fuzzed broker light on a shared disk.
TARGET_CONFIG = {"auto.create.topics.enable": "false", "log.preallocate": "false",
                 "log.segment.bytes": str(1 << 20)}
# Hypothesis settings of the CI runs: fixed seeds, the same cases every time.
SETTINGS: dict[str, Any] = {
    "deadline": None, "derandomize": True, "database": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large,
                              HealthCheck.filter_too_much]}


# ----------------------------------------------------------------------------- the broker


class Target:
    """A live broker prepared for fuzzing: what it advertises and the records it must keep."""

    def __init__(self, broker: BrokerProcess, advertised: dict[int, tuple[int, int]],
                 baseline: list[Any]):
        self.broker = broker
        self.advertised = advertised
        self.baseline = baseline

    @property
    def pid(self) -> int:
        return self.broker.info.pid if self.broker.info else -1

    def __repr__(self) -> str:  # Hypothesis prints it with every falsifying example
        return f"Target({self.broker.bootstrap})"


def prepare_target(broker: BrokerProcess) -> Target:
    """Create the topics requests aim at, and a topic whose records are checked afterwards."""
    create_topic(broker.bootstrap, KEEP_TOPIC, partitions=2)
    for partition in (0, 1):
        slog_produce(broker.bootstrap, KEEP_TOPIC,
                     [Rec(b"k%d" % i, b"v%d" % i, (), RECENT_MS + i) for i in range(10)],
                     partition=partition)
    for topic in [*TOPICS[:3], CANARY_TOPIC]:
        create_topic(broker.bootstrap, topic)
    with slog_connection(broker.bootstrap) as conn:
        advertised = dict(conn.versions)
    return Target(broker, advertised, keep_records(broker))


def keep_records(broker: BrokerProcess) -> list[Any]:
    return [slog_consume(broker.bootstrap, KEEP_TOPIC, p) for p in (0, 1)]


RSS_LIMIT_KB = 300 * 1024


def assert_unharmed(target: Target) -> None:
    """After a run: the broker is alive, bounded, clean, kept its records and serves clients.

    On a SASL broker, slog's client logs in from SLOG_SASL_* in the environment.
    """
    broker = target.broker
    assert process_alive(target.pid)
    rss = process_rss_kb(target.pid)
    assert rss < RSS_LIMIT_KB, f"broker RSS is {rss // 1024} MiB after fuzzing"
    assert "Traceback" not in broker.log_text, broker.log_text[-6000:]
    assert keep_records(broker) == target.baseline
    assert_serving(broker.bootstrap)


# ----------------------------------------------------------------------------- field values

# Requests may create, alter and delete these (never KEEP_TOPIC, whose data is checked).
TOPICS = ["fz-a", "fz-b", "fz.c", "fz_c", "fz-new", "", ".", "..", "a/b", "../../etc",
          "x" * 250, "__consumer_offsets"]
_VALID_BATCH = Rec(b"key", b"value", (("h", b"v"),), RECENT_MS)


def _batch(compression: int = 0) -> bytes:
    from slog.core.records import BatchBuilder

    builder = BatchBuilder(compression=compression)
    builder.append(_VALID_BATCH.key, _VALID_BATCH.value, _VALID_BATCH.headers,
                   _VALID_BATCH.timestamp)
    return builder.build()


GOOD_BATCH = _batch()
RECORDS = [b"", GOOD_BATCH, _batch(3), GOOD_BATCH[:-1] + b"\x00", GOOD_BATCH * 2,
           GOOD_BATCH[:61], GOOD_BATCH[:16] + b"\x01" + GOOD_BATCH[17:],
           # a batch declaring 2**31 - 1 records in a few dozen bytes
           GOOD_BATCH[:57] + b"\x7f\xff\xff\xff" + GOOD_BATCH[61:]]
HOSTILE_INTS = [-(2**63), -(2**31), -(2**15), -129, -2, -1, 0, 1, 2, 3, 127, 128, 255,
                2**15 - 1, 2**16, 2**31 - 1, 2**32, 2**63 - 1]
INT_RANGES = {"int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1),
              "int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1),
              "uint8": (0, 2**8 - 1), "uint16": (0, 2**16 - 1), "uint32": (0, 2**32 - 1),
              "uint64": (0, 2**64 - 1)}
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
# Fields whose legal-but-large values only make the broker do a lot of honest work
# (thousands of partitions, minute-long fetch waits): keep them to telling values.
SPECIAL_INTS = {
    "num_partitions": [-(2**31), -2, -1, 0, 1, 2, 10_001, 2**31 - 1],
    "count": [-(2**31), -1, 0, 1, 2, 3, 20_000, 2**31 - 1],  # new totals
}
CONFIG_NAMES = ["retention.ms", "segment.bytes", "cleanup.policy", "max.message.bytes",
                "min.insync.replicas", "message.timestamp.type", "bogus", ""]
CONFIG_VALUES = ["", "-1", "0", "1", "14", "compact", "delete,compact", "abc",
                 "99999999999999999999999", "LogAppendTime"]
SASL_MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER",
                   "plain", "scram-sha-256", "", "PLAIN\x00", "PLAIN ", "x" * 300]
# Users the SASL fuzz target knows ("hugeiter" is stored with 2**31 - 1 SCRAM
# iterations), and one it does not.
SASL_USERS = ["admin", "alice", "hugeiter", "nobody"]
_OVERSIZED = 9000  # above slog.core.scram.MAX_TOKEN_BYTES (8192)
# SaslAuthenticate tokens: PLAIN ([authzid] NUL user NUL password) and SCRAM
# client-first / client-final messages, broken every way. None of them carries
# a right password.
SASL_TOKENS = [
    b"", b"\0", b"\0\0", b"\0\0\0", b"\0admin", b"\0admin\0", b"\0admin\0wrong",
    b"admin\0admin\0wrong", b"alice\0admin\0wrong", b"\0\0wrong", b"adminwrong",
    b"\0admin\0wrong\0extra", b"\0ad\xffmin\0pw", b"\0nobody\0pw", b"\0hugeiter\0pw",
    b"\0" + b"a" * _OVERSIZED + b"\0pw", b"\0admin\0" + b"p" * _OVERSIZED,
    b"n,,n=admin,r=fyko+d2lbbFgONRv9qkxdawL", b"n,,n=admin,r=", b"n,,r=abc", b"n,,n=,r=abc",
    b"n,,n=admin", b"p=tls-server-end-point,,n=admin,r=abc", b"y,,n=admin,r=abc",
    b"n,a=alice,n=admin,r=abc", b"n,,m=ext,n=admin,r=abc", b"n,,n=ad=min,r=abc",
    b"n,,n=admin,r=abc,i=2147483647", b"n,,n=admin,,r=abc", b"n,,nadmin", b"n,,",
    b"n,,n=hugeiter,r=abc", b"n,,n=" + b"a" * _OVERSIZED + b",r=abc", b"n,,n=adm\xffin,r=abc",
    b"c=biws,r=abc,p=" + b"A" * 43 + b"=", b"c=biws,r=abc", b"c=biws,r=abc,p=!!!",
    b"c=,r=,p=", b"c=biws,r=abc,i=999999999,p=AAAA", b"c=biws,p=AAAA",
]


def _ints(kafka_type: str, name: str) -> st.SearchStrategy[int]:
    lo, hi = INT_RANGES[kafka_type]
    if name in SPECIAL_INTS:
        return st.sampled_from([v for v in SPECIAL_INTS[name] if lo <= v <= hi])
    return st.one_of(st.sampled_from([v for v in HOSTILE_INTS if lo <= v <= hi]),
                     st.integers(lo, hi), st.integers(-3, 12))


def _millis(name: str, kind: str) -> st.SearchStrategy[Any]:
    if kind == "datetime_i64":
        return st.integers(0, 2**42).map(
            lambda ms: datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC))
    waits = st.sampled_from([-1, 0, 1, 50]) if "wait" in name or name == "timeout_ms" \
        else st.sampled_from([-(2**31), -1, 0, 1, 60_000, 2**31 - 1])
    return waits.map(lambda ms: datetime.timedelta(milliseconds=ms))


def _scalar(field: dataclasses.Field[Any], name: str, owner: str = "") -> st.SearchStrategy[Any]:
    kind = field_schema(field).kafka_type
    if kind in INT_RANGES:
        return _ints(kind, name)
    if name == "mechanism":  # SaslHandshake
        return st.sampled_from(SASL_MECHANISMS) | TEXT
    if name == "auth_bytes":  # SaslAuthenticate
        return st.sampled_from(SASL_TOKENS) | st.binary(max_size=80)
    if kind == "string":
        if name == "name" and "Config" in owner:  # CreatableTopicConfig, AlterableConfig...
            return st.sampled_from(CONFIG_NAMES)
        if name == "name" or "topic" in name or name == "resource_name":
            return st.sampled_from(TOPICS) | TEXT
        if "config" in name or name == "key":
            return st.sampled_from(CONFIG_NAMES)
        if name == "value":
            return st.sampled_from(CONFIG_VALUES)
        return TEXT
    if kind in ("bytes", "records"):
        return st.sampled_from(RECORDS) | st.binary(max_size=80)
    if kind == "bool":
        return st.booleans()
    if kind == "uuid":
        return st.uuids() | st.just(uuid.UUID(int=1))
    if kind in ("timedelta_i32", "timedelta_i64", "datetime_i64"):
        return _millis(name, kind)
    if kind == "error_code":
        return st.sampled_from(list(ErrorCode))
    if kind == "float64":
        return st.floats(allow_nan=False)
    raise AssertionError(f"no strategy for {kind}")


def _with_duplicates(items: list[Any]) -> st.SearchStrategy[tuple[Any, ...]]:
    # Duplicate topics / partitions / groups: the same element twice in one request.
    return st.sampled_from([tuple(items), tuple(items + items[:1])])


def _field(field: dataclasses.Field[Any], depth: int, owner: str) -> st.SearchStrategy[Any]:
    schema = field_schema(field)
    nested = schema.entity
    if nested is not None:
        item: st.SearchStrategy[Any] = st.deferred(lambda: entity(nested, depth + 1))
    else:
        item = _scalar(field, field.name, owner)
    values = st.lists(item, max_size=3 if depth < 3 else 1).flatmap(_with_duplicates) \
        if schema.is_array else item
    if schema.optional:
        values = st.none() | values
    return values


@functools.cache
def entity(cls: type, depth: int = 0) -> st.SearchStrategy[Any]:
    """Hostile instances of a kio request class (or one of its nested structs)."""
    return st.fixed_dictionaries({f.name: _field(f, depth, cls.__name__)
                                  for f in dataclasses.fields(cls)}
                                 ).map(lambda kwargs: cls(**kwargs))


def advertised_cases() -> list[tuple[int, int]]:
    """Every (api key, version) the broker serves, from the table it advertises."""
    from slog.broker.handlers import all_handlers
    from slog.protocol.apis import api_versions_table

    return [(spec.api_key, v) for spec in api_versions_table(all_handlers())
            for v in range(spec.min_version, spec.max_version + 1)]


API_CASES = advertised_cases()
_FALLBACK = encode_request(request_class(ApiKey.API_VERSIONS, 0)(), correlation_id=1,
                           client_id=None)


# ----------------------------------------------------------------------------- frames


def _encode(body: Any, draw: st.DrawFn) -> bytes | None:
    try:
        return encode_request(body, correlation_id=draw(st.integers(-(2**31), 2**31 - 1)),
                              client_id=draw(st.none() | TEXT))
    except Exception:  # a value kio cannot encode (out of range for its field)
        return None


@st.composite
def requests(draw: st.DrawFn, cases: list[tuple[int, int]] = API_CASES) -> bytes:
    """A structurally valid request of an advertised API/version with hostile values.

    ``cases``: the (api key, version) pairs to draw from (default: all advertised).
    """
    api_key, version = draw(st.sampled_from(cases))
    body = draw(entity(request_class(api_key, version)))
    return _encode(body, draw) or _FALLBACK


HOSTILE_CHUNKS = [
    b"\x7f\xff\xff\xff",  # int32 max: array / bytes length
    b"\xff\xff\xff\xff",  # -1: null
    b"\xff\xff\xff\xfe",  # -2: invalid negative length
    b"\x80\x00\x00\x00",  # int32 min
    b"\xff\xff\xff\xff\x0f",  # uvarint 2**32 - 1: compact length
    b"\xff\xff\xff\xff\xff",  # over-long varint
    b"\xfe\xff\xff\xff\x07",
    b"\x00", b"\xff", b"\x00\x00\x00\x00",
]


@st.composite
def mutated_requests(draw: st.DrawFn, cases: list[tuple[int, int]] = API_CASES) -> bytes:
    """A valid request with its bytes broken: hostile chunks, truncation, bit flips, growth."""
    data = draw(broken(draw(requests(cases))[4:]))  # the frame without its size
    return struct.pack(">i", len(data)) + data


@st.composite
def broken(draw: st.DrawFn, base: bytes) -> bytes:
    """``base`` broken 1-3 times: hostile chunks, truncation, bit flips, growth."""
    data = bytearray(base)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["overwrite", "insert", "truncate", "flip", "extend"]))
        pos = draw(st.integers(0, len(data)))
        if op == "overwrite":
            chunk = draw(st.sampled_from(HOSTILE_CHUNKS))
            data[pos:pos + len(chunk)] = chunk
        elif op == "insert":
            data[pos:pos] = draw(st.sampled_from(HOSTILE_CHUNKS))
        elif op == "truncate":
            del data[pos:]
        elif op == "extend":
            data += draw(st.binary(min_size=1, max_size=16))
        elif data:
            data[min(pos, len(data) - 1)] ^= 1 << draw(st.integers(0, 7))
    return bytes(data)


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


@st.composite
def random_frames(draw: st.DrawFn) -> bytes:
    """Random bytes in a frame, sometimes behind a real (api key, version) header prefix."""
    head = draw(st.just(b"") | st.sampled_from(
        [struct.pack(">hhi", k, v, 1) for k, v in API_CASES]
        + [encode_request_header(k, v, 1, None, flexible=is_flexible_request(k, v))
           for k, v in API_CASES]))
    return _frame(head + draw(st.binary(max_size=120 if not head else 60)))


@st.composite
def mismatched_versions(draw: st.DrawFn) -> bytes:
    """The body of one version (or API) under the header of another."""
    api_key, version = draw(st.sampled_from(API_CASES))
    body_frame = _encode(draw(entity(request_class(api_key, version))), draw) or _FALLBACK
    header, offset = parse_request_header(body_frame[4:])
    body = body_frame[4 + offset:]
    claimed_key = draw(st.just(api_key) | st.sampled_from([k for k, _ in API_CASES]))
    claimed_version = draw(st.sampled_from(
        [v for k, v in API_CASES if k == claimed_key] + [-1, 99, 32767]))
    flexible = draw(st.sampled_from([is_flexible_request(claimed_key, claimed_version),
                                     not is_flexible_request(claimed_key, claimed_version)]))
    head = encode_request_header(claimed_key, claimed_version, header.correlation_id,
                                 header.client_id, flexible=flexible)
    return _frame(head + body)


# --- targeted breakage of one length field --------------------------------------------


def _length_fields(cls: type) -> list[tuple[dataclasses.Field[Any], str]]:
    """Top-level untagged fields that start with a length: (field, "array"/"string"/"bytes")."""
    sites = []
    for f in dataclasses.fields(cls):
        schema = field_schema(f)
        if schema.tag is not None:
            continue
        if schema.is_array:
            sites.append((f, "array"))
        elif schema.kafka_type in ("string", "bytes", "records"):
            sites.append((f, "string" if schema.kafka_type == "string" else "bytes"))
    return sites


def _one_value(field: dataclasses.Field[Any], shape: str, draw: st.DrawFn) -> Any:
    nested = field_schema(field).entity
    if shape == "string":
        return "a"
    if shape == "bytes":
        return b"a"
    if nested is not None:  # shape "array": an array of structs
        return (draw(entity(nested, 3)),)
    return (draw(_scalar(field, field.name)),)


def _empty_value(shape: str) -> Any:
    return {"array": (), "string": "", "bytes": b""}[shape]


@st.composite
def _length_site(draw: st.DrawFn) -> tuple[bytes, int, int, str, bool, bool] | None:
    """A valid frame and where one of its top-level length fields sits.

    Returns (frame payload, position of the length, its width, shape,
    flexible, nullable). The position is found by encoding the field empty and
    with one element: the first byte that differs is the length's last byte
    (legacy) or its only byte (compact, lengths below 127).
    """
    api_key, version = draw(st.sampled_from(API_CASES))
    cls = request_class(api_key, version)
    sites = _length_fields(cls)
    if not sites:
        return None
    field, shape = draw(st.sampled_from(sites))
    base = draw(entity(cls))
    empty = _encode(dataclasses.replace(base, **{field.name: _empty_value(shape)}), draw)
    one_value = _one_value(field, shape, draw)
    if empty is None:
        return None
    try:
        one = encode_request(dataclasses.replace(base, **{field.name: one_value}),
                             correlation_id=struct.unpack_from(">i", empty, 8)[0],
                             client_id=None)
    except Exception:
        return None
    flexible = cls.__flexible__
    header_len = parse_request_header(empty[4:])[1]
    header_len_one = parse_request_header(one[4:])[1]
    a, b = empty[4 + header_len:], one[4 + header_len_one:]
    diff = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
    if diff is None:
        return None
    width = 1 if flexible else (2 if shape == "string" else 4)
    pos = header_len + diff - (width - 1)
    return empty[4:], pos, width, shape, flexible, field_schema(field).optional


@st.composite
def huge_declared_lengths(draw: st.DrawFn) -> bytes:
    """One top-level array/string/bytes length replaced by a count far beyond the frame."""
    site = draw(_length_site())
    if site is None:
        return _FALLBACK
    payload, pos, width, _shape, flexible, _ = site
    if flexible:
        planted = write_uvarint(draw(st.sampled_from([2**32 - 1, 2**31, 2**24, 2**20,
                                                      len(payload) + 2])))
    else:
        fmt = ">h" if width == 2 else ">i"
        top = 2**15 - 1 if width == 2 else 2**31 - 1
        planted = struct.pack(fmt, draw(st.sampled_from(
            [top, 2**14, len(payload) + 1, -2, -(2**(8 * width - 1))])))
    return _frame(payload[:pos] + planted + payload[pos + width:])


@st.composite
def nulls_where_not_nullable(draw: st.DrawFn) -> bytes:
    """A null (length -1, or compact 0) in a top-level field whose schema forbids null."""
    site = draw(_length_site().filter(lambda s: s is None or not s[5]))
    if site is None:
        return _FALLBACK
    payload, pos, width, _shape, flexible, _ = site
    null = b"\x00" if flexible else b"\xff" * width
    return _frame(payload[:pos] + null + payload[pos + width:])


@st.composite
def unknown_tagged_fields(draw: st.DrawFn) -> bytes:
    """A valid flexible request carrying tagged fields no schema knows (Kafka skips them)."""
    api_key, version = draw(st.sampled_from(
        [(k, v) for k, v in API_CASES if request_class(k, v).__flexible__]))
    cls = request_class(api_key, version)
    base = draw(entity(cls))
    # Known top-level tagged fields back to their defaults, so the body ends with an
    # empty tag section we can replace.
    defaults = {f.name: f.default for f in dataclasses.fields(cls)
                if field_schema(f).tag is not None and f.default is not dataclasses.MISSING}
    frame = _encode(dataclasses.replace(base, **defaults), draw)
    if frame is None or not frame.endswith(b"\x00"):
        return _FALLBACK
    tags = draw(st.lists(st.tuples(st.integers(100, 2**31 - 1), st.binary(max_size=12)),
                         min_size=1, max_size=3, unique_by=lambda t: t[0]))
    section = write_uvarint(len(tags)) + b"".join(
        write_uvarint(tag) + write_uvarint(len(data)) + data for tag, data in sorted(tags))
    payload = frame[4:-1] + section
    if draw(st.booleans()):
        # The header's own tag section (right after the client id) gets one too.
        _, offset = parse_request_header(payload)
        assert payload[offset - 1] == 0
        payload = payload[:offset - 1] + b"\x01\x7f\x02hi" + payload[offset:]
    return _frame(payload)


# ----------------------------------------------------------------------------- the oracle


def _decodes_locally(frame: bytes, advertised: dict[int, tuple[int, int]]) -> tuple[Any, Any]:
    """(header, request) if ``frame`` is a valid request the broker advertises, else Nones."""
    try:
        header, offset = parse_request_header(frame)
        low, high = advertised[header.api_key]
        if not low <= header.api_version <= high:
            return header, None
        return header, decode_request(header, frame, offset)
    except (ProtocolError, KeyError):
        return None, None


def _decoded_response(frame: bytes, header: Any) -> Any | None:
    """The response entity if ``frame`` answers ``header``'s request in the right shape."""
    if header is None or len(frame) < 4:
        return None
    (correlation_id,) = struct.unpack_from(">i", frame)
    if correlation_id != header.correlation_id:
        return None
    versions = [header.api_version, 0] if header.api_key == ApiKey.API_VERSIONS \
        else [header.api_version]
    for version in versions:
        try:
            return decode_response(header.api_key, version, frame)[1]
        except Exception:
            continue
    return None


def has_error(value: Any) -> bool:
    """Whether any error_code anywhere in a response entity is set."""
    if isinstance(value, tuple):
        return any(has_error(v) for v in value)
    if dataclasses.is_dataclass(value):
        return any(
            (f.name == "error_code" and getattr(value, f.name) != ErrorCode.none)
            or has_error(getattr(value, f.name)) for f in dataclasses.fields(value))
    return False


# Outcome classes, as the soak reports them.
ERROR_RESPONSE, OK_RESPONSE, CLOSED, HELD = "error response", "ok response", "closed", "held"


def _api_key(frame: bytes) -> int | None:
    """The API key a size-prefixed frame's header claims (None: too short to say)."""
    return struct.unpack_from(">h", frame, 4)[0] if len(frame) >= 6 else None


def _read_or_close(wire: Wire) -> bytes | None:
    """The next frame; None once the connection is closed (TimeoutError if neither)."""
    try:
        return wire.read_frame()
    except TimeoutError:
        raise
    except (OSError, ProtocolError):
        return None


def exchange(target: Target, sent: bytes, *, framed: bool = True, pre_auth: bool = False,
             wire: Wire | None = None) -> str:
    """Send ``sent`` and the probe on one connection; check what comes back.

    Whatever comes back must be well-formed: a response carries the request's
    correlation id and decodes as the request's version, and then the probe is
    answered or the connection closed. A valid request never costs its
    connection (a handler crash would). Returns the outcome class.

    ``framed``: ``sent`` is exactly one frame, so its header tells what any
    response must look like (unframed bytes may swallow the probe instead).

    ``pre_auth``: the broker requires SASL and this connection has not logged
    in. Then a frame of any API but ApiVersions, SaslHandshake and
    SaslAuthenticate must close the connection unanswered, and after the probe
    a Metadata request (the guard) must too: nothing ``sent`` did may have
    authenticated the connection.

    ``wire``: an open connection to use (a SASL exchange already under way);
    by default a fresh one.
    """
    header, request = _decodes_locally(sent[4:], target.advertised) if framed else (None, None)
    refused = pre_auth and framed and _api_key(sent) not in PRE_AUTH_APIS
    served = request is not None and not refused  # the broker must answer it
    outcome = CLOSED
    with contextlib.nullcontext(wire) if wire is not None else \
            Wire(target.broker.bootstrap, timeout_s=ANSWER_TIMEOUT_S) as conn:
        with contextlib.suppress(OSError):  # closed while we were still writing: fine
            conn.send(sent + PROBE + (GUARD if pre_auth else b""))
            # EOF after the probe: a frame announced but never completed ends the
            # connection instead of waiting for connections.max.idle.ms.
            conn.sock.shutdown(socket.SHUT_WR)
        if served and header.api_key == ApiKey.FETCH and \
                millis(request.max_wait) / 1000 >= ANSWER_TIMEOUT_S / 2:
            # A (mutated) long poll: the broker rightly holds it for max_wait.
            assert process_alive(target.pid)
            return HELD
        while True:
            try:
                frame = _read_or_close(conn)
            except TimeoutError:
                if served and header.api_key in GROUP_WAITS:
                    return HELD  # a JoinGroup/SyncGroup rightly waits for the rest of its group
                raise AssertionError(f"no answer and no close within {ANSWER_TIMEOUT_S} s "
                                     f"for {sent!r}") from None
            if frame is None:
                acks_zero = served and header.api_key == ApiKey.PRODUCE and request.acks == 0
                # Closing after the answer is fine (Kafka does after a failed SASL handshake).
                assert not served or acks_zero or outcome != CLOSED, \
                    f"the broker closed the connection on a valid request: {request!r}"
                break
            assert not refused, \
                f"api {_api_key(sent)} answered before authentication: {frame[:64]!r}"
            if frame[:4] == struct.pack(">i", PROBE_CORRELATION_ID):
                _, probe = decode_response(ApiKey.API_VERSIONS, 0, frame)
                assert probe.error_code == ErrorCode.none
                if pre_auth:
                    try:
                        guard = _read_or_close(conn)
                    except TimeoutError:
                        raise AssertionError("Metadata before authentication neither "
                                             f"answered nor closed after {sent!r}") from None
                    assert guard is None, \
                        f"Metadata answered before authentication, after {sent[:200]!r}"
                break
            if framed:
                response = _decoded_response(frame, header)
                assert response is not None, f"malformed response {frame[:64]!r} to {sent[:64]!r}"
                outcome = ERROR_RESPONSE if has_error(response) else OK_RESPONSE
            else:
                outcome = OK_RESPONSE
    assert process_alive(target.pid), f"the broker died on {sent!r}"
    return outcome


class Tally:
    """Outcome counts for a fuzz run."""

    def __init__(self) -> None:
        self.outcomes: Counter[str] = Counter()

    def add(self, outcome: str) -> None:
        self.outcomes[outcome] += 1

    @property
    def total(self) -> int:
        return sum(self.outcomes.values())


def strategies() -> dict[str, st.SearchStrategy[bytes]]:
    """Every kind of hostile input, by name (framed inputs only)."""
    return {
        "random frame": random_frames(),
        "hostile values": requests(),
        "mutated frame": mutated_requests(),
        "mismatched version": mismatched_versions(),
        "huge declared length": huge_declared_lengths(),
        "null where not nullable": nulls_where_not_nullable(),
        "unknown tagged fields": unknown_tagged_fields(),
    }


@contextlib.contextmanager
def rss_sampled(pid: int) -> Iterator[dict[str, int]]:
    """RSS of ``pid`` in KiB before and after the block (from /proc)."""
    sample = {"before_kb": process_rss_kb(pid)}
    yield sample
    sample["after_kb"] = process_rss_kb(pid)
