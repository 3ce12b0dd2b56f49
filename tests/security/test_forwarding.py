"""Admin writes sent to a broker that is not the controller, with SASL and ACLs on: the
controller authorizes them as the client who sent them (KIP-590), and a client cannot
use an Envelope to pass for someone else."""

from __future__ import annotations

from typing import Any

from slog.client.connection import BrokerConnection
from slog.core.acls import Operation, PatternType, Permission, ResourceType
from slog.protocol.apis import ApiKey, request_class
from slog.protocol.codec import encode_request
from slog.protocol.errors import ErrorCode
from slog.protocol.shapes import shape
from tests.cluster.conftest import Cluster
from tests.security.conftest import cluster_login, describe_acls

TOPIC = "alice-topic"
ALICE_MAY_CREATE = {
    "resource_type": int(ResourceType.TOPIC), "resource_name": TOPIC,
    "resource_pattern_type": int(PatternType.LITERAL), "principal": "User:alice", "host": "*",
    "operation": int(Operation.CREATE), "permission_type": int(Permission.ALLOW)}
ALICE_MAY_ALTER_CLUSTER = {
    "resource_type": int(ResourceType.CLUSTER), "resource_name": "kafka-cluster",
    "resource_pattern_type": int(PatternType.LITERAL), "principal": "User:alice", "host": "*",
    "operation": int(Operation.ALTER), "permission_type": int(Permission.ALLOW)}


def _create_topics_body(name: str) -> dict[str, Any]:
    return {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 2,
                        "assignments": [], "configs": []}],
            "timeout": 5000, "validate_only": False}


def _create_topic(conn: BrokerConnection, name: str) -> int:
    [topic] = conn.request(ApiKey.CREATE_TOPICS, _create_topics_body(name)).topics
    return int(topic.error_code)


def _create_acl(conn: BrokerConnection, binding: dict[str, Any]) -> int:
    [result] = conn.request(ApiKey.CREATE_ACLS, {"creations": [binding]}).results
    return int(result.error_code)


def _delete_acls(conn: BrokerConnection, principal: str) -> Any:
    [result] = conn.request(ApiKey.DELETE_ACLS, {"filters": [{
        "resource_type_filter": int(ResourceType.ANY), "resource_name_filter": None,
        "pattern_type_filter": int(PatternType.ANY), "principal_filter": principal,
        "host_filter": None, "operation": int(Operation.ANY),
        "permission_type": int(Permission.ANY)}]}).filter_results
    return result


def _create_partitions(conn: BrokerConnection, name: str, count: int) -> int:
    [result] = conn.request(ApiKey.CREATE_PARTITIONS, {
        "topics": [{"name": name, "count": count, "assignments": None}],
        "timeout": 5000, "validate_only": False}).results
    return int(result.error_code)


def _delete_topic(conn: BrokerConnection, name: str) -> int:
    [result] = conn.request(ApiKey.DELETE_TOPICS, {
        "topics": [{"name": name, "topic_id": None}], "topic_names": [name],
        "timeout": 5000}).responses
    return int(result.error_code)


def test_forwarded_requests_are_authorized_as_their_client(shared_secure_cluster: Cluster) -> None:
    cluster = shared_secure_cluster
    via = next(b for b in sorted(cluster.brokers) if b != cluster.controller())
    denied_topic, denied_cluster = (ErrorCode.topic_authorization_failed,
                                    ErrorCode.cluster_authorization_failed)
    with cluster_login(cluster, via, "alice") as alice, \
            cluster_login(cluster, via, "admin") as admin:
        # Forwarded as alice, not as the forwarding broker (a super user).
        assert _create_topic(alice, TOPIC) == denied_topic
        assert _create_acl(alice, ALICE_MAY_CREATE) == denied_cluster
        assert TOPIC not in cluster.image().topics

        assert _create_acl(admin, ALICE_MAY_CREATE) == ErrorCode.none
        assert _create_topic(alice, TOPIC) == ErrorCode.none
        assert TOPIC in cluster.image().topics
        assert _create_topic(alice, TOPIC) == ErrorCode.topic_already_exists

        assert _create_partitions(alice, TOPIC, 2) == denied_topic  # no ALTER on it
        assert _create_partitions(admin, TOPIC, 2) == ErrorCode.none
        assert len(cluster.image().topics[TOPIC].partitions) == 2

        deleted = _delete_acls(admin, "User:alice")
        assert deleted.error_code == ErrorCode.none
        assert [a.operation for a in deleted.matching_acls] == [Operation.CREATE]
        # The deleted ACL is out of force at once (it stayed in force when a client
        # gave up after NOT_CONTROLLER).
        assert _create_topic(alice, TOPIC) == denied_topic
        assert _delete_topic(alice, TOPIC) == denied_topic
        assert _delete_topic(admin, TOPIC) == ErrorCode.none
        assert TOPIC not in cluster.image().topics


def test_a_client_cannot_send_an_envelope(shared_secure_cluster: Cluster) -> None:
    """Alice wraps "grant alice ALTER on the cluster" as if the super user sent it."""
    cluster = shared_secure_cluster
    inner = encode_request(shape(request_class(ApiKey.CREATE_ACLS, 3),
                                 {"creations": [ALICE_MAY_ALTER_CLUSTER]}),
                           correlation_id=1, client_id="mallory")[4:]
    for broker_id in sorted(cluster.brokers):  # the controller and the others
        with cluster_login(cluster, broker_id, "alice") as alice:
            answer = alice.request(ApiKey.ENVELOPE, {
                "request_data": inner, "request_principal": b"User:admin",
                "client_host_address": bytes([127, 0, 0, 1])}, version=0)
        assert answer.error_code == ErrorCode.cluster_authorization_failed
        assert answer.response_data is None
    controller_port = cluster.brokers[cluster.controller()].port
    assert ("kafka-cluster", "User:alice") not in describe_acls(controller_port)
