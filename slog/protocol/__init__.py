"""Kafka wire protocol for slog's broker and client.

Schemas come from kio (generated from Kafka's own message JSON files); this
package adds framing, headers, the advertised API table, error mapping, a
guard that makes kio safe on hostile input, and a zero-copy FetchResponse
encoder. Typical broker loop::

    table = api_versions_table(implemented_keys)
    payload = await read_frame(reader, max_bytes)      # None: client closed
    header, offset = parse_request_header(payload)
    spec = API_BY_KEY.get(header.api_key)
    if spec is None or spec not in table or not spec.supports(header.api_version):
        if header.api_key == ApiKey.API_VERSIONS:       # KIP-511
            writer.write(api_versions_fallback_response(header.correlation_id, table))
        else:
            ...                                         # Kafka closes the connection
    request = decode_request(header, payload, offset)   # MalformedRequestError
    ...
    writer.write(encode_response(header, response))
    # Fetch: transport.writelines(encode_fetch_response(header, ...))
"""

from slog.protocol.apis import (
    ALL_APIS,
    API_BY_KEY,
    ApiKey,
    ApiSpec,
    api_versions_table,
    is_flexible_request,
    kio_version_range,
    request_class,
    response_class,
)
from slog.protocol.codec import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    warm_up,
)
from slog.protocol.error_responses import (
    api_versions_fallback_response,
    api_versions_response,
    error_response,
)
from slog.protocol.errors import (
    ErrorCode,
    FrameTooLargeError,
    MalformedFrameError,
    MalformedRequestError,
    MalformedResponseError,
    ProtocolError,
    UnsupportedVersionError,
)
from slog.protocol.fetch_encoding import (
    FetchPartitionResult,
    FetchTopicResult,
    encode_fetch_response,
)
from slog.protocol.framing import frame, frame_size, read_frame, recv_frame
from slog.protocol.headers import (
    RequestHeader,
    encode_request_header,
    encode_response_header,
    parse_request_header,
    response_header_version,
)

__all__ = [
    "ALL_APIS",
    "API_BY_KEY",
    "ApiKey",
    "ApiSpec",
    "ErrorCode",
    "FetchPartitionResult",
    "FetchTopicResult",
    "FrameTooLargeError",
    "MalformedFrameError",
    "MalformedRequestError",
    "MalformedResponseError",
    "ProtocolError",
    "RequestHeader",
    "UnsupportedVersionError",
    "api_versions_fallback_response",
    "api_versions_response",
    "api_versions_table",
    "decode_request",
    "decode_response",
    "encode_fetch_response",
    "encode_request",
    "encode_request_header",
    "encode_response",
    "encode_response_header",
    "error_response",
    "frame",
    "frame_size",
    "is_flexible_request",
    "kio_version_range",
    "parse_request_header",
    "read_frame",
    "recv_frame",
    "request_class",
    "response_class",
    "response_header_version",
    "warm_up",
]
