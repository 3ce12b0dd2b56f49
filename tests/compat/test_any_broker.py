"""Any broker of a cluster serves every client: new topics are auto-created and admin
writes are forwarded to the controller (KIP-590), before and after the controller
fails over. Each client bootstraps from one broker only, so it never talks to the
controller unless that broker is the controller."""

from __future__ import annotations

from typing import Any

import pytest

from slog.protocol.apis import ApiKey, request_class
from slog.protocol.codec import encode_request
from slog.protocol.errors import ErrorCode
from slog.protocol.shapes import shape
from tests.cluster.conftest import Cluster, wait_until
from tests.compat.clients import READERS, WRITERS, Rec, assert_same_records, now_ms

CLIENTS = ("kcat", "confluent", "kafka-python")
pytestmark = pytest.mark.broker_config({"auto.create.topics.enable": "true"})


def _produce_through_each(cluster: Cluster, round_name: str) -> None:
    for broker_id in sorted(set(cluster.brokers) - cluster.down):
        bootstrap = cluster.brokers[broker_id].bootstrap
        for client in CLIENTS:
            topic = f"{round_name}-{client}-via-{broker_id}"
            records = [Rec(f"k{i}".encode(), f"{topic} {i}".encode()) for i in range(5)]
            cluster.step(f"{client} produces to new topic {topic}")
            before = now_ms()
            WRITERS[client](bootstrap, topic, records)
            got = READERS[client](bootstrap, topic)
            assert_same_records(got, records, stamped_between=(before, now_ms()),
                                label=f"{client} via broker {broker_id}")
            assert topic in cluster.image().topics


def test_every_client_auto_creates_through_every_broker(cluster: Cluster) -> None:
    _produce_through_each(cluster, "first")
    controller = cluster.controller()
    cluster.step(f"kill the controller, broker {controller}")
    cluster.kill(controller)
    wait_until(lambda: cluster.controller() not in (controller, -1), 30,
               "a new controller")
    cluster.wait_fenced(controller)
    _produce_through_each(cluster, "after")


def _non_controller(cluster: Cluster) -> int:
    controller = cluster.controller()
    return next(b for b in sorted(cluster.brokers) if b != controller)


def _create_topics(name: str, partitions: int) -> dict[str, Any]:
    return {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 2,
                        "assignments": [], "configs": []}],
            "timeout": 5000, "validate_only": False}


def test_admin_writes_are_forwarded_to_the_controller(cluster: Cluster) -> None:
    broker_id = _non_controller(cluster)
    with cluster.connect(broker_id) as conn:
        [created] = conn.request(ApiKey.CREATE_TOPICS, _create_topics("forwarded", 2)).topics
        assert created.error_code == ErrorCode.none, created
        assert created.num_partitions == 2
        [again] = conn.request(ApiKey.CREATE_TOPICS, _create_topics("forwarded", 2)).topics
        assert again.error_code == ErrorCode.topic_already_exists

        [grown] = conn.request(ApiKey.CREATE_PARTITIONS, {
            "topics": [{"name": "forwarded", "count": 3, "assignments": None}],
            "timeout": 5000, "validate_only": False}).results
        assert grown.error_code == ErrorCode.none, grown
        assert len(cluster.image().topics["forwarded"].partitions) == 3

        [altered] = conn.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, {
            "resources": [{"resource_type": 2, "resource_name": "forwarded", "configs": [
                {"name": "retention.ms", "config_operation": 0, "value": "123456"}]}],
            "validate_only": False}).responses
        assert altered.error_code == ErrorCode.none, altered
        assert cluster.image().topics["forwarded"].configs["retention.ms"] == "123456"

        elected = conn.request(ApiKey.ELECT_LEADERS, {
            "election_type": 0, "topic_partitions": [{"topic": "forwarded", "partitions": [0]}],
            "timeout": 5000})
        assert elected.error_code == ErrorCode.none, elected
        [result] = elected.replica_election_results[0].partition_result
        assert result.error_code == ErrorCode.election_not_needed  # its leader is preferred

        [deleted] = conn.request(ApiKey.DELETE_TOPICS, {
            "topics": [{"name": "forwarded", "topic_id": None}],
            "topic_names": ["forwarded"], "timeout": 5000}).responses
        assert deleted.error_code == ErrorCode.none, deleted
        assert "forwarded" not in cluster.image().topics

        # Without security there is no principal to impersonate: a client's own
        # Envelope to a broker that is not the controller is answered NOT_CONTROLLER.
        inner = encode_request(shape(request_class(ApiKey.CREATE_TOPICS, 5),
                                     _create_topics("smuggled", 1)),
                               correlation_id=7, client_id="me")[4:]
        envelope = conn.request(ApiKey.ENVELOPE, {
            "request_data": inner, "request_principal": b"User:ANONYMOUS",
            "client_host_address": b""}, version=0)
        assert envelope.error_code == ErrorCode.not_controller
        assert "smuggled" not in cluster.image().topics


def test_envelope_is_not_advertised(cluster: Cluster) -> None:
    with cluster.connect(1) as conn:
        assert ApiKey.ENVELOPE not in conn.versions
