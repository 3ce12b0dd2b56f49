"""Kafka's classic (non-flexible) primitive types, for the small binary formats
that live inside other messages: the consumer protocol's subscription and
assignment, and the records of ``__consumer_offsets``.

Strings are int16-length UTF-8 (-1 for null), bytes int32-length (-1 for
null), arrays an int32 count (-1 for null); all big-endian. Readers raise
:class:`WireFormatError` on anything truncated or negative where it must not be.
"""

from __future__ import annotations

import builtins
import struct
from collections.abc import Callable, Iterable
from typing import Self, TypeVar

from slog.core.errors import SlogError

T = TypeVar("T")

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class WireFormatError(SlogError, ValueError):
    """Bytes that do not parse as the expected Kafka structure."""


class Writer:
    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = bytearray()

    def int8(self, value: int) -> Self:
        self._buf += value.to_bytes(1, "big", signed=True)
        return self

    def int16(self, value: int) -> Self:
        self._buf += _I16.pack(value)
        return self

    def int32(self, value: int) -> Self:
        self._buf += _I32.pack(value)
        return self

    def int64(self, value: int) -> Self:
        self._buf += _I64.pack(value)
        return self

    def string(self, value: str | None) -> Self:
        if value is None:
            return self.int16(-1)
        data = value.encode()
        self.int16(len(data))
        self._buf += data
        return self

    def bytes(self, value: bytes | None) -> Self:
        if value is None:
            return self.int32(-1)
        self.int32(len(value))
        self._buf += value
        return self

    def array(self, items: Iterable[T], write: Callable[[Writer, T], object]) -> Self:
        items = list(items)
        self.int32(len(items))
        for item in items:
            write(self, item)
        return self

    def getvalue(self) -> builtins.bytes:  # `bytes` here is the method above
        return bytes(self._buf)


class Reader:
    __slots__ = ("_data", "_pos")

    def __init__(self, data: bytes | bytearray | memoryview):
        self._data = bytes(data)
        self._pos = 0

    @property
    def remaining(self) -> int:
        return len(self._data) - self._pos

    def _take(self, size: int) -> bytes:
        if size < 0 or self._pos + size > len(self._data):
            raise WireFormatError(f"need {size} bytes at {self._pos}, have {self.remaining}")
        chunk = self._data[self._pos : self._pos + size]
        self._pos += size
        return chunk

    def int8(self) -> int:
        return int.from_bytes(self._take(1), "big", signed=True)

    def int16(self) -> int:
        value: int = _I16.unpack(self._take(2))[0]
        return value

    def int32(self) -> int:
        value: int = _I32.unpack(self._take(4))[0]
        return value

    def int64(self) -> int:
        value: int = _I64.unpack(self._take(8))[0]
        return value

    def string(self) -> str | None:
        size = self.int16()
        if size == -1:
            return None
        try:
            return self._take(size).decode()
        except UnicodeDecodeError as exc:
            raise WireFormatError(f"string is not UTF-8: {exc}") from None

    def required_string(self) -> str:
        value = self.string()
        if value is None:
            raise WireFormatError("null where a string is required")
        return value

    def bytes(self) -> bytes | None:
        size = self.int32()
        return None if size == -1 else self._take(size)

    def array(self, read: Callable[[Reader], T]) -> list[T]:
        count = self.int32()
        if count == -1:
            return []
        # Every element takes at least one byte, so a hostile count cannot
        # make us loop (or allocate) beyond what is actually there.
        if count < 0 or count > self.remaining:
            raise WireFormatError(f"array of {count} items in {self.remaining} bytes")
        return [read(self) for _ in range(count)]
