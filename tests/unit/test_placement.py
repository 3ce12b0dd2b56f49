from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slog.replication.placement import PlacementError, assign_replicas, parse_replica_assignment


def test_preferred_leaders_spread_evenly() -> None:
    plan = assign_replicas([1, 2, 3], 6, 3, start_index=0, shift=0)
    leaders = Counter(replicas[0] for replicas in plan.values())
    assert leaders == {1: 2, 2: 2, 3: 2}


@given(
    brokers=st.lists(st.integers(0, 50), min_size=1, max_size=8, unique=True),
    partitions=st.integers(1, 40),
    data=st.data(),
)
def test_every_partition_gets_distinct_live_replicas(brokers, partitions, data) -> None:
    rf = data.draw(st.integers(1, len(brokers)))
    plan = assign_replicas(brokers, partitions, rf, start_index=data.draw(st.integers(0, 10)))
    assert sorted(plan) == list(range(partitions))
    for replicas in plan.values():
        assert len(replicas) == rf == len(set(replicas))
        assert set(replicas) <= set(brokers)
    leaders = Counter(r[0] for r in plan.values())
    assert max(leaders.values()) - min(leaders.get(b, 0) for b in brokers) <= 1 or \
        partitions < len(brokers)


def test_follower_load_spreads_too() -> None:
    plan = assign_replicas([1, 2, 3, 4], 8, 2, start_index=0, shift=0)
    load = Counter(b for replicas in plan.values() for b in replicas)
    assert set(load.values()) == {4}


def test_adding_partitions_continues_the_pattern() -> None:
    first = assign_replicas([1, 2, 3], 3, 2, start_index=0, shift=0)
    more = assign_replicas([1, 2, 3], 3, 2, first_partition=3, start_index=0, shift=0)
    assert sorted(more) == [3, 4, 5]
    assert [more[p][0] for p in (3, 4, 5)] == [first[p][0] for p in (0, 1, 2)]


def test_replication_factor_above_brokers_is_rejected() -> None:
    with pytest.raises(PlacementError, match="larger than the 2 available brokers"):
        assign_replicas([1, 2], 1, 3)


def test_parse_manual_assignment() -> None:
    assert parse_replica_assignment("1:2,2:3") == {0: [1, 2], 1: [2, 3]}
    with pytest.raises(PlacementError):
        parse_replica_assignment("1:1")
    with pytest.raises(PlacementError):
        parse_replica_assignment("1:2,3")
    with pytest.raises(PlacementError):
        parse_replica_assignment("a:b")
