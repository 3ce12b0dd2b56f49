"""Client quotas (KIP-546) on a real cluster: Describe/AlterClientQuotas on any broker
(forwarded to the controller), the CLI, and enforcement measured by real clients: a
confluent-kafka producer and consumer capped at 1 MB/s are held to it within 20 %,
and a request_percentage quota throttles and mutes the connection (KIP-219)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from slog.cli.schema import SCHEMAS
from slog.client.connection import BrokerConnection
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from tests.brokers import run_cli
from tests.cluster.conftest import Cluster, wait_until

pytestmark = pytest.mark.brokers(2)
MB = 1024 * 1024
# Kafka's default window (11 samples of 1 s). A new client may send one sample's worth
# at once, so the rate is measured after a short warm-up.
WARM_UP_S = 2.0
MEASURE_S = 10.0


def _non_controller(cluster: Cluster) -> int:
    controller = cluster.controller()
    return next(b for b in sorted(cluster.brokers) if b != controller)


def _alter(conn: BrokerConnection, entity: list[tuple[str, str | None]],
           ops: dict[str, float | None], validate_only: bool = False) -> Any:
    return conn.request(ApiKey.ALTER_CLIENT_QUOTAS, {"entries": [{
        "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
        "ops": [{"key": k, "value": v or 0.0, "remove": v is None} for k, v in ops.items()]}],
        "validate_only": validate_only})


def _describe(conn: BrokerConnection, components: list[tuple[str, int, str | None]],
              strict: bool = False) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    response = conn.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, {
        "components": [{"entity_type": t, "match_type": m, "match": n}
                       for t, m, n in components], "strict": strict})
    assert response.error_code == ErrorCode.none, response
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity):
            {v.key: v.value for v in entry.values} for entry in response.entries}


@pytest.fixture
def cluster(shared_cluster: Cluster) -> Iterator[Cluster]:
    """The module's cluster, every quota removed after each test (the tests list them all)."""
    yield shared_cluster
    _remove_every_quota(shared_cluster)


def _remove_every_quota(cluster: Cluster) -> None:
    with cluster.connect(cluster.controller()) as conn:
        for entity, values in _describe(conn, []).items():
            [entry] = _alter(conn, list(entity), dict.fromkeys(values)).entries
            assert entry.error_code == ErrorCode.none, entry
    wait_until(lambda: not any(_quota_seen(cluster, b) for b in cluster.brokers), 10,
               "no quota on any broker")


def test_alter_on_any_broker_and_describe_everywhere(cluster: Cluster) -> None:
    broker = _non_controller(cluster)
    with cluster.connect(broker) as conn:
        for version in (0, 1):
            assert conn.versions[ApiKey.ALTER_CLIENT_QUOTAS] == (0, 1) or version
        [entry] = _alter(conn, [("user", "alice")], {"producer_byte_rate": 1024.0,
                                                     "request_percentage": 25.0}).entries
        assert entry.error_code == ErrorCode.none, entry
        [entry] = _alter(conn, [("user", "alice"), ("client-id", None)],
                         {"consumer_byte_rate": 2048.0}).entries
        assert entry.error_code == ErrorCode.none, entry
        [entry] = _alter(conn, [("client-id", "app")], {"producer_byte_rate": 1.0},
                         validate_only=True).entries
        assert entry.error_code == ErrorCode.none, entry

        for entity, ops in [([("ip", "1.2.3.4")], {"producer_byte_rate": 1.0}),
                            ([("user", "a"), ("user", "b")], {"producer_byte_rate": 1.0}),
                            ([("user", "a")], {"bogus_rate": 1.0}),
                            ([("user", "a")], {"producer_byte_rate": 1.5}),
                            ([("user", "a")], {"consumer_byte_rate": -1.0})]:
            [entry] = _alter(conn, entity, ops).entries
            assert entry.error_code == ErrorCode.invalid_request, (entity, ops)
            assert entry.error_message

    alice = (("user", "alice"),)
    alice_any_client = (("client-id", None), ("user", "alice"))
    for broker_id in cluster.brokers:  # every broker replays the record
        with cluster.connect(broker_id) as conn:
            wait_until(lambda c=conn: len(_describe(c, [])) == 2, 10, "both entities")
            assert _describe(conn, []) == {
                alice: {"producer_byte_rate": 1024.0, "request_percentage": 25.0},
                alice_any_client: {"consumer_byte_rate": 2048.0}}
            assert list(_describe(conn, [("user", 0, "alice")], strict=True)) == [alice]
            assert list(_describe(conn, [("client-id", 1, None)])) == [alice_any_client]
            assert list(_describe(conn, [("client-id", 2, None)], strict=True)) == []
            bad = conn.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, {
                "components": [{"entity_type": "user", "match_type": 9, "match": None}],
                "strict": False})
            assert bad.error_code == ErrorCode.invalid_request and bad.error_message

    with cluster.connect(_non_controller(cluster)) as conn:
        [entry] = _alter(conn, [("user", "alice")], {"producer_byte_rate": None,
                                                     "request_percentage": None}).entries
        assert entry.error_code == ErrorCode.none
        wait_until(lambda: list(_describe(conn, [])) == [alice_any_client], 10, "removed")


def _cli(cluster: Cluster, *args: str) -> Any:
    result = run_cli("quota", *args, "-b", cluster.bootstrap, "-o", "json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    for row in rows:
        assert SCHEMAS[f"quota {args[0]}"].check(row) == [], row
    return rows


def test_cli_set_list_remove(cluster: Cluster) -> None:
    assert _cli(cluster, "set", "--user", "bob", "--default", "client-id",
                "producer_byte_rate=1048576", "request_percentage=12.5") == [
        {"user": "bob", "client_id": "<default>", "key": "producer_byte_rate",
         "value": 1048576},
        {"user": "bob", "client_id": "<default>", "key": "request_percentage", "value": 12.5}]
    _cli(cluster, "set", "--default", "user", "consumer_byte_rate=2000000")
    assert [(r["user"], r["client_id"], r["key"]) for r in _cli(cluster, "list")] == [
        ("<default>", None, "consumer_byte_rate"),
        ("bob", "<default>", "producer_byte_rate"),
        ("bob", "<default>", "request_percentage")]
    assert [r["key"] for r in _cli(cluster, "list", "--user", "bob")] == [
        "producer_byte_rate", "request_percentage"]
    assert _cli(cluster, "remove", "--user", "bob", "--default", "client-id",
                "request_percentage")[0]["key"] == "request_percentage"
    assert len(_cli(cluster, "remove", "--default", "user")) == 1
    assert [r["key"] for r in _cli(cluster, "list")] == ["producer_byte_rate"]

    for bad in (["set", "--user", "x", "producer_byte_rate=fast"],
                ["set", "--user", "x", "nope=1"],
                ["set", "producer_byte_rate=1"],
                ["set", "--user", "x", "--default", "user", "producer_byte_rate=1"]):
        result = run_cli("quota", *bad, "-b", cluster.bootstrap)
        assert result.returncode == 2, (bad, result.stdout, result.stderr)
        assert "error" in result.stderr.lower()


def _rate_over_window(stamps: list[tuple[float, int]], start: float) -> float:
    begin = start + WARM_UP_S
    return sum(n for t, n in stamps if begin <= t < begin + MEASURE_S) / MEASURE_S


def test_a_capped_producer_is_held_to_its_rate(cluster: Cluster) -> None:
    cluster.create_topic("capped", partitions=1, replication_factor=2)
    with cluster.connect(1) as conn:
        [entry] = _alter(conn, [("client-id", "capped-producer")],
                         {"producer_byte_rate": float(MB)}).entries
        assert entry.error_code == ErrorCode.none
    wait_until(lambda: cluster.image().client_quotas, 10, "the quota in the log")
    throttles: list[int] = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "client.id": "capped-producer",
                         "linger.ms": 5, "acks": "all",
                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    acked: list[tuple[float, int]] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            acked.append((time.monotonic(), len(msg.value())))

    payload = b"q" * 10_000
    start = time.monotonic()
    while time.monotonic() - start < WARM_UP_S + MEASURE_S + 0.5:
        try:
            producer.produce("capped", payload, on_delivery=delivered)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    producer.purge()
    producer.flush(10)
    rate = _rate_over_window(acked, start)
    cluster.step(f"capped producer: {rate / MB:.3f} MB/s, {len(throttles)} throttles")
    assert 0.8 * MB <= rate <= 1.2 * MB, rate / MB
    assert throttles and max(throttles) > 0  # librdkafka read throttle_time_ms


def test_a_capped_consumer_is_held_to_its_rate(cluster: Cluster) -> None:
    # One partition: quotas are per broker (Kafka's), and one leader serves it all.
    cluster.create_topic("backlog", partitions=1, replication_factor=2)
    free = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 20})
    for i in range(4_000):  # 40 MB: more than a capped consumer reads in the test
        free.produce("backlog", b"b" * 10_000)
        if i % 500 == 0:
            free.flush(30)
    assert free.flush(30) == 0
    with cluster.connect(1) as conn:
        [entry] = _alter(conn, [("user", None), ("client-id", "capped-consumer")],
                         {"consumer_byte_rate": float(MB)}).entries
        assert entry.error_code == ErrorCode.none
    wait_until(lambda: cluster.image().client_quotas, 10, "the quota in the log")
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap,
                         "client.id": "capped-consumer", "group.id": "capped",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["backlog"])
    got: list[tuple[float, int]] = []
    start = 0.0
    try:
        while not start or time.monotonic() - start < WARM_UP_S + MEASURE_S + 0.5:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                start = start or time.monotonic()
                got.append((time.monotonic(), len(msg.value())))
    finally:
        consumer.close()
    rate = _rate_over_window(got, start)
    cluster.step(f"capped consumer: {rate / MB:.3f} MB/s")
    assert 0.8 * MB <= rate <= 1.2 * MB, rate / MB


@pytest.mark.broker_config({"quota.window.num": "2"})  # throttles of at most 2 s
def test_request_percentage_throttles_and_mutes_the_connection(own_cluster: Cluster) -> None:
    with own_cluster.connect(1) as conn:
        [entry] = _alter(conn, [("client-id", "busy")], {"request_percentage": 0.001}).entries
        assert entry.error_code == ErrorCode.none
    wait_until(lambda: all(_quota_seen(own_cluster, b) for b in own_cluster.brokers), 10,
               "the quota")
    busy = BrokerConnection("127.0.0.1", own_cluster.brokers[1].port, client_id="busy").connect()
    calm = BrokerConnection("127.0.0.1", own_cluster.brokers[1].port, client_id="calm").connect()
    try:
        throttle_ms = 0
        for _ in range(50):
            response = busy.request(ApiKey.METADATA, {"topics": None})
            throttle_ms = int(response.throttle_time.total_seconds() * 1000)
            if throttle_ms:
                break
        assert 0 < throttle_ms <= 2000
        started = time.monotonic()
        busy.request(ApiKey.METADATA, {"topics": None})
        waited = time.monotonic() - started
        assert waited >= throttle_ms / 1000 * 0.8, (waited, throttle_ms)  # muted meanwhile
        for _ in range(5):  # another client is not held back
            calm_response = calm.request(ApiKey.METADATA, {"topics": None})
            assert calm_response.throttle_time.total_seconds() == 0
    finally:
        busy.close()
        calm.close()


def _quota_seen(cluster: Cluster, broker_id: int) -> bool:
    with cluster.connect(broker_id) as conn:
        return bool(_describe(conn, []))


def test_kafka_python_encodes_and_decodes_the_quota_apis(cluster: Cluster) -> None:
    """kafka-python 3.0 has the messages but no admin method: send them through its
    connection manager (its own encoding and decoding), to a broker that forwards."""
    from kafka.admin import KafkaAdminClient
    from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest

    broker = _non_controller(cluster)
    admin = KafkaAdminClient(bootstrap_servers=cluster.brokers[broker].bootstrap)
    try:
        alter = AlterClientQuotasRequest
        request = alter(entries=[alter.EntryData(
            entity=[alter.EntryData.EntityData(entity_type="user", entity_name="kp")],
            ops=[alter.EntryData.OpData(key="consumer_byte_rate", value=4096.0,
                                        remove=False)])], validate_only=False)

        async def send_to_broker() -> Any:
            return await admin._manager.send(request, node_id=broker)

        response = admin._manager.run(send_to_broker)
        assert [e.error_code for e in response.entries] == [0], response
        describe = DescribeClientQuotasRequest(components=[
            DescribeClientQuotasRequest.ComponentData(entity_type="user", match_type=0,
                                                      match="kp")], strict=False)

        def described() -> Any:
            return admin._manager.run(admin._manager.send, describe).entries

        wait_until(lambda: len(described()) == 1, 10, "the quota on every broker")
        [entry] = described()
        assert [(e.entity_type, e.entity_name) for e in entry.entity] == [("user", "kp")]
        assert [(v.key, v.value) for v in entry.values] == [("consumer_byte_rate", 4096.0)]
    finally:
        admin.close()
