"""The follower's Fetch v12 response reader against kio's, on what the leader encodes.

(In-process, no brokers: it sits here beside the replication tests it serves.)
"""

from __future__ import annotations

import random

import pytest

from slog.protocol.apis import request_class
from slog.protocol.codec import decode_response, encode_request
from slog.protocol.fetch_encoding import (
    FetchPartitionResult,
    FetchTopicResult,
    encode_fetch_response,
)
from slog.protocol.headers import parse_request_header
from slog.protocol.shapes import shape
from slog.replication.fetch_response import decode_fetch_response

FETCH_REQUEST = {"replica_id": 2, "max_wait": 500, "min_bytes": 1, "max_bytes": 1 << 20,
                 "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                 "forgotten_topics_data": [], "rack_id": "", "topics": []}


def _frame(topics: list[FetchTopicResult], error_code: int = 0) -> memoryview:
    request = encode_request(shape(request_class(1, 12), FETCH_REQUEST), correlation_id=41,
                             client_id="follower")
    header, _ = parse_request_header(request[4:])
    chunks = encode_fetch_response(header, 12, throttle_ms=3, error_code=error_code,
                                   session_id=0, topics=topics)
    return memoryview(b"".join(bytes(c) for c in chunks)[4:]).toreadonly()


def _random_topics(rng: random.Random) -> list[FetchTopicResult]:
    topics = []
    for t in range(rng.randrange(0, 4)):
        partitions = []
        for p in range(rng.randrange(0, 4)):
            records = rng.choice([None, (), (memoryview(rng.randbytes(rng.randrange(1, 300))),
                                             rng.randbytes(rng.randrange(0, 200)))])
            pair = lambda: rng.choice([None, (rng.randrange(-1, 9), rng.randrange(-1, 999))])  # noqa: E731
            partitions.append(FetchPartitionResult(
                partition_index=p, error_code=rng.choice([0, 0, 1, 6, 74]),
                high_watermark=rng.randrange(-1, 10**12), last_stable_offset=rng.randrange(-1, 9),
                log_start_offset=rng.randrange(-1, 10**9),
                aborted_transactions=rng.choice([None, [], [(7, 3), (8, 4)]]),
                preferred_read_replica=rng.randrange(-1, 4), records=records,
                diverging_epoch=pair(), current_leader=pair(), snapshot_id=pair()))
        topics.append(FetchTopicResult(topic=f"topic-{t}-{'é' * t}", partitions=partitions))
    return topics


@pytest.mark.parametrize("seed", range(200))
def test_same_as_kio(seed: int) -> None:
    rng = random.Random(seed)
    frame = _frame(_random_topics(rng), error_code=rng.choice([0, 0, 71]))
    ours = decode_fetch_response(frame)
    correlation_id, theirs = decode_response(1, 12, frame)
    assert ours.correlation_id == correlation_id == 41
    assert ours.error_code == theirs.error_code
    assert [t.topic for t in ours.responses] == [t.topic for t in theirs.responses]
    for mine, kio in zip(ours.responses, theirs.responses, strict=True):
        assert len(mine.partitions) == len(kio.partitions)
        for a, b in zip(mine.partitions, kio.partitions, strict=True):
            assert (a.partition_index, a.error_code, a.high_watermark, a.last_stable_offset,
                    a.log_start_offset) == (b.partition_index, b.error_code, b.high_watermark,
                                            b.last_stable_offset, b.log_start_offset)
            assert (None if a.records is None else bytes(a.records)) == b.records


def test_records_are_views_of_the_frame() -> None:
    batch = memoryview(b"x" * 1000)
    frame = _frame([FetchTopicResult("t", [FetchPartitionResult(0, records=[batch])])])
    [topic] = decode_fetch_response(frame).responses
    records = topic.partitions[0].records
    assert isinstance(records, memoryview) and records.obj is frame.obj
    assert bytes(records) == bytes(batch)


def test_truncated_frames_are_refused() -> None:
    frame = _frame(_random_topics(random.Random(7)))
    for end in range(len(frame)):
        with pytest.raises(ValueError):
            decode_fetch_response(frame[:end])
