"""An asyncio connection from one broker to another (replica fetches, ISR changes).

Brokers talk to each other over the same Kafka protocol clients use, with
fixed versions both sides are known to speak. Like the server, it drives a
non-blocking socket directly rather than an asyncio stream: a fetch response
(megabytes of records) is received straight into a buffer of its size, with
no stream buffer to copy it through twice.

When the inter-broker listener is SSL or SASL_SSL the same socket carries a
:class:`TlsPipe`: the other broker's certificate is verified against the
truststore (and its address, unless ``ssl.endpoint.identification.algorithm``
is empty), and a response is decrypted straight into its frame buffer.
"""

from __future__ import annotations

import asyncio
import itertools
import mmap
import socket
import ssl
import struct
from typing import Any

from slog.core.scram import SaslError, SaslLogin, client_exchange
from slog.protocol.apis import ApiKey, request_class
from slog.protocol.codec import decode_response, encode_request
from slog.protocol.shapes import shape
from slog.protocol.tls import TlsPipe

MAX_RESPONSE_BYTES = 256 * 1024 * 1024
SPARE_MIN_BYTES = 64 * 1024  # frames from this size on are received into a reused map...
SPARE_MAX_BYTES = 16 * 1024 * 1024  # ...kept for the next frame up to this size
SOCKET_BUFFER_BYTES = 4 * 1024 * 1024  # a fetch response in few receives (as the client)
TLS_RECV_BYTES = 256 * 1024  # ciphertext taken from the socket per receive
_SIZE = struct.Struct(">i")


# How this process's brokers log in to each other (None: no SASL). One broker per
# process, set at start-up by the broker from its security settings.
_login: SaslLogin | None = None


def use_sasl_login(login: SaslLogin | None) -> None:
    global _login
    _login = login


# The TLS context for other brokers' listeners (None: plaintext), set like the login.
_tls: ssl.SSLContext | None = None


def use_tls(context: ssl.SSLContext | None) -> None:
    global _tls
    _tls = context


def _exported(buffer: mmap.mmap) -> bool:
    """True while a memoryview of ``buffer`` is alive (CPython refuses to resize it)."""
    try:
        buffer.resize(len(buffer))
    except BufferError:
        return True
    return False


class BrokerChannel:
    def __init__(self, host: str, port: int, client_id: str, timeout_s: float = 30.0):
        self.host = host
        self.port = port
        self._client_id = client_id
        self._timeout_s = timeout_s
        self._sock: socket.socket | None = None
        self._tls: TlsPipe | None = None
        self._spare: mmap.mmap | None = None  # the last large frame's buffer
        self._correlation = itertools.count(1)
        self._lock = asyncio.Lock()

    async def request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        """Send one request and wait for its response (one at a time per channel)."""
        frame = await self.request_frame(api_key, version, body)
        return decode_response(api_key, version, frame)[1]

    async def request_frame(self, api_key: int, version: int, body: dict[str, Any]
                            ) -> memoryview:
        """Like :meth:`request`, but the response frame undecoded (size prefix removed)."""
        async with self._lock:
            try:
                async with asyncio.timeout(self._timeout_s):
                    return await self._round_trip(api_key, version, body)
            except (OSError, TimeoutError, asyncio.IncompleteReadError):
                self.close()
                raise

    async def _round_trip(self, api_key: int, version: int, body: dict[str, Any]
                          ) -> memoryview:
        loop = asyncio.get_running_loop()
        if self._sock is None:
            # Resolved here, synchronously (brokers advertise addresses, not slow
            # names): loop.getaddrinfo would leave an executor thread idling.
            family, kind, proto, _, address = socket.getaddrinfo(
                self.host, self.port, type=socket.SOCK_STREAM)[0]
            sock = socket.socket(family, kind, proto)
            sock.setblocking(False)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_BUFFER_BYTES)
            try:
                await loop.sock_connect(sock, address)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except BaseException:
                sock.close()
                raise
            self._sock = sock
            self._tls = None
            if _tls is not None:
                await self._handshake(loop, sock, _tls)
            if _login is not None:
                await self._authenticate(loop, sock, _login)
        return await self._exchange(loop, self._sock, api_key, version, body)

    async def _handshake(self, loop: asyncio.AbstractEventLoop, sock: socket.socket,
                         context: ssl.SSLContext) -> None:
        tls = TlsPipe(context, server_side=False, server_hostname=self.host)
        try:
            while not tls.handshake():
                await self._send_output(loop, sock, tls)
                data = await loop.sock_recv(sock, TLS_RECV_BYTES)
                if not data:
                    raise ConnectionResetError(f"broker {self.host}:{self.port} closed the "
                                               "connection during the TLS handshake")
                tls.feed(data)
        except ssl.SSLError as exc:
            raise ConnectionRefusedError(f"TLS handshake with broker {self.host}:{self.port} "
                                         f"failed: {exc.reason or exc}") from None
        await self._send_output(loop, sock, tls)
        self._tls = tls

    @staticmethod
    async def _send_output(loop: asyncio.AbstractEventLoop, sock: socket.socket,
                           tls: TlsPipe) -> None:
        ciphertext = tls.output()
        if ciphertext:
            await loop.sock_sendall(sock, ciphertext)

    async def _authenticate(self, loop: asyncio.AbstractEventLoop, sock: socket.socket,
                            login: SaslLogin) -> None:
        """KIP-152: SaslHandshake v1, then SaslAuthenticate frames until done."""
        handshake = decode_response(ApiKey.SASL_HANDSHAKE, 1, await self._exchange(
            loop, sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": login.mechanism}))[1]
        if handshake.error_code:
            raise ConnectionRefusedError(f"broker {self.host}:{self.port} refused SASL "
                                         f"{login.mechanism} (error {handshake.error_code})")
        conversation = client_exchange(login)
        token = next(conversation)
        while True:
            answer = decode_response(ApiKey.SASL_AUTHENTICATE, 1, await self._exchange(
                loop, sock, ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": token}))[1]
            if answer.error_code:
                raise ConnectionRefusedError(f"broker {self.host}:{self.port}: inter-broker "
                                             f"authentication failed ({answer.error_message})")
            try:
                token = conversation.send(bytes(answer.auth_bytes))
            except StopIteration:
                return
            except SaslError as exc:
                raise ConnectionRefusedError(f"broker {self.host}:{self.port}: {exc}") from None

    async def _exchange(self, loop: asyncio.AbstractEventLoop, sock: socket.socket,
                        api_key: int, version: int, body: dict[str, Any]) -> memoryview:
        correlation_id = next(self._correlation)
        entity = shape(request_class(api_key, version), body)
        request = encode_request(entity, correlation_id=correlation_id,
                                 client_id=self._client_id)
        if self._tls is not None:
            self._tls.encrypt([request], len(request))
            await self._send_output(loop, sock, self._tls)
        else:
            await loop.sock_sendall(sock, request)
        (size,) = _SIZE.unpack(await self._receive(loop, sock, 4))
        if size < 0 or size > MAX_RESPONSE_BYTES:
            raise ConnectionResetError(f"broker {self.host}:{self.port} sent a frame of "
                                       f"{size} bytes")
        # Straight into a buffer of the frame's size (a fetch response is megabytes):
        # no stream buffer to copy through, and the record views point into it.
        frame = await self._receive(loop, sock, size)
        if size < 4 or _SIZE.unpack_from(frame)[0] != correlation_id:
            raise ConnectionResetError("correlation id mismatch")
        return frame

    async def _receive(self, loop: asyncio.AbstractEventLoop, sock: socket.socket,
                       size: int) -> memoryview:
        view = self._buffer(size)
        got = 0
        tls = self._tls
        while got < size:
            if tls is not None:
                try:
                    n = tls.read_into(view[got:])
                except ssl.SSLError as exc:
                    raise ConnectionResetError(f"broker {self.host}:{self.port}: TLS "
                                               f"{exc.reason or exc}") from None
                if n < 0:  # more ciphertext first
                    data = await loop.sock_recv(sock, TLS_RECV_BYTES)
                    if data:
                        tls.feed(data)
                        continue
                    n = 0
            else:
                n = await loop.sock_recv_into(sock, view[got:])
            if n == 0:
                raise ConnectionResetError(f"broker {self.host}:{self.port} closed the "
                                           "connection")
            got += n
        return view.toreadonly()

    def _buffer(self, size: int) -> memoryview:
        """A writable buffer of ``size`` bytes for one frame.

        A fetch response is megabytes, and ``bytearray(size)`` zero-fills all
        of it first (measured at a tenth of a follower's CPU). Large frames
        go to an anonymous map instead (pages are only committed as bytes
        arrive), reused once nothing refers to the previous frame any more:
        the follower has appended its records by then.
        """
        if size < SPARE_MIN_BYTES:
            return memoryview(bytearray(size))
        spare = self._spare
        if spare is not None and len(spare) >= size and not _exported(spare):
            return memoryview(spare)[:size]
        buffer = mmap.mmap(-1, size)
        self._spare = buffer if size <= SPARE_MAX_BYTES else None
        return memoryview(buffer)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock = None
        self._tls = None
