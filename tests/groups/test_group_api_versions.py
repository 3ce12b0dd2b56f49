"""The group APIs' Kafka 4.1 versions on a real broker, request by request.

ListGroups v5 (type filter and group_type), DescribeGroups v6 (GROUP_ID_NOT_FOUND
with a message), OffsetCommit v9 and OffsetFetch v9 (KIP-848's fields, which a classic group
treats as before; v10, topics by id, is newer than Kafka 4.1 and refused). slog has only classic
groups, so "consumer" and "share" filters match nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from slog.client import Consumer, TopicPartition
from slog.client.connection import BrokerConnection
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from tests.brokers import BrokerProcess
from tests.groups.helpers import group_consumer, make_topic, unique, wait_for


@pytest.fixture
def conn(broker: BrokerProcess) -> Iterator[BrokerConnection]:
    host, port = broker.bootstrap.rsplit(":", 1)
    with BrokerConnection(host, int(port)).connect() as connection:
        yield connection


@pytest.fixture
def member(broker: BrokerProcess) -> Iterator[tuple[Consumer, str]]:
    """A stable one-member classic group on a one-partition topic: (consumer, topic)."""
    topic = make_topic(broker.bootstrap, 1)
    consumer = group_consumer(broker.bootstrap, unique("ver"), enable_auto_commit=False)
    consumer.subscribe([topic])
    wait_for(lambda: bool(consumer.assignment()), step=lambda: consumer.poll(50),
             what="the assignment")
    try:
        yield consumer, topic
    finally:
        consumer.close()


def _topic_id(conn: BrokerConnection, topic: str) -> uuid.UUID:
    response = conn.request(ApiKey.METADATA, {"topics": [{"name": topic}]}, version=12)
    return response.topics[0].topic_id  # type: ignore[no-any-return]


def _commit_body(group: str, generation: int, member_id: str, topic: dict[str, Any],
                 offset: int) -> dict[str, Any]:
    return {"group_id": group, "generation_id_or_member_epoch": generation,
            "member_id": member_id, "topics": [{**topic, "partitions": [
                {"partition_index": 0, "committed_offset": offset,
                 "committed_metadata": "m"}]}]}


def test_list_groups_v5_filters_by_type_and_reports_it(
        conn: BrokerConnection, member: tuple[Consumer, str]) -> None:
    group = member[0].group_metadata().group_id

    def listed(version: int = 5, **filters: list[str]) -> dict[str, Any]:
        response = conn.request(ApiKey.LIST_GROUPS, filters, version=version)
        assert response.error_code == ErrorCode.none
        return {g.group_id: g for g in response.groups}

    everything = listed()
    assert (everything[group].group_type, everything[group].protocol_type,
            everything[group].group_state) == ("classic", "consumer", "Stable")
    assert group in listed(types_filter=["CLASSIC"])  # any case, as Kafka
    assert group in listed(types_filter=["consumer", "classic"])
    for other in ("consumer", "share", "no-such-type"):
        assert listed(types_filter=[other]) == {}
    assert group in listed(states_filter=["stable"], types_filter=["classic"])
    assert group not in listed(states_filter=["empty"], types_filter=["classic"])
    assert group in listed(version=4, states_filter=["STABLE"])  # v4's filter still works


def test_describe_groups_v6_says_an_unknown_group_is_not_found(
        conn: BrokerConnection, member: tuple[Consumer, str]) -> None:
    group = member[0].group_metadata().group_id
    missing = unique("missing")
    response = conn.request(ApiKey.DESCRIBE_GROUPS, {"groups": [group, missing]}, version=6)
    found, absent = response.groups
    assert (found.error_code, found.error_message, found.group_state) == \
        (ErrorCode.none, None, "Stable")
    assert len(found.members) == 1
    assert (absent.group_id, absent.error_code, absent.group_state) == \
        (missing, ErrorCode.group_id_not_found, "")
    assert absent.error_message and missing in absent.error_message
    older = conn.request(ApiKey.DESCRIBE_GROUPS, {"groups": [missing]}, version=5).groups[0]
    assert (older.error_code, older.group_state) == (ErrorCode.none, "Dead")


def test_offset_commit_v9_is_by_generation_for_a_classic_group(
        conn: BrokerConnection, member: tuple[Consumer, str]) -> None:
    consumer, topic = member
    meta = consumer.group_metadata()
    by_name = {"name": topic}
    ok = conn.request(ApiKey.OFFSET_COMMIT, _commit_body(
        meta.group_id, meta.generation_id, meta.member_id, by_name, 7), version=9)
    assert ok.topics[0].partitions[0].error_code == ErrorCode.none
    stale = conn.request(ApiKey.OFFSET_COMMIT, _commit_body(
        meta.group_id, meta.generation_id + 1, meta.member_id, by_name, 8), version=9)
    assert stale.topics[0].partitions[0].error_code == ErrorCode.illegal_generation
    # A member's commit to a group that does not exist: v9 names the problem.
    missing = unique("missing")
    for version, error in ((8, ErrorCode.illegal_generation), (9, ErrorCode.group_id_not_found)):
        response = conn.request(ApiKey.OFFSET_COMMIT, _commit_body(
            missing, 3, "someone", by_name, 1), version=version)
        assert response.topics[0].partitions[0].error_code == error
    # Outside group management (generation -1) a commit still creates a simple group.
    simple = conn.request(ApiKey.OFFSET_COMMIT, _commit_body(missing, -1, "", by_name, 4),
                          version=9)
    assert simple.topics[0].partitions[0].error_code == ErrorCode.none
    assert consumer.committed([TopicPartition(topic, 0)])[TopicPartition(topic, 0)] \
        .offset == 7  # type: ignore[union-attr]


def test_offset_fetch_v9_ignores_member_fields_for_a_classic_group(
        conn: BrokerConnection, member: tuple[Consumer, str]) -> None:
    consumer, topic = member
    meta = consumer.group_metadata()
    consumer.commit({TopicPartition(topic, 0): 5})
    for member_id, epoch in ((None, -1), (meta.member_id, meta.generation_id),
                             ("stranger", 42)):
        response = conn.request(ApiKey.OFFSET_FETCH, {"groups": [
            {"group_id": meta.group_id, "member_id": member_id, "member_epoch": epoch,
             "topics": [{"name": topic, "partition_indexes": [0]}]}]}, version=9)
        [group] = response.groups
        assert group.error_code == ErrorCode.none
        [partition] = group.topics[0].partitions
        assert (partition.committed_offset, partition.error_code) == (5, ErrorCode.none)


def test_v10_is_newer_than_kafka_4_1_and_refused(broker: BrokerProcess,
                                                 member: tuple[Consumer, str]) -> None:
    """OffsetCommit and OffsetFetch v10 (topics by id) came after Kafka 4.1: not offered,
    and a request at v10 is refused as Kafka refuses an unsupported version, by closing
    the connection; nothing is committed."""
    consumer, topic = member
    meta = consumer.group_metadata()
    host, port = broker.bootstrap.rsplit(":", 1)
    for api_key in (ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH):
        with BrokerConnection(host, int(port)).connect() as conn:
            body = _commit_body(meta.group_id, meta.generation_id, meta.member_id,
                                {"topic_id": _topic_id(conn, topic)}, 11) \
                if api_key == ApiKey.OFFSET_COMMIT else {"groups": [
                    {"group_id": meta.group_id, "topics": None}]}
            with pytest.raises(ConnectionError):
                conn.request(api_key, body, version=10)
    committed = consumer.committed([TopicPartition(topic, 0)])[TopicPartition(topic, 0)]
    assert committed is None or committed.offset != 11
