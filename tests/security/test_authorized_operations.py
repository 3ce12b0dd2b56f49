"""Authorized operations under ACLs: each principal gets the operations its ACLs grant
(with Kafka's implications: READ implies DESCRIBE), a super user every one, as
confluent-kafka and kafka-python report them."""

from __future__ import annotations

from typing import Any

from confluent_kafka import TopicCollection
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from slog.client.connection import BrokerConnection
from slog.core.acls import Operation
from slog.core.scram import SaslLogin
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from tests.brokers import BrokerProcess
from tests.security.conftest import PASSWORDS, sasl_conf

TOPIC = "ops-under-acls"
EVERY_TOPIC_OPERATION = {"READ", "WRITE", "CREATE", "DESCRIBE", "DELETE", "ALTER",
                         "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}


def _topic_operations(broker: BrokerProcess, user: str) -> set[str]:
    admin = AdminClient(sasl_conf(broker, user))
    topic = admin.describe_topics(TopicCollection([TOPIC]),
                                  include_authorized_operations=True)[TOPIC].result(30)
    return {op.name for op in topic.authorized_operations}


def _cluster_operations(broker: BrokerProcess, user: str) -> set[str]:
    admin = AdminClient(sasl_conf(broker, user))
    described = admin.describe_cluster(include_authorized_operations=True).result(30)
    return {op.name for op in described.authorized_operations or []}


def test_operations_follow_the_acls(acl_broker: BrokerProcess) -> None:
    admin = AdminClient(sasl_conf(acl_broker, "admin"))
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    grants = [
        AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:alice", "*",
                   AclOperation.READ, AclPermissionType.ALLOW),
        AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:alice", "*",
                   AclOperation.ALTER_CONFIGS, AclPermissionType.ALLOW),
        AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                   "User:alice", "*", AclOperation.IDEMPOTENT_WRITE, AclPermissionType.ALLOW)]
    for future in admin.create_acls(grants).values():  # BROKER is code 4: the cluster
        future.result(30)

    assert _topic_operations(acl_broker, "admin") == EVERY_TOPIC_OPERATION
    assert _topic_operations(acl_broker, "alice") == {
        "READ", "DESCRIBE", "ALTER_CONFIGS", "DESCRIBE_CONFIGS"}
    assert _cluster_operations(acl_broker, "alice") == {"IDEMPOTENT_WRITE"}
    assert _cluster_operations(acl_broker, "bob") == set()
    assert "ALTER" in _cluster_operations(acl_broker, "admin")

    from kafka.admin import KafkaAdminClient

    kp = KafkaAdminClient(bootstrap_servers=acl_broker.bootstrap,
                          security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
                          sasl_plain_username="alice", sasl_plain_password=PASSWORDS["alice"])
    try:
        [topic] = kp.describe_topics([TOPIC])
        assert set(topic["authorized_operations"]) == {
            "READ", "DESCRIBE", "ALTER_CONFIGS", "DESCRIBE_CONFIGS"}
        assert set(kp.describe_cluster()["authorized_operations"]) == {"IDEMPOTENT_WRITE"}
    finally:
        kp.close()


def test_describe_topic_partitions_hides_what_acls_hide(acl_broker: BrokerProcess) -> None:
    """KIP-966 under ACLs: a named topic alice may not describe is refused with no id,
    after the others; asking for every topic leaves it out; her operations are hers."""
    admin = AdminClient(sasl_conf(acl_broker, "admin"))
    for name in ("dtp-open", "dtp-secret"):
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    for future in admin.create_acls([AclBinding(
            ResourceType.TOPIC, "dtp-open", ResourcePatternType.LITERAL, "User:alice", "*",
            AclOperation.DESCRIBE, AclPermissionType.ALLOW)]).values():
        future.result(30)
    login = SaslLogin("SCRAM-SHA-256", "alice", PASSWORDS["alice"])
    with BrokerConnection("127.0.0.1", acl_broker.port, sasl=login) as conn:
        def describe(names: list[str]) -> Any:
            return conn.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, {
                "topics": [{"name": n} for n in names], "response_partition_limit": 100,
                "cursor": None}).topics

        named = describe(["dtp-secret", "dtp-open", "dtp-nowhere"])
        assert [(t.name, t.error_code) for t in named] == [
            ("dtp-open", ErrorCode.none),
            ("dtp-nowhere", ErrorCode.topic_authorization_failed),  # existing or not
            ("dtp-secret", ErrorCode.topic_authorization_failed)]
        assert named[0].topic_authorized_operations == 1 << Operation.DESCRIBE
        assert named[2].topic_id is None and not named[2].partitions
        every = [t.name for t in describe([])]  # the module's broker has other topics
        assert "dtp-open" in every and "dtp-secret" not in every


def test_topics_named_by_id_are_authorized_by_name(acl_broker: BrokerProcess) -> None:
    """Produce v13 and Fetch v16 name topics by id: alice may write and read the topic
    her ACLs name, whatever the request calls it, and no other."""
    from tests.cluster.conftest import produce_body

    admin = AdminClient(sasl_conf(acl_broker, "admin"))
    for name in ("byid-open", "byid-closed"):
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    grants = [AclBinding(ResourceType.TOPIC, "byid-open", ResourcePatternType.LITERAL,
                         "User:alice", "*", op, AclPermissionType.ALLOW)
              for op in (AclOperation.WRITE, AclOperation.READ)]
    for future in admin.create_acls(grants).values():
        future.result(30)
    with BrokerConnection("127.0.0.1", acl_broker.port,
                          sasl=SaslLogin("SCRAM-SHA-256", "admin", PASSWORDS["admin"])) as conn:
        described = conn.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, {
            "topics": [{"name": "byid-open"}, {"name": "byid-closed"}],
            "response_partition_limit": 10, "cursor": None})
        ids = {t.name: t.topic_id for t in described.topics}
    login = SaslLogin("SCRAM-SHA-256", "alice", PASSWORDS["alice"])
    with BrokerConnection("127.0.0.1", acl_broker.port, sasl=login) as conn:
        def produce(name: str) -> ErrorCode:
            body = produce_body(name, 0, [b"x"], 1)
            body["topic_data"] = [{"topic_id": ids[name],
                                   "partition_data": body["topic_data"][0]["partition_data"]}]
            answer = conn.request(ApiKey.PRODUCE, body, version=13)
            return answer.responses[0].partition_responses[0].error_code

        def fetch(name: str) -> ErrorCode:
            answer = conn.request(ApiKey.FETCH, {
                "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic_id": ids[name], "partitions": [{
                    "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                    "last_fetched_epoch": -1, "log_start_offset": -1,
                    "partition_max_bytes": 1 << 20}]}],
                "forgotten_topics_data": [], "rack_id": ""}, version=16)
            return answer.responses[0].partitions[0].error_code

        assert produce("byid-open") == ErrorCode.none
        assert fetch("byid-open") == ErrorCode.none
        assert produce("byid-closed") == ErrorCode.topic_authorization_failed
        assert fetch("byid-closed") == ErrorCode.topic_authorization_failed
