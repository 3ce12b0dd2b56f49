"""What a client knows about the cluster: brokers, topics, leaders, and a connection pool.

:class:`ClusterClient` bootstraps from ``host:port[,host:port...]``, keeps the
latest Metadata answer as an immutable :class:`ClusterMetadata` snapshot
(swapped whole, so readers on any thread see a consistent picture), and pools
one :class:`BrokerConnection` per broker id.

Threading: metadata requests (:meth:`refresh_metadata`, :meth:`request_any`)
are serialised by a lock and use their own connection, so any thread may call
them. Pooled connections from :meth:`connection` are meant for one owner
thread at a time (the producer's sender, the consumer's poll loop).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from slog.client.connection import (
    _FROM_ENV,
    BrokerConnection,
    UnsupportedApiError,
    tls_context,
    tls_context_from_env,
)
from slog.client.errors import (
    BrokerUnavailableError,
    ConnectionClosedError,
    InvalidArgumentError,
)
from slog.client.types import (
    BrokerMetadata,
    ClusterMetadata,
    PartitionMetadata,
    TopicMetadata,
)
from slog.protocol.apis import ApiKey

DEFAULT_PORT = 9092


def parse_bootstrap(bootstrap: str | Iterable[str]) -> list[tuple[str, int]]:
    """``"a:9092,b:9093"`` or ``["a:9092", "b"]`` → ``[("a", 9092), ("b", 9092)]``."""
    items = bootstrap.split(",") if isinstance(bootstrap, str) else list(bootstrap)
    out = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep:
            host, port = item, str(DEFAULT_PORT)
        host = host.strip("[]") or "127.0.0.1"
        try:
            out.append((host, int(port)))
        except ValueError:
            raise InvalidArgumentError(
                f"bad bootstrap address {item!r}: the port must be a number") from None
    if not out:
        raise InvalidArgumentError("no bootstrap address given")
    return out


def _metadata_from(response: Any, previous: ClusterMetadata | None, replace_all: bool
                   ) -> ClusterMetadata:
    brokers = {b.node_id: BrokerMetadata(b.node_id, b.host, b.port, b.rack)
               for b in response.brokers}
    topics = {} if replace_all or previous is None else dict(previous.topics)
    for t in response.topics:
        if t.name is None:
            continue
        partitions = {
            p.partition_index: PartitionMetadata(
                topic=t.name,
                partition=p.partition_index,
                leader=p.leader_id,
                leader_epoch=getattr(p, "leader_epoch", -1),
                replicas=tuple(p.replica_nodes),
                isr=tuple(p.isr_nodes),
                offline_replicas=tuple(getattr(p, "offline_replicas", ())),
                error_code=int(p.error_code),
            )
            for p in t.partitions
        }
        topic_id = getattr(t, "topic_id", None)
        topics[t.name] = TopicMetadata(
            name=t.name,
            topic_id=str(topic_id) if topic_id is not None and topic_id.int else None,
            is_internal=bool(getattr(t, "is_internal", False)),
            partitions=partitions,
            error_code=int(t.error_code),
        )
    return ClusterMetadata(
        cluster_id=getattr(response, "cluster_id", None),
        controller_id=getattr(response, "controller_id", -1),
        brokers=brokers,
        topics=topics,
    )


def client_tls(security_protocol: str | None, ssl_cafile: str | None = None,
               ssl_certfile: str | None = None, ssl_keyfile: str | None = None) -> Any:
    """The TLS context for kafka-python-style settings; without ``security_protocol``,
    the environment's (SLOG_TLS, as the CLI's --tls sets it)."""
    if security_protocol is None:
        return _FROM_ENV
    return tls_context(security_protocol, ssl_cafile, ssl_certfile, ssl_keyfile)


class ClusterClient:
    """Metadata cache and per-broker connection pool, shared by producer, consumer and admin."""

    def __init__(self, bootstrap: str | Iterable[str], *, client_id: str = "slog",
                 request_timeout_ms: int = 30_000, tls: Any = _FROM_ENV):
        self.bootstrap = parse_bootstrap(bootstrap)
        self.tls = tls if tls is not _FROM_ENV else tls_context_from_env()
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.metadata = ClusterMetadata()
        self._lock = threading.RLock()
        self._meta_conn: BrokerConnection | None = None
        self._pool: dict[tuple[int, str], BrokerConnection] = {}
        self._closed = False

    def _new_connection(self, host: str, port: int, node_id: int = -1) -> BrokerConnection:
        return BrokerConnection(host, port, client_id=self.client_id,
                                timeout_s=self.request_timeout_ms / 1000, node_id=node_id,
                                tls=self.tls)

    # -- any-broker requests ---------------------------------------------------------
    def _candidates(self) -> list[tuple[str, int, int]]:
        known = [(b.host, b.port, b.node_id) for b in self.metadata.brokers.values()]
        seen = {(h, p) for h, p, _ in known}
        return known + [(h, p, -1) for h, p in self.bootstrap if (h, p) not in seen]

    def request_any(self, api_key: int, body: dict[str, Any]) -> Any:
        """Send a request to whichever broker answers (known brokers, then bootstrap)."""
        with self._lock:
            if self._closed:
                raise ConnectionClosedError("the client is closed")
            conn = self._meta_conn
            if conn is not None and conn.connected:
                try:
                    return conn.request(api_key, body)
                except UnsupportedApiError:
                    raise  # the broker answered without the API; trying others would hide that
                except ConnectionError:
                    conn.close()
            failures = []
            for host, port, node_id in self._candidates():
                conn = self._new_connection(host, port, node_id)
                try:
                    conn.connect()
                    response = conn.request(api_key, body)
                except UnsupportedApiError:
                    self._meta_conn = conn
                    raise
                except ConnectionError as exc:
                    conn.close()
                    failures.append(str(exc))
                    continue
                self._meta_conn = conn
                return response
            # Each failure already names its address; keep the first line short.
            raise BrokerUnavailableError("; ".join(failures) or "no bootstrap brokers given")

    def refresh_metadata(self, topics: Iterable[str] | None = None, *,
                         allow_auto_create: bool = False) -> ClusterMetadata:
        """Ask for metadata of ``topics`` (None: every topic) and update the cache.

        Topics not asked about keep their cached entries; brokers and the
        controller are always replaced.
        """
        names = None if topics is None else sorted(set(topics))
        body = {
            "topics": None if names is None else [{"name": n} for n in names],
            "allow_auto_topic_creation": allow_auto_create,
        }
        response = self.request_any(ApiKey.METADATA, body)
        with self._lock:
            self.metadata = _metadata_from(response, self.metadata, replace_all=names is None)
            return self.metadata

    # -- lookups ---------------------------------------------------------------------
    def topic(self, name: str) -> TopicMetadata | None:
        return self.metadata.topics.get(name)

    def partitions_for(self, topic: str) -> list[int] | None:
        """Partition ids of ``topic`` from the cache, None if unknown (or in error)."""
        entry = self.metadata.topics.get(topic)
        if entry is None or entry.error_code or not entry.partitions:
            return None
        return sorted(entry.partitions)

    def partition(self, topic: str, partition: int) -> PartitionMetadata | None:
        entry = self.metadata.topics.get(topic)
        return None if entry is None else entry.partitions.get(partition)

    def leader_for(self, topic: str, partition: int) -> int | None:
        """The leader's broker id, or None when unknown or leaderless (refresh and retry)."""
        part = self.partition(topic, partition)
        if part is None or part.leader < 0 or part.leader not in self.metadata.brokers:
            return None
        return part.leader

    def controller_id(self) -> int:
        return self.metadata.controller_id

    # -- the pool --------------------------------------------------------------------
    def connection(self, broker_id: int, channel: str = "default") -> BrokerConnection:
        """The pooled connection to ``broker_id``, (re)connecting if needed.

        ``channel`` keeps separate connections for separate jobs (the
        consumer's pipelined fetches and its ListOffsets requests, say).
        """
        key = (broker_id, channel)
        with self._lock:
            if self._closed:
                raise ConnectionClosedError("the client is closed")
            conn = self._pool.get(key)
            if conn is not None and conn.connected:
                return conn
            broker = self.metadata.brokers.get(broker_id)
            if broker is None:
                raise BrokerUnavailableError(f"broker {broker_id} is not in the cluster metadata")
            conn = self._new_connection(broker.host, broker.port, broker_id)
            self._pool[key] = conn
        return conn.connect()

    def pooled(self, channel: str = "default") -> dict[int, BrokerConnection]:
        """The open pooled connections of ``channel`` by broker id."""
        with self._lock:
            return {b: c for (b, ch), c in self._pool.items() if ch == channel and c.connected}

    def close_connection(self, broker_id: int, channel: str = "default") -> None:
        with self._lock:
            conn = self._pool.pop((broker_id, channel), None)
        if conn is not None:
            conn.close()

    def controller_request(self, api_key: int, body: dict[str, Any]) -> Any:
        """Send a request to the controller (from fresh metadata), else to any broker.

        A cluster may name no controller (-1), or one that is not among the
        brokers it lists (KRaft clusters hide their controllers, as do proxies
        and managed services): then any broker takes admin requests and routes
        them itself, as Kafka's brokers do.
        """
        self.refresh_metadata([])
        controller = self.metadata.controller_id
        if controller not in self.metadata.brokers:
            return self.request_any(api_key, body)
        conn = self.connection(controller)
        try:
            return conn.request(api_key, body)
        except ConnectionError:
            self.close_connection(controller)
            raise

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conns = list(self._pool.values())
            self._pool.clear()
            if self._meta_conn is not None:
                conns.append(self._meta_conn)
                self._meta_conn = None
        for conn in conns:
            conn.close()

    def __enter__(self) -> ClusterClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
