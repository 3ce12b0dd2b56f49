"""ACLs end to end: `slog acl` manages them, confluent-kafka feels them."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient

from tests.brokers import BrokerProcess, run_cli
from tests.security.conftest import logged_in, sasl_conf


def cli(broker: BrokerProcess, *args: str) -> Any:
    return run_cli(*args, "-b", broker.bootstrap)


def ok(result: Any) -> str:
    assert result.returncode == 0, result.stderr
    return str(result.stdout)


def produce_error(broker: BrokerProcess, user: str, topic: str) -> int | None:
    """Produce one record as ``user``; the delivery error code, or None when it was written."""
    outcome: list[Any] = []
    producer = Producer({**sasl_conf(broker, user), "message.timeout.ms": 10000,
                         "allow.auto.create.topics": False})
    producer.produce(topic, b"v", on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(30)
    assert outcome, "no delivery report"
    return None if outcome[0] is None else outcome[0].code()


def consume_error(broker: BrokerProcess, user: str, topic: str, group: str
                  ) -> tuple[int | None, int]:
    """(first error code, records read) of a group consumer reading ``topic`` as ``user``."""
    consumer = Consumer({**sasl_conf(broker, user), "group.id": group,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    read, error = 0, None
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline and error is None and read == 0:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                if message.error().code() != KafkaError._PARTITION_EOF:
                    error = message.error().code()
            else:
                read += 1
    finally:
        consumer.close()
    return error, read


@pytest.fixture(scope="module")
def topics(acl_broker: BrokerProcess) -> list[str]:
    """Topics the super user created, and the ACLs the tests start from."""
    with logged_in("admin"):
        for name in ("orders", "secret", "team-a.events"):
            ok(cli(acl_broker, "topic", "create", name))
        ok(cli(acl_broker, "acl", "add", "--allow-principal", "User:alice", "--operation",
               "read", "--operation", "write", "--topic", "orders"))
        ok(cli(acl_broker, "acl", "add", "--allow-principal", "User:alice", "--operation",
               "read", "--group", "app"))
        ok(cli(acl_broker, "acl", "add", "--allow-principal", "User:bob", "--operation", "all",
               "--topic", "team-a.", "--resource-pattern-type", "prefixed"))
    return ["orders", "secret", "team-a.events"]


def test_allowed_user_produces_and_consumes(acl_broker: BrokerProcess, topics: list[str]) -> None:
    assert produce_error(acl_broker, "alice", "orders") is None
    error, read = consume_error(acl_broker, "alice", "orders", "app")
    assert error is None and read >= 1


def test_denied_topic(acl_broker: BrokerProcess, topics: list[str]) -> None:
    assert produce_error(acl_broker, "bob", "orders") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert produce_error(acl_broker, "alice", "secret") == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_denied_group(acl_broker: BrokerProcess, topics: list[str]) -> None:
    error, read = consume_error(acl_broker, "alice", "orders", "not-my-group")
    assert error == KafkaError.GROUP_AUTHORIZATION_FAILED and read == 0


def test_prefixed_acl(acl_broker: BrokerProcess, topics: list[str]) -> None:
    assert produce_error(acl_broker, "bob", "team-a.events") is None


def test_metadata_hides_undescribable_topics(acl_broker: BrokerProcess,
                                             topics: list[str]) -> None:
    admin = AdminClient(sasl_conf(acl_broker, "alice"))
    visible = set(admin.list_topics(timeout=30).topics)
    assert "orders" in visible and "secret" not in visible and "team-a.events" not in visible
    everything = set(AdminClient(sasl_conf(acl_broker, "admin")).list_topics(timeout=30).topics)
    assert set(topics) <= everything


def test_deny_wins_and_remove(acl_broker: BrokerProcess, topics: list[str], as_user: Any) -> None:
    as_user("admin")
    ok(cli(acl_broker, "acl", "add", "--deny-principal", "User:alice", "--operation", "write",
           "--topic", "orders"))
    assert produce_error(acl_broker, "alice", "orders") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    removed = json.loads(ok(cli(acl_broker, "acl", "remove", "--deny-principal", "User:alice",
                                "--operation", "write", "--topic", "orders", "-o", "json")))
    assert removed == [{"principal": "User:alice", "permission": "DENY", "operation": "WRITE",
                        "host": "*", "resource_type": "TOPIC", "resource": "orders",
                        "pattern": "LITERAL"}]
    assert produce_error(acl_broker, "alice", "orders") is None


def test_acl_list(acl_broker: BrokerProcess, topics: list[str], as_user: Any) -> None:
    as_user("admin")
    rows = json.loads(ok(cli(acl_broker, "acl", "list", "--topic", "orders", "-o", "json")))
    assert {(r["principal"], r["operation"], r["permission"]) for r in rows} == {
        ("User:alice", "READ", "ALLOW"), ("User:alice", "WRITE", "ALLOW")}
    matching = json.loads(ok(cli(acl_broker, "acl", "list", "--topic", "team-a.events",
                                 "--resource-pattern-type", "match", "-o", "json")))
    assert [(r["principal"], r["pattern"]) for r in matching] == [("User:bob", "PREFIXED")]
    table = ok(cli(acl_broker, "acl", "list", "--principal", "User:bob"))
    assert "PRINCIPAL" in table and "team-a." in table and "orders" not in table


def test_only_authorized_users_manage_acls(acl_broker: BrokerProcess, topics: list[str],
                                           as_user: Any) -> None:
    as_user("alice")
    refused = cli(acl_broker, "acl", "add", "--allow-principal", "User:alice", "--operation",
                  "all", "--topic", "secret")
    assert refused.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in refused.stderr
    listed = cli(acl_broker, "acl", "list")
    assert listed.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in listed.stderr
    assert produce_error(acl_broker, "alice", "secret") == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_acl_usage_errors(acl_broker: BrokerProcess, as_user: Any) -> None:
    as_user("admin")
    missing = cli(acl_broker, "acl", "add", "--topic", "orders", "--operation", "read")
    assert missing.returncode == 2
    bad_principal = cli(acl_broker, "acl", "add", "--allow-principal", "alice", "--operation",
                        "read", "--topic", "orders")
    assert bad_principal.returncode == 2 and "User:name" in bad_principal.stderr
    two = cli(acl_broker, "acl", "list", "--topic", "a", "--group", "b")
    assert two.returncode == 2


def test_acls_need_an_authorizer(sasl_broker: BrokerProcess, as_user: Any) -> None:
    as_user("admin")
    result = cli(sasl_broker, "acl", "list")
    assert result.returncode == 1 and "SECURITY_DISABLED" in result.stderr
