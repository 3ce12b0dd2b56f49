"""A blocking connection to one Kafka broker (slog or Apache Kafka).

It negotiates versions with ApiVersions once (falling back to v0 per KIP-511)
and then sends requests built from plain dicts, shaped into the highest
version both sides support.
"""

from __future__ import annotations

import itertools
import socket
from typing import Any

from slog.protocol.apis import ApiKey, request_class
from slog.protocol.codec import decode_response, encode_request
from slog.protocol.errors import ErrorCode
from slog.protocol.framing import recv_frame
from slog.protocol.shapes import shape

MAX_RESPONSE_BYTES = 256 * 1024 * 1024
CLIENT_MAX_VERSIONS = {
    ApiKey.API_VERSIONS: 3,
    ApiKey.METADATA: 12,
    ApiKey.PRODUCE: 9,
    ApiKey.FETCH: 12,
    ApiKey.LIST_OFFSETS: 7,
    ApiKey.CREATE_TOPICS: 7,
    ApiKey.DELETE_TOPICS: 6,
    ApiKey.CREATE_PARTITIONS: 3,
    ApiKey.DESCRIBE_CONFIGS: 4,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: 1,
    ApiKey.INIT_PRODUCER_ID: 4,
    ApiKey.DESCRIBE_CLUSTER: 1,
}


class BrokerUnavailableError(ConnectionError):
    """No broker answered at the address."""


class ConnectionClosedError(ConnectionError):
    pass


class BrokerConnection:
    def __init__(self, host: str, port: int, *, client_id: str = "slog", timeout_s: float = 10.0):
        self.host = host
        self.port = port
        self.client_id = client_id
        self._timeout_s = timeout_s
        self._sock: socket.socket | None = None
        self._correlation = itertools.count(1)
        self.versions: dict[int, tuple[int, int]] = {}

    def connect(self) -> BrokerConnection:
        try:
            self._sock = socket.create_connection((self.host, self.port), timeout=self._timeout_s)
        except OSError as exc:
            raise BrokerUnavailableError(
                f"no broker at {self.host}:{self.port} ({exc.strerror or exc})"
            ) from exc
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._negotiate()
        return self

    def _negotiate(self) -> None:
        response = self._send(ApiKey.API_VERSIONS, 3, {"client_software_name": "slog",
                                                        "client_software_version": "0.1"})
        if response.error_code == ErrorCode.unsupported_version:
            response = self._send(ApiKey.API_VERSIONS, 0, {})
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}

    def version_for(self, api_key: int) -> int:
        ours = CLIENT_MAX_VERSIONS.get(api_key, 0)
        low, high = self.versions.get(api_key, (0, -1))
        chosen = min(ours, high)
        if chosen < low:
            raise ConnectionError(f"broker does not support api {api_key} in a version slog speaks")
        return chosen

    def request(self, api_key: int, body: dict[str, Any], version: int | None = None) -> Any:
        return self._send(api_key, self.version_for(api_key) if version is None else version, body)

    def send_no_response(self, api_key: int, body: dict[str, Any]) -> None:
        """For acks=0 produce: the broker sends nothing back."""
        self._write(api_key, self.version_for(api_key), body)

    def _write(self, api_key: int, version: int, body: dict[str, Any]) -> int:
        if self._sock is None:
            raise ConnectionClosedError("not connected")
        correlation_id = next(self._correlation)
        entity = shape(request_class(api_key, version), body)
        self._sock.sendall(encode_request(entity, correlation_id=correlation_id,
                                          client_id=self.client_id))
        return correlation_id

    def _send(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        correlation_id = self._write(api_key, version, body)
        assert self._sock is not None
        frame = recv_frame(self._sock, MAX_RESPONSE_BYTES)
        if frame is None:
            self.close()
            raise ConnectionClosedError(f"broker {self.host}:{self.port} closed the connection")
        got, response = decode_response(api_key, version, frame)
        if got != correlation_id:
            raise ConnectionError(f"correlation id mismatch: sent {correlation_id}, got {got}")
        return response

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> BrokerConnection:
        return self.connect() if self._sock is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()
