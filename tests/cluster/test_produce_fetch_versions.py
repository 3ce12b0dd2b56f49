"""Produce v10-v13 and Fetch v13-v17 against real brokers: topic ids instead of names
(KIP-516), KIP-951's leader hints on NOT_LEADER_OR_FOLLOWER, and the errors for ids no
topic has; the records written through one version read back through another."""

from __future__ import annotations

import uuid

import pytest

from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from tests.cluster.conftest import Cluster, produce_body

pytestmark = pytest.mark.brokers(2)


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
