"""Kafka framing: every request and response is an int32 size, then that many bytes.

The size is checked against the limit *before* the payload is read, so a
hostile or confused peer (an HTTP client, a TLS handshake: b"\\x16\\x03\\x01..."
reads as a 369 MB frame) cannot make us allocate memory.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterable
from typing import TYPE_CHECKING

from slog.protocol.errors import FrameTooLargeError, MalformedFrameError

if TYPE_CHECKING:  # a blocking client never loads asyncio (CLI start-up time)
    import asyncio

__all__ = ["frame", "frame_size", "read_frame", "recv_frame"]

_SIZE = struct.Struct(">i")

Chunk = bytes | bytearray | memoryview


def _check_size(size: int, max_bytes: int) -> None:
    if size < 0:
        raise MalformedFrameError(f"negative frame size {size}")
    if size > max_bytes:
        raise FrameTooLargeError(size, max_bytes)


async def read_frame(reader: asyncio.StreamReader, max_bytes: int) -> bytes | None:
    """Read one frame's payload (without the size prefix).

    Returns None on a clean EOF between frames. Raises `FrameTooLargeError`
    when the announced size exceeds `max_bytes` (the payload is left unread),
    `MalformedFrameError` on a negative size or EOF inside a frame.
    """
    try:
        prefix = await reader.readexactly(4)
    except EOFError as exc:
        if not (partial := _received(exc)):
            return None
        raise MalformedFrameError(
            f"connection closed after {len(partial)} of 4 size bytes"
        ) from None
    (size,) = _SIZE.unpack(prefix)
    _check_size(size, max_bytes)
    if size == 0:
        return b""
    try:
        return await reader.readexactly(size)
    except EOFError as exc:
        raise MalformedFrameError(
            f"connection closed after {len(_received(exc))} of {size} frame bytes"
        ) from None


def _received(exc: EOFError) -> bytes:
    """What a read got before the end: readexactly's EOFError is an IncompleteReadError."""
    import asyncio  # only now: loaded already, as an event loop runs the caller

    assert isinstance(exc, asyncio.IncompleteReadError)
    return exc.partial


def _recv_exactly(sock: socket.socket, size: int) -> bytearray:
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    while got < size:
        n = sock.recv_into(view[got:], size - got)
        if n == 0:
            raise EOFError(got)
        got += n
    return buf


def recv_frame(sock: socket.socket, max_bytes: int) -> bytes | None:
    """Blocking counterpart of `read_frame` for a plain socket client.

    Same contract: None on a clean EOF between frames, `FrameTooLargeError`
    before reading an oversized payload, `MalformedFrameError` on a negative
    size or EOF mid-frame. Socket timeouts propagate unchanged.
    """
    try:
        prefix = _recv_exactly(sock, 4)
    except EOFError as exc:
        if exc.args[0] == 0:
            return None
        raise MalformedFrameError(
            f"connection closed after {exc.args[0]} of 4 size bytes"
        ) from None
    (size,) = _SIZE.unpack(prefix)
    _check_size(size, max_bytes)
    try:
        return bytes(_recv_exactly(sock, size))
    except EOFError as exc:
        raise MalformedFrameError(
            f"connection closed after {exc.args[0]} of {size} frame bytes"
        ) from None


def frame_size(parts: Iterable[Chunk]) -> int:
    """Total byte length of `parts` (memoryviews count in bytes, not items)."""
    return sum(p.nbytes if isinstance(p, memoryview) else len(p) for p in parts)


def frame(payload_parts: Iterable[Chunk]) -> list[Chunk]:
    """Prepend the int32 size to `payload_parts`, without joining them.

    The result can go straight to `transport.writelines` / `socket.sendmsg`,
    so large memoryviews (record batches) are never copied.
    """
    parts = list(payload_parts)
    return [_SIZE.pack(frame_size(parts)), *parts]
