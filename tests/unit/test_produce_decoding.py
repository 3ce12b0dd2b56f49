"""The hand-written Produce decoder agrees with kio (behind the codec's guard).

Valid bodies of every Produce version decode to equal entities, with the
records as views of the frame; mutated and random bodies are refused by both
decoders or decoded to equal entities by both.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader

from slog.protocol import encode_request, parse_request_header, request_class
from slog.protocol.apis import ApiKey
from slog.protocol.guard import guard
from slog.protocol.produce_decoding import decode_produce_request
from tests.fuzz.hostile import broken
from tests.unit.test_protocol_support import random_entity

VERSIONS = range(3, 10)


def _kio_decode(body: bytes, version: int):
    cls = request_class(ApiKey.PRODUCE, version)
    buf = guard(cls, body, 0)
    return entity_reader(cls)(buf, 0)[0]


def _body(entity) -> bytes:
    frame = encode_request(entity, correlation_id=1, client_id="t")[4:]
    _header, offset = parse_request_header(frame)
    return frame[offset:]


def _bodies(version: int, count: int) -> list[bytes]:
    rng = random.Random(version)
    cls = request_class(ApiKey.PRODUCE, version)
    return [_body(random_entity(cls, rng, full=i % 2 == 0)) for i in range(count)]


@pytest.mark.parametrize("version", VERSIONS)
def test_valid_bodies_decode_as_kio_does_with_records_as_views(version: int) -> None:
    for body in _bodies(version, 40):
        frame = memoryview(bytearray(b"head" + body)).toreadonly()
        mine = decode_produce_request(frame, 4, version)
        assert mine == _kio_decode(body, version)
        for topic in mine.topic_data:
            for partition in topic.partition_data:
                if partition.records is not None:
                    assert isinstance(partition.records, memoryview)
                    assert partition.records.readonly
                    assert partition.records.obj is frame.obj  # a view, not a copy


SAMPLES = {version: _bodies(version, 4) for version in VERSIONS}


@st.composite
def hostile_bodies(draw: st.DrawFn) -> tuple[int, bytes]:
    version = draw(st.sampled_from(VERSIONS))
    if draw(st.integers(0, 3)) == 0:
        return version, draw(st.binary(max_size=64))
    return version, draw(broken(draw(st.sampled_from(SAMPLES[version]))))


@settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=hostile_bodies())
def test_hostile_bodies_are_refused_or_decoded_like_kio(case: tuple[int, bytes]) -> None:
    version, body = case
    try:
        expected = _kio_decode(body, version)
    except Exception:  # kio and the guard raise many types; decode_request wraps them
        expected = None
    try:
        mine = decode_produce_request(body, 0, version)
    except ValueError:
        mine = None
    assert mine == expected
