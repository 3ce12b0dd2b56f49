"""Denied DELETE, DESCRIBE and CREATE end to end: a real broker, real clients, nothing lost.

A super user (admin) sets up topics with records, a group with committed
offsets and the ACLs; alice and bob then try what their ACLs do not allow,
through confluent-kafka's AdminClient and slog's own CLI and client. Each
denial carries Kafka's code (TOPIC_AUTHORIZATION_FAILED 29,
GROUP_AUTHORIZATION_FAILED 30), and what was to be deleted or hidden is still
there or still hidden; an allowed principal doing the same shows the denial is
the ACL's doing.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
)

from slog.client.connection import BrokerConnection
from slog.core.scram import SaslLogin
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from tests.brokers import BrokerProcess, run_cli
from tests.compat.clients import Rec, slog_consume, slog_produce
from tests.security.conftest import PASSWORDS, logged_in, sasl_conf

LEDGER, VAULT, DRAFTS = "ledger", "vault", "drafts"
READERS = "ledger-readers"  # alice's group: READ, no DELETE
COMMITTED = {(LEDGER, 0): 3, (LEDGER, 1): 7}
TOPIC_DENIED, GROUP_DENIED = KafkaError.TOPIC_AUTHORIZATION_FAILED, \
    KafkaError.GROUP_AUTHORIZATION_FAILED
ALLOW = AclPermissionType.ALLOW


def admin_client(broker: BrokerProcess, user: str) -> AdminClient:
    return AdminClient(sasl_conf(broker, user))


def admin_call(broker: BrokerProcess, user: str, method: str, *args: Any, **kwargs: Any
               ) -> tuple[int | None, Any]:
    """One confluent-kafka AdminClient call about one resource, as ``user``.

    Returns (the Kafka error code it failed with or None, its result).
    """
    client = admin_client(broker, user)  # alive until the future is done
    [future] = getattr(client, method)(*args, **kwargs).values()
    try:
        return None, future.result(timeout=30)
    except KafkaException as exc:
        return int(exc.args[0].code()), None


def error_of(broker: BrokerProcess, user: str, method: str, *args: Any, **kwargs: Any
             ) -> int | None:
    return admin_call(broker, user, method, *args, **kwargs)[0]


def acl(resource: ResourceType, name: str, principal: str, operation: AclOperation,
        pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, "*", operation, ALLOW)


def slog_as(broker: BrokerProcess, user: str) -> BrokerConnection:
    return BrokerConnection("127.0.0.1", broker.port,
                            sasl=SaslLogin("SCRAM-SHA-256", user, PASSWORDS[user])).connect()


def records(broker: BrokerProcess, topic: str) -> list[list[bytes | None]]:
    with logged_in("admin"):
        return [[r.value for r in slog_consume(broker.bootstrap, topic, p)] for p in (0, 1)]


def topics(broker: BrokerProcess) -> set[str]:
    return set(admin_client(broker, "admin").list_topics(timeout=30).topics)


def committed(broker: BrokerProcess, user: str, group: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets as ``user`` fetches them (all topics: OffsetFetch null)."""
    error, result = admin_call(broker, user, "list_consumer_group_offsets",
                               [ConsumerGroupTopicPartitions(group)])
    if error is not None:
        raise KafkaException(KafkaError(error))
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions
            if tp.offset >= 0}


def commit(broker: BrokerProcess, user: str, group: str,
           offsets: dict[tuple[str, int], int]) -> int | None:
    """The first error of the commit, its own or a partition's. A coordinator still
    loading its offsets partition (the first commit creates __consumer_offsets) is
    waited out, as a consumer would; AlterConsumerGroupOffsets does not retry it."""
    give_up = time.monotonic() + 30
    while True:
        error, result = admin_call(broker, user, "alter_consumer_group_offsets", [
            ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, o)
                                                 for (t, p), o in offsets.items()])])
        if error is None:
            error = next((int(tp.error.code()) for tp in result.topic_partitions
                          if tp.error is not None), None)
        if error != ErrorCode.coordinator_load_in_progress or time.monotonic() > give_up:
            return error
        time.sleep(0.1)


@pytest.fixture(scope="module")
def setup(acl_broker: BrokerProcess) -> dict[str, list[list[bytes | None]]]:
    """Topics with records, alice's group with offsets, and the ACLs; returns the records."""
    admin = admin_client(acl_broker, "admin")
    for future in admin.create_topics([NewTopic(t, 2, 1) for t in (LEDGER, VAULT, DRAFTS)],
                                      operation_timeout=30).values():
        future.result(timeout=30)
    with logged_in("admin"):
        for topic in (LEDGER, VAULT):
            for partition in (0, 1):
                slog_produce(acl_broker.bootstrap, topic,
                             [Rec(b"k", f"{topic}-{partition}-{i}".encode()) for i in range(10)],
                             partition=partition)
    bindings = [
        *(acl(ResourceType.TOPIC, LEDGER, "User:alice", op)
          for op in (AclOperation.READ, AclOperation.WRITE)),
        acl(ResourceType.GROUP, READERS, "User:alice", AclOperation.READ),
        acl(ResourceType.GROUP, "alice-", "User:alice", AclOperation.ALL,
            ResourcePatternType.PREFIXED),
        acl(ResourceType.TOPIC, DRAFTS, "User:bob", AclOperation.DELETE),
        acl(ResourceType.TOPIC, "bob.", "User:bob", AclOperation.CREATE,
            ResourcePatternType.PREFIXED),
    ]
    for future in admin.create_acls(bindings).values():
        future.result(timeout=30)
    # alice commits her group's offsets; admin commits offsets for vault in the same group.
    for user, offsets in (("alice", COMMITTED), ("admin", {(VAULT, 0): 5})):
        assert commit(acl_broker, user, READERS, offsets) is None
    return {t: records(acl_broker, t) for t in (LEDGER, VAULT)}


# -- DELETE ----------------------------------------------------------------------------
def test_delete_topic_without_delete_is_denied_and_the_topic_keeps_its_data(
        acl_broker: BrokerProcess, setup: dict[str, Any], as_user: Callable[[str], None]
        ) -> None:
    for user in ("alice", "bob"):  # alice may read and write ledger, bob may not even see it
        assert error_of(acl_broker, user, "delete_topics", [LEDGER],
                        operation_timeout=30) == TOPIC_DENIED, user
    # slog's own admin: by name (DeleteTopics v5) and by topic id (v6).
    as_user("alice")
    refused = run_cli("topic", "delete", LEDGER, "-b", acl_broker.bootstrap)
    assert refused.returncode == 1 and "TOPIC_AUTHORIZATION_FAILED" in refused.stdout
    with slog_as(acl_broker, "alice") as conn:
        [topic] = conn.request(ApiKey.METADATA, {"topics": [{"name": LEDGER}]}).topics
        by_id = conn.request(ApiKey.DELETE_TOPICS, {
            "topics": [{"name": None, "topic_id": topic.topic_id}], "timeout_ms": 10000},
            version=6)
    assert [r.error_code for r in by_id.responses] == [ErrorCode.topic_authorization_failed]
    assert LEDGER in topics(acl_broker)
    assert records(acl_broker, LEDGER) == setup[LEDGER]
    # The same request from a principal with DELETE on the topic succeeds.
    assert error_of(acl_broker, "bob", "delete_topics", [DRAFTS], operation_timeout=30) is None
    assert DRAFTS not in topics(acl_broker)


def test_delete_group_without_delete_is_denied_and_its_offsets_remain(
        acl_broker: BrokerProcess, setup: dict[str, Any], as_user: Callable[[str], None]
        ) -> None:
    for user in ("alice", "bob"):
        assert error_of(acl_broker, user, "delete_consumer_groups", [READERS]) == GROUP_DENIED
    as_user("alice")
    refused = run_cli("group", "delete", READERS, "-b", acl_broker.bootstrap)
    assert refused.returncode == 1 and "GROUP_AUTHORIZATION_FAILED" in refused.stdout
    assert committed(acl_broker, "admin", READERS) == {**COMMITTED, (VAULT, 0): 5}
    # alice may delete the groups she has ALL on (PREFIXED alice-).
    scratch = f"alice-{uuid.uuid4().hex[:6]}"
    assert commit(acl_broker, "alice", scratch, {(LEDGER, 0): 1}) is None
    assert committed(acl_broker, "admin", scratch) == {(LEDGER, 0): 1}
    assert error_of(acl_broker, "alice", "delete_consumer_groups", [scratch]) is None
    assert committed(acl_broker, "admin", scratch) == {}


def test_delete_records_needs_delete_on_the_topic(acl_broker: BrokerProcess,
                                                 setup: dict[str, Any]) -> None:
    topic = "purgeable"
    admin = admin_client(acl_broker, "admin")
    [future] = admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=30).values()
    future.result(timeout=30)
    with logged_in("admin"):
        slog_produce(acl_broker.bootstrap, topic, [Rec(b"k", b"%d" % i) for i in range(10)])
    for future in admin.create_acls([
            acl(ResourceType.TOPIC, topic, "User:alice", AclOperation.READ),
            acl(ResourceType.TOPIC, topic, "User:bob", AclOperation.DELETE)]).values():
        future.result(timeout=30)
    # alice may read the topic (so librdkafka finds its leader), not delete from it.
    assert error_of(acl_broker, "alice", "delete_records",
                    [TopicPartition(topic, 0, 5)]) == TOPIC_DENIED
    with slog_as(acl_broker, "alice") as conn:
        refused = conn.request(ApiKey.DELETE_RECORDS, {"topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "offset": 5}]}],
            "timeout": 5000})
    [result] = refused.topics[0].partitions
    assert (result.error_code, result.low_watermark) == (ErrorCode.topic_authorization_failed,
                                                         -1)
    assert log_start(acl_broker, topic) == 0
    error, deleted = admin_call(acl_broker, "bob", "delete_records", [TopicPartition(topic, 0, 5)])
    assert error is None and deleted.low_watermark == 5
    assert log_start(acl_broker, topic) == 5


def log_start(broker: BrokerProcess, topic: str) -> int:
    with slog_as(broker, "admin") as conn:
        response = conn.request(ApiKey.LIST_OFFSETS, {
            "replica_id": -1, "isolation_level": 0, "topics": [
                {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -2}]}]})
    return int(response.topics[0].partitions[0].offset)


# -- DESCRIBE --------------------------------------------------------------------------
def test_list_offsets_needs_describe(acl_broker: BrokerProcess, setup: dict[str, Any]) -> None:
    wanted = {TopicPartition(LEDGER, 0): OffsetSpec.latest()}
    # librdkafka first asks Metadata for the leader; bob gets TOPIC_AUTHORIZATION_FAILED
    # there (as from Kafka), so it never finds one to ask ("No leaders found").
    assert error_of(acl_broker, "bob", "list_offsets", wanted) == KafkaError._NOENT
    error, allowed = admin_call(acl_broker, "alice", "list_offsets", wanted)
    assert error is None and allowed.offset == 10  # READ implies DESCRIBE
    with slog_as(acl_broker, "bob") as conn:
        response = conn.request(ApiKey.LIST_OFFSETS, {
            "replica_id": -1, "isolation_level": 0, "topics": [
                {"name": LEDGER, "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
    assert response.topics[0].partitions[0].error_code == ErrorCode.topic_authorization_failed


def test_describe_configs_needs_describe_configs(acl_broker: BrokerProcess,
                                                 setup: dict[str, Any]) -> None:
    # bob has nothing on ledger; alice's READ and WRITE do not imply DESCRIBE_CONFIGS.
    for user in ("bob", "alice"):
        assert error_of(acl_broker, user, "describe_configs",
                        [ConfigResource(ResourceType.TOPIC, LEDGER)]) == TOPIC_DENIED, user
    error, configs = admin_call(acl_broker, "admin", "describe_configs",
                                [ConfigResource(ResourceType.TOPIC, LEDGER)])
    assert error is None and "retention.ms" in configs


def test_group_offsets_and_description_need_describe_on_the_group(
        acl_broker: BrokerProcess, setup: dict[str, Any]) -> None:
    with pytest.raises(KafkaException) as denied:
        committed(acl_broker, "bob", READERS)
    assert denied.value.args[0].code() == GROUP_DENIED
    assert error_of(acl_broker, "bob", "describe_consumer_groups", [READERS]) == GROUP_DENIED
    # FindCoordinator v0 has no key type (it was read unconditionally: a crash).
    with slog_as(acl_broker, "bob") as conn:
        found = conn.request(ApiKey.FIND_COORDINATOR, {"key": READERS}, version=0)
    assert found.error_code == ErrorCode.group_authorization_failed


def test_offset_fetch_of_all_topics_hides_undescribable_ones(
        acl_broker: BrokerProcess, setup: dict[str, Any]) -> None:
    """alice may describe the group but not vault: its offsets are left out, as Kafka does."""
    assert committed(acl_broker, "alice", READERS) == COMMITTED
    with slog_as(acl_broker, "alice") as conn:
        response = conn.request(ApiKey.OFFSET_FETCH, {"group_id": READERS, "topics": None},
                                version=7)
    assert {t.name for t in response.topics} == {LEDGER}
    assert committed(acl_broker, "admin", READERS)[(VAULT, 0)] == 5


def test_metadata_names_an_undescribable_topic_as_denied(
        acl_broker: BrokerProcess, setup: dict[str, Any]) -> None:
    with slog_as(acl_broker, "alice") as conn:
        response = conn.request(ApiKey.METADATA, {"topics": [{"name": VAULT}, {"name": LEDGER}],
                                                  "allow_auto_topic_creation": False})
    errors = {t.name: t.error_code for t in response.topics}
    assert errors == {VAULT: ErrorCode.topic_authorization_failed, LEDGER: ErrorCode.none}
    assert [len(t.partitions) for t in response.topics if t.name == VAULT] == [0]


# -- CREATE ----------------------------------------------------------------------------
def test_create_topic_needs_create(acl_broker: BrokerProcess, setup: dict[str, Any],
                                   as_user: Callable[[str], None]) -> None:
    for user, name in (("alice", "alice-new"), ("bob", "not-bobs")):
        assert error_of(acl_broker, user, "create_topics", [NewTopic(name, 1, 1)],
                        operation_timeout=30) == TOPIC_DENIED, user
    as_user("alice")
    refused = run_cli("topic", "create", "alice-cli", "-b", acl_broker.bootstrap)
    assert refused.returncode == 1 and "TOPIC_AUTHORIZATION_FAILED" in refused.stdout
    # bob may create topics under his prefix.
    assert error_of(acl_broker, "bob", "create_topics", [NewTopic("bob.events", 1, 1)],
                    operation_timeout=30) is None
    existing = topics(acl_broker)
    assert "bob.events" in existing
    assert not {"alice-new", "not-bobs", "alice-cli"} & existing
