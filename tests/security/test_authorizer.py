"""The authorizer's rules, ACL filters, ACL records in the metadata image, request checks."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from slog.broker.access import CLUSTER_DENIED, GROUP_DENIED, TOPIC_DENIED, denial
from slog.broker.authorizer import AuthorizerSettings, authorize
from slog.core.acls import (
    AclBinding,
    AclError,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from slog.core.metadata import MetadataImage
from slog.core.metadata_records import InvalidRecordError, decode_record
from slog.protocol.apis import ApiKey

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY
OFF = AuthorizerSettings()


def acl(name: str, op: Operation, principal: str = "User:alice", perm: Permission = ALLOW,
        kind: ResourceType = T, pattern: PatternType = LIT, host: str = "*") -> AclBinding:
    return AclBinding(kind, name, pattern, principal, host, op, perm).validate()


def may(acls: list[AclBinding], op: Operation, name: str = "orders", kind: ResourceType = T,
        principal: str = "User:alice", settings: AuthorizerSettings = OFF,
        host: str = "10.0.0.1") -> bool:
    return authorize(acls, settings, principal, host, op, kind, name)


def test_no_acl_means_denied_unless_configured() -> None:
    assert not may([], Operation.READ)
    assert may([], Operation.READ, settings=AuthorizerSettings(frozenset(), True))
    # Once a resource has any binding, allow.everyone no longer applies to it.
    other = [acl("orders", Operation.READ, principal="User:bob")]
    assert not may(other, Operation.READ, settings=AuthorizerSettings(frozenset(), True))


def test_super_users_may_do_anything() -> None:
    supers = AuthorizerSettings(frozenset({"User:admin"}))
    deny_all = [acl("*", Operation.ALL, principal="User:*", perm=DENY)]
    assert may(deny_all, Operation.DELETE, principal="User:admin", settings=supers)


def test_allow_and_implied_describe() -> None:
    acls = [acl("orders", Operation.WRITE)]
    assert may(acls, Operation.WRITE)
    assert may(acls, Operation.DESCRIBE)  # WRITE implies DESCRIBE
    assert not may(acls, Operation.READ)
    assert not may(acls, Operation.WRITE, principal="User:bob")
    assert may([acl("orders", Operation.ALTER_CONFIGS)], Operation.DESCRIBE_CONFIGS)
    assert not may([acl("orders", Operation.DESCRIBE)], Operation.READ)


def test_deny_wins_over_allow() -> None:
    acls = [acl("orders", Operation.ALL), acl("orders", Operation.WRITE, perm=DENY)]
    assert may(acls, Operation.READ)
    assert not may(acls, Operation.WRITE)
    wildcard_deny = [acl("orders", Operation.READ),
                     acl("*", Operation.ALL, principal="User:*", perm=DENY)]
    assert not may(wildcard_deny, Operation.READ)


def test_wildcards_prefixes_and_hosts() -> None:
    everyone = [acl("*", Operation.READ, principal="User:*")]
    assert may(everyone, Operation.READ, name="anything", principal="User:zed")
    prefixed = [acl("team-a.", Operation.READ, pattern=PRE)]
    assert may(prefixed, Operation.READ, name="team-a.orders")
    assert not may(prefixed, Operation.READ, name="team-b.orders")
    assert not may(prefixed, Operation.READ, name="team-a")
    pinned = [acl("orders", Operation.READ, host="10.0.0.1")]
    assert may(pinned, Operation.READ, host="10.0.0.1")
    assert not may(pinned, Operation.READ, host="10.0.0.2")


def test_resource_types_do_not_mix() -> None:
    acls = [acl("orders", Operation.READ, kind=G)]
    assert may(acls, Operation.READ, kind=G)
    assert not may(acls, Operation.READ, kind=T)


@pytest.mark.parametrize("binding", [
    AclBinding(T, "t", PatternType.MATCH, "User:a", "*", Operation.READ, ALLOW),
    AclBinding(T, "t", LIT, "alice", "*", Operation.READ, ALLOW),
    AclBinding(T, "t", LIT, "User:a", "*", Operation.ANY, ALLOW),
    AclBinding(C, "other", LIT, "User:a", "*", Operation.ALTER, ALLOW),
    AclBinding(ResourceType.ANY, "t", LIT, "User:a", "*", Operation.READ, ALLOW),
])
def test_invalid_bindings(binding: AclBinding) -> None:
    with pytest.raises(AclError):
        binding.validate()


def test_filters() -> None:
    a = acl("team-a.", Operation.READ, pattern=PRE)
    b = acl("orders", Operation.WRITE, principal="User:bob", perm=DENY)
    assert AclFilter().matches(a) and AclFilter().matches(b)
    assert AclFilter(principal="User:bob").matches(b) and not AclFilter(
        principal="User:bob").matches(a)
    assert AclFilter(T, "team-a.x", PatternType.MATCH).matches(a)
    assert not AclFilter(T, "team-a.x", PatternType.ANY).matches(a)
    assert AclFilter(T, "team-a.", PRE).matches(a)
    assert AclFilter(operation=Operation.WRITE, permission=DENY).matches(b)
    assert not AclFilter(G).matches(a)


def test_acl_records_replay_into_the_image() -> None:
    binding = acl("orders", Operation.READ)
    image = MetadataImage()
    image.apply(decode_record({"type": "acl", **binding.to_record()}), 0)
    image.apply(decode_record({"type": "acl", **binding.to_record()}), 1)
    assert image.acls == {binding}
    with pytest.raises(InvalidRecordError):  # unknown: the log reader skips it
        decode_record({"type": "acl", **binding.to_record(), "operation": 99})
    assert image.acls == {binding}
    image.apply(decode_record({"type": "remove_acl", **binding.to_record()}), 3)
    assert image.acls == set()


def _request(**fields: object) -> SimpleNamespace:
    return SimpleNamespace(**fields)


def test_request_checks_use_kafka_error_codes() -> None:
    allowed = {(Operation.WRITE, T, "orders"), (Operation.READ, G, "g1")}

    def check(op: Operation, kind: ResourceType, name: str) -> bool:
        return (op, kind, name) in allowed

    produce = _request(topic_data=[_request(name="orders")])
    assert denial(ApiKey.PRODUCE, produce, check, lambda: False) is None
    produce.topic_data.append(_request(name="payments"))
    assert denial(ApiKey.PRODUCE, produce, check, lambda: False) == TOPIC_DENIED
    join = _request(group_id="g2")
    assert denial(ApiKey.JOIN_GROUP, join, check, lambda: False) == GROUP_DENIED
    assert denial(ApiKey.HEARTBEAT, _request(group_id="g1"), check, lambda: False) is None
    follower_fetch = _request(replica_id=2, topics=[])
    assert denial(ApiKey.FETCH, follower_fetch, check, lambda: False) == CLUSTER_DENIED
    assert denial(ApiKey.INIT_PRODUCER_ID, _request(), check, lambda: True) is None
    assert denial(ApiKey.INIT_PRODUCER_ID, _request(), check, lambda: False) == CLUSTER_DENIED
    create = _request(topics=[_request(name="new")])
    assert denial(ApiKey.CREATE_TOPICS, create, check, lambda: False) == TOPIC_DENIED
    allowed.add((Operation.CREATE, C, "kafka-cluster"))
    assert denial(ApiKey.CREATE_TOPICS, create, check, lambda: False) is None


def test_topics_named_by_id_are_checked_under_their_names() -> None:
    """Produce v13 and Fetch v13+ name topics by id: the check is on the topic's name;
    an id no topic has is left to the handler (UNKNOWN_TOPIC_ID)."""
    allowed = {(Operation.WRITE, T, "orders"), (Operation.READ, T, "orders")}

    def check(op: Operation, kind: ResourceType, name: str) -> bool:
        return (op, kind, name) in allowed

    names = {"id-orders": "orders", "id-payments": "payments"}
    produce = _request(topic_data=[_request(topic_id="id-orders")])
    assert denial(ApiKey.PRODUCE, produce, check, lambda: False, names.get) is None
    produce.topic_data.append(_request(topic_id="id-nowhere"))
    assert denial(ApiKey.PRODUCE, produce, check, lambda: False, names.get) is None
    produce.topic_data.append(_request(topic_id="id-payments"))
    assert denial(ApiKey.PRODUCE, produce, check, lambda: False, names.get) == TOPIC_DENIED
    fetch = _request(replica_state=_request(replica_id=-1),
                     topics=[_request(topic_id="id-payments")])
    assert denial(ApiKey.FETCH, fetch, check, lambda: False, names.get) == TOPIC_DENIED
    # OffsetCommit v10 / OffsetFetch v10 (KIP-848) too, after the group's own check.
    allowed |= {(Operation.READ, G, "g"), (Operation.DESCRIBE, T, "orders"),
                (Operation.DESCRIBE, G, "g")}
    commit = _request(group_id="g", topics=[_request(topic_id="id-orders")])
    assert denial(ApiKey.OFFSET_COMMIT, commit, check, lambda: False, names.get) is None
    commit.topics.append(_request(topic_id="id-payments"))
    assert denial(ApiKey.OFFSET_COMMIT, commit, check, lambda: False, names.get) == TOPIC_DENIED
    offsets = _request(groups=[_request(group_id="g", topics=[_request(topic_id="id-orders")])])
    assert denial(ApiKey.OFFSET_FETCH, offsets, check, lambda: False, names.get) is None
    offsets.groups[0].topics.append(_request(topic_id="id-payments"))
    assert denial(ApiKey.OFFSET_FETCH, offsets, check, lambda: False, names.get) == TOPIC_DENIED


def test_describe_log_dirs_needs_describe_on_the_cluster() -> None:
    allowed: set[tuple[Operation, ResourceType, str]] = set()

    def check(op: Operation, kind: ResourceType, name: str) -> bool:
        return (op, kind, name) in allowed

    request = _request(topics=None)
    assert denial(ApiKey.DESCRIBE_LOG_DIRS, request, check, lambda: False) == CLUSTER_DENIED
    allowed.add((Operation.DESCRIBE, C, "kafka-cluster"))
    assert denial(ApiKey.DESCRIBE_LOG_DIRS, request, check, lambda: False) is None
