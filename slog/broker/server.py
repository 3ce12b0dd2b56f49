"""The Kafka listener: non-blocking sockets on the asyncio loop, requests answered in order.

Like Kafka's network processor, a connection is served one request at a time
(its channel is "muted" while a request is in flight), which keeps responses
in request order. The exception is a run of pipelined Produce requests: they
are appended in order as they arrive while earlier ones still wait for their
acks=all replication, and answered in order (see ``_start_produce``).

A frame larger than ``socket.request.max.bytes`` is refused before its
payload is read; idle connections are closed after
``connections.max.idle.ms``; at ``max.connections`` new sockets are closed at once.

The sockets are driven directly with ``loop.add_reader``/``add_writer``
rather than through asyncio streams, because the data path is about bytes,
not requests (a 1 MB produce or a 10 MB fetch is one request):

* a large frame is received with ``recv_into`` straight into a buffer of its
  exact size (streams copy every byte twice more: into the reader's buffer,
  then out of it), and handed on as a read-only view, which the codec reads
  without another copy; its rest and the bytes after it are read in one
  ``recvmsg_into`` over both buffers, so a burst of large frames costs one
  read per frame, and a read that fills all it was offered is followed by
  another before going back to the selector;
* a response is sent with one ``sendmsg`` over its chunk list, so the record
  views of a fetch go from the segment maps to the kernel unjoined (asyncio's
  ``writelines`` joins them, and buffers what the socket does not take);
* idleness is checked by one sweeper task, not a timeout per frame.

On an SSL or SASL_SSL listener the same loop runs over a :class:`TlsPipe`
(an ``SSLObject`` over memory BIOs): received ciphertext is fed to it and the
plaintext read out into the same buffers; a response's chunks are encrypted
in batches of 256 KiB and each batch goes out in one send, so a connection
never holds more than a batch of ciphertext, and nothing blocks on a slow or
stalled peer. A handshake has ``TLS_HANDSHAKE_TIMEOUT_S``; one that fails or
times out closes that connection only.

Segment pages that reads mapped into this process (the views of a response,
and the batch headers read to find an offset) are dropped from its page
tables with ``madvise(MADV_DONTNEED)`` (``slog.core.mapped_pages``): after
every 8 MB of views sent, within a second of any other answer, and when a
connection closes. They stay in the page cache, so nothing is re-read from
disk, but a broker that serves gigabytes, or a consumer that reads a thousand
partitions once, no longer leaves them all counted as resident memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import mmap
import os
import socket
import ssl
import struct
import sys
import time
from collections import deque
from collections.abc import Mapping, Sequence

from slog.broker.dispatcher import CLOSE_CONNECTION, Dispatcher
from slog.broker.security import Session
from slog.core.config import BrokerConfig
from slog.core.listeners import Endpoint
from slog.core.mapped_pages import TOUCHED
from slog.protocol.errors import FrameTooLargeError, MalformedFrameError, ProtocolError
from slog.protocol.tls import TlsPipe

log = logging.getLogger("slog.broker.server")

_SIZE = struct.Struct(">i")
RECV_BUFFER = 64 * 1024  # small frames are parsed out of this; larger ones get their own
LARGE_FRAME = 16 * 1024  # from this size a frame gets a buffer of its own (reused)
MAX_SPARE_BUFFER = 2 * 1024 * 1024  # a connection keeps its last large frame buffers up to this
SPARE_BYTES = 10 * 1024 * 1024  # ...and up to this many bytes of them
SPARE_BUFFERS = 96  # ...at most this many (as many frames as can be queued or in flight)
READ_AHEAD_FRAMES = 16  # stop reading while this many requests wait for their turn...
READ_AHEAD_BYTES = 1024 * 1024  # ...or this many bytes of them (Kafka reads none ahead)
READS_PER_EVENT = 4  # reads per readiness event while each fills its buffers (fairness)
# Produce requests of one connection handled at once (in order): up to this many...
MAX_PIPELINED_PRODUCE = 64
# ...while they hold fewer bytes than this. librdkafka sends one partition per request,
# so 1,000 partitions make requests of ~100 KB where 6 make ~1 MB: a bound in requests
# alone let a write.caching=false sync pass cover a tenth of the bytes (16 x 100 KB).
MAX_PIPELINED_PRODUCE_BYTES = 8 * 1024 * 1024
RELEASE_MAPPED_EVERY = 8 * 1024 * 1024  # bytes sent from segment maps between madvise calls
RELEASE_MAPPED_WITHIN_S = 1.0  # ...and at the latest this long after an answer went out
PRE_AUTH_MAX_BYTES = 512 * 1024
TLS_HANDSHAKE_TIMEOUT_S = 10.0  # a peer that stalls mid-handshake is dropped after this
TLS_RECV_BYTES = 256 * 1024  # ciphertext taken from the socket per read
_IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024
_ACCEPT_ERRNOS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
_EOF = object()  # queued after the last frame of a connection closed by the peer

Chunk = bytes | bytearray | memoryview


class KafkaServer:
    """One listener (``--listen``, or one entry of ``listeners``) and its connections."""

    def __init__(self, config: BrokerConfig, dispatcher: Dispatcher,
                 listener: Endpoint | None = None, tls: ssl.SSLContext | None = None):
        self._config = config
        self._dispatcher = dispatcher
        protocol = config.values["security.protocol"]
        self.listener = listener or Endpoint(protocol, config.host, config.port, protocol)
        if self.listener.tls and tls is None:
            raise ValueError(f"listener {self.listener.name} needs a TLS context")
        self.tls = tls if self.listener.tls else None
        self._listeners: list[socket.socket] = []
        self._connections: set[_Connection] = set()
        self._sweeper: asyncio.Task[None] | None = None
        self._mapped = _MappedPages(RELEASE_MAPPED_EVERY, RELEASE_MAPPED_WITHIN_S)
        self.max_bytes = config.get_int("socket.request.max.bytes")
        # Before a SASL login a frame may be at most this big (Kafka's
        # sasl.server.max.receive.size): strangers cannot make us buffer 100 MB.
        self.pre_auth_max_bytes = min(self.max_bytes, PRE_AUTH_MAX_BYTES) \
            if self.listener.sasl else self.max_bytes
        self.idle_s = config.get_int("connections.max.idle.ms") / 1000
        self.port = self.listener.port

    async def start(self) -> int:
        loop = asyncio.get_running_loop()
        host = self.listener.host or None
        # Synchronous on purpose: loop.getaddrinfo would start an executor
        # thread that then idles for the broker's lifetime; this is start-up.
        infos = socket.getaddrinfo(host, self.listener.port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
        seen = set()
        try:
            for family, kind, proto, _, address in infos:
                if (family, address) in seen:
                    continue
                seen.add((family, address))
                sock = socket.socket(family, kind, proto)
                self._listeners.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                try:
                    sock.bind(address)
                except OSError as exc:
                    reason = (exc.strerror or str(exc)).lower()
                    raise OSError(exc.errno, f"error while attempting to bind on address "
                                             f"{address!r} (listener {self.listener.name}): "
                                             f"{reason}") from None
                sock.listen(512)
                sock.setblocking(False)
        except BaseException:
            for sock in self._listeners:
                sock.close()
            self._listeners.clear()
            raise
        for sock in self._listeners:
            loop.add_reader(sock.fileno(), self._accept, sock)
        self.port = self._listeners[0].getsockname()[1]
        self._sweeper = loop.create_task(self._sweep_idle(), name="idle-connections")
        return self.port

    async def stop(self) -> None:
        loop = asyncio.get_running_loop()
        for sock in self._listeners:
            loop.remove_reader(sock.fileno())
            sock.close()
        self._listeners.clear()
        if self._sweeper is not None:
            self._sweeper.cancel()
        self._mapped.stop()
        tasks = [conn.task for conn in self._connections]
        for conn in list(self._connections):
            conn.close()
        await asyncio.gather(*tasks, *([self._sweeper] if self._sweeper else []),
                             return_exceptions=True)

    # -- connections ---------------------------------------------------------------
    def _accept(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        for _ in range(512):
            try:
                sock, address = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in _ACCEPT_ERRNOS:
                    # Out of descriptors or memory: stop accepting for a moment.
                    log.error("accept failed: %s; pausing the listener for 1 s", exc)
                    loop.remove_reader(listener.fileno())
                    loop.call_later(1.0, self._resume_accepting, listener)
                    return
                if exc.errno in (errno.ECONNABORTED, errno.EPROTO):
                    continue
                log.warning("accept failed: %s", exc)
                return
            if len(self._connections) >= self._config.get_int("max.connections"):
                log.warning("max.connections reached; refusing %s", _format_peer(address))
                sock.close()
                continue
            sock.setblocking(False)
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Connection(self, loop, sock, _format_peer(address))
            self._connections.add(conn)

    def _resume_accepting(self, listener: socket.socket) -> None:
        if listener in self._listeners:
            asyncio.get_running_loop().add_reader(listener.fileno(), self._accept, listener)

    def _forget(self, conn: _Connection) -> None:
        self._connections.discard(conn)
        if TOUCHED:  # a consumer that left will not read those pages again
            self._mapped.release()

    async def _sweep_idle(self) -> None:
        """Close connections idle for connections.max.idle.ms. Sleeps until the
        longest-quiet connection could reach it (10 minutes for a new one), at least
        ``period``: an idle broker's connections (replica fetches) are never due."""
        loop = asyncio.get_running_loop()
        period = min(1.0, max(0.01, self.idle_s / 4))
        while True:
            now = loop.time()
            quiet_since = min((c.last_active for c in self._connections), default=now)
            await asyncio.sleep(max(period, quiet_since + self.idle_s - now))
            limit = loop.time() - self.idle_s
            for conn in [c for c in self._connections if c.idle_since(limit)]:
                log.debug("closing idle connection %s", conn.peer)
                conn.close()


class _Connection:
    """One client socket: frames in, one request (or a run of produces) in flight,
    responses out in order."""

    def __init__(self, server: KafkaServer, loop: asyncio.AbstractEventLoop,
                 sock: socket.socket, peer: str):
        self.server = server
        self.peer = peer
        self._loop = loop
        self._sock = sock
        self._fd = sock.fileno()
        self._max_bytes = server.pre_auth_max_bytes
        self._buf = bytearray(RECV_BUFFER)
        self._view = memoryview(self._buf)
        self._start = 0  # unparsed bytes are _buf[_start:_end]
        self._end = 0
        self._big: memoryview | None = None  # a frame too large for _buf, being filled
        self._big_got = 0
        # The last large frames' buffers by size (a power of two), oldest first; the
        # sizes least recently used first.
        self._spares: dict[int, deque[mmap.mmap]] = {}
        self._spare_bytes = 0
        self._spare_count = 0
        self._frames: deque[object] = deque()  # frames, then _EOF or a ProtocolError
        self._queued_bytes = 0
        self._reading = True
        self._closed_for_reading = False  # EOF, a framing error, or close()
        self._frame_waiter: asyncio.Future[None] | None = None
        self._pending: list[Chunk] = []  # unsent rest of the current response
        self._drain_waiter: asyncio.Future[None] | None = None
        self._busy = False  # a request is being handled or its response sent
        self._closed = False
        self._last_active = loop.time()
        self.session = Session(host=peer.rpartition(":")[0] or "*",  # SASL state, principal
                               listener=server.listener.name,
                               sasl_required=server.listener.sasl)
        self._tls: TlsPipe | None = None
        self._plain: list[Chunk] = []  # TLS: response chunks not encrypted yet
        self._tls_eof = False
        self._tls_bytes_in = 0  # ciphertext received (a probe that sends none is not logged)
        self._handshake_timer: asyncio.TimerHandle | None = None
        if server.tls is not None:
            self._tls = TlsPipe(server.tls, server_side=True)
            self._handshake_timer = loop.call_later(TLS_HANDSHAKE_TIMEOUT_S,
                                                    self._handshake_expired)
        loop.add_reader(self._fd, self._on_readable)
        self.task = loop.create_task(self._serve(), name=f"kafka-connection {peer}")

    @property
    def last_active(self) -> float:
        return self._last_active

    def idle_since(self, limit: float) -> bool:
        return not self._busy and not self._frames and self._last_active < limit

    # -- request loop ----------------------------------------------------------------
    async def _serve(self) -> None:
        dispatcher = self.server._dispatcher
        frames = self._frames
        out: list[Chunk] = []  # responses not written yet, in order
        # Produce requests being handled, oldest first (see _start_produce).
        inflight: deque[asyncio.Task[object]] = deque()
        # The frame size of each inflight request: what the byte bound counts (summed
        # only when one more may start: at most MAX_PIPELINED_PRODUCE of them).
        sizes: deque[int] = deque()
        try:
            while True:
                if inflight:
                    if self.session.produce_quota is None:
                        # The head's first step looks the quota up (Dispatcher): let it.
                        await asyncio.sleep(0)
                    # Under a produce quota, or before it is known: one at a time
                    # (slog.broker.quotas).
                    pipelined = MAX_PIPELINED_PRODUCE if self.session.produce_quota is False \
                        else 1
                    while frames and _is_produce(frames[0]) and len(inflight) < pipelined \
                            and sum(sizes) < MAX_PIPELINED_PRODUCE_BYTES \
                            and not self._muted():
                        self._start_produce(dispatcher, inflight, sizes)
                    head = inflight[0]
                    if not head.done():
                        if out:
                            await self._write(out)
                            out = []
                        await self._wait_for(head)
                        continue
                    inflight.popleft()
                    sizes.popleft()
                    response = head.result()
                    if response is CLOSE_CONNECTION:
                        if out:
                            await self._write(out)
                        return
                    if isinstance(response, list) and response:
                        out += response
                    if not (inflight and inflight[0].done() and len(out) < 64):
                        await self._write(out)
                        out = []
                    continue
                if self._muted():
                    # KIP-219: the throttled response went out first; now read nothing
                    # from this client until its throttle time is over.
                    if out:
                        await self._write(out)
                        out = []
                    await self._mute()
                    continue
                if not frames:
                    if out:
                        await self._write(out)
                        out = []
                    self._busy = False
                    self._last_active = self._loop.time()
                    await self._wait_for_frame()
                    # A finished produce's done callback, scheduled before its _wait_for
                    # ended, may be what woke this waiter: look again.
                    continue
                item = frames[0]
                if item is _EOF or isinstance(item, ProtocolError):
                    frames.popleft()
                    if out:
                        await self._write(out)
                    if isinstance(item, ProtocolError):
                        raise item
                    return
                self._busy = True
                if _is_produce(item):
                    del item
                    self._start_produce(dispatcher, inflight, sizes)
                    continue
                frame = self._next_frame()
                response = await dispatcher.handle(frame, self.peer, self.session)
                del frame, item
                if response is CLOSE_CONNECTION:
                    if out:
                        await self._write(out)
                    return
                if isinstance(response, list) and response:
                    out += response
                    await self._write(out)
                    out = []
                if self.session.close_after_response:
                    return  # a failed SASL exchange: answered, now closed
                if self.session.authenticated:
                    self._max_bytes = self.server.max_bytes
        except (ConnectionError, asyncio.CancelledError):
            pass  # the client went away, or the broker is shutting down
        except ProtocolError as exc:
            log.info("closing %s: %s", self.peer, exc)
        except OSError as exc:
            log.info("closing %s: %s", self.peer, exc)
        except Exception:
            log.exception("connection %s failed", self.peer)
        finally:
            for task in inflight:
                task.cancel()
            self.close()

    def _next_frame(self) -> bytes | memoryview:
        # Called only when the queue's head is a frame, not _EOF or an error.
        frame: bytes | memoryview = self._frames.popleft()  # type: ignore[assignment]
        self._queued_bytes -= len(frame)
        if not self._reading and not self._closed and not self._muted():
            self._resume_reading()
        return frame

    def _muted(self) -> bool:
        """Whether a client quota throttle mutes this connection (slog.broker.quotas)."""
        until = self.session.muted_until
        return until > 0 and until > time.monotonic()

    async def _mute(self) -> None:
        self._pause_reading()
        while (delay := self.session.muted_until - time.monotonic()) > 0:
            await asyncio.sleep(delay)
        self.session.muted_until = 0.0
        if not self._reading and not self._closed and \
                len(self._frames) < READ_AHEAD_FRAMES and self._queued_bytes < READ_AHEAD_BYTES:
            self._resume_reading()

    def _start_produce(self, dispatcher: Dispatcher, inflight: deque[asyncio.Task[object]],
                       sizes: deque[int]) -> None:
        """Handle the next frame, a Produce request, while earlier ones wait for their acks.

        An acks=all produce waits for the followers (tens of ms under load). A
        producer keeps several requests in flight on its connection, and
        handling them one at a time would make each wait for the previous
        one's replication round: the followers would fetch one request's
        batches per round. Tasks start in creation order, so the appends
        still happen in request order; the responses are sent in request
        order too; and a request of any other kind waits until every produce
        before it has been answered, so nothing else is reordered.
        """
        frame = self._next_frame()
        inflight.append(self._loop.create_task(dispatcher.handle(frame, self.peer,
                                                                 self.session)))
        sizes.append(len(frame))

    async def _wait_for(self, head: asyncio.Task[object]) -> None:
        """Until ``head`` finishes or another frame arrives (it may be started).

        One future and one callback, not ``asyncio.wait``'s set, counter and
        callbacks: this runs once or twice for every produce request."""
        waiter = self._frame_waiter = self._loop.create_future()
        head.add_done_callback(self._head_done)
        try:
            await waiter
        finally:
            self._frame_waiter = None
            head.remove_done_callback(self._head_done)

    def _head_done(self, _task: asyncio.Task[object]) -> None:
        self._wake()

    async def _write(self, out: list[Chunk]) -> None:
        self._send(out)
        if self._pending or self._plain:
            await self._wait_drained()
        self.server._mapped.sent(out)

    async def _wait_for_frame(self) -> None:
        if self._closed:
            raise ConnectionResetError("connection closed")
        waiter = self._frame_waiter = self._loop.create_future()
        try:
            await waiter
        finally:
            self._frame_waiter = None

    def _wake(self) -> None:
        waiter = self._frame_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- reading ---------------------------------------------------------------------
    def _on_readable(self) -> None:
        if self._tls is not None:
            self._on_readable_tls(self._tls)
            return
        sock, buf = self._sock, self._buf
        # A read that fills every buffer offered probably left more behind: read
        # again now rather than after another trip through the selector.
        for _ in range(READS_PER_EVENT):
            big = self._big
            try:
                if big is not None:
                    # The rest of the large frame and, in the same call, whatever
                    # follows it into _buf (empty meanwhile): a burst of ~100 KB
                    # frames costs one read per frame, not two.
                    room = len(big) - self._big_got
                    n = sock.recvmsg_into((big[self._big_got:], self._view[self._end:]))[0]
                    full = n == room + len(buf) - self._end
                else:
                    n = sock.recv_into(self._view[self._end:])
                    full = n == len(buf) - self._end
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self._finish_reading(_EOF)  # reset by peer: nothing more will come
                return
            self._received(n)
            if not full or not self._reading:
                return

    def _on_readable_tls(self, tls: TlsPipe) -> None:
        """Ciphertext in; the handshake advanced or plaintext read into the frame buffers.

        Decrypted bytes may stay in the pipe when reading pauses (read-ahead);
        select cannot see them, so resuming reads them (see _resume_reading)."""
        if not self._tls_eof:
            try:
                data = self._sock.recv(TLS_RECV_BYTES)
            except (BlockingIOError, InterruptedError):
                data = None
            except OSError:
                self._finish_reading(_EOF)
                return
            if data == b"":
                if not tls.handshaken and not self._tls_bytes_in:
                    # A port probe (`slog broker start` checks the port is open).
                    self._finish_reading(_EOF)
                    return
                self._tls_eof = True
                tls.feed_eof()
            elif data is not None:
                self._tls_bytes_in += len(data)
                tls.feed(data)
                self._last_active = self._loop.time()
        try:
            if not tls.handshaken:
                done = tls.handshake()
                self._pump()
                if not done:
                    if self._tls_eof:
                        self._finish_reading(_EOF)
                    return
                self._handshaken(tls)
            while self._reading and not self._closed:
                target = self._big[self._big_got:] if self._big is not None \
                    else self._view[self._end:]
                n = tls.read_into(target)
                if n < 0:
                    break
                self._received(n)
                if n == 0:
                    return
            if tls.buffered():
                pass  # paused with plaintext waiting: _resume_reading comes back for it
            elif self._tls_eof and not self._closed_for_reading:
                self._received(0)
            self._pump()  # post-handshake messages (TLS 1.3 tickets, key updates)
        except ssl.SSLError as exc:
            log.info("closing %s: TLS %s", self.peer, exc.reason or exc)
            self._flush_alert(tls)
            self._finish_reading(_EOF)
        except OSError as exc:
            log.info("closing %s: %s", self.peer, exc)
            self._finish_reading(_EOF)

    def _handshaken(self, tls: TlsPipe) -> None:
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
            self._handshake_timer = None
        if not self.session.sasl_required:
            certificate = tls.peer_certificate()
            if certificate is not None:  # SSL with a client certificate: Kafka's principal
                self.session.principal = "User:" + distinguished_name(certificate)

    def _handshake_expired(self) -> None:
        self._handshake_timer = None
        if self._tls is not None and not self._tls.handshaken and not self._closed:
            log.info("closing %s: no TLS handshake within %.0f s", self.peer,
                     TLS_HANDSHAKE_TIMEOUT_S)
            self.close()

    def _flush_alert(self, tls: TlsPipe) -> None:
        """Best effort: the peer learns why (a TLS alert) before the connection closes."""
        with contextlib.suppress(OSError):
            alert = tls.output()
            if alert and not self._pending:
                self._sock.send(alert)

    def _received(self, n: int) -> None:
        """``n`` more bytes are in the frame buffers (0: the peer closed): the large
        frame's rest first, then _buf."""
        if n == 0:
            if self._big is not None or self._end > self._start:
                got = self._big_got if self._big is not None else self._end - self._start
                self._finish_reading(MalformedFrameError(
                    f"connection closed after {got} bytes of an unfinished frame"))
            else:
                self._finish_reading(_EOF)
            return
        self._last_active = self._loop.time()
        big = self._big
        if big is not None:
            room = len(big) - self._big_got
            if n < room:
                self._big_got += n
            else:
                self._queue(big.toreadonly())
                self._big = None
                if n > room:  # the next frames' bytes, read into _buf after it
                    self._end += n - room
                    self._parse()
        else:
            self._end += n
            self._parse()
        if self._frames and (len(self._frames) >= READ_AHEAD_FRAMES
                             or self._queued_bytes >= READ_AHEAD_BYTES):
            self._pause_reading()

    def _parse(self) -> None:
        buf, view = self._buf, self._view
        start, end = self._start, self._end
        while end - start >= 4:
            (size,) = _SIZE.unpack_from(buf, start)
            if size < 0 or size > self._max_bytes:
                error = (MalformedFrameError(f"negative frame size {size}") if size < 0
                         else FrameTooLargeError(size, self._max_bytes))
                self._start = self._end = 0
                self._finish_reading(error)
                return
            have = end - start - 4
            if have >= size:
                if size < LARGE_FRAME:
                    self._queue(bytes(view[start + 4:start + 4 + size]))
                else:  # a reused buffer: no fresh heap pages to fault in for each frame
                    big = self._frame_buffer(size)
                    big[:] = view[start + 4:start + 4 + size]
                    self._queue(big.toreadonly())
                start += 4 + size
                continue
            if size >= LARGE_FRAME or size + 4 > len(buf):
                # Receive the rest straight into a buffer of the frame's size: one copy
                # of what came so far, none of the rest (no move to the front of _buf).
                big = self._frame_buffer(size)
                big[:have] = view[start + 4:end]
                self._big, self._big_got = big, have
                start = end = 0
            break
        if start == end:
            start = end = 0
        elif start:
            # Move the unfinished frame (shorter than the buffer) to the front.
            buf[:end - start] = bytes(view[start:end])
            start, end = 0, end - start
        self._start, self._end = start, end

    def _frame_buffer(self, size: int) -> memoryview:
        """A writable view of ``size`` bytes for one large frame.

        Zero-filling a fresh megabyte per produce request costs more than
        receiving it, so an earlier large buffer is reused when nothing refers
        to it any more (no request object kept a view of its frame). Several are
        kept, since pipelined and read-ahead produce requests hold theirs until
        answered: a producer writing to a thousand partitions sends frames of
        about 100 KB, up to 32 of them queued or in flight, and a fresh map for
        each (a syscall, then a page fault per 4 KiB) cost more than its append.

        Buffers come in powers of two, so one fits the next frames of about the
        same size. Requests are answered in order, so of the buffers of a size the
        one handed out longest ago is the first to be free again: only it is
        looked at.
        """
        if size > MAX_SPARE_BUFFER:
            # Anonymous memory is only committed as bytes arrive, so a client that
            # announces a 100 MB frame and sends two bytes costs two bytes, not 100 MB.
            return memoryview(mmap.mmap(-1, size))
        capacity = 1 << max(0, size - 1).bit_length()
        spares = self._spares
        kept = spares.pop(capacity, None) or deque()
        spares[capacity] = kept  # the most recently used size goes last
        if kept and _unexported(kept, 0):
            buffer = kept.popleft()
        else:
            buffer = mmap.mmap(-1, capacity)
            self._spare_bytes += capacity
            self._spare_count += 1
        kept.append(buffer)
        while self._spare_bytes > SPARE_BYTES or self._spare_count > SPARE_BUFFERS:
            # Forget the oldest of the least recently used size (still in use or not).
            oldest_size, oldest = next(iter(spares.items()))
            oldest.popleft()
            self._spare_bytes -= oldest_size
            self._spare_count -= 1
            if not oldest:
                del spares[oldest_size]
        return memoryview(buffer)[:size]

    def _queue(self, item: object) -> None:
        self._frames.append(item)
        if type(item) is bytes or type(item) is memoryview:
            self._queued_bytes += len(item)
        if self.session.end_long_poll is not None:
            self.session.end_long_poll()
        self._wake()

    def _finish_reading(self, last: object) -> None:
        """No more frames will be read: queue the end marker (EOF or the error)."""
        self._pause_reading()
        self._reading = False
        self._closed_for_reading = True
        self._frames.append(last)
        self._big = None
        self._wake()

    def _pause_reading(self) -> None:
        if self._reading:
            self._reading = False
            self._loop.remove_reader(self._fd)

    def _resume_reading(self) -> None:
        if self._closed_for_reading:
            return
        self._reading = True
        self._loop.add_reader(self._fd, self._on_readable)
        if self._tls is not None and self._tls.buffered():
            self._loop.call_soon(self._read_buffered)

    def _read_buffered(self) -> None:
        if self._reading and not self._closed and self._tls is not None:
            self._on_readable_tls(self._tls)

    # -- writing ---------------------------------------------------------------------
    def _send(self, buffers: Sequence[Chunk]) -> None:
        if self._tls is not None:
            self._plain = list(buffers)
            self._pump()
            return
        pending = list(buffers)
        sent = _sendmsg(self._sock, pending)
        if sent < 0:  # would block before anything went out
            sent = 0
        self._pending = _after(pending, sent)
        if self._pending:
            self._loop.add_writer(self._fd, self._on_writable)

    def _pump(self) -> None:
        """TLS: encrypt a batch, send it, repeat until all is out or the socket is full."""
        assert self._tls is not None
        while True:
            if not self._pending:
                if self._plain:
                    self._plain = self._tls.encrypt(self._plain)
                ciphertext = self._tls.output()
                if not ciphertext:
                    break
                self._pending = [ciphertext]
            sent = _sendmsg(self._sock, self._pending)
            if sent < 0:
                break
            self._pending = _after(self._pending, sent)
            if self._pending:
                break
        if self._pending:
            self._loop.add_writer(self._fd, self._on_writable)
            return
        self._loop.remove_writer(self._fd)
        waiter = self._drain_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _on_writable(self) -> None:
        try:
            if self._tls is not None:
                self._pump()
                return
            sent = _sendmsg(self._sock, self._pending)
        except OSError as exc:
            self._loop.remove_writer(self._fd)
            self._pending = []
            self._plain = []
            waiter = self._drain_waiter
            if waiter is not None and not waiter.done():
                waiter.set_exception(exc)
            return
        if sent > 0:
            self._pending = _after(self._pending, sent)
        if not self._pending:
            self._loop.remove_writer(self._fd)
            waiter = self._drain_waiter
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    async def _wait_drained(self) -> None:
        waiter = self._drain_waiter = self._loop.create_future()
        try:
            await waiter
        finally:
            self._drain_waiter = None

    # -- closing ---------------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._closed_for_reading = True
        if self._reading:
            self._loop.remove_reader(self._fd)
            self._reading = False
        if self._pending or self._plain:
            self._loop.remove_writer(self._fd)
            self._pending = []
            self._plain = []
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
            self._handshake_timer = None
        self._sock.close()
        self._frames.clear()
        self.server._forget(self)
        for waiter in (self._frame_waiter, self._drain_waiter):
            if waiter is not None and not waiter.done():
                waiter.set_exception(ConnectionResetError("connection closed"))
        if self.task is not asyncio.current_task() and not self.task.done():
            self.task.cancel()


def _is_produce(item: object) -> bool:
    """Whether a queued frame is a Produce request (api key 0)."""
    return (type(item) is bytes or type(item) is memoryview) and len(item) >= 2 \
        and item[0] == 0 and item[1] == 0


def _references(buffers: deque[mmap.mmap], i: int) -> int:
    return sys.getrefcount(buffers[i])


def _unexported(buffers: deque[mmap.mmap], i: int) -> bool:
    """True unless something besides ``buffers`` refers to ``buffers[i]``, such as a
    memoryview of it (each view's buffer holds a reference to the map it exports).

    Counted against a map only a deque refers to, looked at the same way, so
    whatever the interpreter adds to the count is in both; a probe by resizing the
    map cost a system call per buffer looked at."""
    return _references(buffers, i) <= _UNEXPORTED_REFERENCES


_UNEXPORTED_REFERENCES = _references(deque([mmap.mmap(-1, 1)]), 0)


def _sendmsg(sock: socket.socket, chunks: list[Chunk]) -> int:
    """Send as much of ``chunks`` as the socket takes now; -1 if it takes nothing."""
    try:
        if len(chunks) == 1:
            return sock.send(chunks[0])
        return sock.sendmsg(chunks[:_IOV_MAX])
    except (BlockingIOError, InterruptedError):
        return -1


def _after(chunks: list[Chunk], sent: int) -> list[Chunk]:
    """What is left of ``chunks`` once their first ``sent`` bytes are out (views, no copies)."""
    for i, chunk in enumerate(chunks):
        size = chunk.nbytes if type(chunk) is memoryview else len(chunk)
        if sent < size:
            rest = chunks[i + 1:]
            return [memoryview(chunk)[sent:], *rest] if sent else chunks[i:]
        sent -= size
    return []


class _MappedPages:
    """When to unmap the segment pages that reads touched (``slog.core.mapped_pages``).

    After ``every`` bytes of memoryviews over mmap objects have been sent, at
    the latest ``within_s`` after any answer went out while a map was touched
    (a consumer polling a thousand partitions at their ends reads a header of
    each and is sent nothing), and when a connection closes: a broker that
    goes quiet keeps nothing mapped for long. The maps of the views sent are
    registered too: a release since they were read may have dropped their
    pages, which the kernel's copy to the socket mapped back in.
    """

    def __init__(self, every: int, within_s: float):
        self._every = every
        self._within_s = within_s
        self._bytes = 0
        self._timer: asyncio.TimerHandle | None = None

    def sent(self, buffers: Sequence[Chunk]) -> None:
        maps = []
        for chunk in buffers:
            if type(chunk) is memoryview and type(chunk.obj) is mmap.mmap:
                maps.append(chunk.obj)
                self._bytes += chunk.nbytes
        if maps:
            TOUCHED.touched(*maps)  # one lock for the response, not one per partition
        if self._bytes >= self._every:
            self.release()
        elif self._timer is None and TOUCHED:
            self._timer = asyncio.get_running_loop().call_later(self._within_s, self.release)

    def release(self) -> None:
        self.stop()
        TOUCHED.release()
        self._bytes = 0

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


_DN_NAMES = {"commonName": "CN", "organizationalUnitName": "OU", "organizationName": "O",
             "localityName": "L", "stateOrProvinceName": "ST", "countryName": "C",
             "domainComponent": "DC", "userId": "UID"}


def distinguished_name(certificate: Mapping[str, object]) -> str:
    """A certificate subject as RFC 2253 writes it (``CN=alice,O=acme``): Kafka's SSL principal."""
    rdns = certificate.get("subject", ())
    parts = []
    # ssl's decoded certificate: the subject is a tuple of RDNs, each of (name, value) pairs.
    for rdn in reversed(rdns):  # type: ignore[call-overload]
        parts.append("+".join(f"{_DN_NAMES.get(k, k)}={v}" for k, v in rdn))
    return ",".join(parts)


def _format_peer(address: object) -> str:
    if isinstance(address, tuple) and len(address) >= 2:
        return f"{address[0]}:{address[1]}"
    return "?"
