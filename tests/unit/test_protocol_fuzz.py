"""Fuzzing: hostile bytes may only ever produce the protocol's own exceptions.

Bodies are either pure random bytes or valid encodings with mutations aimed at
length fields (huge int32s and varints), truncations and byte flips. Without
the guard (protocol/guard.py), several of these abort the interpreter inside kio's
native reader; with it, every input ends in a value or a ProtocolError.
"""

from __future__ import annotations

import contextlib
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slog.protocol import (
    ProtocolError,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    parse_request_header,
    request_class,
    response_class,
)
from slog.protocol.headers import RequestHeader, encode_request_header
from tests.fuzz.hostile import broken
from tests.unit.test_protocol_support import ALL_CASES, random_entity

# A few valid bodies per (api key, version) to mutate.
_rng = random.Random(1234)
REQUEST_BODIES: dict[tuple[int, int], list[bytes]] = {}
RESPONSE_FRAMES: dict[tuple[int, int], list[bytes]] = {}
for _key, _version in ALL_CASES:
    _req_cls, _resp_cls = request_class(_key, _version), response_class(_key, _version)
    _requests, _responses = [], []
    for _i in range(3):
        _raw = encode_request(
            random_entity(_req_cls, _rng, full=_i == 0), correlation_id=1, client_id="f"
        )
        _header, _offset = parse_request_header(_raw[4:])
        _requests.append(_raw[4 + _offset :])
        _entity = random_entity(_resp_cls, _rng, full=_i == 0)
        _responses.append(encode_response(RequestHeader(_key, _version, 1, None, 1), _entity)[4:])
    REQUEST_BODIES[(_key, _version)] = _requests
    RESPONSE_FRAMES[(_key, _version)] = _responses



@st.composite
def request_inputs(draw: st.DrawFn) -> tuple[int, int, bytes]:
    key, version = draw(st.sampled_from(ALL_CASES))
    if draw(st.integers(0, 3)) == 0:
        body = draw(st.binary(max_size=64))
    else:
        body = draw(broken(draw(st.sampled_from(REQUEST_BODIES[(key, version)]))))
    return key, version, body


@settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
@given(frame=st.binary(max_size=80))
def test_header_parsing_of_random_bytes(frame: bytes) -> None:
    try:
        header, offset = parse_request_header(frame)
    except ProtocolError:
        return
    assert 0 <= offset <= len(frame)
    with contextlib.suppress(ProtocolError):
        decode_request(header, frame, offset)


@settings(max_examples=3000, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=request_inputs())
def test_decode_request_only_raises_protocol_errors(case: tuple[int, int, bytes]) -> None:
    key, version, body = case
    flexible = request_class(key, version).__flexible__
    frame = encode_request_header(key, version, 5, "fz", flexible=flexible) + body
    header, offset = parse_request_header(frame)
    try:
        decode_request(header, frame, offset)
    except ProtocolError as exc:
        assert getattr(exc, "correlation_id", 5) == 5


@st.composite
def response_inputs(draw: st.DrawFn) -> tuple[int, int, bytes]:
    key, version = draw(st.sampled_from(ALL_CASES))
    return key, version, draw(broken(draw(st.sampled_from(RESPONSE_FRAMES[(key, version)]))))


@settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=response_inputs())
def test_decode_response_only_raises_protocol_errors(case: tuple[int, int, bytes]) -> None:
    key, version, frame = case
    with contextlib.suppress(ProtocolError):
        decode_response(key, version, frame)
