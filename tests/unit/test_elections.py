"""Controller state transitions (pure): elections, fencing, ISR changes."""

from __future__ import annotations

from slog.core.metadata import NO_LEADER, PartitionState
from slog.replication import elections


def state(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1, epoch=5) -> PartitionState:
    return PartitionState("t", 0, tuple(replicas), tuple(isr), leader, epoch, 10)


def test_fencing_the_leader_elects_the_next_in_sync_replica() -> None:
    after = elections.on_broker_fenced(state(), 1, live={2, 3}, unclean_allowed=False)
    assert after is not None
    assert (after.leader, after.isr, after.leader_epoch, after.partition_epoch) == \
        (2, (2, 3), 6, 11)


def test_fencing_a_follower_only_shrinks_the_isr() -> None:
    after = elections.on_broker_fenced(state(), 3, live={1, 2}, unclean_allowed=False)
    assert after is not None and after.leader == 1 and after.isr == (1, 2)
    assert after.leader_epoch == 5  # no leader change, no leader-epoch bump


def test_last_isr_member_stays_and_the_partition_goes_offline() -> None:
    after = elections.on_broker_fenced(state(isr=(1,)), 1, live={2, 3}, unclean_allowed=False)
    assert after is not None and after.leader == NO_LEADER and after.isr == (1,)
    back = elections.elect_offline(after, live={1, 2, 3}, unclean_allowed=False)
    assert back is not None and back.leader == 1  # clean: the last in-sync replica returns


def test_unclean_election_only_when_allowed() -> None:
    offline = elections.on_broker_fenced(state(isr=(1,)), 1, live={3}, unclean_allowed=False)
    assert offline is not None
    assert elections.elect_offline(offline, live={3}, unclean_allowed=False) is None
    after = elections.elect_offline(offline, live={3}, unclean_allowed=True)
    assert after is not None and after.leader == 3 and after.isr == (3,)


def test_preferred_election_needs_the_preferred_replica_in_sync() -> None:
    moved = state(leader=2)
    back = elections.preferred_election(moved, live={1, 2, 3})
    assert back is not None and back.leader == 1
    assert elections.preferred_election(state(leader=2, isr=(2, 3)), live={1, 2, 3}) is None
    assert elections.preferred_election(state(), live={1, 2, 3}) is None


def test_controlled_shutdown_moves_leadership_and_keeps_a_lone_replica() -> None:
    after = elections.controlled_shutdown(state(), 1, live={1, 2, 3})
    assert after is not None and after.leader == 2 and 1 not in after.isr
    assert elections.controlled_shutdown(state(isr=(1,)), 1, live={1, 2, 3}) is None


def test_controlled_shutdown_done_once_changes_nothing_more() -> None:
    # The controller asks again on every liveness pass while the broker drains; a
    # partition it already left must not get a new epoch (and a metadata write) each time.
    assert elections.controlled_shutdown(state(isr=(2, 3), leader=2), 1, live={1, 2, 3}) is None
    after = elections.controlled_shutdown(state(isr=(2, 1), leader=2), 1, live={1, 2, 3})
    assert after is not None and after.isr == (2,) and after.leader_epoch == 5


def test_isr_change_bumps_only_the_partition_epoch() -> None:
    after = elections.with_isr(state(isr=(1, 2)), (1, 2, 3))
    assert after is not None and after.leader_epoch == 5 and after.partition_epoch == 11
    assert elections.with_isr(state(), (1, 2, 3)) is None
