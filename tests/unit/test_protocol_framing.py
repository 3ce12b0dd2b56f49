"""Framing: int32 size + payload, over asyncio streams and blocking sockets."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading

import pytest

from slog.protocol import (
    FrameTooLargeError,
    MalformedFrameError,
    ProtocolError,
    frame,
    frame_size,
    read_frame,
    recv_frame,
)


def _reader(data: bytes, *, eof: bool = True) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    if eof:
        reader.feed_eof()
    return reader


def _run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def test_reads_consecutive_frames_then_clean_eof() -> None:
    async def go() -> list[bytes | None]:
        reader = _reader(b"".join(bytes(p) for p in frame([b"abc"]) + frame([b"", b"de"])))
        return [await read_frame(reader, 100) for _ in range(3)]

    assert _run(go()) == [b"abc", b"de", None]


def test_zero_length_frame_is_empty_payload() -> None:
    async def go() -> bytes | None:
        return await read_frame(_reader(b"\x00\x00\x00\x00"), 10)

    assert _run(go()) == b""


def test_oversize_rejected_before_reading_payload() -> None:
    # A 2 GB announcement with no payload behind it and no EOF: if the reader
    # tried to read the payload, this test would hang instead of raising.
    async def go() -> None:
        reader = _reader(struct.pack(">i", 2**31 - 1), eof=False)
        await asyncio.wait_for(read_frame(reader, 1024), timeout=2)

    with pytest.raises(FrameTooLargeError) as info:
        _run(go())
    assert info.value.size == 2**31 - 1
    assert info.value.max_bytes == 1024


def test_oversize_does_not_consume_payload() -> None:
    async def go() -> bytes:
        reader = _reader(struct.pack(">i", 11) + b"hello world")
        with pytest.raises(FrameTooLargeError):
            await read_frame(reader, 10)
        return await reader.read()

    assert _run(go()) == b"hello world"


def test_size_equal_to_limit_is_accepted() -> None:
    async def go() -> bytes | None:
        return await read_frame(_reader(struct.pack(">i", 5) + b"12345"), 5)

    assert _run(go()) == b"12345"


def test_negative_size() -> None:
    async def go() -> None:
        await read_frame(_reader(struct.pack(">i", -1)), 100)

    with pytest.raises(MalformedFrameError):
        _run(go())


def test_eof_in_size_prefix() -> None:
    async def go() -> None:
        await read_frame(_reader(b"\x00\x00"), 100)

    with pytest.raises(MalformedFrameError):
        _run(go())


def test_eof_mid_payload() -> None:
    async def go() -> None:
        await read_frame(_reader(struct.pack(">i", 10) + b"abc"), 100)

    with pytest.raises(MalformedFrameError, match="3 of 10"):
        _run(go())


def test_errors_share_the_protocol_base() -> None:
    assert issubclass(FrameTooLargeError, ProtocolError)
    assert issubclass(MalformedFrameError, ProtocolError)


def test_frame_keeps_parts_and_counts_memoryview_bytes() -> None:
    view = memoryview(bytearray(range(8))).cast("I")  # 2 items, 8 bytes
    body = b"xy"
    parts = frame([body, view])
    assert parts[1] is body and parts[2] is view
    assert parts[0] == struct.pack(">i", 10)
    assert frame_size([body, view]) == 10


# --- blocking socket variant -----------------------------------------------------------


def _socket_pair(payload: bytes, *, close: bool = True) -> socket.socket:
    a, b = socket.socketpair()

    def feed() -> None:
        b.sendall(payload)
        if close:
            b.close()

    threading.Thread(target=feed, daemon=True).start()
    a.settimeout(2)
    return a


def test_recv_frame_roundtrip_and_eof() -> None:
    sock = _socket_pair(b"".join(bytes(p) for p in frame([b"hello"]) + frame([b"x" * 70000])))
    with sock:
        assert recv_frame(sock, 100000) == b"hello"
        assert recv_frame(sock, 100000) == b"x" * 70000
        assert recv_frame(sock, 100000) is None


def test_recv_frame_oversize_before_payload() -> None:
    sock = _socket_pair(struct.pack(">i", 1 << 30), close=False)
    with sock, pytest.raises(FrameTooLargeError):
        recv_frame(sock, 1 << 20)


def test_recv_frame_truncated() -> None:
    with _socket_pair(struct.pack(">i", 8) + b"abc") as sock, pytest.raises(MalformedFrameError):
        recv_frame(sock, 100)
    with _socket_pair(b"\x00") as sock, pytest.raises(MalformedFrameError):
        recv_frame(sock, 100)
    with _socket_pair(struct.pack(">i", -5)) as sock, pytest.raises(MalformedFrameError):
        recv_frame(sock, 100)
