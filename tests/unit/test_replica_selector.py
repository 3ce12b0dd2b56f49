from __future__ import annotations

from slog.replication.replica_selector import (
    NO_PREFERRED_REPLICA,
    ReplicaView,
    preferred_read_replica,
)

LEADER = ReplicaView(1, "a", 100, 0.0)


def test_a_follower_in_the_clients_rack_is_preferred() -> None:
    followers = [ReplicaView(2, "b", 100, 5.0), ReplicaView(3, "c", 100, 5.0)]
    assert preferred_read_replica("b", LEADER, followers, 40) == 2
    assert preferred_read_replica("c", LEADER, followers, 40) == 3


def test_the_leader_keeps_clients_of_its_rack_and_of_unknown_racks() -> None:
    followers = [ReplicaView(2, "a", 100, 5.0), ReplicaView(3, "b", 100, 5.0)]
    assert preferred_read_replica("a", LEADER, followers, 0) == NO_PREFERRED_REPLICA
    assert preferred_read_replica("z", LEADER, followers, 0) == NO_PREFERRED_REPLICA
    assert preferred_read_replica("", LEADER, followers, 0) == NO_PREFERRED_REPLICA


def test_a_follower_without_the_fetch_offset_is_passed_over() -> None:
    followers = [ReplicaView(2, "b", 30, 5.0)]
    assert preferred_read_replica("b", LEADER, followers, 31) == NO_PREFERRED_REPLICA
    assert preferred_read_replica("b", LEADER, followers, 30) == 2


def test_the_most_caught_up_of_several_wins() -> None:
    followers = [ReplicaView(2, "b", 90, 9.0), ReplicaView(3, "b", 100, 1.0),
                 ReplicaView(4, "b", 100, 2.0)]
    assert preferred_read_replica("b", LEADER, followers, 50) == 4
