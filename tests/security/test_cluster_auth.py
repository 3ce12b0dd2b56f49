"""Three brokers with SASL and ACLs on: replication authenticates, ACLs reach every broker."""

from __future__ import annotations

from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from tests.brokers import run_cli
from tests.cluster.conftest import WAIT_S, Cluster, wait_until
from tests.security.conftest import describe_acls, poll_values, sasl_conf

TOPIC = "replicated"


def read_all(cluster: Cluster, settings: dict[str, Any], count: int, assign: bool = False
             ) -> list[bytes]:
    consumer = Consumer({**sasl_conf(cluster.bootstrap, "alice"), **settings,
                         "auto.offset.reset": "earliest"})
    if assign:
        consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    else:
        consumer.subscribe([TOPIC])
    return poll_values(consumer, count)


def test_replication_and_acls_with_authentication(secure_cluster: Cluster) -> None:
    cluster = secure_cluster
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3,
                         configs={"min.insync.replicas": "2"})
    for args in (["--operation", "write", "--operation", "read", "--topic", TOPIC],
                 ["--operation", "read", "--group", "replicated-readers"]):
        added = run_cli("acl", "add", "--allow-principal", "User:alice", *args,
                        "-b", cluster.bootstrap)
        assert added.returncode == 0, added.stderr
    # Every broker replays the ACL records from the metadata log.
    wanted = {(TOPIC, "User:alice"), ("replicated-readers", "User:alice")}
    for broker in cluster.brokers.values():
        wait_until(lambda port=broker.port: wanted <= describe_acls(port), WAIT_S,
                   f"the ACLs on port {broker.port}")

    values = [f"v{i}".encode() for i in range(300)]
    producer = Producer({**sasl_conf(cluster.bootstrap, "alice"), "acks": "all",
                         "enable.idempotence": True})
    for value in values:
        producer.produce(TOPIC, value)
    assert producer.flush(60) == 0

    # The followers fetched everything over authenticated connections.
    cluster.wait_in_sync(TOPIC)
    for broker_id in cluster.brokers:
        wait_until(lambda b=broker_id: len(cluster.replica_values(b, TOPIC, 0)) == len(values),
                   WAIT_S, f"broker {broker_id} to replicate every record")
        assert sorted(cluster.replica_values(broker_id, TOPIC, 0).values()) == sorted(values)

    assert read_all(cluster, {"group.id": "replicated-readers"}, len(values)) == values
    # Lose the leader: the new one serves what the followers replicated.
    old = cluster.leader(TOPIC)
    cluster.kill(old)
    cluster.wait_leader(TOPIC, not_in=[old])
    assigned = {"group.id": "replicated-readers", "enable.auto.commit": False}
    assert read_all(cluster, assigned, len(values), assign=True) == values
    logs = cluster.all_logs()
    assert "inter-broker authentication failed" not in logs
    assert "authenticated as User:__broker" in logs
