"""A Kafka-protocol peer in front of one real slog broker, answering as another cluster would.

Managed services, proxies and KRaft clusters differ from slog in what they
tell clients: the controller a Metadata response names (-1, or a node that is
not among the listed brokers), and the APIs an ApiVersions response offers.
This peer forwards every request to a real broker and rewrites only those two
answers, plus the broker address (its own, so clients keep talking through
it). It is a network peer, like a proxy, not a stand-in for slog: everything
else is the real broker's answer, byte for byte.
"""

from __future__ import annotations

import dataclasses
import socket
import threading
from collections.abc import Iterable
from typing import Any

from slog.protocol.apis import ApiKey
from slog.protocol.codec import decode_response, encode_response
from slog.protocol.errors import ProtocolError
from slog.protocol.framing import recv_frame
from slog.protocol.headers import RequestHeader, parse_request_header

MAX_FRAME = 256 * 1024 * 1024


class KafkaPeer:
    """Listens on 127.0.0.1 (a free port); one pair of threads per client connection.

    ``controller_id`` replaces the controller in Metadata responses (None: keep
    it); ``hidden_apis`` are left out of ApiVersions responses.
    """

    def __init__(self, upstream: str, *, controller_id: int | None = None,
                 hidden_apis: Iterable[int] = ()):
        host, _, port = upstream.rpartition(":")
        self.upstream = (host, int(port))
        self.controller_id = controller_id
        self.hidden_apis = frozenset(int(api) for api in hidden_apis)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="peer-accept").start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sockets, self._sockets = self._sockets, []
        self._listener.close()
        for sock in sockets:
            sock.close()

    def __enter__(self) -> KafkaPeer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing ------------------------------------------------------------------------
    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            server = socket.create_connection(self.upstream)
            with self._lock:
                if self._closed:
                    client.close()
                    server.close()
                    return
                self._sockets += [client, server]
            asked: dict[int, RequestHeader] = {}
            threading.Thread(target=self._requests, args=(client, server, asked),
                             daemon=True).start()
            threading.Thread(target=self._responses, args=(server, client, asked),
                             daemon=True).start()

    def _requests(self, client: socket.socket, server: socket.socket,
                  asked: dict[int, RequestHeader]) -> None:
        try:
            while (frame := recv_frame(client, MAX_FRAME)) is not None:
                header, _ = parse_request_header(frame)
                asked[header.correlation_id] = header
                server.sendall(len(frame).to_bytes(4, "big") + frame)
        except (OSError, ProtocolError):
            pass  # either side closing ends the pair
        finally:
            client.close()
            server.close()

    def _responses(self, server: socket.socket, client: socket.socket,
                   asked: dict[int, RequestHeader]) -> None:
        try:
            while (frame := recv_frame(server, MAX_FRAME)) is not None:
                header = asked.pop(int.from_bytes(frame[:4], "big", signed=True))
                client.sendall(self._rewrite(header, frame))
        except (OSError, ProtocolError):
            pass  # either side closing ends the pair
        finally:
            client.close()
            server.close()

    # -- what differs from slog ----------------------------------------------------------
    def _rewrite(self, header: RequestHeader, frame: bytes) -> bytes:
        raw = len(frame).to_bytes(4, "big") + frame
        if header.api_key not in (ApiKey.API_VERSIONS, ApiKey.METADATA):
            return raw
        _, response = decode_response(header.api_key, header.api_version, frame)
        if header.api_key == ApiKey.API_VERSIONS:
            if response.error_code or type(response).__version__ != header.api_version:
                return raw
            kept = tuple(k for k in response.api_keys if k.api_key not in self.hidden_apis)
            response = dataclasses.replace(response, api_keys=kept)
        else:
            response = self._metadata(response)
        return encode_response(header, response)

    def _metadata(self, response: Any) -> Any:
        brokers = tuple(dataclasses.replace(b, host="127.0.0.1", port=self.port)
                        for b in response.brokers)
        changes: dict[str, Any] = {"brokers": brokers}
        if self.controller_id is not None:
            changes["controller_id"] = self.controller_id
        return dataclasses.replace(response, **changes)
