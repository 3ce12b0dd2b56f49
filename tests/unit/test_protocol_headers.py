"""Request/response header parsing, including keys and versions we don't know."""

from __future__ import annotations

import struct

import pytest

from slog.protocol import (
    MalformedRequestError,
    RequestHeader,
    encode_request_header,
    encode_response_header,
    is_flexible_request,
    parse_request_header,
    response_header_version,
)


def _v1(api_key: int, version: int, corr: int, client_id: bytes | None) -> bytes:
    cid = b"\xff\xff" if client_id is None else struct.pack(">h", len(client_id)) + client_id
    return struct.pack(">hhi", api_key, version, corr) + cid


def test_parse_v1_header() -> None:
    frame = _v1(3, 1, 42, b"my-client") + b"BODY"
    header, offset = parse_request_header(frame)
    assert header == RequestHeader(3, 1, 42, "my-client", 1)
    assert not header.flexible
    assert frame[offset:] == b"BODY"


def test_parse_v2_header_skips_tagged_fields() -> None:
    # Metadata v9 is the first flexible version: header v2, tags after client_id.
    tags = b"\x02" + b"\x00\x03abc" + b"\x05\x00"
    frame = _v1(3, 9, 7, b"c") + tags + b"BODY"
    header, offset = parse_request_header(frame)
    assert header == RequestHeader(3, 9, 7, "c", 2)
    assert frame[offset:] == b"BODY"


def test_null_client_id() -> None:
    header, offset = parse_request_header(_v1(18, 0, 1, None))
    assert header.client_id is None
    assert offset == 10


def test_bad_utf8_client_id_is_tolerated() -> None:
    header, _ = parse_request_header(_v1(18, 0, 1, b"\xff\xfeok"))
    assert header.client_id is not None and header.client_id.endswith("ok")


@pytest.mark.parametrize("api_key", [7, 99, 1000, -5, 32767])
def test_unknown_api_key_still_yields_correlation_id(api_key: int) -> None:
    header, offset = parse_request_header(_v1(api_key, 3, 123456, b"x") + b"junk")
    assert (header.api_key, header.correlation_id, header.client_id) == (api_key, 123456, "x")
    assert header.header_version == 1
    assert offset == 11


def test_unknown_future_version_of_flexible_api_uses_header_v2() -> None:
    # ApiVersions v9 from a future client: flexible from v3 on, so header v2.
    assert is_flexible_request(18, 9)
    header, offset = parse_request_header(_v1(18, 9, 5, b"new") + b"\x00")
    assert header.header_version == 2
    assert offset == len(_v1(18, 9, 5, b"new")) + 1


def test_version_below_kio_range_is_not_flexible() -> None:
    assert not is_flexible_request(0, 0)  # Produce v0 (Kafka 4 removed it)
    assert not is_flexible_request(18, 0)
    assert is_flexible_request(18, 3)
    assert is_flexible_request(1, 12)
    assert not is_flexible_request(1, 11)


def test_too_short_for_fixed_part() -> None:
    with pytest.raises(MalformedRequestError) as info:
        parse_request_header(b"\x00\x03\x00\x01\x00\x00")
    assert info.value.correlation_id is None


@pytest.mark.parametrize(
    "frame",
    [
        struct.pack(">hhi", 3, 1, 9),  # no client id at all
        struct.pack(">hhih", 3, 1, 9, 20) + b"short",  # client id past the end
        struct.pack(">hhih", 3, 1, 9, -7),  # negative length other than -1
        _v1(3, 9, 9, b"c"),  # flexible but no tag section
        _v1(3, 9, 9, b"c") + b"\x01\x00\x09ab",  # tag longer than frame
        _v1(3, 9, 9, b"c") + b"\xff\xff\xff\xff\xff\x01",  # over-long varint
    ],
)
def test_malformed_headers_keep_the_correlation_id(frame: bytes) -> None:
    with pytest.raises(MalformedRequestError) as info:
        parse_request_header(frame)
    assert info.value.correlation_id == 9


def test_encode_request_header_roundtrip() -> None:
    for flexible, version in ((False, 5), (True, 9)):
        raw = encode_request_header(3, version, 77, "cli", flexible=flexible)
        header, offset = parse_request_header(raw)
        assert header == RequestHeader(3, version, 77, "cli", 2 if flexible else 1)
        assert offset == len(raw)


def test_response_header_versions() -> None:
    assert response_header_version(3, 8) == 0
    assert response_header_version(3, 9) == 1
    # KIP-511: ApiVersions responses always use header v0, even v3 (flexible).
    assert response_header_version(18, 3) == 0
    assert response_header_version(999, 0) == 0
    assert encode_response_header(5, 0) == b"\x00\x00\x00\x05"
    assert encode_response_header(5, 1) == b"\x00\x00\x00\x05\x00"
