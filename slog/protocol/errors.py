"""Kafka error codes and the exceptions the wire codec raises.

`ErrorCode` (kio's enum: Kafka's numbers and names, lower-case,
``ErrorCode.unsupported_version == 35``) and `KafkaApiError` live in
`slog.core.kafka_errors`, below every layer; they are re-exported here for the
broker and the client, which speak the protocol.

The exception hierarchy is deliberately small: the broker needs to tell apart
"close the connection" (bad framing), "answer with an error" (unsupported
version) and "the request body is garbage" (malformed request).
"""

from __future__ import annotations

from slog.core.errors import SlogError
from slog.core.kafka_errors import ErrorCode, KafkaApiError

__all__ = [
    "ErrorCode",
    "FrameTooLargeError",
    "KafkaApiError",
    "MalformedFrameError",
    "MalformedRequestError",
    "MalformedResponseError",
    "ProtocolError",
    "UnsupportedVersionError",
]


class ProtocolError(SlogError):
    """Base class of every error raised by `slog.protocol`."""


class FrameTooLargeError(ProtocolError):
    """A frame announced a size above the configured limit (nothing was read)."""

    def __init__(self, size: int, max_bytes: int):
        super().__init__(f"frame of {size} bytes exceeds the limit of {max_bytes} bytes")
        self.size = size
        self.max_bytes = max_bytes


class MalformedFrameError(ProtocolError):
    """The byte stream is not a sequence of frames (negative size, EOF mid-frame)."""


class MalformedRequestError(ProtocolError):
    """A request header or body could not be parsed.

    Whatever part of the header was read before the failure is attached, so the
    broker can log it (and, for ApiVersions, still answer with the right
    correlation id).
    """

    def __init__(
        self,
        reason: str,
        *,
        api_key: int | None = None,
        api_version: int | None = None,
        correlation_id: int | None = None,
    ):
        where = ""
        if api_key is not None:
            where = f" (api_key={api_key}, api_version={api_version})"
        super().__init__(f"malformed request{where}: {reason}")
        self.reason = reason
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


class MalformedResponseError(ProtocolError):
    """A response could not be parsed (client side)."""


class UnsupportedVersionError(ProtocolError):
    """No schema exists for this (api_key, api_version) pair."""

    def __init__(self, api_key: int, api_version: int):
        super().__init__(f"unsupported api_key={api_key} api_version={api_version}")
        self.api_key = api_key
        self.api_version = api_version
