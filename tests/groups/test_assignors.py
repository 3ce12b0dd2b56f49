"""The assignors: Kafka's rules for range and roundrobin; properties for the sticky ones."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slog.client.assignors import (
    MemberSubscription,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    make_assignors,
)
from slog.core.consumer_protocol import Subscription, encode_sticky_user_data

COOPERATIVE = StickyAssignor("cooperative-sticky", "cooperative")


def members(*specs: tuple[str, tuple[str, ...]]) -> dict[str, MemberSubscription]:
    return {m: MemberSubscription(m, topics) for m, topics in specs}


@pytest.mark.parametrize(("consumers", "expected"), [
    (1, [[0, 1, 2]]),
    (2, [[0, 1], [2]]),
    (3, [[0], [1], [2]]),
    (4, [[0], [1], [2], []]),  # the seed's example: the fourth consumer gets nothing
])
def test_range_follows_the_seed_rule(consumers: int, expected: list[list[int]]) -> None:
    group = members(*[(f"c{i}", ("topic1",)) for i in range(1, consumers + 1)])
    got = RangeAssignor().assign({"topic1": 3}, group)
    assert [[p for _, p in got[f"c{i}"]] for i in range(1, consumers + 1)] == expected


def test_range_is_per_topic_and_sorts_static_members_first() -> None:
    group = {"b": MemberSubscription("b", ("x", "y")),
             "a": MemberSubscription("a", ("x",)),
             "z": MemberSubscription("z", ("x", "y"), group_instance_id="i-0")}
    got = RangeAssignor().assign({"x": 4, "y": 2}, group)
    assert got == {"z": [("x", 0), ("x", 1), ("y", 0)], "a": [("x", 2)],
                   "b": [("x", 3), ("y", 1)]}


def test_roundrobin_deals_sorted_partitions_to_subscribers() -> None:
    group = members(("c1", ("t0", "t1")), ("c2", ("t0", "t1")), ("c3", ("t1",)))
    got = RoundRobinAssignor().assign({"t0": 2, "t1": 3}, group)
    # Java's CircularIterator: c3 is skipped for t0, so the t1 deal starts at c3.
    assert got == {"c1": [("t0", 0), ("t1", 1)], "c2": [("t0", 1), ("t1", 2)],
                   "c3": [("t1", 0)]}


def test_make_assignors() -> None:
    assert [a.name for a in make_assignors(["cooperative-sticky", "range"])] == \
        ["cooperative-sticky", "range"]
    with pytest.raises(ValueError):
        make_assignors(["fastest"])


def test_sticky_reads_owned_partitions_from_java_and_librdkafka_metadata() -> None:
    sticky = StickyAssignor()
    # librdkafka / Java StickyAssignor: previous assignment + generation in user data.
    sub = Subscription(("t",), encode_sticky_user_data([("t", 1)], 4), version=0)
    assert sticky.member("m", None, sub) == MemberSubscription("m", ("t",), None, (("t", 1),), 4)
    # Java CooperativeStickyAssignor on subscription v1: user data is the generation.
    sub = Subscription(("t",), (9).to_bytes(4, "big"), (("t", 2),), version=1)
    assert sticky.member("m", None, sub).generation == 9
    # v2+: the subscription's own fields.
    sub = Subscription(("t",), None, (("t", 0),), 6)
    assert sticky.member("m", None, sub) == MemberSubscription("m", ("t",), None, (("t", 0),), 6)


# -- properties of the sticky assignors ------------------------------------------------------

@st.composite
def scenarios(draw: st.DrawFn, homogeneous: bool) -> tuple[dict[str, int],
                                                         dict[str, MemberSubscription]]:
    topics = {f"t{i}": draw(st.integers(1, 6)) for i in range(draw(st.integers(1, 3)))}
    everything = [(t, p) for t, n in topics.items() for p in range(n)]
    ids = [f"m{i}" for i in range(draw(st.integers(1, 6)))]
    # Previous owners: a random partial (and partly stale) assignment.
    owners = {tp: draw(st.sampled_from([*ids, None])) for tp in everything}
    group = {}
    for m in ids:
        subscribed = tuple(topics) if homogeneous else tuple(
            draw(st.lists(st.sampled_from(list(topics)), min_size=1, unique=True)))
        # A cooperative member revokes unsubscribed topics before it joins.
        owned = tuple(tp for tp, owner in owners.items() if owner == m and tp[0] in subscribed)
        group[m] = MemberSubscription(m, subscribed, None, owned, 1)
    return topics, group


def _check_valid(topics: dict[str, int], group: dict[str, MemberSubscription],
                 got: dict[str, list[tuple[str, int]]], *, complete: bool) -> None:
    counts = Counter(tp for parts in got.values() for tp in parts)
    assert all(n == 1 for n in counts.values()), "a partition assigned twice"
    for m, parts in got.items():
        assert all(t in group[m].topics for t, _ in parts), "assigned an unsubscribed topic"
    wanted = {(t, p) for t, n in topics.items() for p in range(n)
              if any(t in s.topics for s in group.values())}
    if complete:
        assert set(counts) == wanted


def _check_balanced(group: dict[str, MemberSubscription],
                    got: dict[str, list[tuple[str, int]]]) -> None:
    """No subscriber of a topic could take a partition from someone with two more."""
    for donor, parts in got.items():
        for topic, _ in parts:
            for taker in got:
                if topic in group[taker].topics:
                    assert len(got[taker]) >= len(parts) - 1, (donor, taker, got)


@settings(max_examples=150, deadline=None)
@given(case=scenarios(homogeneous=True))
def test_sticky_homogeneous(case: tuple[dict[str, int], dict[str, MemberSubscription]]) -> None:
    topics, group = case
    got = StickyAssignor().assign(topics, group)
    _check_valid(topics, group, got, complete=True)
    sizes = [len(p) for p in got.values()]
    assert max(sizes) - min(sizes) <= 1
    quota = sum(topics.values()) // len(group)
    for m, sub in group.items():  # everyone keeps what it had, up to its fair share
        assert len(set(sub.owned) & set(got[m])) >= min(len(sub.owned), quota)


@settings(max_examples=150, deadline=None)
@given(case=scenarios(homogeneous=False))
def test_sticky_heterogeneous(case: tuple[dict[str, int], dict[str, MemberSubscription]]
                              ) -> None:
    topics, group = case
    got = StickyAssignor().assign(topics, group)
    _check_valid(topics, group, got, complete=True)
    _check_balanced(group, got)


def _cooperative_rounds(topics: dict[str, int], group: dict[str, MemberSubscription]
                       ) -> tuple[int, dict[str, list[tuple[str, int]]],
                                  dict[str, set[tuple[str, int]]]]:
    """Rebalance after rebalance (owners revoke what they lost, everyone rejoins with
    what they kept) until the assignment is a fixed point. Every round is checked:
    valid, and nothing goes straight from one owner to another."""
    revoked: dict[str, set[tuple[str, int]]] = {m: set() for m in group}
    current = group
    for rounds in range(1, 8):
        got = COOPERATIVE.assign(topics, current)
        _check_valid(topics, current, got, complete=False)
        for m, parts in got.items():
            for tp in parts:
                assert tp in current[m].owned or all(tp not in s.owned
                                                     for s in current.values())
            revoked[m] |= set(current[m].owned) - set(parts)
        current = {m: MemberSubscription(m, s.topics, None, tuple(got[m]), rounds + 1)
                   for m, s in group.items()}
        if COOPERATIVE.assign(topics, current) == got:  # settled
            return rounds, got, revoked
    raise AssertionError("the cooperative rebalances never settle")


@settings(max_examples=200, deadline=None)
@given(case=scenarios(homogeneous=True))
def test_cooperative_takes_two_rounds_and_revokes_only_what_moves(
        case: tuple[dict[str, int], dict[str, MemberSubscription]]) -> None:
    topics, group = case
    rounds, final, revoked = _cooperative_rounds(topics, group)
    _check_valid(topics, group, final, complete=True)
    sizes = [len(p) for p in final.values()]
    assert max(sizes) - min(sizes) <= 1
    assert rounds <= 2, "more than one follow-up rebalance"
    for m, parts in final.items():
        assert not revoked[m] & set(parts), "revoked a partition that stayed"


@settings(max_examples=200, deadline=None)
@given(case=scenarios(homogeneous=False))
def test_cooperative_settles_with_mixed_subscriptions(
        case: tuple[dict[str, int], dict[str, MemberSubscription]]) -> None:
    topics, group = case
    _, final, _ = _cooperative_rounds(topics, group)
    _check_valid(topics, group, final, complete=True)
    _check_balanced(group, final)


def test_cooperative_only_moves_what_balance_needs() -> None:
    before = {"a": MemberSubscription("a", ("t",), None, tuple(("t", p) for p in range(6)), 3)}
    group = {**before, "b": MemberSubscription("b", ("t",))}
    first = COOPERATIVE.assign({"t": 6}, group)
    assert len(first["a"]) == 3 and first["b"] == []  # a revokes three, b waits for them
    second = COOPERATIVE.assign({"t": 6}, {
        "a": MemberSubscription("a", ("t",), None, tuple(first["a"]), 4),
        "b": MemberSubscription("b", ("t",), None, (), 4)})
    assert second["a"] == first["a"] and len(second["b"]) == 3
