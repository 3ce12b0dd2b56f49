"""The Kafka listener: one asyncio task per connection, requests answered in order.

Like Kafka's network processor, a connection is served one request at a time
(its channel is "muted" while a request is in flight), which keeps responses
in request order. A frame larger than ``socket.request.max.bytes`` is refused
before its payload is read; idle connections are closed after
``connections.max.idle.ms``; at ``max.connections`` new sockets are closed at once.
"""

from __future__ import annotations

import asyncio
import logging
import socket

from slog.broker.dispatcher import CLOSE_CONNECTION, Dispatcher
from slog.core.config import BrokerConfig
from slog.protocol.errors import ProtocolError
from slog.protocol.framing import read_frame

log = logging.getLogger("slog.broker.server")


class KafkaServer:
    def __init__(self, config: BrokerConfig, dispatcher: Dispatcher):
        self._config = config
        self._dispatcher = dispatcher
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.port = config.port

    async def start(self) -> int:
        self._server = await asyncio.start_server(
            self._on_connection, self._config.host, self._config.port, reuse_address=True,
            backlog=512,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        if len(self._connections) >= self._config.get_int("max.connections"):
            log.warning("max.connections reached; refusing %s", _peer(writer))
            writer.close()
            return
        self._connections.add(task)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the client went away, or the broker is shutting down
        except ProtocolError as exc:
            log.info("closing %s: %s", _peer(writer), exc)
        except TimeoutError:
            log.debug("closing idle connection %s", _peer(writer))
        finally:
            self._connections.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        max_bytes = self._config.get_int("socket.request.max.bytes")
        idle_s = self._config.get_int("connections.max.idle.ms") / 1000
        peer = _peer(writer)
        while True:
            async with asyncio.timeout(idle_s):
                frame = await read_frame(reader, max_bytes)
            if frame is None:
                return
            response = await self._dispatcher.handle(frame, peer)
            if response is CLOSE_CONNECTION:
                return
            if response:
                writer.writelines(response)
                await writer.drain()


def _peer(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    return f"{peer[0]}:{peer[1]}" if peer else "?"
