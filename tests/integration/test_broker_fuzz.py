"""Hypothesis fuzzing of a live broker over TCP.

Three kinds of input, each sent on a fresh connection and followed by a probe
(an ApiVersions v0 request) on the same connection:

* random frames;
* structurally valid requests of every API and version the broker
  advertises, built from kio's schemas with hostile values (negative and
  extreme integers, illegal and duplicate topic names, out-of-range
  partitions, corrupt record batches, zero and negative waits);
* those requests encoded, then mutated (hostile length fields, truncation,
  bit flips).

Per input, whatever comes back must be well-formed: responses carry the
request's correlation id and decode as the request's version, and then the
probe is answered or the connection is closed. A request that is valid Kafka
must never cost its connection (a handler crash would). After the run the
broker is alive, has no tracebacks in its log, stays under a memory bound,
and serves normal clients.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import socket
import struct
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    classify_field,
    get_schema_field_type,
    is_optional,
)

from slog.core.names import parse_partition_dir_name
from slog.protocol.apis import ApiKey, request_class
from slog.protocol.codec import decode_request, decode_response, encode_request
from slog.protocol.errors import ErrorCode, ProtocolError
from slog.protocol.headers import parse_request_header
from slog.protocol.shapes import millis
from tests.brokers import BrokerProcess, running_broker
from tests.compat.clients import (
    CANARY_TOPIC,
    RECENT_MS,
    Rec,
    Wire,
    assert_serving,
    create_topic,
    kcat_metadata,
    process_alive,
    process_rss_kb,
    slog_connection,
    slog_consume,
    slog_produce,
)

RSS_LIMIT_KB = 300 * 1024
GROUP_WAITS = (ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP)
ANSWER_TIMEOUT_S = 5.0
PROBE_CORRELATION_ID = 0x7EADBEEF
_PROBE_BODY = struct.pack(">hhih", ApiKey.API_VERSIONS, 0, PROBE_CORRELATION_ID, 5) + b"probe"
PROBE = struct.pack(">i", len(_PROBE_BODY)) + _PROBE_BODY
SETTINGS = {"deadline": None, "derandomize": False, "database": None,
            "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}


# ----------------------------------------------------------------------------- the broker


class Target:
    def __init__(self, broker: BrokerProcess, advertised: dict[int, tuple[int, int]],
                 baseline: list[Any]):
        self.broker = broker
        self.advertised = advertised
        self.baseline = baseline

    def __repr__(self) -> str:  # Hypothesis prints it with every falsifying example
        return f"Target({self.broker.bootstrap})"


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    # No auto-creation, so random Metadata names cannot fill the disk with topics.
    data_dir = tmp_path_factory.mktemp("fuzz") / "data"
    with running_broker(data_dir, **{"auto.create.topics.enable": "false"}) as broker:
        create_topic(broker.bootstrap, "fz-keep", partitions=2)
        for partition in (0, 1):
            slog_produce(broker.bootstrap, "fz-keep",
                         [Rec(b"k%d" % i, b"v%d" % i, (), RECENT_MS + i) for i in range(10)],
                         partition=partition)
        for topic in [*TOPICS[:3], CANARY_TOPIC]:
            create_topic(broker.bootstrap, topic)
        with slog_connection(broker.bootstrap) as conn:
            advertised = dict(conn.versions)
        yield Target(broker, advertised, _keep_records(broker))


def _keep_records(broker: BrokerProcess) -> list[Any]:
    return [slog_consume(broker.bootstrap, "fz-keep", p) for p in (0, 1)]


# ----------------------------------------------------------------------------- inputs

# Requests may create, alter and delete these (never "fz-keep", whose data is checked).
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
RECORDS = [None, b"", GOOD_BATCH, _batch(3), GOOD_BATCH[:-1] + b"\x00", GOOD_BATCH * 2,
           GOOD_BATCH[:61], GOOD_BATCH[:16] + b"\x01" + GOOD_BATCH[17:]]
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
CONFIG_VALUES = [None, "", "-1", "0", "1", "14", "compact", "delete,compact", "abc",
                 "99999999999999999999999", "LogAppendTime"]


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


def _scalar(field: dataclasses.Field[Any], name: str) -> st.SearchStrategy[Any]:
    kind = get_schema_field_type(field)
    if kind in INT_RANGES:
        return _ints(kind, name)
    if kind == "string":
        if name == "name" or "topic" in name or name == "resource_name":
            return st.sampled_from(TOPICS) | TEXT
        if "config" in name or name == "key":
            return st.sampled_from(CONFIG_NAMES)
        if name == "value":
            return st.sampled_from([v for v in CONFIG_VALUES if v is not None])
        return TEXT
    if kind in ("bytes", "records"):
        return st.sampled_from([r for r in RECORDS if r is not None]) | st.binary(max_size=80)
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


def _field(field: dataclasses.Field[Any], depth: int) -> st.SearchStrategy[Any]:
    kind = classify_field(field)
    if isinstance(kind, EntityField | EntityTupleField):
        item: st.SearchStrategy[Any] = st.deferred(lambda: entity(kind.type_, depth + 1))
    else:
        item = _scalar(field, field.name)
    values = st.lists(item, max_size=3 if depth < 3 else 1).map(tuple) if kind.is_array \
        else item
    if is_optional(field):
        values = st.none() | values
    return values


@functools.cache
def entity(cls: type, depth: int = 0) -> st.SearchStrategy[Any]:
    """Hostile instances of a kio request class (or one of its nested structs)."""
    return st.fixed_dictionaries({f.name: _field(f, depth) for f in dataclasses.fields(cls)}
                                 ).map(lambda kwargs: cls(**kwargs))


def _api_cases() -> list[tuple[int, int]]:
    from slog.broker.handlers import all_handlers
    from slog.protocol.apis import api_versions_table

    return [(spec.api_key, v) for spec in api_versions_table(all_handlers())
            for v in range(spec.min_version, spec.max_version + 1)]


API_CASES = _api_cases()


@st.composite
def requests(draw: st.DrawFn) -> bytes:
    api_key, version = draw(st.sampled_from(API_CASES))
    body = draw(entity(request_class(api_key, version)))
    try:
        return encode_request(body, correlation_id=draw(st.integers(-(2**31), 2**31 - 1)),
                              client_id=draw(st.none() | TEXT))
    except Exception:  # a value kio cannot encode (out of range for its field)
        return encode_request(request_class(ApiKey.API_VERSIONS, 0)(), correlation_id=1,
                              client_id=None)


HOSTILE_CHUNKS = [b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff", b"\xff\xff\xff\xfe",
                  b"\x80\x00\x00\x00", b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\xff",
                  b"\x00", b"\xff", b"\x00\x00\x00\x00"]


@st.composite
def mutated_requests(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(requests())[4:])  # the frame without its size
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["overwrite", "insert", "truncate", "flip"]))
        pos = draw(st.integers(0, len(data)))
        if op == "overwrite":
            chunk = draw(st.sampled_from(HOSTILE_CHUNKS))
            data[pos:pos + len(chunk)] = chunk
        elif op == "insert":
            data[pos:pos] = draw(st.sampled_from(HOSTILE_CHUNKS))
        elif op == "truncate":
            del data[pos:]
        elif data:
            data[min(pos, len(data) - 1)] ^= draw(st.integers(1, 255))
    return struct.pack(">i", len(data)) + bytes(data)


# ----------------------------------------------------------------------------- checking


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


def _valid_response(frame: bytes, header: Any) -> bool:
    if header is None or len(frame) < 4:
        return False
    (correlation_id,) = struct.unpack_from(">i", frame)
    if correlation_id != header.correlation_id:
        return False
    versions = [header.api_version, 0] if header.api_key == ApiKey.API_VERSIONS \
        else [header.api_version]
    for version in versions:
        try:
            decode_response(header.api_key, version, frame)
        except Exception:
            continue
        return True
    return False


def exchange(target: Target, sent: bytes, *, framed: bool = True) -> None:
    """Send ``sent`` and the probe on one connection; check what comes back.

    ``framed``: ``sent`` is exactly one frame, so its header tells what any
    response must look like (unframed bytes may swallow the probe instead).
    """
    pid = target.broker.info.pid if target.broker.info else -1
    header, request = _decodes_locally(sent[4:], target.advertised) if framed else (None, None)
    with Wire(target.broker.bootstrap, timeout_s=ANSWER_TIMEOUT_S) as wire:
        with contextlib.suppress(OSError):  # closed while we were still writing: fine
            wire.send(sent + PROBE)
            # EOF after the probe: a frame announced but never completed ends the
            # connection instead of waiting for connections.max.idle.ms.
            wire.sock.shutdown(socket.SHUT_WR)
        if request is not None and header.api_key == ApiKey.FETCH and \
                millis(request.max_wait) / 1000 >= ANSWER_TIMEOUT_S / 2:
            # A (mutated) long poll: the broker rightly holds it for max_wait.
            assert process_alive(pid)
            return
        while True:
            try:
                frame = wire.read_frame()
            except TimeoutError:
                if request is not None and header.api_key in GROUP_WAITS:
                    break  # a JoinGroup/SyncGroup rightly waits for the rest of its group
                raise AssertionError(f"no answer and no close within {ANSWER_TIMEOUT_S} s "
                                     f"for {sent!r}") from None
            except (OSError, ProtocolError):
                frame = None
            if frame is None:
                acks_zero = request is not None and header.api_key == ApiKey.PRODUCE \
                    and request.acks == 0
                assert request is None or acks_zero, \
                    f"the broker closed the connection on a valid request: {request!r}"
                break
            if frame[:4] == struct.pack(">i", PROBE_CORRELATION_ID):
                _, probe = decode_response(ApiKey.API_VERSIONS, 0, frame)
                assert probe.error_code == ErrorCode.none
                break
            assert not framed or _valid_response(frame, header), \
                f"malformed response {frame[:64]!r} to {sent[:64]!r}"
    assert process_alive(pid), f"the broker died on {sent!r}"


# ----------------------------------------------------------------------------- tests


@settings(max_examples=700, **SETTINGS)
@given(frame=st.binary(min_size=0, max_size=120) | st.builds(
    lambda head, body: head + body,
    st.sampled_from([struct.pack(">hhi", k, v, 1) for k, v in API_CASES[::3]]),
    st.binary(max_size=60)))
def test_random_frames(target: Target, frame: bytes) -> None:
    exchange(target, struct.pack(">i", len(frame)) + frame)


@settings(max_examples=200, **SETTINGS)
@given(raw=st.binary(min_size=1, max_size=64))
def test_random_unframed_bytes(target: Target, raw: bytes) -> None:
    exchange(target, raw, framed=False)


@settings(max_examples=1500, **SETTINGS)
@given(sent=requests())
def test_hostile_valid_requests(target: Target, sent: bytes) -> None:
    exchange(target, sent)


@settings(max_examples=1200, **SETTINGS)
@given(sent=mutated_requests())
def test_mutated_requests(target: Target, sent: bytes) -> None:
    exchange(target, sent)


def test_broker_survived(target: Target) -> None:
    """Runs last in this module: the broker is alive, bounded, clean and useful."""
    broker = target.broker
    assert broker.info is not None
    assert process_alive(broker.info.pid)
    rss = process_rss_kb(broker.info.pid)
    assert rss < RSS_LIMIT_KB, f"broker RSS is {rss // 1024} MiB after fuzzing"
    assert "Traceback" not in broker.log_text, broker.log_text[-6000:]
    assert _keep_records(broker) == target.baseline
    assert_serving(broker.bootstrap)
    assert kcat_metadata(broker.bootstrap)["brokers"][0]["id"] == broker.broker_id
    # Nothing was created outside the data dir, and every log dir is a legal topic's.
    assert [p.name for p in broker.data_dir.parent.iterdir()] == [broker.data_dir.name]
    for log_dir in (broker.data_dir / "brokers" / str(broker.broker_id) / "logs").iterdir():
        parse_partition_dir_name(log_dir.name)
