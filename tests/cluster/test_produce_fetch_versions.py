"""Produce v10-v13 and Fetch v13-v17 against real brokers: topic ids instead of names
(KIP-516), KIP-951's leader hints on NOT_LEADER_OR_FOLLOWER, and the errors for ids no
topic has; the records written through one version read back through another."""

from __future__ import annotations

import uuid

import pytest

from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from tests.cluster.conftest import Cluster, produce_body, wait_until

pytestmark = pytest.mark.brokers(2)


@pytest.fixture
def cluster(shared_cluster: Cluster) -> Cluster:
    """The module's cluster: these tests break no broker and create their own topics."""
    return shared_cluster


def _topic_id(cluster: Cluster, topic: str) -> uuid.UUID:
    return uuid.UUID(cluster.image().topics[topic].topic_id)


def _by_id(body: dict, topic_id: uuid.UUID | None) -> dict:
    """A Produce body of ``produce_body`` naming its topic by id (v13)."""
    [topic] = body["topic_data"]
    return {**body, "topic_data": [{"topic_id": topic_id,
                                    "partition_data": topic["partition_data"]}]}


def test_produce_v10_to_v13_with_leader_hints_and_topic_ids(cluster: Cluster) -> None:
    cluster.create_topic("pv", 1, 1, assignment={0: [1]})
    topic_id = _topic_id(cluster, "pv")
    epoch = cluster.state("pv").leader_epoch
    with cluster.connect(1) as leader, cluster.connect(2) as other:
        for version in (9, 10, 11, 12):
            answer = leader.request(ApiKey.PRODUCE, produce_body("pv", 0, [b"a"], -1),
                                    version=version)
            [p] = answer.responses[0].partition_responses
            assert p.error_code == ErrorCode.none
            wrong = other.request(ApiKey.PRODUCE, produce_body("pv", 0, [b"x"], 1),
                                  version=version)
            [p] = wrong.responses[0].partition_responses
            assert p.error_code == ErrorCode.not_leader_or_follower
            if version >= 10:  # KIP-951: where to go, without asking Metadata
                assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (1, epoch)
                [node] = wrong.node_endpoints
                assert (node.node_id, node.port) == (1, cluster.brokers[1].port)
        answer = leader.request(ApiKey.PRODUCE, _by_id(produce_body("pv", 0, [b"b"], -1),
                                                      topic_id), version=13)
        [topic] = answer.responses
        assert topic.topic_id == topic_id
        assert topic.partition_responses[0].error_code == ErrorCode.none
        assert topic.partition_responses[0].base_offset == 4
        unknown = leader.request(ApiKey.PRODUCE, _by_id(produce_body("pv", 0, [b"c"], 1),
                                                       uuid.uuid4()), version=13)
        assert unknown.responses[0].partition_responses[0].error_code == \
            ErrorCode.unknown_topic_id
        wrong = other.request(ApiKey.PRODUCE, _by_id(produce_body("pv", 0, [b"x"], 1),
                                                    topic_id), version=13)
        [p] = wrong.responses[0].partition_responses
        assert p.error_code == ErrorCode.not_leader_or_follower and p.current_leader.leader_id == 1
    assert [v for _, v in sorted(cluster.replica_values(1, "pv", 0).items())] == \
        [b"a", b"a", b"a", b"a", b"b"]


def _fetch_body(version: int, topic: str | uuid.UUID | None, offset: int = 0,
                session: tuple[int, int] = (0, -1),
                forgotten: list[uuid.UUID | str] | None = None) -> dict:
    key = {"topic_id": topic} if version >= 13 else {"topic": topic}
    partitions = [] if topic is None else [{
        "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
        "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20,
        "replica_directory_id": None}]
    return {"replica_id": -1, "replica_state": {"replica_id": -1, "replica_epoch": -1},
            "max_wait": 200, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": session[0], "session_epoch": session[1],
            "topics": [] if topic is None else [{**key, "partitions": partitions}],
            "forgotten_topics_data": [
                {("topic_id" if version >= 13 else "topic"): f, "partitions": [0]}
                for f in forgotten or []],
            "rack_id": ""}


def _values(response) -> list[bytes]:
    from slog.core.records import decode_records

    out = []
    for topic in response.responses:
        for p in topic.partitions:
            if p.records:
                _, records = decode_records(p.records)
                out += [r.value for r in records]
    return out


def test_fetch_v13_to_v17_by_topic_id_in_sessions(cluster: Cluster) -> None:
    cluster.create_topic("fv", 1, 1, assignment={0: [1]})
    cluster.append_to(1, "fv", 0, [b"r0", b"r1", b"r2"])
    topic_id = _topic_id(cluster, "fv")
    with cluster.connect(1) as leader:
        for version in range(13, 18):
            full = leader.request(ApiKey.FETCH, _fetch_body(version, topic_id), version=version)
            assert full.error_code == ErrorCode.none
            [topic] = full.responses
            assert topic.topic_id == topic_id and _values(full) == [b"r0", b"r1", b"r2"]
        # A session keyed by id: opened, then incremental (names only what moved).
        opened = leader.request(ApiKey.FETCH, _fetch_body(17, topic_id, 0, (0, 0)), version=17)
        session = opened.session_id
        assert session != 0 and _values(opened) == [b"r0", b"r1", b"r2"]
        cluster.append_to(1, "fv", 0, [b"r3"])
        more = leader.request(ApiKey.FETCH, _fetch_body(17, topic_id, 3, (session, 1)),
                              version=17)
        assert more.error_code == ErrorCode.none and _values(more) == [b"r3"]
        # The session is by id: the same session asked by name is refused.
        mixed = leader.request(ApiKey.FETCH, _fetch_body(12, "fv", 4, (session, 2)), version=12)
        assert mixed.error_code == ErrorCode.fetch_session_topic_id_error
        # An id no topic has: UNKNOWN_TOPIC_ID for its partition, in and out of sessions.
        stranger = uuid.uuid4()
        for session_meta in ((0, -1), (0, 0)):
            unknown = leader.request(ApiKey.FETCH, _fetch_body(15, stranger, 0, session_meta),
                                     version=15)
            [topic] = unknown.responses
            assert topic.topic_id == stranger
            assert topic.partitions[0].error_code == ErrorCode.unknown_topic_id


def test_fetch_v16_names_the_leader_to_a_misdirected_consumer(cluster: Cluster) -> None:
    cluster.create_topic("fl", 1, 1, assignment={0: [1]})
    topic_id = _topic_id(cluster, "fl")
    epoch = cluster.state("fl").leader_epoch
    with cluster.connect(2) as other:
        for version in (15, 16, 17):
            answer = other.request(ApiKey.FETCH, _fetch_body(version, topic_id),
                                   version=version)
            [p] = answer.responses[0].partitions
            assert p.error_code == ErrorCode.not_leader_or_follower
            if version >= 16:
                assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (1, epoch)
                [node] = answer.node_endpoints
                assert (node.node_id, node.port) == (1, cluster.brokers[1].port)


def test_a_session_by_id_does_not_follow_a_recreated_topic(cluster: Cluster) -> None:
    """Deleted and created again under the same name, the topic has a new id: the old
    session's id now names nothing (UNKNOWN_TOPIC_ID), and the new id reads the new log."""
    from slog.client.admin import Admin

    cluster.create_topic("fr", 1, 1, assignment={0: [1]})
    cluster.append_to(1, "fr", 0, [b"old"])
    old_id = _topic_id(cluster, "fr")
    with cluster.connect(1) as leader:
        opened = leader.request(ApiKey.FETCH, _fetch_body(16, old_id, 0, (0, 0)), version=16)
        session = opened.session_id
        assert _values(opened) == [b"old"]
        with Admin(cluster.bootstrap) as admin:
            admin.delete_topics(["fr"])
        wait_until(lambda: "fr" not in cluster.image().topics, 30, "the deletion")
        cluster.create_topic("fr", 1, 1, assignment={0: [1]})
        cluster.append_to(1, "fr", 0, [b"new"])
        new_id = _topic_id(cluster, "fr")
        assert new_id != old_id
        stale = leader.request(ApiKey.FETCH, _fetch_body(16, old_id, 1, (session, 1)),
                               version=16)
        assert stale.error_code == ErrorCode.none
        [topic] = stale.responses
        assert topic.topic_id == old_id
        assert topic.partitions[0].error_code == ErrorCode.unknown_topic_id
        # The client forgets the old id and asks for the new one in the same session.
        moved = leader.request(ApiKey.FETCH, _fetch_body(16, new_id, 0, (session, 2),
                                                         forgotten=[old_id]), version=16)
        assert moved.error_code == ErrorCode.none and _values(moved) == [b"new"]
