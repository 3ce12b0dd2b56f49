"""Regression for the first loss the chaos harness found (rolling restart, seed 11).

Leader 2 proposed adding broker 1 to the ISR; the controller committed it and, before
leader 2 had read that, moved leadership to broker 1 (broker 2 was shutting down).
Meanwhile leader 2 kept computing the high watermark over the old ISR [2, 3] and
acknowledged records that broker 1 did not have: the new leader truncated them away.
A proposed member must count for the high watermark at once (Kafka's maximal ISR).
"""

from __future__ import annotations

from pathlib import Path

from slog.core.log import PartitionLog
from slog.core.log_config import LogConfig
from slog.core.metadata import PartitionState
from slog.core.records import build_batch
from slog.replication.partition import Partition


def state(isr: tuple[int, ...], partition_epoch: int) -> PartitionState:
    return PartitionState("chaos", 5, replicas=(2, 3, 1), isr=isr, leader=2, leader_epoch=3,
                          partition_epoch=partition_epoch)


def leader(tmp_path: Path) -> Partition:
    partition = Partition("chaos", 5, PartitionLog.open(tmp_path / "chaos-5", LogConfig()), 2)
    partition.become_leader(state((2, 3), 7))
    return partition


def append(partition: Partition, count: int) -> int:
    """Append ``count`` records as the leader; returns the new log end offset."""
    records = [(None, b"v", (), None)] * count
    partition.append_as_leader(build_batch(records), required_acks=-1, min_insync_replicas=2)
    return partition.log.log_end_offset


def test_a_proposed_isr_member_holds_the_high_watermark(tmp_path: Path) -> None:
    partition = leader(tmp_path)
    end = append(partition, 10)
    partition.update_follower(3, end)
    partition.update_follower(1, end)  # caught up: the leader wants it back in the ISR
    assert partition.high_watermark == end
    assert partition.wanted_isr(lag_max_ms=30_000) == (2, 3, 1)
    partition.propose_isr((2, 3, 1))

    later = append(partition, 5)
    partition.update_follower(3, later)  # broker 3 has them, broker 1 not yet
    assert partition.high_watermark == end, "acknowledged what a proposed member lacks"
    partition.update_follower(1, later)
    assert partition.high_watermark == later


def test_the_controllers_answer_ends_the_proposal(tmp_path: Path) -> None:
    partition = leader(tmp_path)
    end = append(partition, 10)
    partition.update_follower(3, end)
    partition.update_follower(1, end)
    partition.propose_isr((2, 3, 1))
    later = append(partition, 5)
    partition.update_follower(3, later)
    assert partition.high_watermark == end

    partition.proposal_failed()  # refused: the ISR stays [2, 3] and the HW follows it
    partition.update_follower(3, later)
    assert partition.high_watermark == later

    partition.propose_isr((2, 3, 1))
    last = append(partition, 5)
    partition.update_follower(3, last)
    assert partition.high_watermark == later
    partition.become_leader(state((2, 3), 8))  # a newer epoch without broker 1: not added
    partition.update_follower(3, last)
    assert partition.high_watermark == last
