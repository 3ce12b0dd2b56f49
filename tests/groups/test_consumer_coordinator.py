"""ConsumerGroupCoordinator over a real offsets log, without a broker: heartbeats are
written as records and a fresh coordinator loads the same group; expiry, offset
retention and the classic/consumer conversions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from slog.core.kafka_errors import ErrorCode, KafkaApiError
from slog.groups.consumer_coordinator import ConsumerGroupConfig, ConsumerGroupCoordinator
from slog.groups.consumer_group import ConsumerHeartbeat, HeartbeatOutcome, TopicInfo
from slog.groups.manager import GroupMetadataManager, StoreError
from slog.groups.offsets import OffsetAndMetadata
from slog.transactions.offsets import PendingTxnOffsets
from tests.groups.local_log import LocalOffsetsLog

WALL = 1_700_000_000_000
TOPICS = {"a": TopicInfo("00000000-0000-0000-0000-00000000000a", 4),
          "b": TopicInfo("00000000-0000-0000-0000-00000000000b", 1)}
DAY_MS = 24 * 3600 * 1000


class Node:
    """One coordinator on a log; ``now`` drives both clocks."""

    def __init__(self, log: LocalOffsetsLog):
        self.now = 0.0
        self.manager = GroupMetadataManager(log, 1, lambda: WALL + int(self.now))
        self.coordinator = ConsumerGroupCoordinator(
            ConsumerGroupConfig(session_timeout_ms=1000, offsets_retention_ms=DAY_MS,
                                offsets_retention_check_ms=1000),
            self.manager, lambda: (TOPICS, 1), clock=lambda: self.now,
            wall=lambda: WALL + int(self.now))
        self.manager.on_election(0)

    def beat(self, member: str, epoch: int, **kw: Any) -> HeartbeatOutcome:
        if epoch == 0:
            kw.setdefault("rebalance_timeout_ms", 5000)
            kw.setdefault("subscribed_topic_names", ["a"])
            kw.setdefault("owned", frozenset())
        answers: list[Any] = []
        self.coordinator.handle_heartbeat("g", ConsumerHeartbeat(member, epoch, **kw),
                                          answers.append)
        [answer] = answers
        if isinstance(answer, KafkaApiError):
            raise answer
        assert isinstance(answer, HeartbeatOutcome)
        return answer

    def commit(self, member: str, epoch: int, topic: str) -> ErrorCode:
        group = self.coordinator.group("g")
        assert group is not None
        answers: list[dict[Any, ErrorCode]] = []
        self.coordinator.handle_commit_offsets(
            group, member, epoch, {(topic, 0): OffsetAndMetadata(7, -1, "", WALL)},
            answers.append, version=9)
        return answers[0][(topic, 0)]


@pytest.fixture
def log(tmp_path: Path) -> Any:
    offsets_log = LocalOffsetsLog(tmp_path)
    yield offsets_log
    offsets_log.close()


def test_a_new_coordinator_loads_the_same_group(log: LocalOffsetsLog) -> None:
    node = Node(log)
    a = node.beat("a", 0, instance_id="i")
    b = node.beat("b", 0)
    node.beat("a", a.member_epoch, owned=a.assignment)  # told to revoke two partitions
    assert node.commit("a", a.member_epoch, "a") is ErrorCode.none
    before = node.coordinator.group("g")
    assert before is not None
    fresh = Node(log)
    group = fresh.coordinator.group("g")
    assert group is not None and group is not before
    assert (group.group_epoch, group.target_epoch, group.target, group.owners) == \
        (before.group_epoch, before.target_epoch, before.target, before.owners)
    assert {m: (x.member_epoch, x.state, x.assigned, x.pending_revocation)
            for m, x in group.members.items()} == \
        {m: (x.member_epoch, x.state, x.assigned, x.pending_revocation)
         for m, x in before.members.items()}
    assert group.offsets.get(("a", 0)) == OffsetAndMetadata(7, -1, "", WALL)
    # The member carries on at its epoch with the new coordinator.
    again = fresh.beat("b", b.member_epoch)
    assert again.member_epoch == b.member_epoch


def test_members_expire_and_epochs_are_checked_on_commit(log: LocalOffsetsLog) -> None:
    node = Node(log)
    a = node.beat("a", 0)
    assert node.commit("a", a.member_epoch + 1, "a") is ErrorCode.stale_member_epoch
    assert node.commit("x", 1, "a") is ErrorCode.unknown_member_id
    node.now = 1500  # past the session
    node.coordinator.expire()
    group = node.coordinator.group("g")
    assert group is not None and group.is_empty
    with pytest.raises(KafkaApiError) as exc:
        node.beat("a", a.member_epoch)
    assert exc.value.code is ErrorCode.unknown_member_id


def test_offsets_of_unsubscribed_topics_expire_then_the_empty_group_goes(
        log: LocalOffsetsLog) -> None:
    node = Node(log)
    a = node.beat("a", 0)
    assert node.commit("a", a.member_epoch, "a") is ErrorCode.none
    assert node.commit("a", a.member_epoch, "b") is ErrorCode.none
    node.now = DAY_MS + 2000
    node.beat("a", a.member_epoch)  # alive, subscribed to "a" only
    node.coordinator.expire()
    group = node.coordinator.group("g")
    assert group is not None
    assert set(group.offsets.committed) == {("a", 0)}
    node.beat("a", -1)
    node.now += DAY_MS + 2000
    node.coordinator.expire()
    assert node.coordinator.group("g") is None
    assert Node(log).coordinator.group("g") is None  # deleted in the log too


def test_offsets_awaiting_a_marker_keep_the_empty_group_until_it_is_deleted(
        log: LocalOffsetsLog) -> None:
    """As Kafka: while a transaction has an offset for the group, that partition's offset
    does not expire and the empty group is not removed, so the COMMIT finds the group;
    deleting the group drops the pending offset (no marker brings it back)."""
    node = Node(log)
    pending = PendingTxnOffsets()
    node.manager.txn_offsets = pending
    a = node.beat("a", 0)
    assert node.commit("a", a.member_epoch, "b") is ErrorCode.none
    pending.add(9, 0, "g", {("b", 0): OffsetAndMetadata(8, -1, "", WALL)})
    node.beat("a", -1)
    node.now = DAY_MS + 2000
    node.coordinator.expire()
    group = node.coordinator.group("g")
    assert group is not None and set(group.offsets.committed) == {("b", 0)}
    assert node.coordinator.delete_group("g") is ErrorCode.none
    assert pending.partitions_of("g") == set()
    assert Node(log).coordinator.group("g") is None


def test_empty_groups_change_kind(log: LocalOffsetsLog) -> None:
    node = Node(log)
    classic = node.manager.get_or_create("g")
    classic.offsets.load(("a", 0), OffsetAndMetadata(3), 0)
    a = node.beat("a", 0)  # an empty classic group becomes a consumer group
    group = node.coordinator.group("g")
    assert group is not None and group.offsets.get(("a", 0)) == OffsetAndMetadata(3)
    assert node.manager.get("g") is None
    with pytest.raises(KafkaApiError) as exc:
        node.coordinator.release_to_classic("g")
    assert exc.value.code is ErrorCode.inconsistent_group_protocol
    node.beat("a", -1)
    back = node.coordinator.release_to_classic("g")
    assert back is not None and back.offsets.get(("a", 0)) == OffsetAndMetadata(3)
    assert node.coordinator.group("g") is None
    assert a.member_epoch > 0


class FailingLog(LocalOffsetsLog):
    """A log whose appends fail while ``failing`` (as when the disk refuses a write)."""

    failing = False

    def append(self, partition: int, batch: bytes) -> int:
        if self.failing:
            raise StoreError(ErrorCode.unknown_server_error, "the disk refused")
        return super().append(partition, batch)


def test_a_change_whose_records_fail_is_reverted(tmp_path: Path) -> None:
    log = FailingLog(tmp_path)
    try:
        node = Node(log)
        a = node.beat("a", 0)
        group = node.coordinator.group("g")
        assert group is not None
        before = (group.group_epoch, group.target_epoch, dict(group.target),
                  dict(group.owners), {m: (x.member_epoch, x.assigned)
                                       for m, x in group.members.items()})
        log.failing = True
        with pytest.raises(KafkaApiError) as exc:
            node.beat("b", 0)  # a join: new epoch, new target, a's partitions to revoke
        assert exc.value.code is ErrorCode.unknown_server_error
        with pytest.raises(KafkaApiError):
            node.beat("a", -1)  # a leave
        after = (group.group_epoch, group.target_epoch, dict(group.target),
                 dict(group.owners), {m: (x.member_epoch, x.assigned)
                                      for m, x in group.members.items()})
        assert after == before
        log.failing = False
        assert node.beat("a", a.member_epoch, owned=a.assignment).member_epoch == \
            a.member_epoch  # the member goes on as if nothing happened
        assert node.beat("b", 0).member_epoch == group.group_epoch
    finally:
        log.close()
