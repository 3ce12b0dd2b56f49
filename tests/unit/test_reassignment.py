"""Partition reassignment, leader rebalancing and the replication throttle: the pure logic,
then the controller driving it against a real metadata log."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pytest

from slog.core.config import BrokerConfig
from slog.core.kafka_errors import ErrorCode
from slog.core.log import FetchSlice
from slog.core.metadata import BrokerRegistration, MetadataImage, PartitionState, TopicImage
from slog.replication import reassignment as ra
from slog.replication.controller import ControllerError
from slog.replication.leader_balance import imbalance, partitions_to_rebalance
from slog.replication.throttle import (
    THROTTLE_CONFIG,
    ReplicationThrottle,
    TokenBucket,
    split_throttle_configs,
)
from tests.fake_clock import FakeClock
from tests.unit.test_controller import Cluster

if TYPE_CHECKING:
    from slog.replication.partition import Partition

LIVE = {1, 2, 3, 4}


def state(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1, partition=0, adding=(),
          removing=()) -> PartitionState:
    return PartitionState("t", partition, tuple(replicas), tuple(isr), leader, 5, 10,
                          tuple(adding), tuple(removing))


# -- state transitions -----------------------------------------------------------------
def test_start_adds_the_target_first_and_keeps_the_leader() -> None:
    after = ra.start(state(), [2, 3, 4], LIVE)
    assert after is not None
    assert (after.replicas, after.adding, after.removing) == ((2, 3, 4, 1), (4,), (1,))
    assert (after.leader, after.isr, after.leader_epoch, after.partition_epoch) == \
        (1, (1, 2, 3), 5, 11)
    assert ra.original_replicas(after) == (2, 3, 1)
    assert ra.target_replicas(after) == (2, 3, 4)


def test_start_with_the_current_replicas_changes_nothing_and_a_reorder_applies_at_once() -> None:
    assert ra.start(state(), [1, 2, 3], LIVE) is None
    reordered = ra.start(state(), [3, 1, 2], LIVE)
    assert reordered is not None and reordered.replicas == (3, 1, 2)
    assert not ra.in_progress(reordered) and reordered.leader == 1


def test_steps_wait_for_the_isr_then_move_the_leader_then_drop_old_replicas() -> None:
    moving = ra.start(state(), [2, 3, 4], LIVE)
    assert moving is not None
    assert ra.advance(moving, LIVE) is None  # 4 has not caught up yet
    caught_up = replace(moving, isr=(1, 2, 3, 4))
    moved = ra.advance(caught_up, LIVE)
    assert moved is not None
    assert (moved.leader, moved.leader_epoch, moved.replicas) == (2, 6, (2, 3, 4, 1))
    done = ra.advance(moved, LIVE)
    assert done is not None
    assert (done.replicas, done.isr, done.leader, done.adding, done.removing) == \
        ((2, 3, 4), (2, 3, 4), 2, (), ())
    assert done.leader_epoch == 6 and ra.advance(done, LIVE) is None


def started(target: list[int], before: PartitionState | None = None) -> PartitionState:
    after = ra.start(before or state(), target, LIVE)
    assert after is not None
    return after


def test_the_leader_moves_only_to_a_live_in_sync_target_replica() -> None:
    moving = replace(started([2, 3, 4]), isr=(1, 3, 4))
    moved = ra.advance(moving, {1, 2, 4})  # 2 not in sync, 3 dead
    assert moved is not None and moved.leader == 4
    assert ra.advance(moving, {1, 2}) is None


def test_a_leader_in_the_target_stays_and_shrinking_completes_at_once() -> None:
    shrink = ra.start(state(leader=2), [2, 3], LIVE)
    assert shrink is not None and shrink.removing == (1,) and shrink.adding == ()
    done = ra.advance(shrink, LIVE)
    assert done is not None
    assert (done.replicas, done.isr, done.leader, done.leader_epoch) == ((2, 3), (2, 3), 2, 5)


def test_cancel_drops_the_adding_replicas_and_their_leadership() -> None:
    moving = ra.start(state(), [2, 3, 4], LIVE)
    assert moving is not None
    back = ra.cancel(replace(moving, isr=(1, 2, 3, 4)), LIVE)
    assert (set(back.replicas), back.isr, back.adding, back.removing) == \
        ({1, 2, 3}, (1, 2, 3), (), ())
    led_by_new = replace(moving, leader=4, isr=(4, 2))
    back = ra.cancel(led_by_new, LIVE)
    assert back.leader == 2 and back.isr == (2,) and back.leader_epoch == 6
    with pytest.raises(ra.ReassignmentError) as err:
        ra.cancel(state(), LIVE)
    assert err.value.code == ErrorCode.no_reassignment_in_progress
    nobody = replace(moving, leader=4, isr=(4,))
    with pytest.raises(ra.ReassignmentError, match="alive and in sync"):
        ra.cancel(nobody, LIVE)


def test_a_new_target_replaces_a_running_reassignment_from_the_original() -> None:
    moving = ra.start(state(), [2, 3, 4], LIVE)
    assert moving is not None
    again = ra.start(replace(moving, isr=(1, 2, 3, 4)), [1, 2, 5], LIVE | {5})
    assert again is not None
    assert (again.replicas, again.adding, again.removing, again.isr) == \
        ((1, 2, 5, 3), (5,), (3,), (1, 2, 3))
    assert not ra.in_progress(started([2, 3, 1], moving))  # the original: a cancel


@pytest.mark.parametrize(("target", "message"), [
    ([], "empty"), ([2, 2, 3], r"\[2\] more than once"), ([1, 2, 9], r"unknown broker\(s\) \[9\]"),
])
def test_bad_targets(target: list[int], message: str) -> None:
    with pytest.raises(ra.ReassignmentError, match=message) as err:
        ra.check_target(target, LIVE)
    assert err.value.code == ErrorCode.invalid_replica_assignment


def test_alter_reports_each_partition_independently() -> None:
    image = MetadataImage()
    image.topics["t"] = TopicImage("t", "id", partitions={0: state(), 1: state(partition=1)})
    image.brokers = {b: BrokerRegistration(b, "127.0.0.1", 9091 + b) for b in LIVE}
    changed, outcome = ra.alter(image, {("t", 0): [2, 3, 4], ("t", 1): None, ("t", 7): [1],
                                        ("u", 0): [1], ("t", 2): [1, 2, 7]}, LIVE)
    assert [after.partition for _, after in changed] == [0]
    codes = {k: e.code if e else None for k, e in outcome.items()}
    assert codes == {("t", 0): None, ("t", 1): ErrorCode.no_reassignment_in_progress,
                     ("t", 7): ErrorCode.unknown_topic_or_partition,
                     ("u", 0): ErrorCode.unknown_topic_or_partition,
                     ("t", 2): ErrorCode.unknown_topic_or_partition}


def test_describe_step() -> None:
    moving = ra.start(state(), [2, 3, 4], LIVE)
    assert moving is not None
    assert "started" in ra.describe_step(state(), moving)
    moved = ra.advance(replace(moving, isr=(1, 2, 3, 4)), LIVE)
    assert moved is not None and "moved the leader 1 -> 2" in ra.describe_step(moving, moved)
    done = ra.advance(moved, LIVE)
    assert done is not None and "complete" in ra.describe_step(moved, done)
    assert "cancelled" in ra.describe_step(moving, ra.cancel(moving, LIVE))


# -- plan files ------------------------------------------------------------------------
CURRENT = {("t", 0): (1, 2, 3), ("t", 1): (2, 3, 1), ("u", 0): (3, 1, 2)}


def plan_text(*entries: dict) -> str:
    return json.dumps({"version": 1, "partitions": list(entries)})


def test_plan_round_trip() -> None:
    plan = {("t", 1): (2, 3, 4), ("t", 0): (4, 2, 3)}
    data = ra.plan_to_json(plan)
    assert data["partitions"][0] == {"topic": "t", "partition": 0, "replicas": [4, 2, 3]}
    assert ra.parse_plan(json.dumps(data)) == plan


@pytest.mark.parametrize(("text", "message"), [
    ("{", "not valid JSON"),
    ("[]", "object with a \"partitions\" list"),
    ('{"version": 2, "partitions": []}', "unsupported plan version 2"),
    ('{"version": 1, "partitions": []}', "lists no partitions"),
    ('{"partitions": [7]}', r"partitions\[0\] must be an object"),
    (plan_text({"partition": 0, "replicas": [1]}), "'topic' must be a string"),
    (plan_text({"topic": "t", "partition": True, "replicas": [1]}), "'partition' must be an"),
    (plan_text({"topic": "t", "partition": 0, "replicas": "1,2"}), "'replicas' must be a list"),
    (plan_text({"topic": "t", "partition": 0, "replicas": [1, "2"]}), "broker ids"),
    (plan_text({"topic": "t", "partition": 0, "replicas": [1]},
               {"topic": "t", "partition": 0, "replicas": [2]}), "t-0 appears more than once"),
])
def test_malformed_plans(text: str, message: str) -> None:
    with pytest.raises(ra.PlanError, match=message):
        ra.parse_plan(text)


@pytest.mark.parametrize(("plan", "message"), [
    ({("x", 0): (1, 2, 3)}, "unknown topic 'x'"),
    ({("t", 5): (1, 2, 3)}, "topic 't' has no partition 5"),
    ({("t", 0): (1, 2, 9)}, r"t-0: the target names unknown broker\(s\) \[9\]"),
    ({("t", 0): (1, 1, 2)}, "more than once"),
])
def test_plans_the_cluster_cannot_take(plan: ra.Assignment, message: str) -> None:
    with pytest.raises(ra.PlanError, match=message):
        ra.check_plan(plan, CURRENT, LIVE)


def test_a_plan_may_change_the_replica_count_unless_that_is_refused() -> None:
    for changed in ({("t", 0): (1, 2)}, {("t", 0): (1, 2, 3, 4)}):
        ra.check_plan(changed, CURRENT, LIVE)  # Kafka's way to change a replication factor
        with pytest.raises(ra.PlanError, match=r"lists .* replica.* has 3, and the replication"):
            ra.check_plan(changed, CURRENT, LIVE, same_replica_count=True)
    ra.check_plan({("t", 0): (3, 2, 1)}, CURRENT, LIVE, same_replica_count=True)


def test_propose_keeps_counts_and_uses_only_the_given_brokers() -> None:
    proposed = ra.propose(CURRENT, ["t", "u"], [2, 3, 4], random.Random(7))
    assert sorted(proposed) == sorted(CURRENT)
    assert all(len(r) == 3 and set(r) == {2, 3, 4} for r in proposed.values())
    assert {proposed[("t", 0)][0], proposed[("t", 1)][0]} != {proposed[("t", 0)][0]}
    ra.check_plan(proposed, CURRENT, LIVE)
    with pytest.raises(ra.PlanError, match="unknown topic 'x'"):
        ra.propose(CURRENT, ["x"], [1, 2, 3])
    with pytest.raises(ra.PlanError, match="larger than the 2 available brokers"):
        ra.propose(CURRENT, ["t"], [1, 2])


# -- leader balance --------------------------------------------------------------------
def test_imbalance_counts_partitions_led_away_from_their_preferred_leader() -> None:
    parts = [state(partition=0), state((1, 2, 3), leader=2, partition=1),
             state((2, 3, 1), leader=2, partition=2), state((1, 2, 3), leader=1, partition=3)]
    assert imbalance(parts) == {1: pytest.approx(1 / 3), 2: 0.0}
    assert partitions_to_rebalance(parts, LIVE, 10) == [("t", 1)]
    assert partitions_to_rebalance(parts, LIVE, 40) == []  # 33% is within 40%
    assert partitions_to_rebalance(parts, {2, 3}, 10) == []  # the preferred leader is down


def test_rebalance_skips_out_of_sync_preferred_leaders_and_moving_partitions() -> None:
    parts = [state(isr=(2, 3), leader=2), state(leader=2, partition=1, adding=(4,))]
    assert partitions_to_rebalance(parts, LIVE, 0) == []


# -- throttle --------------------------------------------------------------------------
def test_throttle_configs_are_split_and_checked() -> None:
    throttle, rest = split_throttle_configs({THROTTLE_CONFIG: "1024", "retention.ms": "5"})
    assert throttle == {THROTTLE_CONFIG: "1024"} and rest == {"retention.ms": "5"}
    assert split_throttle_configs({THROTTLE_CONFIG: None})[0] == {THROTTLE_CONFIG: None}
    for bad in ("0", "fast"):
        with pytest.raises(ValueError, match=THROTTLE_CONFIG):
            split_throttle_configs({THROTTLE_CONFIG: bad})


def test_token_bucket_refills_at_the_rate_and_caps_at_one_second() -> None:
    clock = FakeClock(100.0)
    bucket = TokenBucket(1000, clock)
    assert bucket.available() == 1000
    bucket.consume(1500)
    assert bucket.available() == -500  # a debt from one oversized batch
    clock.now += 1.0
    assert bucket.available() == 500
    clock.now += 60
    assert bucket.available() == 1000


class FakePartition:
    topic = "t"

    def __init__(self, partition_state: PartitionState):
        self.state = partition_state
        self.reads: list[tuple[int, int, bool]] = []

    def read(self, offset: int, max_bytes: int, *, committed_only: bool,
             min_one: bool = True, read_committed: bool = False) -> FetchSlice:
        self.reads.append((offset, max_bytes, committed_only))
        return FetchSlice([memoryview(b"x" * 700)], 700, offset, offset + 1)


def test_only_adding_replicas_of_throttled_topics_are_limited() -> None:
    clock = FakeClock(100.0)
    throttle = ReplicationThrottle(clock)
    image = MetadataImage()
    image.topics["t"] = TopicImage("t", "id", configs={THROTTLE_CONFIG: "1000"})
    moving = FakePartition(state(replicas=(2, 3, 4, 1), adding=(4,), removing=(1,)))
    partition = cast("Partition", moving)
    assert throttle.read(image, partition, 2, 0, 10_000).size == 700
    assert throttle.read(image, partition, -1, 0, 10_000).size == 700
    assert moving.reads[-1][2] is True  # consumers still read committed data only
    first = throttle.read(image, partition, 4, 0, 10_000)
    assert first.size == 700 and moving.reads[-1][1] == 1000
    second = throttle.read(image, partition, 4, 1, 10_000)
    assert second.size == 700 and moving.reads[-1][1] == 300
    before = len(moving.reads)
    empty = throttle.read(image, partition, 4, 2, 10_000)
    assert empty.size == 0 and empty.views == [] and len(moving.reads) == before
    clock.now += 1
    assert throttle.read(image, partition, 4, 2, 10_000).size == 700
    image.topics["t"].configs.clear()
    assert throttle.bucket_for(image, partition, 4) is None


# -- the controller driving it ---------------------------------------------------------
@pytest.fixture
def cluster(tmp_path: Path) -> Cluster:
    return Cluster(tmp_path / "metadata", brokers=4)


def leader_of(cluster: Cluster) -> int:
    found = cluster.image.partition("t", 0)
    assert found is not None
    return found.leader


def _create(cluster: Cluster, assignment: dict[int, list[int]]) -> None:
    from slog.replication.controller import NewTopic

    [created] = cluster.controller.create_topics([NewTopic("t", assignment=assignment)])
    assert not isinstance(created, ControllerError)


def test_controller_runs_a_reassignment_to_completion(cluster: Cluster) -> None:
    _create(cluster, {0: [1, 2, 3]})
    outcome = cluster.controller.alter_reassignments({("t", 0): [2, 3, 4], ("t", 9): [1]})
    missing = outcome[("t", 9)]
    assert outcome[("t", 0)] is None
    assert missing is not None and missing.code == ErrorCode.unknown_topic_or_partition
    moving = cluster.image.partition("t", 0)
    assert moving is not None and moving.adding == (4,)
    cluster.controller.maintain_reassignments()
    assert cluster.image.partition("t", 0) == moving  # waits for broker 4 to catch up
    cluster.controller.alter_partition(1, "t", 0, moving.leader_epoch, moving.partition_epoch,
                                       (1, 2, 3, 4))
    cluster.controller.maintain_reassignments()  # leader 1 -> 2
    cluster.controller.maintain_reassignments()  # drop 1
    done = cluster.image.partition("t", 0)
    assert done is not None
    assert (done.replicas, done.isr, done.leader, done.adding) == ((2, 3, 4), (2, 3, 4), 2, ())


def test_controller_cancel_and_throttle_configs(cluster: Cluster) -> None:
    _create(cluster, {0: [1, 2, 3]})
    cluster.controller.alter_topic_configs("t", {THROTTLE_CONFIG: "4096"})
    assert cluster.image.topics["t"].configs[THROTTLE_CONFIG] == "4096"
    with pytest.raises(ControllerError) as err:
        cluster.controller.alter_topic_configs("t", {THROTTLE_CONFIG: "-5"})
    assert err.value.code == ErrorCode.invalid_config
    cluster.controller.alter_reassignments({("t", 0): [2, 3, 4]})
    assert cluster.controller.alter_reassignments({("t", 0): None}) == {("t", 0): None}
    back = cluster.image.partition("t", 0)
    assert back is not None and set(back.replicas) == {1, 2, 3} and back.adding == ()
    again = cluster.controller.alter_reassignments({("t", 0): None})[("t", 0)]
    assert again is not None and again.code == ErrorCode.no_reassignment_in_progress
    cluster.controller.alter_topic_configs("t", {THROTTLE_CONFIG: None})
    assert THROTTLE_CONFIG not in cluster.image.topics["t"].configs


def _leader_moved_off_broker_1(cluster: Cluster) -> None:
    """t-0 (preferred leader 1) led by 2 after broker 1 restarted and caught up."""
    _create(cluster, {0: [1, 2, 3], 1: [2, 3, 1]})
    cluster.controller.fence_broker(1, "test")
    cluster.controller.register_broker(1, "127.0.0.1", 9092, "new incarnation")
    moved = cluster.image.partition("t", 0)
    assert moved is not None and moved.leader == 2
    cluster.controller.alter_partition(2, "t", 0, moved.leader_epoch, moved.partition_epoch,
                                       (2, 3, 1))


def test_controller_rebalances_leaders_on_its_interval(cluster: Cluster) -> None:
    _leader_moved_off_broker_1(cluster)
    interval = cluster.controller.config.get_int("leader.imbalance.check.interval.seconds")
    now = cluster.controller._next_leader_check - 1
    cluster.controller.maybe_rebalance_leaders(now)  # not yet due
    assert leader_of(cluster) == 2
    cluster.controller.maybe_rebalance_leaders(now + 1)
    assert leader_of(cluster) == 1
    assert cluster.controller._next_leader_check == now + 1 + interval


def test_no_rebalance_when_disabled(cluster: Cluster, tmp_path: Path) -> None:
    cluster.controller.config = BrokerConfig.build(
        1, tmp_path, "127.0.0.1", 9092, {"auto.leader.rebalance.enable": "false"})
    _leader_moved_off_broker_1(cluster)
    cluster.controller.maybe_rebalance_leaders(cluster.controller._next_leader_check)
    assert leader_of(cluster) == 2
