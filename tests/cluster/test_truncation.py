"""Follower truncation by leader epoch (KIP-101/279), with real broker processes.

High-watermark truncation loses or diverges data whenever a replica's HW
does not describe what the new leader has. The first test builds exactly
that case deterministically with SIGSTOP: the old leader's in-memory HW
covers records the new leader never received, so cutting at the HW keeps
them and the replicas diverge; cutting where the leader says our epoch ends
does not.
"""

from __future__ import annotations

import pytest

from tests.cluster.conftest import (
    Cluster,
    check_acknowledged,
    check_identical_replicas,
    wait_until,
)

VALUES = [f"committed-{i}".encode() for i in range(10)]


def _two_replicas_off_controller(cluster: Cluster) -> tuple[int, int]:
    """Two brokers that are not the controller (a paused controller stalls elections)."""
    a, b = sorted(x for x in cluster.brokers if x != cluster.controller())
    return a, b


@pytest.mark.broker_config({"replica.lag.time.max.ms": "30000"})
def test_paused_leader_truncates_to_the_epoch_end_not_its_high_watermark(
        cluster: Cluster) -> None:
    topic = "kip101"
    a, b = _two_replicas_off_controller(cluster)
    cluster.create_topic(topic, assignment={0: [a, b]}, configs={
        "min.insync.replicas": "1", "unclean.leader.election.enable": "true"})
    acked: dict[bytes, tuple[int, int]] = {}
    # 1. Both replicas hold ten committed records (acks=all).
    for value in VALUES:
        acked[value] = (0, cluster.append_to(a, topic, 0, [value], acks=-1))

    # 2. B stops; A takes ten more acks=1 records, and once B is fenced (ISR [A])
    #    A's high watermark moves past them: A's HW is 20, B's log ends at 10.
    cluster.pause(b)
    for i in range(10):
        cluster.append_to(a, topic, 0, [f"only-on-a-{i}".encode()], acks=1)
    cluster.wait_isr(topic, 0, [a], timeout_s=10)
    wait_until(lambda: cluster.high_watermark(topic) == 20, 5, "A's high watermark to reach 20")

    # 3. A stops, B runs again; with A fenced only B can lead: an unclean election.
    cluster.step(f"pausing {a}, resuming {b}")
    cluster.pause(a)
    cluster.resume(b)
    assert cluster.wait_leader(topic, not_in={a}, timeout_s=10) == b
    cluster.step("B leads")
    for i in range(5):  # on B from offset 10 (or a little later): A holds other records there
        value = f"after-failover-{i}".encode()
        acked[value] = (0, cluster.append_to(b, topic, 0, [value], acks=-1))
    # B may have had one fetch answered before it stopped (and applied it on resuming).
    diverged_at = acked[b"after-failover-0"][1]
    assert 10 <= diverged_at < 20, diverged_at

    # 4. A runs again: it must cut at offset 10 (where its epoch ends on B), not at
    #    its HW of 20, then copy B's records and rejoin the ISR.
    cluster.resume(a)
    cluster.step("A resumed")
    cluster.wait_in_sync(topic)
    cluster.step("in sync")
    assert "unclean" in cluster.log_lines(cluster.controller(), "slog.controller")
    assert f"truncating from 20 to {diverged_at}" in cluster.log_text(a)
    marks = check_acknowledged(cluster, topic, [0], acked)
    assert marks == {0: diverged_at + 5}
    check_identical_replicas(cluster, topic, marks)


def test_restarted_follower_then_leader_death_loses_nothing(cluster: Cluster) -> None:
    """The follower restarts right after an acknowledged write, then the leader dies."""
    topic = "restart"
    a, b = _two_replicas_off_controller(cluster)
    cluster.create_topic(topic, assignment={0: [a, b]}, configs={"min.insync.replicas": "1"})
    acked: dict[bytes, tuple[int, int]] = {}
    for round_ in range(3):
        leader = cluster.leader(topic)
        follower = b if leader == a else a
        for i in range(5):
            value = f"round-{round_}-{i}".encode()
            acked[value] = (0, cluster.append_to(leader, topic, 0, [value], acks=-1))
        # The follower has the last record (acks=all) but maybe not the HW that covers it.
        cluster.step(f"round {round_}: restart follower {follower}")
        cluster.kill(follower)
        cluster.restart(follower)
        cluster.wait_in_sync(topic)
        cluster.step(f"round {round_}: kill leader {leader}")
        cluster.kill(leader)
        assert cluster.wait_leader(topic, not_in={leader}, timeout_s=10) == follower
        cluster.step(f"round {round_}: new leader")
        check_acknowledged(cluster, topic, [0], acked)
        cluster.step(f"round {round_}: checked")
        cluster.restart(leader)
        cluster.wait_in_sync(topic)
        cluster.step(f"round {round_}: in sync")
    marks = check_acknowledged(cluster, topic, [0], acked)
    # A leader never proposed a dead (or not yet fetching) replica back into the ISR.
    assert "ineligible_replica" not in cluster.all_logs()
    check_identical_replicas(cluster, topic, marks)
