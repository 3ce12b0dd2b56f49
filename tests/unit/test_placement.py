from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slog.replication.placement import (
    PlacementError,
    RackAwareMode,
    assign_replicas,
    parse_replica_assignment,
    rack_alternated,
)


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


# -- rack-aware placement ----------------------------------------------------------------

def test_brokers_alternate_between_racks() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c", 7: "c"}
    assert rack_alternated(racks) == [1, 3, 5, 2, 4, 6, 7]


def test_rack_aware_plan_matches_kafkas_walk() -> None:
    # Six brokers in three racks, fixed start and shift: the interleaved list is
    # 1,3,5,2,4,6, leaders walk it, followers continue along it across racks.
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    plan = assign_replicas(list(racks), 6, 3, racks=racks, start_index=0, shift=0)
    assert plan == {0: [1, 3, 5], 1: [3, 5, 2], 2: [5, 2, 4], 3: [2, 4, 6], 4: [4, 6, 1],
                    5: [6, 1, 3]}


@given(
    rack_sizes=st.lists(st.integers(1, 4), min_size=1, max_size=5),
    partitions=st.integers(1, 40),
    data=st.data(),
)
def test_replicas_span_racks_and_leaders_balance(rack_sizes, partitions, data) -> None:
    racks = {}
    for r, size in enumerate(rack_sizes):
        for _ in range(size):
            racks[len(racks) + 1] = f"rack-{r}"
    brokers = list(racks)
    rf = data.draw(st.integers(1, len(brokers)))
    plan = assign_replicas(brokers, partitions, rf, racks=racks,
                           start_index=data.draw(st.integers(0, 10)),
                           shift=data.draw(st.integers(0, 10)))
    assert sorted(plan) == list(range(partitions))
    for replicas in plan.values():
        assert len(replicas) == rf == len(set(replicas))
        assert len({racks[b] for b in replicas}) == min(rf, len(rack_sizes))
    leaders = Counter(r[0] for r in plan.values())
    if partitions % len(brokers) == 0:
        assert set(leaders.values()) == {partitions // len(brokers)}
    assert max(leaders.values()) - min(leaders.get(b, 0) for b in brokers) <= 1 or \
        partitions < len(brokers)


def test_one_broker_per_rack_spreads_followers_too() -> None:
    racks = {1: "a", 2: "b", 3: "c"}
    plan = assign_replicas([1, 2, 3], 6, 2, racks=racks, start_index=0, shift=0)
    load = Counter(b for replicas in plan.values() for b in replicas)
    assert set(load.values()) == {4}


def test_brokers_without_racks_place_as_before() -> None:
    unaware = assign_replicas([1, 2, 3], 5, 2, start_index=1, shift=2)
    assert assign_replicas([1, 2, 3], 5, 2, start_index=1, shift=2,
                           racks={1: None, 2: None, 3: None}) == unaware


def test_a_mix_of_racked_and_unracked_brokers_is_refused_unless_safe_mode() -> None:
    racks = {1: "a", 2: "b", 3: None}
    with pytest.raises(PlacementError, match=r"not all brokers have rack information.*3"):
        assign_replicas([1, 2, 3], 3, 2, racks=racks)
    assert assign_replicas([1, 2, 3], 3, 2, racks=racks, rack_mode=RackAwareMode.SAFE,
                           start_index=0, shift=0) == \
        assign_replicas([1, 2, 3], 3, 2, start_index=0, shift=0)


def test_safe_mode_still_uses_racks_when_every_broker_has_one() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    kwargs = {"start_index": 0, "shift": 0, "racks": racks}
    assert assign_replicas([1, 2, 3, 4], 4, 2, rack_mode=RackAwareMode.SAFE, **kwargs) == \
        assign_replicas([1, 2, 3, 4], 4, 2, **kwargs)
    disabled = assign_replicas([1, 2, 3, 4], 4, 2, rack_mode=RackAwareMode.DISABLED, **kwargs)
    assert disabled == assign_replicas([1, 2, 3, 4], 4, 2, start_index=0, shift=0)
    assert any(racks[a] == racks[b] for a, b in disabled.values())
