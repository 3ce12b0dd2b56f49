"""The hand-written ProduceResponse encoder matches kio byte for byte (v3..v12 unhinted).

kio's side is what the dispatcher did before: ``shape`` the handler's dicts into
the version's dataclasses, then ``encode_response``.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slog.protocol import ErrorCode, RequestHeader, decode_response, encode_response
from slog.protocol.apis import ApiKey, response_class
from slog.protocol.produce_encoding import can_encode, encode_produce_response
from slog.protocol.shapes import shape

VERSIONS = range(3, 13)  # v10-v12: answers without KIP-951 leader hints
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
# Times as the handler gives them: -1 (none), or milliseconds since the epoch.
MILLIS = st.just(-1) | st.integers(0, 2**45)
TEXT = st.text(max_size=20)


@st.composite
def partition(draw: st.DrawFn) -> dict[str, Any]:
    """A partition dict; the optional keys are sometimes left out, as the handler does."""
    result: dict[str, Any] = {"index": draw(INT32), "error_code": draw(st.sampled_from(ErrorCode)),
                              "base_offset": draw(INT64)}
    optional = {
        "log_append_time": MILLIS,
        "log_start_offset": INT64,
        "error_message": st.none() | TEXT,
        "record_errors": st.lists(st.fixed_dictionaries(
            {"batch_index": INT32},
            optional={"batch_index_error_message": st.none() | TEXT}), max_size=3),
    }
    for key, values in optional.items():
        if draw(st.booleans()):
            result[key] = draw(values)
    return result


RESULTS = st.fixed_dictionaries(
    {"responses": st.lists(st.fixed_dictionaries(
        {"name": TEXT, "partition_responses": st.lists(partition(), max_size=4)}), max_size=3)},
    optional={"throttle_time": st.integers(0, 2**31 - 1)})


def _kio(header: RequestHeader, result: dict[str, Any]) -> bytes:
    return encode_response(header, shape(response_class(ApiKey.PRODUCE, header.api_version),
                                         result))


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(VERSIONS), correlation_id=INT32, result=RESULTS)
def test_matches_kio_byte_for_byte(version: int, correlation_id: int,
                                   result: dict[str, Any]) -> None:
    header = RequestHeader(ApiKey.PRODUCE, version, correlation_id, "client", 1)
    assert encode_produce_response(header, result) == _kio(header, result)


@pytest.mark.parametrize("version", VERSIONS)
def test_the_handlers_answer_decodes_as_kio_reads_it(version: int) -> None:
    """What a producer reads from an ordinary answer: offsets, times, the throttle."""
    header = RequestHeader(ApiKey.PRODUCE, version, 42, "client", 1)
    result = {"responses": [{"name": "orders", "partition_responses": [
        {"index": 3, "error_code": ErrorCode.none, "base_offset": 1000,
         "log_append_time": 1_700_000_000_123, "log_start_offset": 7},
        {"index": 4, "error_code": ErrorCode.not_leader_or_follower, "base_offset": -1,
         "log_append_time": -1, "log_start_offset": -1, "error_message": "moved"}]}],
        "throttle_time": 25}
    frame = encode_produce_response(header, result)
    assert frame == _kio(header, result)
    correlation_id, response = decode_response(ApiKey.PRODUCE, version, frame[4:])
    assert correlation_id == 42
    (topic,) = response.responses
    first, second = topic.partition_responses
    assert (first.index, first.error_code, first.base_offset) == (3, ErrorCode.none, 1000)
    assert second.error_code == ErrorCode.not_leader_or_follower
    assert response.throttle_time.total_seconds() == 0.025


@pytest.mark.parametrize("version", [2, 13])
def test_versions_slog_does_not_serve_are_refused(version: int) -> None:
    with pytest.raises(ValueError, match="ProduceResponse"):
        encode_produce_response(RequestHeader(ApiKey.PRODUCE, version, 1, None, 1),
                                {"responses": []})


def test_answers_with_leader_hints_are_left_to_kio() -> None:
    hinted = {"responses": [], "node_endpoints": [
        {"node_id": 2, "host": "127.0.0.1", "port": 9093, "rack": None}]}
    assert can_encode(9, hinted)  # v9 has no field for the hints: they are dropped
    assert not can_encode(10, hinted) and not can_encode(12, hinted)
    assert can_encode(12, {"responses": [], "node_endpoints": []})
