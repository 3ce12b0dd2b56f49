"""Every in-sync replica dies: the partition stays offline unless unclean election is allowed.

RF=2 on brokers that are not the controller: the follower dies first (the
ISR shrinks to the leader), the leader takes more acks=all records, then it
dies too. The old follower comes back out of sync. With unclean election off
the partition stays offline and produce fails within its timeout; turning it
on (a topic config or the cluster-wide broker default, through the CLI) or
asking for it (ElectLeaders, unclean) makes the out-of-sync replica lead, and
the loss is logged. One cluster takes three such partitions offline at once, one
per way of allowing it, and allows them one at a time: each way elects its own
partition only.
"""

from __future__ import annotations

import time

import pytest

from slog.client.errors import KafkaError
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from tests.brokers import run_cli
from tests.cluster.conftest import Cluster, check_identical_replicas, wait_until

ELECTION_UNCLEAN = 1


def _elect_unclean(cluster: Cluster, topic: str, partition: int) -> int:
    """ElectLeaders v2, election_type=1 (unclean), sent to the controller."""
    with cluster.connect(cluster.controller()) as conn:
        response = conn.request(ApiKey.ELECT_LEADERS, {
            "election_type": ELECTION_UNCLEAN, "timeout_ms": 5_000,
            "topic_partitions": [{"topic": topic, "partitions": [partition]}]}, version=2)
    assert response.error_code == 0
    [result] = [p for t in response.replica_election_results for p in t.partition_result]
    return int(result.error_code)


# one offline partition per way of allowing unclean election, in the order they are tried;
# the cluster default comes last, as it reaches every topic without its own setting
HOWS = ["topic-config", "elect-leaders", "cluster-default"]


def _offline(cluster: Cluster, topic: str) -> bool:
    state = cluster.state(topic)
    return state.leader == -1


def _unclean_logged(cluster: Cluster, topic: str) -> bool:
    return any(f"{topic}-0 leader" in line and "unclean" in line
               for line in cluster.log_lines(cluster.controller(), "slog.controller")
               .splitlines())


def _allow(cluster: Cluster, how: str, topic: str) -> None:
    if how == "topic-config":
        result = run_cli("topic", "alter", topic, "-c", "unclean.leader.election.enable=true",
                         "--bootstrap", cluster.bootstrap)
        assert result.returncode == 0, result.stderr
    elif how == "cluster-default":
        # A dynamic broker default, which the controller applies to a topic without its own.
        result = run_cli("config", "alter", "--broker-default",
                         "--set", "unclean.leader.election.enable=true",
                         "--bootstrap", cluster.bootstrap)
        assert result.returncode == 0, result.stderr
    else:
        assert _elect_unclean(cluster, topic, 0) == 0


def test_unclean_election_only_when_asked(cluster: Cluster) -> None:
    topics = {how: f"offline-by-{how}" for how in HOWS}
    a, b = sorted(x for x in cluster.brokers if x != cluster.controller())
    for topic in topics.values():
        cluster.create_topic(topic, assignment={0: [a, b]},
                             configs={"min.insync.replicas": "1"})
        for i in range(5):
            cluster.append_to(a, topic, 0, [f"both-{i}".encode()], acks=-1)
    cluster.kill(b)
    for topic in topics.values():
        cluster.wait_isr(topic, 0, [a], timeout_s=10)
        for i in range(5):  # acknowledged by the ISR [a] alone
            cluster.append_to(a, topic, 0, [f"only-a-{i}".encode()], acks=-1)
    cluster.kill(a)
    cluster.restart(b)
    cluster.wait_registered([b])
    # b is alive but out of sync: with unclean election off nobody may lead.
    for topic in topics.values():
        state = cluster.state(topic)
        assert state.leader == -1 and state.isr == (a,), state
        assert cluster.produce_to(b, topic, 0, [b"nobody leads"], acks=-1) == \
            int(ErrorCode.not_leader_or_follower)
    assert "unclean" not in cluster.log_lines(cluster.controller(), "slog.controller")
    first = topics[HOWS[0]]
    with cluster.producer(delivery_timeout_ms=2_000, request_timeout_ms=1_000,
                          max_block_ms=2_000) as producer:
        started = time.monotonic()
        with pytest.raises(KafkaError):
            producer.send(first, b"offline", partition=0).result(timeout=10)
        assert time.monotonic() - started < 6, "produce to an offline partition hung"
    meta = cluster.admin().cluster.refresh_metadata(list(topics.values()))
    for topic in topics.values():
        assert meta.topics[topic].partitions[0].error_code == \
            int(ErrorCode.leader_not_available)

    for done, how in enumerate(HOWS):
        topic = topics[how]
        _allow(cluster, how, topic)
        assert cluster.wait_leader(topic, timeout_s=10) == b, how
        assert cluster.state(topic).isr == (b,)
        assert _unclean_logged(cluster, topic), how
        # the others not yet allowed stay offline
        for later in HOWS[done + 1:]:
            assert _offline(cluster, topics[later]), (how, later)
            assert not _unclean_logged(cluster, topics[later]), (how, later)

    # b leads with what it had: the five records only a had are gone.
    for topic in topics.values():
        wait_until(lambda t=topic: cluster.high_watermark(t) == 5, 10,
                   f"b's HW of {topic} to be its LEO, 5")
        values = [r.value for r in cluster.read_all(topic, 0, 5)]
        assert values == [f"both-{i}".encode() for i in range(5)]
        for i in range(3):
            cluster.append_to(b, topic, 0, [f"after-{i}".encode()], acks=-1)
    # a comes back, truncates its five lost records (and says so), and follows b.
    cluster.restart(a)
    for topic in topics.values():
        cluster.wait_in_sync(topic)
        assert f"{topic}-0: truncating from 10 to 5" in cluster.log_text(a)
        values = [r.value for r in cluster.read_all(topic, 0, 8)]
        assert values[5:] == [f"after-{i}".encode() for i in range(3)]
    for topic in topics.values():  # the first call stops the cluster, cleanly
        check_identical_replicas(cluster, topic, {0: 8})
