"""Coordinator failover in a three-broker cluster: the new leader of the group's
__consumer_offsets partition loads the group and its offsets, members carry on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from slog.client import GroupAdmin, TopicPartition
from slog.client.cluster import ClusterClient
from slog.groups.placement import OFFSETS_TOPIC, partition_for
from tests.cluster.conftest import FAST, Cluster, wait_until
from tests.groups.helpers import FAST as GROUP_FAST
from tests.groups.helpers import poll_all, unique

OFFSETS_PARTITIONS = 3


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    nodes = Cluster(tmp_path / "data", 3, {**FAST, "group.min.session.timeout.ms": "100",
                                           "offsets.topic.num.partitions":
                                               str(OFFSETS_PARTITIONS)})
    try:
        yield nodes.start()
    finally:
        nodes.close()
    assert "Traceback" not in "".join(b.log_text for b in nodes.brokers.values())


def test_coordinator_failover(cluster: Cluster) -> None:
    # The first FindCoordinator goes to a broker that is not the controller: it
    # asks the controller to create the offsets topic.
    follower = next(b for b in cluster.brokers if b != cluster.controller())
    group = unique("failover")
    with ClusterClient(cluster.brokers[follower].bootstrap) as client:
        # RF = min(3, live brokers) as that broker sees them: let it see all three.
        wait_until(lambda: len(client.refresh_metadata([]).brokers) == 3,
                   what="the follower to see every broker")
        GroupAdmin(client).coordinators([group])
    assert len(cluster.state(OFFSETS_TOPIC, 0).replicas) == 3
    cluster.wait_in_sync(OFFSETS_TOPIC)

    admin = cluster.admin()
    from slog.client import NewTopic

    admin.create_topics([NewTopic("orders", 2, 3)])
    cluster.wait_in_sync("orders")
    producer = cluster.producer(acks="all")
    for i in range(20):
        producer.send("orders", b"%d" % i, partition=i % 2)
    producer.flush()

    options = {**GROUP_FAST, "session_timeout_ms": 15_000, "retry_backoff_ms": 20}
    members = [cluster.consumer(group_id=group, client_id=f"m{i}", **options) for i in range(2)]
    got: dict[int, list[object]] = {}
    for member in members:
        member.subscribe(["orders"])
    wait_until(lambda: poll_all(members, got) or sum(len(v) for v in got.values()) == 20,
               what="both members to read everything")
    wait_until(lambda: poll_all(members) or all(m.assignment() for m in members),
               what="both members to hold a partition")
    for member in members:
        member.commit()
    generation = members[0].group_metadata()
    expected = {TopicPartition("orders", 0): 10, TopicPartition("orders", 1): 10}

    home = partition_for(group, OFFSETS_PARTITIONS)
    old = cluster.leader(OFFSETS_TOPIC, home)
    cluster.step(f"killing broker {old}, coordinator of {group}")
    cluster.kill(old)
    new = cluster.wait_leader(OFFSETS_TOPIC, home, not_in=[old])
    cluster.step(f"broker {new} leads {OFFSETS_TOPIC}-{home}")

    def loaded() -> bool:
        with ClusterClient(cluster.bootstrap) as client:
            try:
                found = GroupAdmin(client).list_offsets([group])[group]
            except Exception:  # the dead broker, or the new one still loading
                return False
        return {tp: v.offset for tp, v in found.items() if v is not None} == expected

    wait_until(loaded, what="the new coordinator to serve the offsets")
    with ClusterClient(cluster.bootstrap) as client:
        described = GroupAdmin(client).describe_groups([group])[group]
    assert described.coordinator.node_id == new
    assert {m.member_id for m in described.members} == {m.group_metadata().member_id
                                                        for m in members}
    # The members keep their generation and go on committing to the new coordinator.
    for i in range(4):
        producer.send("orders", b"more-%d" % i, partition=i % 2)
    producer.flush()
    wait_until(lambda: poll_all(members, got) or sum(len(v) for v in got.values()) == 24,
               what="the new records")
    for member in members:
        member.commit()
    assert members[0].group_metadata() == generation
    expected = {tp: 12 for tp in expected}
    wait_until(loaded, what="the new commits")
