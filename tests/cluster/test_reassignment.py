"""Partition reassignment and leader rebalancing on a real cluster (see conftest).

Moving every replica of a topic under acks=all load loses nothing, and the old
broker's copies disappear; a broker that comes back gets its preferred
leaderships back automatically.
"""

from __future__ import annotations

import pytest

from slog.client import TopicPartition
from tests.cluster.conftest import Cluster, wait_until
from tests.cluster.test_failover import Load, check_acknowledged, check_identical_replicas

TARGETS = {0: [2, 3, 4], 1: [3, 4, 2], 2: [4, 2, 3]}


@pytest.mark.brokers(4)
def test_move_every_replica_off_a_broker_under_load(cluster: Cluster) -> None:
    topic, partitions = "moving", 3
    cluster.create_topic(topic, assignment={0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]},
                         configs={"min.insync.replicas": "2"})
    admin = cluster.admin()
    with Load(cluster, topic, partitions) as load:
        load.wait_progress()
        admin.alter_partition_reassignments(
            {TopicPartition(topic, p): replicas for p, replicas in TARGETS.items()})
        assert set(admin.list_partition_reassignments()) <= \
            {TopicPartition(topic, p) for p in TARGETS}
        wait_until(lambda: not admin.list_partition_reassignments(), 30,
                   "the reassignment to complete")
        load.wait_progress()  # still producing against the new replicas
    assert not load.failed, f"{len(load.failed)} records failed, first {load.failed[:3]}"
    assert len(load.acked) == load.sent
    for p, replicas in TARGETS.items():
        state = cluster.state(topic, p)
        assert (list(state.replicas), state.adding, state.removing) == (replicas, (), ())
        assert set(state.isr) == {2, 3, 4} and state.leader in {2, 3, 4}
    copies = [cluster.layout.partition_dir(b, topic, p) for b in (1, 4) for p in TARGETS]
    wait_until(lambda: not any(d.exists() for d in copies[:partitions]), 10,
               f"broker 1 to delete its copies of {topic}")
    assert all(d.exists() for d in copies[partitions:])
    marks = check_acknowledged(cluster, topic, range(partitions), load.acked)
    assert sum(marks.values()) == len(load.acked)
    check_identical_replicas(cluster, topic, marks)


@pytest.mark.broker_config({"auto.leader.rebalance.enable": "true",
                            "leader.imbalance.check.interval.seconds": "1"})
def test_auto_rebalance_gives_a_returning_broker_its_leaderships_back(cluster: Cluster
                                                                      ) -> None:
    topic = "balanced"
    assignment = {0: [1, 2, 3], 1: [1, 3, 2], 2: [2, 3, 1]}
    cluster.create_topic(topic, assignment=assignment)
    cluster.stop(1)  # controlled shutdown: its leaderships move to 2 and 3
    for p in (0, 1):
        cluster.wait_leader(topic, p, not_in={1})
    cluster.restart(1)
    cluster.wait_registered([1])
    wait_until(lambda: all(cluster.leader(topic, p) == replicas[0]
                           for p, replicas in assignment.items()), 15,
               "the preferred leaders to lead again")
    assert "leader imbalance: preferred election" in cluster.all_logs()
