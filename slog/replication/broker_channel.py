"""An asyncio connection from one broker to another (replica fetches, ISR changes).

Brokers talk to each other over the same Kafka protocol clients use, with
fixed versions both sides are known to speak.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from slog.protocol.apis import request_class
from slog.protocol.codec import decode_response, encode_request
from slog.protocol.framing import read_frame
from slog.protocol.shapes import shape

MAX_RESPONSE_BYTES = 256 * 1024 * 1024


class BrokerChannel:
    def __init__(self, host: str, port: int, client_id: str, timeout_s: float = 30.0):
        self.host = host
        self.port = port
        self._client_id = client_id
        self._timeout_s = timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation = itertools.count(1)
        self._lock = asyncio.Lock()

    async def request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        """Send one request and wait for its response (one at a time per channel)."""
        async with self._lock:
            try:
                async with asyncio.timeout(self._timeout_s):
                    return await self._round_trip(api_key, version, body)
            except (OSError, TimeoutError, asyncio.IncompleteReadError):
                self.close()
                raise

    async def _round_trip(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        assert self._reader is not None
        correlation_id = next(self._correlation)
        entity = shape(request_class(api_key, version), body)
        self._writer.write(encode_request(entity, correlation_id=correlation_id,
                                          client_id=self._client_id))
        await self._writer.drain()
        frame = await read_frame(self._reader, MAX_RESPONSE_BYTES)
        if frame is None:
            raise ConnectionResetError(f"broker {self.host}:{self.port} closed the connection")
        got, response = decode_response(api_key, version, frame)
        if got != correlation_id:
            raise ConnectionResetError("correlation id mismatch")
        return response

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None
