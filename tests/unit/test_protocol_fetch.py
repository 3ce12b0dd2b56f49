"""The hand-written FetchResponse encoder must match kio byte for byte (v4..v17)."""

from __future__ import annotations

import datetime
import itertools
import uuid
from dataclasses import fields
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slog.protocol import (
    ErrorCode,
    FetchPartitionResult,
    FetchTopicResult,
    RequestHeader,
    decode_response,
    encode_fetch_response,
    encode_response,
    response_class,
)
from slog.protocol.fetch_encoding import MAX_FETCH_VERSION, NodeEndpoint

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
ERRORS = st.sampled_from(list(ErrorCode))
PAIR = st.none() | st.just((-1, -1)) | st.tuples(INT32, INT64)


@st.composite
def record_chunks(draw: st.DrawFn) -> list[memoryview] | None:
    """None, or slices of one buffer (like views into an mmap'd segment)."""
    if draw(st.booleans()) and draw(st.booleans()):
        return None
    backing = draw(st.binary(max_size=300))
    cuts = sorted(draw(st.lists(st.integers(0, len(backing)), max_size=3)))
    bounds = [0, *cuts, len(backing)]
    view = memoryview(backing)
    return [view[a:b] for a, b in itertools.pairwise(bounds)]


@st.composite
def partitions(draw: st.DrawFn) -> FetchPartitionResult:
    return FetchPartitionResult(
        partition_index=draw(INT32),
        error_code=draw(ERRORS),
        high_watermark=draw(INT64),
        last_stable_offset=draw(INT64),
        log_start_offset=draw(INT64),
        aborted_transactions=draw(st.none() | st.lists(st.tuples(INT64, INT64), max_size=3)),
        preferred_read_replica=draw(INT32),
        records=draw(record_chunks()),
        diverging_epoch=draw(PAIR),
        current_leader=draw(st.none() | st.just((-1, -1)) | st.tuples(INT32, INT32)),
        snapshot_id=draw(st.none() | st.just((-1, -1)) | st.tuples(INT64, INT32)),
    )


TOPICS = st.lists(
    st.builds(FetchTopicResult, st.text(max_size=20), st.lists(partitions(), max_size=3)),
    max_size=3,
)
# v13+: topics by id (never the zero id, which kio reads back as None).
TOPICS_BY_ID = st.lists(
    st.builds(FetchTopicResult, st.uuids().filter(lambda u: u.int != 0).map(str),
              st.lists(partitions(), max_size=3)),
    max_size=3,
)
NODES = st.lists(st.builds(NodeEndpoint, INT32, st.text(max_size=12), INT32,
                           st.none() | st.text(max_size=6)), max_size=3)


def _fill(cls: type, **values: Any) -> Any:
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


def _field_type(cls: type, name: str) -> Any:
    return next(f.type for f in fields(cls) if f.name == name)


def _kio_fetch(
    version: int, throttle: int, error: ErrorCode, session: int, topics: list[FetchTopicResult],
    nodes: list[NodeEndpoint],
) -> Any:
    """The same content as a kio FetchResponse entity."""
    cls = response_class(1, version)
    topic_cls = _field_type(cls, "responses").__args__[0]
    part_cls = _field_type(topic_cls, "partitions").__args__[0]
    aborted_cls = _field_type(part_cls, "aborted_transactions").__args__[0].__args__[0]
    tags: dict[str, Any] = {}
    if version >= 12:
        tags = {
            "diverging_epoch": _field_type(part_cls, "diverging_epoch"),
            "current_leader": _field_type(part_cls, "current_leader"),
            "snapshot_id": _field_type(part_cls, "snapshot_id"),
        }

    def tag_values(p: FetchPartitionResult) -> dict[str, Any]:
        out = {}
        if p.diverging_epoch is not None:
            out["diverging_epoch"] = tags["diverging_epoch"](
                epoch=p.diverging_epoch[0], end_offset=p.diverging_epoch[1]
            )
        if p.current_leader is not None:
            out["current_leader"] = tags["current_leader"](
                leader_id=p.current_leader[0], leader_epoch=p.current_leader[1]
            )
        if p.snapshot_id is not None:
            out["snapshot_id"] = tags["snapshot_id"](
                end_offset=p.snapshot_id[0], epoch=p.snapshot_id[1]
            )
        return out

    node_cls = _field_type(cls, "node_endpoints").__args__[0] if version >= 16 else None
    return _fill(
        cls,
        throttle_time=datetime.timedelta(milliseconds=throttle),
        error_code=error,
        session_id=session,
        node_endpoints=tuple(node_cls(node_id=n.node_id, host=n.host, port=n.port, rack=n.rack)
                             for n in nodes) if node_cls else (),
        responses=tuple(
            _fill(
                topic_cls,
                topic=t.topic,
                topic_id=uuid.UUID(t.topic) if version >= 13 else None,
                partitions=tuple(
                    _fill(
                        part_cls,
                        partition_index=p.partition_index,
                        error_code=p.error_code,
                        high_watermark=p.high_watermark,
                        last_stable_offset=p.last_stable_offset,
                        log_start_offset=p.log_start_offset,
                        aborted_transactions=None
                        if p.aborted_transactions is None
                        else tuple(
                            aborted_cls(producer_id=a, first_offset=b)
                            for a, b in p.aborted_transactions
                        ),
                        preferred_read_replica=p.preferred_read_replica,
                        records=None if p.records is None else b"".join(p.records),
                        **(tag_values(p) if version >= 12 else {}),
                    )
                    for p in t.partitions
                ),
            )
            for t in topics
        ),
    )


@settings(max_examples=900, deadline=None)
@given(
    version=st.integers(4, MAX_FETCH_VERSION),
    correlation_id=INT32,
    throttle=st.integers(0, 2**31 - 1),
    error=ERRORS,
    session=INT32,
    data=st.data(),
)
def test_fast_path_matches_kio(
    version: int,
    correlation_id: int,
    throttle: int,
    error: ErrorCode,
    session: int,
    data: st.DataObject,
) -> None:
    topics = data.draw(TOPICS_BY_ID if version >= 13 else TOPICS)
    nodes = data.draw(NODES) if version >= 16 else []
    header = RequestHeader(1, version, correlation_id, None, 2 if version >= 12 else 1)
    parts = encode_fetch_response(header, version, throttle, error, session, topics, nodes)
    fast = b"".join(bytes(p) for p in parts)
    entity = _kio_fetch(version, throttle, error, session, topics, nodes)
    assert fast == encode_response(header, entity)

    # The record views travel through unchanged (same objects, no copies).
    ids = {id(p) for p in parts}
    for t in topics:
        for p in t.partitions:
            for chunk in p.records or ():
                if chunk.nbytes:
                    assert id(chunk) in ids

    # And it decodes back to the same entity.
    assert decode_response(1, version, fast[4:]) == (correlation_id, entity)


def test_records_size_hint_is_used() -> None:
    view = memoryview(b"abcdef")
    p = FetchPartitionResult(0, records=[view], records_size=6)
    parts = encode_fetch_response(
        RequestHeader(1, 12, 1, None, 2), 12, 0, 0, 0, [FetchTopicResult("t", [p])]
    )
    assert any(part is view for part in parts)
    assert p.size_of_records() == 6


@pytest.mark.parametrize("version", [3, MAX_FETCH_VERSION + 1])
def test_out_of_range_versions_rejected(version: int) -> None:
    with pytest.raises(ValueError):
        encode_fetch_response(RequestHeader(1, version, 1, None, 1), version, 0, 0, 0, [])
