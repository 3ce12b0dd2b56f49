"""SCRAM users managed by admin clients (KIP-554) on a three-broker SASL + ACL cluster:
created by confluent-kafka and kafka-python through any broker, described, used to log
in with SCRAM-SHA-256 and SCRAM-SHA-512, deleted (then the login fails), and Kafka's
error codes for what cannot be applied."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from slog.client.connection import BrokerConnection
from slog.core.credentials import load_credentials
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from tests.cluster.conftest import Cluster
from tests.security.conftest import PASSWORDS, cluster_login, sasl_conf

SHA_256, SHA_512 = 1, 2  # Kafka's ScramMechanism type codes


def _admin(cluster: Cluster, broker_id: int) -> AdminClient:
    return AdminClient(sasl_conf(cluster.brokers[broker_id].bootstrap, "admin"))


def _can_log_in(cluster: Cluster, user: str, password: str, mechanism: str) -> bool:
    """Whether confluent-kafka logs in to every broker as ``user`` with ``mechanism``."""
    for broker in cluster.brokers.values():
        refused: list[KafkaError] = []
        client = AdminClient({**sasl_conf(broker.bootstrap, user, mechanism, password),
                              "retries": 0, "reconnect.backoff.max.ms": 100,
                              "error_cb": lambda e, r=refused: r.append(e)})
        # A refused login is reported at once through error_cb, while list_topics would
        # keep retrying until its timeout: ask in short slices and stop at the refusal.
        deadline = time.monotonic() + 10
        while True:
            try:
                client.list_topics(timeout=0.5)
                break
            except KafkaException:
                client.poll(0.1)  # serves error_cb
                if any(e.code() == KafkaError._AUTHENTICATION for e in refused) or \
                        time.monotonic() > deadline:
                    return False
    return True


def _describe(conn: BrokerConnection, users: list[str] | None) -> Any:
    return conn.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, {
        "users": None if users is None else [{"name": u} for u in users]})


def _alter(conn: BrokerConnection, deletions: list[tuple[str, int]],
           upsertions: list[tuple[str, int, int, bytes, bytes]]) -> dict[str, int]:
    response = conn.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, {
        "deletions": [{"name": n, "mechanism": m} for n, m in deletions],
        "upsertions": [{"name": n, "mechanism": m, "iterations": i, "salt": s,
                        "salted_password": p} for n, m, i, s, p in upsertions]})
    return {r.user: int(r.error_code) for r in response.results}


def test_confluent_kafka_creates_users_that_log_in(shared_secure_cluster: Cluster) -> None:
    cluster = shared_secure_cluster
    via = next(b for b in sorted(cluster.brokers) if b != cluster.controller())
    admin = _admin(cluster, via)  # not the controller: the change is forwarded
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion(
            "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"carol-pw"),
        UserScramCredentialUpsertion(
            "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"carol-pw",
            b"a-chosen-salt")])
    futures["carol"].result(30)

    described = admin.describe_user_scram_credentials(["carol"])["carol"].result(30)
    assert sorted((i.mechanism, i.iterations) for i in described.scram_credential_infos) == [
        (ScramMechanism.SCRAM_SHA_256, 8192), (ScramMechanism.SCRAM_SHA_512, 4096)]
    everyone = admin.describe_user_scram_credentials().result(30)
    assert {"admin", "alice", "bob", "carol"} <= set(everyone)
    stored = load_credentials(cluster.data_dir / "credentials.json")["carol"]
    assert stored["SCRAM-SHA-512"].salt == b"a-chosen-salt"

    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"):
        assert _can_log_in(cluster, "carol", "carol-pw", mechanism), mechanism
    assert not _can_log_in(cluster, "carol", "wrong-pw", "SCRAM-SHA-512")

    admin.alter_user_scram_credentials([
        UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512)])["carol"].result(30)
    assert not _can_log_in(cluster, "carol", "carol-pw", "SCRAM-SHA-512")
    assert _can_log_in(cluster, "carol", "carol-pw", "SCRAM-SHA-256")
    admin.alter_user_scram_credentials([
        UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_256)])["carol"].result(30)
    assert not _can_log_in(cluster, "carol", "carol-pw", "SCRAM-SHA-256")
    assert "carol" not in load_credentials(cluster.data_dir / "credentials.json")
    with pytest.raises(KafkaException, match="RESOURCE_NOT_FOUND"):
        admin.describe_user_scram_credentials(["carol"])["carol"].result(30)


def test_kafka_python_manages_users_on_every_broker(shared_secure_cluster: Cluster) -> None:
    from kafka.admin import KafkaAdminClient
    from kafka.admin import ScramMechanism as KpMechanism
    from kafka.admin import UserScramCredentialDeletion as KpDeletion
    from kafka.admin import UserScramCredentialUpsertion as KpUpsertion

    cluster = shared_secure_cluster
    for broker_id, broker in sorted(cluster.brokers.items()):
        user = f"dave{broker_id}"
        admin = KafkaAdminClient(
            bootstrap_servers=broker.bootstrap, security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="admin",
            sasl_plain_password=PASSWORDS["admin"])
        try:
            assert admin.alter_user_scram_credentials([
                KpUpsertion(user, KpMechanism.SCRAM_SHA_512, "dave-pw", iterations=4096)]) \
                == {user: None}
            described = admin.describe_user_scram_credentials([user])[user]
            assert described["error"] is None
            assert [(i["mechanism"], i["iterations"]) for i in described["credential_infos"]] \
                == [(KpMechanism.SCRAM_SHA_512, 4096)]
            assert _can_log_in(cluster, user, "dave-pw", "SCRAM-SHA-512")
            assert not _can_log_in(cluster, user, "dave-pw", "SCRAM-SHA-256")  # none made
            refused = admin.alter_user_scram_credentials([
                KpUpsertion(user, KpMechanism.SCRAM_SHA_256, "x", iterations=1000)])
            assert refused[user] is not None  # too few iterations
            assert admin.alter_user_scram_credentials([
                KpDeletion(user, KpMechanism.SCRAM_SHA_512)]) == {user: None}
            assert not _can_log_in(cluster, user, "dave-pw", "SCRAM-SHA-512")
        finally:
            admin.close()


def test_kafka_error_codes(shared_secure_cluster: Cluster) -> None:
    cluster = shared_secure_cluster
    salted_256, salted_512 = b"k" * 32, b"k" * 64
    via = next(b for b in sorted(cluster.brokers) if b != cluster.controller())
    with cluster_login(cluster, via, "admin") as admin, \
            cluster_login(cluster, via, "alice") as alice:
        assert _alter(admin, [], [("erin", SHA_256, 4096, b"salt", salted_256)]) \
            == {"erin": ErrorCode.none}
        assert _alter(admin, [("nobody", SHA_256)], [
            ("few", SHA_256, 4095, b"salt", salted_256),
            ("many", SHA_512, 16385, b"salt", salted_512),
            ("mech", 3, 4096, b"salt", salted_256),
            ("short", SHA_512, 4096, b"salt", salted_256),
            ("nosalt", SHA_256, 4096, b"", salted_256),
            ("", SHA_256, 4096, b"salt", salted_256),
            ("__broker", SHA_256, 4096, b"salt", salted_256),
            ("twice", SHA_256, 4096, b"salt", salted_256),
            ("twice", SHA_256, 8192, b"salt", salted_256),
            ("ok", SHA_512, 16384, b"salt", salted_512)]) == {
            "nobody": ErrorCode.resource_not_found,
            "few": ErrorCode.unacceptable_credential,
            "many": ErrorCode.unacceptable_credential,
            "mech": ErrorCode.unsupported_sasl_mechanism,
            "short": ErrorCode.unacceptable_credential,
            "nosalt": ErrorCode.unacceptable_credential,
            "": ErrorCode.unacceptable_credential,
            "__broker": ErrorCode.unacceptable_credential,
            "twice": ErrorCode.duplicate_resource,
            "ok": ErrorCode.none}
        # A user's changes apply all or none: erin keeps her credential.
        assert _alter(admin, [("erin", SHA_256)], [("erin", SHA_256, 4096, b"s", salted_256)]) \
            == {"erin": ErrorCode.duplicate_resource}
        users = load_credentials(cluster.data_dir / "credentials.json")
        assert set(users["erin"]) == {"SCRAM-SHA-256"} and set(users["ok"]) == {"SCRAM-SHA-512"}
        assert not {"few", "many", "mech", "short", "nosalt", "", "twice"} & set(users)

        results = {r.user: (int(r.error_code), [(i.mechanism, i.iterations)
                                                for i in r.credential_infos])
                   for r in _describe(admin, ["erin", "ghost", "ok", "ok"]).results}
        assert results == {"erin": (ErrorCode.none, [(SHA_256, 4096)]),
                           "ghost": (ErrorCode.resource_not_found, []),
                           "ok": (ErrorCode.duplicate_resource, [])}
        assert {r.user for r in _describe(admin, None).results} \
            == {"admin", "alice", "bob", "erin", "ok"}

        # Alice has neither ALTER nor DESCRIBE on the cluster.
        assert _alter(alice, [("erin", SHA_256)], []) \
            == {"erin": ErrorCode.cluster_authorization_failed}
        denied = _describe(alice, None)
        assert denied.error_code == ErrorCode.cluster_authorization_failed and not denied.results
        assert "erin" in load_credentials(cluster.data_dir / "credentials.json")
