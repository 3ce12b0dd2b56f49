"""Produce requests decoded by hand, so the records stay views of the frame.

kio copies every ``records`` field into a new ``bytes``: one extra pass over
each megabyte a producer sends, on top of the receive, the CRC check and the
page-cache write. This reader returns kio's entity (the
same kio classes, so it compares equal to kio's decoding) with ``records`` as
read-only memoryviews of the request frame, which the log
writes to disk unchanged. The server reuses a receive buffer only once no
view of it is left, so the views stay valid for as long as anyone holds them.

Produce v3-v13 (v9 is flexible: compact strings, arrays and bytes, and tagged
fields, which are skipped; Produce requests define none; v13 names each topic
by its 16-byte id instead of its name, KIP-516). Every read is
bounds-checked first, and anything that is not a well-formed request raises
``ValueError``, as kio plus the codec's guard would refuse it.
"""

from __future__ import annotations

import datetime
import functools
import struct
import sys
import uuid
from typing import Any

from slog.protocol.apis import ApiKey, request_class

FIRST_FLEXIBLE_VERSION = 9
FIRST_TOPIC_ID_VERSION = 13
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class _Reader:
    """Bounds-checked reads of Kafka primitives from a read-only view."""

    __slots__ = ("end", "flexible", "pos", "view")

    def __init__(self, view: memoryview, pos: int, flexible: bool):
        self.view, self.pos, self.end, self.flexible = view, pos, len(view), flexible

    def _take(self, n: int) -> int:
        start = self.pos
        if n < 0 or start + n > self.end:
            raise ValueError(f"{n} bytes at byte {start} run past the end ({self.end})")
        self.pos = start + n
        return start

    def int16(self) -> int:
        value: int = _INT16.unpack_from(self.view, self._take(2))[0]
        return value

    def int32(self) -> int:
        value: int = _INT32.unpack_from(self.view, self._take(4))[0]
        return value

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.view[self._take(1)]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise ValueError("unsigned varint longer than 5 bytes")

    def _length(self, legacy: struct.Struct) -> int:
        """A string/bytes length; -1 means null."""
        if self.flexible:
            return self.uvarint() - 1
        n: int = legacy.unpack_from(self.view, self._take(legacy.size))[0]
        if n < -1:
            raise ValueError(f"negative length {n}")
        return n

    def string(self, nullable: bool) -> str | None:
        n = self._length(_INT16)
        if n == -1:
            if not nullable:
                raise ValueError("null for a non-nullable string")
            return None
        start = self._take(n)
        return str(self.view[start:start + n], "utf-8")

    def uuid(self) -> uuid.UUID | None:
        """A topic id; the all-zero id reads as None, as kio reads it."""
        start = self._take(16)
        value = int.from_bytes(self.view[start:start + 16], "big")
        return uuid.UUID(int=value) if value else None

    def blob(self) -> memoryview | None:
        n = self._length(_INT32)
        if n == -1:
            return None
        start = self._take(n)
        return self.view[start:start + n]

    def array_length(self, min_item_size: int) -> int:
        n = self.uvarint() - 1 if self.flexible else self.int32()
        if n < 0:
            raise ValueError(f"null or negative length {n} for a non-nullable array")
        if n * min_item_size > self.end - self.pos:
            raise ValueError(f"array of {n} items cannot fit in {self.end - self.pos} bytes")
        return n

    def skip_tagged_fields(self) -> None:
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()  # tag
                self._take(self.uvarint())


@functools.cache
def _classes(version: int) -> tuple[Any, Any, Any]:
    request = request_class(ApiKey.PRODUCE, version)
    module = sys.modules[request.__module__]
    return request, module.TopicProduceData, module.PartitionProduceData


def decode_produce_request(frame: bytes | bytearray | memoryview, offset: int, version: int
                           ) -> Any:
    """The Produce request body at ``offset`` of ``frame``; ValueError if malformed."""
    request_cls, topic_cls, partition_cls = _classes(version)
    view = memoryview(frame).toreadonly()
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    r = _Reader(view, offset, version >= FIRST_FLEXIBLE_VERSION)
    transactional_id = r.string(nullable=True)
    acks = r.int16()
    timeout = datetime.timedelta(milliseconds=r.int32())
    topics = []
    by_id = version >= FIRST_TOPIC_ID_VERSION
    for _ in range(r.array_length(min_item_size=16 if by_id else 2)):
        topic = {"topic_id": r.uuid()} if by_id else {"name": r.string(nullable=False)}
        partitions = []
        for _ in range(r.array_length(min_item_size=5)):
            index = r.int32()
            records = r.blob()
            r.skip_tagged_fields()
            partitions.append(partition_cls(index=index, records=records))
        r.skip_tagged_fields()
        topics.append(topic_cls(**topic, partition_data=tuple(partitions)))
    r.skip_tagged_fields()
    return request_cls(transactional_id=transactional_id, acks=acks, timeout=timeout,
                       topic_data=tuple(topics))
