"""ACLs end to end: `slog acl` manages them, confluent-kafka feels them."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient

from tests.brokers import BrokerProcess, run_cli
from tests.security.conftest import logged_in, sasl_conf, sasl_connection


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


def transactional_produce_error(broker: BrokerProcess, user: str, topic: str,
                                transactional_id: str) -> int | None:
    """Commit one transactional record as ``user``; the error code, or None on success."""
    from confluent_kafka import KafkaException

    producer = Producer({**sasl_conf(broker, user), "transactional.id": transactional_id,
                         "transaction.timeout.ms": 10000, "message.timeout.ms": 10000})
    try:
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(topic, b"v")
        producer.commit_transaction(30)
    except KafkaException as exc:
        return int(exc.args[0].code())
    return None


def test_producer_and_consumer_shortcuts(acl_broker: BrokerProcess, topics: list[str],
                                         as_user: Any) -> None:
    """kafka-acls' --producer (with --transactional-id) and --consumer sets, added and
    removed in one command each, and what they let a client do."""
    as_user("admin")
    ok(cli(acl_broker, "topic", "create", "payments"))
    assert transactional_produce_error(acl_broker, "bob", "payments", "pay-app") == \
        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    granted = json.loads(ok(cli(
        acl_broker, "acl", "add", "--allow-principal", "User:bob", "--producer", "--consumer",
        "--topic", "payments", "--transactional-id", "pay-app", "--group", "payers",
        "-o", "json")))
    assert {(r["resource_type"], r["resource"], r["operation"]) for r in granted} == {
        ("TOPIC", "payments", "WRITE"), ("TOPIC", "payments", "DESCRIBE"),
        ("TOPIC", "payments", "CREATE"), ("TRANSACTIONAL_ID", "pay-app", "WRITE"),
        ("TRANSACTIONAL_ID", "pay-app", "DESCRIBE"), ("TOPIC", "payments", "READ"),
        ("GROUP", "payers", "READ")}
    listed = json.loads(ok(cli(acl_broker, "acl", "list", "--transactional-id", "pay-app",
                               "-o", "json")))
    assert {r["operation"] for r in listed} == {"WRITE", "DESCRIBE"}
    assert transactional_produce_error(acl_broker, "bob", "payments", "pay-app") is None
    assert consume_error(acl_broker, "bob", "payments", "payers") == (None, 1)

    removed = json.loads(ok(cli(
        acl_broker, "acl", "remove", "--allow-principal", "User:bob", "--producer",
        "--consumer", "--topic", "payments", "--transactional-id", "pay-app", "--group",
        "payers", "-o", "json")))
    assert len(removed) == len(granted) == 7  # DESCRIBE on the topic once, though both sets have it
    assert json.loads(ok(cli(acl_broker, "acl", "list", "--principal", "User:bob", "--topic",
                             "payments", "-o", "json"))) == []
    assert produce_error(acl_broker, "bob", "payments") == \
        KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_shortcut_usage_errors(acl_broker: BrokerProcess, as_user: Any) -> None:
    as_user("admin")
    no_group = cli(acl_broker, "acl", "add", "--allow-principal", "User:bob", "--consumer",
                   "--topic", "orders")
    assert no_group.returncode == 2 and "--consumer needs --topic and --group" in no_group.stderr
    with_operation = cli(acl_broker, "acl", "add", "--allow-principal", "User:bob",
                         "--producer", "--topic", "orders", "--operation", "read")
    assert with_operation.returncode == 2
    two = cli(acl_broker, "acl", "list", "--topic", "a", "--transactional-id", "b")
    assert two.returncode == 2


def test_auto_creation_without_create_is_an_authorization_error(acl_broker: BrokerProcess,
                                                                topics: list[str],
                                                                as_user: Any) -> None:
    """Kafka's Metadata: a topic the principal may describe but not create, asked for
    with auto-creation, is TOPIC_AUTHORIZATION_FAILED (not created); without
    auto-creation it is UNKNOWN_TOPIC_OR_PARTITION."""
    from slog.protocol.apis import ApiKey
    from slog.protocol.errors import ErrorCode

    as_user("admin")
    ok(cli(acl_broker, "acl", "add", "--allow-principal", "User:bob", "--operation", "describe",
           "--operation", "write", "--topic", "not-yet"))
    with sasl_connection(acl_broker.port, "bob") as bob:
        def metadata_error(auto: bool) -> int:
            answer = bob.request(ApiKey.METADATA, {"topics": [{"name": "not-yet"}],
                                                   "allow_auto_topic_creation": auto},
                                 version=9)
            return int(answer.topics[0].error_code)

        assert metadata_error(True) == ErrorCode.topic_authorization_failed
        assert metadata_error(False) == ErrorCode.unknown_topic_or_partition
    listed = json.loads(ok(cli(acl_broker, "topic", "list", "-o", "json")))
    assert "not-yet" not in json.dumps(listed)
