"""CreateAcls and DeleteAcls sent to every broker in turn, by kafka-python, confluent-kafka
and slog's client: the broker that is not the controller forwards them (KIP-590), with
SASL and ACLs on, and with ACLs but no SASL (where the forwarded principal is signed
with the inter-broker secret, since a broker's connection proves nothing there)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from slog.client.connection import BrokerConnection
from slog.core.acls import Operation, PatternType, Permission
from slog.core.acls import ResourceType as SlogResourceType
from slog.protocol.apis import ApiKey, request_class
from slog.protocol.codec import encode_request
from slog.protocol.errors import ErrorCode
from slog.protocol.shapes import shape
from tests.cluster.conftest import Cluster, wait_until
from tests.security.conftest import PASSWORDS, describe_acls, sasl_conf, three_brokers

ACLS_WITHOUT_SASL = {"authorizer.class.name": "slog", "allow.everyone.if.no.acl.found": "true"}


def _binding(topic: str, principal: str) -> dict[str, Any]:
    return {"resource_type": int(SlogResourceType.TOPIC), "resource_name": topic,
            "resource_pattern_type": int(PatternType.LITERAL), "principal": principal,
            "host": "*", "operation": int(Operation.READ),
            "permission_type": int(Permission.ALLOW)}


def _kafka_python_admin(bootstrap: str, sasl: bool) -> Any:
    from kafka.admin import KafkaAdminClient

    settings: dict[str, Any] = {"bootstrap_servers": bootstrap}
    if sasl:
        settings.update(security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
                        sasl_plain_username="admin", sasl_plain_password=PASSWORDS["admin"])
    return KafkaAdminClient(**settings)


def _kafka_python_create(admin: Any, topic: str, principal: str) -> None:
    from kafka.admin import ACL, ACLOperation, ACLPermissionType, ResourcePattern
    from kafka.admin import ACLResourcePatternType as KpPatternType
    from kafka.admin import ResourceType as KpResourceType

    acl = ACL(principal, "*", ACLOperation.READ, ACLPermissionType.ALLOW,
              ResourcePattern(KpResourceType.TOPIC, topic, KpPatternType.LITERAL))
    result = admin.create_acls([acl])
    assert result["failed"] == [] and len(result["succeeded"]) == 1, result


def _kafka_python_delete(admin: Any, topic: str) -> int:
    from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, ResourcePatternFilter
    from kafka.admin import ACLResourcePatternType as KpPatternType
    from kafka.admin import ResourceType as KpResourceType

    flt = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                    ResourcePatternFilter(KpResourceType.TOPIC, topic, KpPatternType.LITERAL))
    [(_, matched, error)] = admin.delete_acls([flt])
    assert error.errno == 0, error
    return len(matched)


def _confluent_create(conf: dict[str, Any], topic: str, principal: str) -> None:
    admin = AdminClient(conf)
    binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal,
                         "*", AclOperation.READ, AclPermissionType.ALLOW)
    admin.create_acls([binding])[binding].result(30)


def _confluent_delete(conf: dict[str, Any], topic: str) -> int:
    admin = AdminClient(conf)
    flt = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None, None,
                           AclOperation.ANY, AclPermissionType.ANY)
    return len(admin.delete_acls([flt])[flt].result(30))


def _every_client_through_every_broker(cluster: Cluster, sasl: bool,
                                       connect: Any, described: Any) -> None:
    for broker_id, broker in sorted(cluster.brokers.items()):
        conf = sasl_conf(broker, "admin") if sasl else {"bootstrap.servers": broker.bootstrap}
        kp = _kafka_python_admin(broker.bootstrap, sasl)
        try:
            for client in ("slog", "kafka-python", "confluent"):
                topic = f"t-{client}-via-{broker_id}"
                if client == "slog":
                    with connect(broker_id) as conn:
                        [created] = conn.request(ApiKey.CREATE_ACLS, {
                            "creations": [_binding(topic, "User:carol")]}).results
                        assert created.error_code == ErrorCode.none, created
                elif client == "kafka-python":
                    _kafka_python_create(kp, topic, "User:carol")
                else:
                    _confluent_create(conf, topic, "User:carol")
                for other in cluster.brokers:  # every broker learns it from the metadata log
                    wait_until(lambda o=other, t=topic: (t, "User:carol") in described(o),
                               30, f"{client}'s ACL on broker {other}")
                # Deleted through the same broker by another client.
                deleted = _confluent_delete(conf, topic) if client != "confluent" \
                    else _kafka_python_delete(kp, topic)
                assert deleted == 1, (client, broker_id)
                for other in cluster.brokers:
                    wait_until(lambda o=other, t=topic: (t, "User:carol") not in described(o),
                               30, f"{client}'s ACL gone from broker {other}")
        finally:
            kp.close()


def test_acl_writes_through_every_broker_with_sasl(secure_cluster: Cluster) -> None:
    cluster = secure_cluster

    def connect(broker_id: int) -> BrokerConnection:
        return BrokerConnection("127.0.0.1", cluster.brokers[broker_id].port, node_id=broker_id,
                                sasl=_admin_login()).connect()

    _every_client_through_every_broker(
        cluster, True, connect, lambda b: describe_acls(cluster.brokers[b].port))


def _admin_login() -> Any:
    from slog.core.scram import SaslLogin

    return SaslLogin("SCRAM-SHA-256", "admin", PASSWORDS["admin"])


@pytest.fixture
def acl_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """Three brokers with ACLs on and no SASL: every client is User:ANONYMOUS."""
    yield from three_brokers(tmp_path / "data", ACLS_WITHOUT_SASL)


def _described_plain(cluster: Cluster, broker_id: int) -> set[tuple[str, str]]:
    with cluster.connect(broker_id) as conn:
        response = conn.request(ApiKey.DESCRIBE_ACLS, {
            "resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
            "principal_filter": None, "host_filter": None, "operation": 1,
            "permission_type": 1})
    assert response.error_code == ErrorCode.none
    return {(r.resource_name, a.principal) for r in response.resources for a in r.acls}


def test_acl_writes_through_every_broker_without_sasl(acl_cluster: Cluster) -> None:
    cluster = acl_cluster
    _every_client_through_every_broker(
        cluster, False, cluster.connect, lambda b: _described_plain(cluster, b))


def test_a_client_cannot_forge_a_forwarded_request(acl_cluster: Cluster) -> None:
    """Without SASL only the signature tells a broker's Envelope from a client's."""
    cluster = acl_cluster
    grant = {**_binding("kafka-cluster", "User:mallory"),
             "resource_type": int(SlogResourceType.CLUSTER), "operation": int(Operation.ALL)}
    inner = encode_request(shape(request_class(ApiKey.CREATE_ACLS, 3), {"creations": [grant]}),
                           correlation_id=1, client_id="mallory")[4:]
    for principal in (b"User:admin", b"User:admin\0" + b"\x01" * 32, b"User:admin\0short"):
        for broker_id in sorted(cluster.brokers):
            with cluster.connect(broker_id) as conn:
                answer = conn.request(ApiKey.ENVELOPE, {
                    "request_data": inner, "request_principal": principal,
                    "client_host_address": bytes([127, 0, 0, 1])}, version=0)
            assert answer.error_code in (ErrorCode.cluster_authorization_failed,
                                         ErrorCode.invalid_request), (principal, broker_id)
            assert answer.response_data is None
    assert not any(p == "User:mallory" for _, p in _described_plain(cluster, 1))
