"""KafkaServer's socket handling, against a stand-in dispatcher that echoes frames.

Covers what the server itself promises: frames split or batched any way on
the wire come out whole and in order, responses go back in request order,
large frames and large chunked responses survive partial socket I/O, size
limits and malformed sizes close the connection, idle connections are
closed, max.connections is enforced, and sent mmap pages are released.
"""

from __future__ import annotations

import asyncio
import mmap
import socket
import struct
import time
from collections import deque
from pathlib import Path

import pytest

from slog.broker import server as server_mod
from slog.broker.dispatcher import CLOSE_CONNECTION
from slog.broker.server import KafkaServer, _after, _unexported
from slog.core.config import BrokerConfig
from slog.core.mapped_pages import TOUCHED

_SIZE = struct.Struct(">i")


def no_quota(session):
    """What Dispatcher looks up before handling a request: here, no produce quota."""
    if session is not None:
        session.produce_quota = False


class EchoDispatcher:
    """Answers each frame with [size][frame] split into several chunks; b"close" closes."""

    def __init__(self, delay_s: float = 0.0, chunks: int = 3):
        self.frames: list[bytes] = []
        self.types: list[type] = []
        self.delay_s = delay_s
        self.chunks = chunks

    async def handle(self, frame, peer, session=None):
        no_quota(session)
        self.types.append(type(frame))
        data = bytes(frame)
        self.frames.append(data)
        if data == b"close":
            return CLOSE_CONNECTION
        if data == b"silent":
            return None
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        view = memoryview(data)
        step = max(1, len(data) // self.chunks)
        parts = [view[i:i + step] for i in range(0, len(data), step)]
        return [_SIZE.pack(len(data)), *parts]


def _config(**overrides: str) -> BrokerConfig:
    return BrokerConfig.build(1, Path("/nonexistent"), "127.0.0.1", 0, overrides)


def _run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


async def _with_server(dispatcher, client, **overrides: str):
    server = KafkaServer(_config(**overrides), dispatcher)
    port = await server.start()
    try:
        return await client(port)
    finally:
        await server.stop()


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = _SIZE.unpack(await reader.readexactly(4))
    return await reader.readexactly(size)


def _pipelining(payloads: list[bytes]):
    """A client that sends every request before reading any answer."""

    async def client(port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"".join(_frame(p) for p in payloads))
        answers = [await _read_frame(reader) for _ in payloads]
        writer.close()
        return answers

    return client


def _frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload


def test_pipelined_frames_in_one_write_are_answered_in_order():
    dispatcher = EchoDispatcher()
    payloads = [f"request-{i}".encode() * (i + 1) for i in range(40)]

    assert _run(_with_server(dispatcher, _pipelining(payloads))) == payloads
    assert dispatcher.frames == payloads


def test_frames_trickling_one_byte_at_a_time():
    dispatcher = EchoDispatcher()
    payloads = [b"a" * 10, b"b" * 70_000, b"", b"c"]

    async def client(port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.transport.get_extra_info("socket").setsockopt(
            socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        data = b"".join(_frame(p) for p in payloads)
        for i in range(0, 200):  # the first bytes one by one, the rest in a burst
            writer.write(data[i:i + 1])
            await writer.drain()
            await asyncio.sleep(0)
        writer.write(data[200:])
        answers = [await _read_frame(reader) for _ in payloads]
        writer.close()
        return answers

    assert _run(_with_server(dispatcher, client)) == payloads


def test_large_frames_and_large_responses_survive_partial_io():
    dispatcher = EchoDispatcher(chunks=7)
    big = bytes(range(256)) * (12 * 1024)  # 3 MiB: beyond any socket buffer
    payloads = [big, b"small", big[:100_000], big[::-1]]

    async def client(port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"".join(_frame(p) for p in payloads))
        answers = []
        for _ in payloads:
            await asyncio.sleep(0.05)  # let the server's socket buffer fill
            answers.append(await _read_frame(reader))
        writer.close()
        return answers

    assert _run(_with_server(dispatcher, client)) == payloads
    # Large frames arrive as read-only views (the codec reads them without a copy).
    assert dispatcher.types[0] is memoryview and dispatcher.types[1] is bytes


def test_large_frame_buffer_is_reused_only_when_released():
    buffers = deque([mmap.mmap(-1, 1000), mmap.mmap(-1, 1000)])
    assert _unexported(buffers, 0) and _unexported(buffers, 1)
    view = memoryview(buffers[0])[:10].toreadonly()
    part = view[2:5]
    assert not _unexported(buffers, 0) and _unexported(buffers, 1)
    del view
    assert not _unexported(buffers, 0)  # a view of the view still holds the map
    del part
    assert _unexported(buffers, 0)
    kept = buffers[1]  # any other reference counts too: never handed out while held
    assert not _unexported(buffers, 1)
    del kept
    assert _unexported(buffers, 1)


def test_a_kept_frame_is_not_overwritten_by_the_next():
    kept = []

    class Keeper(EchoDispatcher):
        async def handle(self, frame, peer, session=None):
            kept.append(frame)  # a handler holding on to its frame
            return await super().handle(frame, peer)

    first, second = b"x" * 200_000, b"y" * 150_000

    async def client(port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for payload in (first, second):
            writer.write(_frame(payload))
            await _read_frame(reader)
        writer.close()

    _run(_with_server(Keeper(), client))
    assert bytes(kept[0]) == first and bytes(kept[1]) == second


def test_frame_too_large_closes_before_reading_it():
    dispatcher = EchoDispatcher()

    async def client(port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(_frame(b"ok") + _SIZE.pack(1001) + b"x" * 10)
        answer = await _read_frame(reader)
        rest = await reader.read()
        writer.close()
        return answer, rest

    answer, rest = _run(_with_server(dispatcher, client, **{"socket.request.max.bytes": "1000"}))
    assert answer == b"ok" and rest == b""
    assert dispatcher.frames == [b"ok"]


@pytest.mark.parametrize("data", [_SIZE.pack(-1), _SIZE.pack(10) + b"abc", b"\x00\x00"])
def test_malformed_or_truncated_frames_close_the_connection(data):
    dispatcher = EchoDispatcher()

    async def client(port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(data)
        if data.startswith(_SIZE.pack(10)) or len(data) < 4:
            writer.write_eof()
        rest = await reader.read()
        writer.close()
        return rest

    assert _run(_with_server(dispatcher, client)) == b""
    assert dispatcher.frames == []


def test_close_connection_and_no_response():
    dispatcher = EchoDispatcher()

    async def client(port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(_frame(b"silent") + _frame(b"one") + _frame(b"close") + _frame(b"never"))
        answer = await _read_frame(reader)
        rest = await reader.read()
        writer.close()
        return answer, rest

    assert _run(_with_server(dispatcher, client)) == (b"one", b"")
    assert dispatcher.frames == [b"silent", b"one", b"close"]


def test_idle_connections_are_closed_but_busy_ones_are_not():
    dispatcher = EchoDispatcher(delay_s=0.5)

    async def client(port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(_frame(b"slow"))  # handled for longer than the idle limit
        answer = await _read_frame(reader)
        start = time.monotonic()
        rest = await reader.read()  # then idle: closed by the server
        writer.close()
        return answer, rest, time.monotonic() - start

    answer, rest, waited = _run(
        _with_server(dispatcher, client, **{"connections.max.idle.ms": "200"}))
    assert answer == b"slow" and rest == b""
    assert waited < 5


def test_max_connections_refuses_extra_sockets():
    dispatcher = EchoDispatcher()

    async def client(port):
        first = await asyncio.open_connection("127.0.0.1", port)
        first[1].write(_frame(b"hello"))
        assert await _read_frame(first[0]) == b"hello"
        second = await asyncio.open_connection("127.0.0.1", port)
        refused = await second[0].read()
        first[1].close()
        second[1].close()
        return refused

    assert _run(_with_server(dispatcher, client, **{"max.connections": "1"})) == b""


def test_stop_closes_open_connections():
    async def main():
        server = KafkaServer(_config(), EchoDispatcher())
        port = await server.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(_frame(b"hi"))
        assert await _read_frame(reader) == b"hi"
        await server.stop()
        rest = await reader.read()
        writer.close()
        return rest

    assert _run(main()) == b""


def test_after_slices_without_copying():
    a, b = b"abcd", memoryview(b"efgh")
    assert _after([a, b], 0) == [a, b]
    rest = _after([a, b], 2)
    assert [bytes(r) for r in rest] == [b"cd", b"efgh"] and rest[1] is b
    assert [bytes(r) for r in _after([a, b], 5)] == [b"fgh"]
    assert _after([a, b], 8) == []


def test_sent_mmap_pages_are_released(tmp_path, monkeypatch):
    path = tmp_path / "segment"
    path.write_bytes(b"z" * (4 * 1024 * 1024))
    released = []

    class Pages(server_mod._MappedPages):
        def release(self):
            released.append(self._bytes)
            super().release()

    with open(path, "rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)

    class MapDispatcher(EchoDispatcher):
        async def handle(self, frame, peer, session=None):
            view = memoryview(mapped)
            return [_SIZE.pack(len(view)), view[: len(view) // 2], view[len(view) // 2:]]

    monkeypatch.setattr(server_mod, "_MappedPages",
                        lambda every, within_s: Pages(1024 * 1024, within_s))

    async def client(port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(_frame(b"fetch"))
        data = await _read_frame(reader)
        writer.close()
        return data

    assert _run(_with_server(MapDispatcher(), client)) == b"z" * (4 * 1024 * 1024)
    assert released == [4 * 1024 * 1024]
    assert mapped[:1] == b"z"  # still readable after MADV_DONTNEED


def test_maps_touched_by_reads_are_released_soon_after_any_answer(tmp_path, monkeypatch):
    # A consumer polling partitions at their ends makes the broker read headers and
    # send no records: nothing counts towards the byte trigger, yet pages were mapped.
    path = tmp_path / "segment"
    path.write_bytes(b"z" * (1024 * 1024))
    with open(path, "rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    monkeypatch.setattr(server_mod, "RELEASE_MAPPED_WITHIN_S", 0.05)
    before = TOUCHED.generation

    async def client(port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        TOUCHED.touched(mapped)  # as a header read does
        writer.write(_frame(b"poll"))
        assert await _read_frame(reader) == b"poll"
        released_at_once = TOUCHED.generation != before
        await asyncio.sleep(0.3)
        writer.close()
        return released_at_once

    assert _run(_with_server(EchoDispatcher(), client)) is False
    assert TOUCHED.generation != before and not TOUCHED
    assert mapped[:1] == b"z"


def test_maps_touched_are_released_when_a_connection_closes(tmp_path):
    path = tmp_path / "segment"
    path.write_bytes(b"z" * 4096)
    with open(path, "rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)

    async def client(port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(_frame(b"fetch"))
        assert await _read_frame(reader) == b"fetch"
        TOUCHED.touched(mapped)  # the consumer's last reads
        before = TOUCHED.generation
        writer.close()
        for _ in range(100):
            if TOUCHED.generation != before:
                break
            await asyncio.sleep(0.01)
        return TOUCHED.generation != before

    assert _run(_with_server(EchoDispatcher(), client)) is True


def test_large_frame_buffers_are_reused_and_refilled_correctly():
    dispatcher = EchoDispatcher()
    payloads = [bytes([i]) * (300_000 - i * 1000) for i in range(1, 6)]

    async def client(port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        answers = []
        for payload in payloads:  # one at a time: each buffer is free again
            writer.write(_frame(payload))
            answers.append(await _read_frame(reader))
        writer.close()
        return answers

    assert _run(_with_server(dispatcher, client)) == payloads


def test_unfinished_frame_after_whole_ones_is_kept():
    dispatcher = EchoDispatcher()
    first, second = b"1" * 1000, b"2" * 50_000
    data = _frame(first) + _frame(second)

    async def client(port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(data[:30_000])  # the first frame and part of the second
        assert await _read_frame(reader) == first
        await asyncio.sleep(0.05)
        writer.write(data[30_000:])
        answer = await _read_frame(reader)
        writer.close()
        return answer

    assert _run(_with_server(dispatcher, client)) == second


def test_requests_before_a_half_close_are_still_answered():
    dispatcher = EchoDispatcher(delay_s=0.05)

    async def client(port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(_frame(b"one") + _frame(b"two"))
        writer.write_eof()
        answers = [await _read_frame(reader), await _read_frame(reader)]
        rest = await reader.read()
        writer.close()
        return answers, rest

    assert _run(_with_server(dispatcher, client)) == ([b"one", b"two"], b"")


def test_pipelined_produce_responses_are_written_together(monkeypatch):
    dispatcher = EchoDispatcher(chunks=1)
    payloads = [b"\x00\x00produce-%d" % i for i in range(10)] + [b"\x00\x01fetch"]
    writes = []
    real = server_mod._sendmsg

    def counting(sock, chunks):
        writes.append(len(chunks))
        return real(sock, chunks)

    monkeypatch.setattr(server_mod, "_sendmsg", counting)

    assert _run(_with_server(dispatcher, _pipelining(payloads))) == payloads
    assert len(writes) < len(payloads)  # produce answers were batched


class GatedDispatcher(EchoDispatcher):
    """Holds every request until ``expected`` are being handled at once (or 5 s pass)."""

    def __init__(self, expected: int):
        super().__init__(chunks=1)
        self.expected = expected
        self.running = self.most = 0
        self.gate: asyncio.Event | None = None

    async def handle(self, frame, peer, session=None):
        no_quota(session)
        if self.gate is None:
            self.gate = asyncio.Event()
        self.running += 1
        self.most = max(self.most, self.running)
        if self.running >= self.expected:
            self.gate.set()
        try:
            await asyncio.wait_for(self.gate.wait(), 5)
        except TimeoutError:
            self.gate.set()
        self.running -= 1
        return await super().handle(frame, peer, session)


@pytest.mark.parametrize("size, count, bound", [
    # Small requests: the count bound.
    (100, 100, server_mod.MAX_PIPELINED_PRODUCE),
    # ~300 KB ones (1,000 partitions' are ~100 KB): the byte bound; started while
    # the ones in flight hold less than it, so one more than fits below it.
    (300_000, 40, server_mod.MAX_PIPELINED_PRODUCE_BYTES // 300_000 + 1),
])
def test_pipelined_produces_are_bounded_by_count_and_bytes(size, count, bound):
    payloads = [b"\x00\x00" + b"%06d" % i + bytes(size - 8) for i in range(count)]
    dispatcher = GatedDispatcher(bound)

    assert _run(_with_server(dispatcher, _pipelining(payloads))) == payloads
    assert dispatcher.most == bound


# With a 16-byte receive buffer, frames of 12+ bytes take the large-frame path:
# its scatter read (the frame's rest, then the next frames' bytes into the buffer).
_SMALL_BUFFER_FRAMES = [b"ab", b"L" * 40, b"", b"c" * 12, bytes(range(100)), b"d" * 11, b"e"]


def test_frames_split_at_every_byte_boundary(monkeypatch):
    monkeypatch.setattr(server_mod, "RECV_BUFFER", 16)
    dispatcher = EchoDispatcher()
    data = b"".join(_frame(p) for p in _SMALL_BUFFER_FRAMES)

    async def client(port):
        for cut in range(1, len(data)):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.transport.get_extra_info("socket").setsockopt(
                socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            writer.write(data[:cut])
            await writer.drain()
            await asyncio.sleep(0.002)  # the server reads the first part on its own
            writer.write(data[cut:])
            answers = [await _read_frame(reader) for _ in _SMALL_BUFFER_FRAMES]
            assert answers == _SMALL_BUFFER_FRAMES, cut
            writer.close()
        return len(data) - 1

    cuts = _run(_with_server(dispatcher, client))
    assert dispatcher.frames == _SMALL_BUFFER_FRAMES * cuts


@pytest.mark.parametrize("buffer", [16, 64 * 1024])
def test_bursts_of_frames_larger_than_the_buffer(monkeypatch, buffer):
    monkeypatch.setattr(server_mod, "RECV_BUFFER", buffer)
    dispatcher = EchoDispatcher()
    big = bytes(range(256)) * 400  # ~100 KB: a librdkafka produce to one of 1,000 partitions
    payloads = [big, b"x", big[::-1], big[:buffer - 4], big[:buffer - 3], b"", big] * 3
    if buffer == 16:
        payloads += _SMALL_BUFFER_FRAMES * 20  # many frames per read

    assert _run(_with_server(dispatcher, _pipelining(payloads))) == payloads
    assert dispatcher.frames == payloads


@pytest.mark.parametrize("sent", [4, 10, 16, 30, 99])
def test_eof_inside_a_frame_larger_than_the_buffer(monkeypatch, sent):
    monkeypatch.setattr(server_mod, "RECV_BUFFER", 16)
    dispatcher = EchoDispatcher()
    data = _frame(b"ok" * 10) + _frame(bytes(100))

    async def client(port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(data[:24 + sent])
        writer.write_eof()
        answer = await _read_frame(reader)
        rest = await reader.read()
        writer.close()
        return answer, rest

    assert _run(_with_server(dispatcher, client)) == (b"ok" * 10, b"")
    assert dispatcher.frames == [b"ok" * 10]


def test_large_frames_need_one_read_each(monkeypatch):
    """A burst of ~100 KB frames: the rest of each and the start of the next in one read."""
    reads = []
    real = server_mod._Connection._received

    def counting(self, n):
        reads.append(n)
        return real(self, n)

    monkeypatch.setattr(server_mod._Connection, "_received", counting)
    dispatcher = EchoDispatcher()
    payloads = [bytes([i]) * 100_000 for i in range(12)]

    async def client(port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.transport.get_extra_info("socket").setsockopt(
            socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * 1024 * 1024)
        writer.write(b"".join(_frame(p) for p in payloads))
        await writer.drain()
        answers = [await _read_frame(reader) for _ in payloads]
        writer.close()
        return answers

    assert _run(_with_server(dispatcher, client)) == payloads
    assert len(reads) <= len(payloads) * 3 // 2  # was two per frame (26 here)
