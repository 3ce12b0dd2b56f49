"""Reading a Fetch v12 response without copying its records: the follower's hot path.

kio's reader returns every partition's records as a new ``bytes`` (a copy of
megabytes per fetch, on every follower). This reader returns them as
read-only slices of the received frame, which the follower appends to its
log as they are. It reads exactly what the leader's encoder
(:mod:`slog.protocol.fetch_encoding`) writes for v12, and skips any tagged
field, as Kafka's readers do. A malformed response raises ValueError.

FetchResponse v12 (flexible; Kafka's FetchResponse.json)::

    header v1       correlation_id int32, tagged fields
    throttle_time_ms int32, error_code int16, session_id int32
    responses       compact array of
      topic           compact string
      partitions      compact array of
        partition_index int32, error_code int16, high_watermark int64,
        last_stable_offset int64, log_start_offset int64,
        aborted_transactions compact nullable array of
          (producer_id int64, first_offset int64, tagged fields),
        preferred_read_replica int32,
        records         compact nullable records,
        tagged fields (0 diverging_epoch, 1 current_leader, 2 snapshot_id)
      tagged fields
    tagged fields
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

FETCH_RESPONSE_VERSION = 12

_I32 = struct.Struct(">i")
_TOP = struct.Struct(">ihi")  # throttle, error, session id
_PARTITION = struct.Struct(">ihqqq")  # index, error, HW, LSO, log start
_ABORTED = 16  # producer_id + first_offset


@dataclass(slots=True)
class FetchedPartition:
    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: memoryview | None


@dataclass(slots=True)
class FetchedTopic:
    topic: str
    partitions: list[FetchedPartition]


@dataclass(slots=True)
class FetchResponse:
    correlation_id: int
    error_code: int
    session_id: int
    responses: list[FetchedTopic]


class _Reader:
    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf: memoryview, pos: int = 0):
        self.buf = buf
        self.pos = pos
        self.end = len(buf)

    def take(self, size: int) -> int:
        """Advance by ``size`` bytes; returns where they start."""
        start = self.pos
        if size < 0 or start + size > self.end:
            raise ValueError(f"fetch response truncated at byte {start} (+{size})")
        self.pos = start + size
        return start

    def uvarint(self) -> int:
        value = shift = 0
        buf, pos = self.buf, self.pos
        while True:
            if pos >= self.end:
                raise ValueError("fetch response truncated inside a varint")
            byte = buf[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                self.pos = pos
                return value
            shift += 7
            if shift >= 35:
                raise ValueError("varint longer than 5 bytes")

    def unpack(self, fmt: struct.Struct) -> tuple[int, ...]:
        return fmt.unpack_from(self.buf, self.take(fmt.size))

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.take(self.uvarint())

    def count(self) -> int:
        """A compact array's length (-1 for null)."""
        return self.uvarint() - 1


def decode_fetch_response(frame: memoryview) -> FetchResponse:
    """Decode a whole FetchResponse v12 frame (size prefix removed)."""
    r = _Reader(frame)
    (correlation_id,) = r.unpack(_I32)
    r.skip_tags()
    _throttle, error_code, session_id = r.unpack(_TOP)
    topics = []
    for _ in range(max(r.count(), 0)):
        size = r.count()
        start = r.take(size)
        name = str(frame[start:start + size], "utf-8")
        partitions = []
        for _ in range(max(r.count(), 0)):
            index, code, hw, lso, log_start = r.unpack(_PARTITION)
            aborted = r.count()
            for _ in range(max(aborted, 0)):
                r.take(_ABORTED)
                r.skip_tags()
            r.take(4)  # preferred_read_replica
            size = r.count()
            records = None
            if size >= 0:
                start = r.take(size)
                records = frame[start:start + size]
            r.skip_tags()
            partitions.append(FetchedPartition(index, code, hw, lso, log_start, records))
        r.skip_tags()
        topics.append(FetchedTopic(name, partitions))
    r.skip_tags()
    return FetchResponse(correlation_id, error_code, session_id, topics)
