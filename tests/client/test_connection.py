"""BrokerConnection and ClusterClient: pipelining, bootstrap parsing, failures."""

from __future__ import annotations

import pytest

from slog.client.cluster import ClusterClient, parse_bootstrap
from slog.client.connection import BrokerConnection
from slog.client.errors import BrokerUnavailableError, ConnectionClosedError
from slog.protocol.apis import ApiKey
from tests.brokers import free_port


def test_parse_bootstrap() -> None:
    assert parse_bootstrap("a:1, b:2,c") == [("a", 1), ("b", 2), ("c", 9092)]
    assert parse_bootstrap(["[::1]:9093"]) == [("::1", 9093)]
    with pytest.raises(ValueError):
        parse_bootstrap("a:x")
    with pytest.raises(ValueError):
        parse_bootstrap(" , ")


def test_pipelined_requests_come_back_in_order(bootstrap: str) -> None:
    host, port = bootstrap.rsplit(":", 1)
    with BrokerConnection(host, int(port)) as conn:
        ids = [conn.send(ApiKey.METADATA, {"topics": []}) for _ in range(10)]
        assert conn.in_flight == 10
        with pytest.raises(RuntimeError):
            conn.request(ApiKey.METADATA, {"topics": []})
        got = [conn.receive()[0] for _ in ids]
        assert got == ids and conn.in_flight == 0
        assert conn.request(ApiKey.METADATA, {"topics": []}).brokers[0].node_id == 1
        assert conn.supports(ApiKey.FETCH) and conn.version_for(ApiKey.FETCH) >= 4


def test_cluster_metadata_and_pool(bootstrap: str, make_topic) -> None:  # type: ignore[no-untyped-def]
    topic = make_topic(partitions=2)
    dead = f"127.0.0.1:{free_port()}"
    with ClusterClient(f"{dead},{bootstrap}") as cluster:  # the first address is skipped
        meta = cluster.refresh_metadata([topic])
        assert meta.cluster_id and meta.controller_id == 1
        assert cluster.partitions_for(topic) == [0, 1]
        assert cluster.leader_for(topic, 1) == 1
        assert cluster.leader_for(topic, 7) is None
        conn = cluster.connection(1)
        assert cluster.connection(1) is conn
        conn.close()
        assert cluster.connection(1) is not conn  # reconnects
    with pytest.raises(ConnectionClosedError):
        cluster.connection(1)


def test_nothing_listening() -> None:
    port = free_port()
    with pytest.raises(BrokerUnavailableError, match=f"no broker at 127.0.0.1:{port}"):
        BrokerConnection("127.0.0.1", port).connect()
    with ClusterClient(f"127.0.0.1:{port}") as cluster, \
            pytest.raises(BrokerUnavailableError, match="Connection refused"):
        cluster.refresh_metadata()
