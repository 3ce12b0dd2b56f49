"""Client quotas for authenticated users: a quota on ``user`` applies to that principal's
connections only, and altering quotas needs ALTER_CONFIGS on the cluster."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Producer

from slog.client import Admin, NewTopic
from slog.client.errors import KafkaError
from slog.protocol.errors import ErrorCode
from tests.brokers import BrokerProcess
from tests.security.conftest import logged_in, sasl_conf

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
