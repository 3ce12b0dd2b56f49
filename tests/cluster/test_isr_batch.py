"""AlterPartition carries many partitions: the controller decides each on its own and
writes the accepted ones together; a follower that stops fetching leaves the ISR of
every partition it follows and comes back when it fetches again."""

from __future__ import annotations

import uuid

import pytest

from slog.core.metadata import PartitionState
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from tests.cluster.conftest import Cluster, wait_until


def entry(state: PartitionState, isr: list[int], *, partition_epoch: int | None = None
          ) -> dict[str, object]:
    return {"partition_index": state.partition, "leader_epoch": state.leader_epoch,
            "new_isr": isr, "leader_recovery_state": 0,
            "partition_epoch": state.partition_epoch if partition_epoch is None
            else partition_epoch}


def test_one_alter_partition_request_decides_each_partition(cluster: Cluster) -> None:
    topic = "batched"
    cluster.create_topic(topic, 6, 3)
    image = cluster.image()
    topic_id = image.topics[topic].topic_id
    leader = cluster.leader(topic, 0)
    led = [cluster.state(topic, p) for p in range(6) if cluster.leader(topic, p) == leader]
    assert len(led) >= 2, "the placement gives each broker two leaderships of six"
    shrink, stale = led[0], led[1]
    dropped = next(r for r in shrink.isr if r != leader)
    kept = [r for r in shrink.isr if r != dropped]
    connection = cluster.connect(cluster.controller())
    try:
        response = connection.request(ApiKey.ALTER_PARTITION, {
            "broker_id": leader, "broker_epoch": -1, "topics": [
                {"topic_id": topic_id, "partitions": [
                    entry(shrink, kept),
                    entry(stale, list(stale.isr), partition_epoch=stale.partition_epoch - 1)]},
                {"topic_id": str(uuid.uuid4()), "partitions": [entry(shrink, kept)]}]},
            version=2)
    finally:
        connection.close()
    assert response.error_code == 0
    first, second = response.topics
    accepted, refused = first.partitions
    assert accepted.error_code == 0
    assert sorted(accepted.isr) == sorted(kept)
    assert accepted.partition_epoch == shrink.partition_epoch + 1
    assert refused.error_code == ErrorCode.invalid_update_version
    assert second.partitions[0].error_code == ErrorCode.unknown_topic_id
    # The dropped follower still fetches: its leader proposes it again on its own.
    cluster.wait_isr(topic, shrink.partition, shrink.isr)


@pytest.mark.broker_config({"broker.session.timeout.ms": "60000"})
def test_a_stopped_follower_leaves_every_isr_and_rejoins(cluster: Cluster) -> None:
    """Not fenced (a long session timeout): its leaders' lag deadlines shrink the ISRs."""
    topic = "lagging"
    cluster.create_topic(topic, 12, 3)
    follower = next(b for b in cluster.brokers if b != cluster.controller())
    followed = [p for p in range(12) if cluster.leader(topic, p) != follower]
    cluster.pause(follower)
    try:
        wait_until(lambda: all(follower not in cluster.state(topic, p).isr for p in followed),
                   30, f"broker {follower} out of the ISR of every partition it follows")
        assert cluster.registered(follower), "shrunk by lag, not by fencing"
    finally:
        cluster.resume(follower)
    cluster.wait_in_sync(topic, timeout_s=60)
