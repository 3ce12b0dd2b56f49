"""Codec: round trips for every advertised API version, the guard, KIP-511, errors."""

from __future__ import annotations

import datetime
import random
import struct
from dataclasses import fields, replace
from typing import Any

import pytest

from slog.protocol import (
    ALL_APIS,
    API_BY_KEY,
    ApiKey,
    ErrorCode,
    MalformedRequestError,
    MalformedResponseError,
    RequestHeader,
    UnsupportedVersionError,
    api_versions_fallback_response,
    api_versions_response,
    api_versions_table,
    decode_request,
    decode_response,
    encode_request,
    encode_request_header,
    encode_response,
    error_response,
    is_flexible_request,
    parse_request_header,
    request_class,
    response_class,
)
from tests.unit.test_protocol_support import ALL_CASES, encode_body, random_entity

SEEDS_PER_CLASS = 12


def _request_frame(entity: Any, corr: int = 1, client_id: str | None = "t") -> bytes:
    """An encoded request without its size prefix, as read_frame returns it."""
    raw = encode_request(entity, correlation_id=corr, client_id=client_id)
    assert struct.unpack_from(">i", raw)[0] == len(raw) - 4
    return raw[4:]


@pytest.mark.parametrize(("api_key", "version"), ALL_CASES)
def test_request_roundtrip_every_version(api_key: int, version: int) -> None:
    rng = random.Random(api_key * 100 + version)
    cls = request_class(api_key, version)
    for i in range(SEEDS_PER_CLASS):
        entity = random_entity(cls, rng)
        client_id = None if i % 4 == 0 else f"client-{i}"
        frame = _request_frame(entity, corr=i * 7919, client_id=client_id)
        header, offset = parse_request_header(frame)
        assert header.api_key == api_key and header.api_version == version
        assert header.correlation_id == i * 7919 and header.client_id == client_id
        assert header.flexible == cls.__flexible__
        assert decode_request(header, frame, offset) == entity


@pytest.mark.parametrize(("api_key", "version"), ALL_CASES)
def test_response_roundtrip_every_version(api_key: int, version: int) -> None:
    rng = random.Random(api_key * 1000 + version)
    cls = response_class(api_key, version)
    header = RequestHeader(api_key, version, 0, "t", 2 if cls.__flexible__ else 1)
    for i in range(SEEDS_PER_CLASS):
        entity = random_entity(cls, rng)
        if api_key == ApiKey.API_VERSIONS and version and entity.error_code:
            continue  # errors are read as v0 (KIP-511 fallback), tested below
        raw = encode_response(header._replace(correlation_id=i), entity)
        assert struct.unpack_from(">i", raw)[0] == len(raw) - 4
        assert decode_response(api_key, version, raw[4:]) == (i, entity)


def test_trailing_bytes_after_request_body_are_tolerated() -> None:
    entity = random_entity(request_class(3, 9), random.Random(1))
    frame = _request_frame(entity) + b"trailing garbage"
    header, offset = parse_request_header(frame)
    assert decode_request(header, frame, offset) == entity


def test_decode_request_accepts_memoryview_and_bytearray() -> None:
    entity = random_entity(request_class(0, 9), random.Random(2))
    frame = _request_frame(entity)
    header, offset = parse_request_header(frame)
    assert decode_request(header, memoryview(frame), offset) == entity
    assert decode_request(header, bytearray(frame), offset) == entity


def test_unknown_key_or_version_raises_unsupported() -> None:
    for key, version in [(99, 0), (0, 2), (1, 3), (3, 99), (7, 0)]:
        flexible = is_flexible_request(key, version)
        frame = encode_request_header(key, version, 5, "c", flexible=flexible)
        header, offset = parse_request_header(frame)
        with pytest.raises(UnsupportedVersionError):
            decode_request(header, frame, offset)


def test_encode_response_rejects_wrong_version() -> None:
    header = RequestHeader(3, 5, 1, None, 1)
    entity = random_entity(response_class(3, 6), random.Random(3))
    with pytest.raises(ValueError):
        encode_response(header, entity)


# --- the guard around kio's native reader -------------------------------------------


@pytest.mark.parametrize(
    ("api_key", "version", "body"),
    [
        # Metadata v12 (flexible): compact array announcing ~4 billion topics.
        # kio 0.6.5 alone aborts the process with a failed 32 GB allocation.
        (3, 12, b"\xff\xff\xff\xff\x0f"),
        # Metadata v1: legacy int32 array of 2**31 - 1 topics.
        (3, 1, b"\x7f\xff\xff\xff"),
        # Produce v3: 2**31 - 1 topics after a null transactional id, acks, timeout.
        (0, 3, b"\xff\xff" + b"\x00\x01" + b"\x00\x00\x03\xe8" + b"\x7f\xff\xff\xff"),
        # OffsetFetch v1: primitive int32 array nested in a topic.
        (9, 1, b"\x00\x01g" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x7f\xff\xff\xff"),
        # ListGroups v4 (flexible): compact array of strings, huge.
        (16, 4, b"\xfe\xff\xff\xff\x0f\x00"),
        # More tagged fields than bytes.
        (18, 3, b"\x01a\x01b\xff\xff\xff\xff\x0f"),
    ],
)
def test_huge_array_lengths_are_rejected_not_allocated(
    api_key: int, version: int, body: bytes
) -> None:
    header_bytes = encode_request_header(
        api_key, version, 77, "c", flexible=request_class(api_key, version).__flexible__
    )
    frame = header_bytes + body
    header, offset = parse_request_header(frame)
    with pytest.raises(MalformedRequestError) as info:
        decode_request(header, frame, offset)
    assert info.value.correlation_id == 77


def _with_tags(entity: Any, tags: bytes) -> tuple[RequestHeader, bytes, int]:
    """Encode `entity` and replace its (empty) top-level tag section by `tags`."""
    frame = _request_frame(entity)
    assert frame.endswith(b"\x00")
    frame = frame[:-1] + tags
    header, offset = parse_request_header(frame)
    return header, frame, offset


def test_unknown_tagged_fields_are_skipped() -> None:
    # ApiVersions v3 request knows no tagged fields at all; a future client
    # may send some. Kafka ignores them; kio alone raises KeyError.
    cls = request_class(18, 3)
    entity = cls(client_software_name="x", client_software_version="1")
    header, frame, offset = _with_tags(entity, b"\x02" + b"\x05\x02hi" + b"\x7f\x00")
    assert decode_request(header, frame, offset) == entity


def test_known_and_unknown_tagged_fields_mix() -> None:
    # Fetch v12 request: tag 0 is cluster_id (compact nullable string).
    cls = request_class(1, 12)
    entity = random_entity(cls, random.Random(5))
    entity = replace(entity, cluster_id=None)
    tags = b"\x03" + b"\x00\x04\x04abc" + b"\x09\x01z" + b"\x0a\x00"
    header, frame, offset = _with_tags(entity, tags)
    assert decode_request(header, frame, offset) == replace(entity, cluster_id="abc")


def test_tagged_field_size_mismatch_is_malformed() -> None:
    cls = request_class(1, 12)
    entity = replace(random_entity(cls, random.Random(6)), cluster_id=None)
    # Declares 6 bytes, but the compact string inside only takes 4.
    header, frame, offset = _with_tags(entity, b"\x01\x00\x06\x04abc\x00\x00")
    with pytest.raises(MalformedRequestError):
        decode_request(header, frame, offset)


def test_every_parse_failure_is_a_malformed_request() -> None:
    cls = request_class(3, 1)
    frame = _request_frame(cls(topics=()))
    header, offset = parse_request_header(frame)
    cases = [
        frame[:offset] + b"\x00\x00\x00\x01\x00\x02\xff\xfe",  # invalid UTF-8 topic name
        frame[:offset] + b"\x00\x00\x00\x01\xff\xf0",  # negative string length
        frame[:offset] + b"\x00\x00",  # truncated array length
        frame[:offset] + b"\xff\xff\xff\xf0",  # negative array length
    ]
    for bad in cases:
        with pytest.raises(MalformedRequestError):
            decode_request(header, bad, offset)


# --- ApiVersions and KIP-511 ---------------------------------------------------------


def test_api_versions_response_all_versions() -> None:
    table = api_versions_table(key for key in ApiKey)
    for version in range(0, 4):
        entity = api_versions_response(version, table, throttle_ms=7)
        raw = encode_response(RequestHeader(18, version, 3, None, 1), entity)
        # ApiVersions responses never carry a tagged header section (KIP-511).
        assert raw[4:8] == b"\x00\x00\x00\x03"
        corr, back = decode_response(18, version, raw[4:])
        assert corr == 3
        assert [(k.api_key, k.min_version, k.max_version) for k in back.api_keys] == [
            (s.api_key, s.min_version, s.max_version) for s in table
        ]
        if version >= 1:
            assert back.throttle_time == datetime.timedelta(milliseconds=7)


def test_kip511_fallback_is_a_v0_response() -> None:
    table = api_versions_table([0, 1, 3])
    raw = api_versions_fallback_response(99, table)
    assert struct.unpack_from(">i", raw)[0] == len(raw) - 4
    # Byte layout: corr id, error 35, legacy array of (key, min, max) int16s.
    expected = struct.pack(">ihi", 99, 35, len(table)) + b"".join(
        struct.pack(">hhh", s.api_key, s.min_version, s.max_version) for s in table
    )
    assert raw[4:] == expected
    corr, body = decode_response(18, 0, raw[4:])
    assert corr == 99 and body.error_code == ErrorCode.unsupported_version
    assert {k.api_key for k in body.api_keys} == {0, 1, 3, 18}


def test_client_reads_fallback_when_it_asked_for_v3() -> None:
    raw = api_versions_fallback_response(5, api_versions_table([]))
    corr, body = decode_response(18, 3, raw[4:])
    assert corr == 5
    assert type(body) is response_class(18, 0)
    assert body.error_code == ErrorCode.unsupported_version


def test_decode_response_garbage_raises_malformed_response() -> None:
    with pytest.raises(MalformedResponseError):
        decode_response(3, 12, b"\x00\x00\x00\x01\x00\xff\xff\xff\xff\x0f")
    with pytest.raises(MalformedResponseError):
        decode_response(3, 1, b"\x00\x00")


# --- error responses -------------------------------------------------------------------


@pytest.mark.parametrize(("api_key", "version"), ALL_CASES)
def test_error_response_for_every_version(api_key: int, version: int) -> None:
    rng = random.Random(api_key * 7 + version)
    request = random_entity(request_class(api_key, version), rng, full=True)
    header = RequestHeader(api_key, version, 11, "c", 1)
    code = ErrorCode.not_leader_or_follower
    for req in (request, None):
        response = error_response(header, req, code)
        if api_key == ApiKey.API_VERSIONS:
            assert response is None  # errors go out as api_versions_fallback_response
            continue
        if response is None:
            assert req is None, "every API must answer when the request decoded"
            continue
        assert type(response) is response_class(api_key, version)
        corr, back = decode_response(api_key, version, encode_response(header, response)[4:])
        assert corr == 11 and back == response
        assert code in set(_error_codes(response)), response


def _error_codes(entity: Any) -> list[ErrorCode]:
    found: list[ErrorCode] = []
    for f in fields(entity):
        value = getattr(entity, f.name)
        if isinstance(value, ErrorCode):
            found.append(value)
        elif isinstance(value, tuple):
            for item in value:
                if hasattr(item, "__dataclass_fields__"):
                    found.extend(_error_codes(item))
        elif hasattr(value, "__dataclass_fields__"):
            found.extend(_error_codes(value))
    return found


def test_error_response_mirrors_produce_partitions() -> None:
    cls = request_class(0, 9)
    topic_cls = cls.__dataclass_fields__["topic_data"].type.__args__[0]
    part_cls = topic_cls.__dataclass_fields__["partition_data"].type.__args__[0]
    request = cls(
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=1),
        topic_data=(
            topic_cls(name="a", partition_data=(part_cls(index=0, records=b""),)),
            topic_cls(name="b", partition_data=(part_cls(index=3, records=None),)),
        ),
    )
    response = error_response(RequestHeader(0, 9, 1, None, 2), request, 3)
    assert response is not None
    rows = [
        (t.name, p.index, p.error_code, p.base_offset)
        for t in response.responses
        for p in t.partition_responses
    ]
    assert rows == [
        ("a", 0, ErrorCode.unknown_topic_or_partition, -1),
        ("b", 3, ErrorCode.unknown_topic_or_partition, -1),
    ]


def test_error_response_unknown_api_is_none() -> None:
    assert error_response(RequestHeader(99, 0, 1, None, 1), None, 35) is None
    assert error_response(RequestHeader(0, 2, 1, None, 1), None, 35) is None


def test_specs_match_their_kio_classes() -> None:
    for spec in ALL_APIS:
        assert API_BY_KEY[spec.api_key] is spec
        for version in (spec.min_version, spec.max_version):
            req, resp = request_class(spec.api_key, version), response_class(spec.api_key, version)
            assert req.__api_key__ == resp.__api_key__ == spec.api_key
            assert req.__version__ == resp.__version__ == version
            assert isinstance(encode_body(random_entity(req, random.Random(0))), bytes)
