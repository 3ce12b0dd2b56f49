"""Client quotas for authenticated users: a quota on ``user`` applies to that principal's
connections only, and altering quotas needs ALTER_CONFIGS on the cluster."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Producer

from slog.client import Admin, NewTopic
from slog.client.errors import KafkaError
from slog.core.records import build_batch
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from tests.brokers import BrokerProcess
from tests.compat.clients import produce_request
from tests.security.conftest import logged_in, sasl_conf, sasl_connection

RATE = 64 * 1024  # bytes/s: low enough that a few seconds of producing must be throttled


def _produce_for(conf: dict[str, Any], topic: str, seconds: float) -> tuple[int, list[float]]:
    """Bytes acked while producing as fast as allowed, and the throttles reported."""
    throttles: list[float] = []
    acked = [0]
    producer = Producer({**conf, "client.id": "shared-client", "linger.ms": 5,
                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            acked[0] += len(msg.value())

    start = time.monotonic()
    while time.monotonic() - start < seconds:
        try:
            producer.produce(topic, b"u" * 4096, on_delivery=delivered)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    producer.purge()
    producer.flush(10)
    return acked[0], throttles


def test_a_user_quota_throttles_that_user_only(sasl_broker: BrokerProcess) -> None:
    with logged_in("admin"), Admin(sasl_broker.bootstrap) as admin:
        admin.create_topics([NewTopic("per-user", 1, 1)])
        admin.alter_client_quotas({(("user", "alice"),): {"producer_byte_rate": RATE}})
        assert admin.describe_client_quotas() == {
            (("user", "alice"),): {"producer_byte_rate": float(RATE)}}
    seconds = 4.0
    alice_bytes, alice_throttles = _produce_for(sasl_conf(sasl_broker, "alice"), "per-user",
                                                seconds)
    bob_bytes, bob_throttles = _produce_for(sasl_conf(sasl_broker, "bob"), "per-user", seconds)
    # A request is admitted whole (librdkafka's first one may carry 1 MB, its batch.size),
    # then Alice is held at her quota's pace.
    assert alice_throttles and alice_bytes <= RATE * seconds + 1024 * 1024
    assert not bob_throttles and bob_bytes > 4 * alice_bytes


def test_pipelined_produce_requests_wait_out_the_throttle(sasl_broker: BrokerProcess) -> None:
    """Produce requests sent together right after logging in are handled one at a time
    under the user's quota: the second waits out the throttle the first earned (KIP-219
    mutes the connection, and Kafka reads nothing meanwhile). Before login the connection
    had no quota (ANONYMOUS has none), and that must not let them through at once."""
    entity = (("user", "alice"), ("client-id", "piped"))  # its own rate, not Alice's
    with logged_in("admin"), Admin(sasl_broker.bootstrap) as admin:
        admin.create_topics([NewTopic("piped", 1, 1)])
        admin.alter_client_quotas({entity: {"producer_byte_rate": 16_000}})
    batch = build_batch([(None, b"p" * 20_000, (), None)])  # over a second's worth
    with sasl_connection(sasl_broker.port, "alice", client_id="piped") as piped:
        for _ in range(3):
            piped.send(ApiKey.PRODUCE, produce_request("piped", 0, batch))
        _, first = piped.receive()
        answered = time.monotonic()
        throttle_s = first.throttle_time.total_seconds()
        assert throttle_s >= 0.5, first
        _, second = piped.receive()
        waited = time.monotonic() - answered
    assert waited >= throttle_s * 0.8, (waited, throttle_s)  # muted, not handled at once
    assert second.responses[0].partition_responses[0].error_code == ErrorCode.none


def test_altering_quotas_needs_alter_configs_on_the_cluster(acl_broker: BrokerProcess) -> None:
    entity = (("client-id", "x"),)
    with logged_in("alice"), Admin(acl_broker.bootstrap) as admin:
        with pytest.raises(KafkaError) as denied:
            admin.alter_client_quotas({entity: {"producer_byte_rate": 1024}})
        assert denied.value.code == ErrorCode.cluster_authorization_failed
        with pytest.raises(KafkaError) as denied:
            admin.describe_client_quotas()
        assert denied.value.code == ErrorCode.cluster_authorization_failed
    with logged_in("admin"), Admin(acl_broker.bootstrap) as admin:
        admin.alter_client_quotas({entity: {"producer_byte_rate": 1024}})
        assert admin.describe_client_quotas() == {entity: {"producer_byte_rate": 1024.0}}
