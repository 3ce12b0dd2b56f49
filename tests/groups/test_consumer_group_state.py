"""ConsumerGroup (KIP-848), the pure state machine, and the server-side assignors."""

from __future__ import annotations

import pytest

from slog.core.kafka_errors import ErrorCode, KafkaApiError
from slog.groups.consumer_group import (
    ConsumerGroup,
    ConsumerGroupState,
    ConsumerHeartbeat,
    HeartbeatOutcome,
    MemberState,
    TopicInfo,
)
from slog.groups.server_assignors import (
    ASSIGNORS,
    MemberSubscription,
    RangeAssignor,
    UniformAssignor,
    assignors_from_config,
)

SESSION = 45_000
TOPICS = {"t": TopicInfo("id-t", 6), "u": TopicInfo("id-u", 2), "logs-a": TopicInfo("id-a", 1),
          "logs-b": TopicInfo("id-b", 1)}


def group() -> ConsumerGroup:
    return ConsumerGroup("g", assignors_from_config("uniform,range"))


def beat(g: ConsumerGroup, member: str, epoch: int, *, topics: list[str] | None = None,
         owned: frozenset[tuple[str, int]] | None = None, now: float = 0, version: int = 1,
         view: dict[str, TopicInfo] | None = None, **kw: object) -> HeartbeatOutcome:
    if epoch == 0:
        kw.setdefault("rebalance_timeout_ms", 10_000)
        owned = frozenset() if owned is None else owned
        if topics is None and "subscribed_topic_regex" not in kw:
            topics = ["t"]
    request = ConsumerHeartbeat(member, epoch, subscribed_topic_names=topics, owned=owned,
                                **kw)  # type: ignore[arg-type]
    return g.heartbeat(request, view if view is not None else TOPICS, version, now, SESSION)


def fails(code: ErrorCode, *args: object, **kw: object) -> None:
    with pytest.raises(KafkaApiError) as exc:
        beat(*args, **kw)  # type: ignore[arg-type]
    assert exc.value.code is code


def no_double_owner(g: ConsumerGroup) -> None:
    seen: dict[tuple[str, int], str] = {}
    for m in g.members.values():
        for tp in m.assigned | m.pending_revocation:
            assert tp not in seen, f"{tp} held by {seen[tp]} and {m.member_id}"
            seen[tp] = m.member_id


def test_one_member_gets_everything_at_once() -> None:
    g = group()
    out = beat(g, "a", 0)
    assert out.member_epoch == g.group_epoch == g.target_epoch == 1  # one bump per heartbeat
    assert out.assignment == frozenset(("id-t", p) for p in range(6))
    assert g.state is ConsumerGroupState.STABLE
    assert g.take_changes()
    # Idle heartbeats change nothing and send no assignment.
    again = beat(g, "a", out.member_epoch)
    assert again.assignment is None and again.member_epoch == out.member_epoch
    assert not g.changes


def test_revocation_comes_before_assignment() -> None:
    g = group()
    a = beat(g, "a", 0)
    b = beat(g, "b", 0)
    # b's target is half of t, but a still owns it: b gets nothing yet.
    assert b.assignment == frozenset() and g.members["b"].state is \
        MemberState.UNRELEASED_PARTITIONS
    no_double_owner(g)
    # a is told to give up three partitions; its epoch stays until it acks.
    a2 = beat(g, "a", a.member_epoch, owned=a.assignment)
    assert a2.member_epoch == a.member_epoch and a2.assignment is not None
    assert len(a2.assignment) == 3
    assert g.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    assert g.state is ConsumerGroupState.RECONCILING
    b2 = beat(g, "b", b.member_epoch)
    assert b2.assignment is None  # still held by a
    no_double_owner(g)
    # a acks (owns only what it kept): it moves to the new epoch, b gets the rest.
    a3 = beat(g, "a", a2.member_epoch, owned=a2.assignment)
    assert a3.member_epoch == g.target_epoch
    b3 = beat(g, "b", b2.member_epoch)
    assert b3.assignment is not None and len(b3.assignment) == 3
    assert b3.assignment.isdisjoint(a2.assignment)
    assert g.state is ConsumerGroupState.STABLE
    no_double_owner(g)


def test_fencing_rules() -> None:
    g = group()
    a = beat(g, "a", 0)
    fails(ErrorCode.fenced_member_epoch, g, "a", a.member_epoch + 1)
    fails(ErrorCode.unknown_member_id, g, "zz", 3)
    # An epoch behind is fenced unless it is the previous one with a subset owned.
    beat(g, "b", 0)
    a2 = beat(g, "a", a.member_epoch, owned=a.assignment)
    beat(g, "a", a2.member_epoch, owned=a2.assignment)
    current = g.members["a"]
    assert current.previous_member_epoch == a.member_epoch
    beat(g, "a", current.previous_member_epoch, owned=current.assigned)  # lost answer: fine
    fails(ErrorCode.fenced_member_epoch, g, "a", current.previous_member_epoch,
          owned=frozenset(("id-t", p) for p in range(6)))
    fails(ErrorCode.fenced_member_epoch, g, "a", 1)


def test_leave_frees_partitions_and_bumps_the_epoch() -> None:
    g = group()
    a = beat(g, "a", 0)
    epoch = g.group_epoch
    out = beat(g, "a", -1)
    assert out.member_epoch == -1 and g.group_epoch == epoch + 1
    assert not g.owners and g.state is ConsumerGroupState.EMPTY
    assert "a" in g.changes.removed
    fails(ErrorCode.unknown_member_id, g, "a", a.member_epoch)


def test_session_and_rebalance_timeouts() -> None:
    g = group()
    a = beat(g, "a", 0, now=0)
    beat(g, "b", 0, now=0)
    beat(g, "a", a.member_epoch, owned=a.assignment, now=1000)  # told to revoke
    assert g.members["a"].revocation_deadline_ms == 11_000
    assert g.expire(10_999) == []
    assert g.expire(11_000) == ["a"]  # did not revoke in time: fenced
    assert not any(owner == "a" for owner in g.owners.values())
    assert g.expire(SESSION) == ["b"]  # no heartbeat for a session


def test_static_member_keeps_its_place() -> None:
    g = group()
    a = beat(g, "a1", 0, instance_id="i")
    epoch = g.group_epoch
    fails(ErrorCode.unreleased_instance_id, g, "a2", 0, instance_id="i")
    beat(g, "a1", -2, instance_id="i")
    assert g.members["a1"].member_epoch == -2 and g.owners  # keeps its partitions
    back = beat(g, "a2", 0, instance_id="i")
    assert back.assignment == a.assignment and back.member_epoch == a.member_epoch
    assert g.group_epoch == epoch and "a1" not in g.members
    fails(ErrorCode.unknown_member_id, g, "a1", a.member_epoch)
    fails(ErrorCode.fenced_instance_id, g, "a2", a.member_epoch, instance_id="other")
    with pytest.raises(KafkaApiError) as exc:
        beat(g, "x", -2)
    assert exc.value.code is ErrorCode.unknown_member_id


def test_regex_and_metadata_changes_bump_the_epoch() -> None:
    g = group()
    out = beat(g, "a", 0, subscribed_topic_regex="logs-.*")
    assert out.assignment == {("id-a", 0), ("id-b", 0)}
    epoch = g.group_epoch
    # Same metadata version: nothing looked at again.
    beat(g, "a", out.member_epoch)
    assert g.group_epoch == epoch
    view = dict(TOPICS, **{"logs-c": TopicInfo("id-c", 2)})
    again = beat(g, "a", out.member_epoch, version=2, view=view)
    assert g.group_epoch == epoch + 1
    assert again.assignment is not None and ("id-c", 1) in again.assignment
    fails(ErrorCode.invalid_regular_expression, g, "b", 0, subscribed_topic_regex="(")


def test_unknown_assignor_and_max_size() -> None:
    g = group()
    fails(ErrorCode.unsupported_assignor, g, "a", 0, server_assignor="sticky")
    g.max_size = 1
    beat(g, "a", 0, server_assignor="range")
    assert g.assignor_name() == "range"
    fails(ErrorCode.group_max_size_reached, g, "b", 0)


def test_offset_commit_checks_member_epochs() -> None:
    g = group()
    g.validate_offset_commit("", -1)  # empty group: an admin commit is fine
    a = beat(g, "a", 0)
    g.validate_offset_commit("a", a.member_epoch)
    for member, epoch, code in (("a", a.member_epoch - 1, ErrorCode.stale_member_epoch),
                                ("b", 1, ErrorCode.unknown_member_id),
                                ("", -1, ErrorCode.unknown_member_id)):
        with pytest.raises(KafkaApiError) as exc:
            g.validate_offset_commit(member, epoch)
        assert exc.value.code is code
    g.validate_offset_fetch(None, -1)


def test_txn_offset_commit_checks_member_epochs() -> None:
    """TxnOffsetCommit has no STALE_MEMBER_EPOCH: a stale epoch is ILLEGAL_GENERATION."""
    g = group()
    g.validate_txn_offset_commit("", None, -1)  # empty group: an admin-style commit is fine
    g.validate_txn_offset_commit("gone", "static", -1)  # no generation, empty group: too
    a = beat(g, "a", 0)
    g.validate_txn_offset_commit("a", None, a.member_epoch)
    for member, epoch, code in (("a", a.member_epoch - 1, ErrorCode.illegal_generation),
                                ("a", a.member_epoch + 1, ErrorCode.illegal_generation),
                                ("a", -1, ErrorCode.illegal_generation),
                                ("b", 1, ErrorCode.unknown_member_id),
                                ("", 0, ErrorCode.unknown_member_id)):
        with pytest.raises(KafkaApiError) as exc:
            g.validate_txn_offset_commit(member, None, epoch)
        assert exc.value.code is code


def test_txn_offset_commit_without_member_fields_passes_into_an_active_group() -> None:
    """As Kafka: TxnOffsetCommit's member id, instance id and generation are optional
    (producers before KIP-447 send none), so naming none of them is not checked; naming
    only an instance id makes the member id count, and no member has the empty one."""
    g = group()
    beat(g, "a", 0)
    g.validate_txn_offset_commit("", None, -1)
    with pytest.raises(KafkaApiError) as exc:
        g.validate_txn_offset_commit("", "static-a", -1)
    assert exc.value.code is ErrorCode.unknown_member_id


def test_many_members_converge_without_double_ownership() -> None:
    g = group()
    owned: dict[str, frozenset[tuple[str, int]]] = {}
    epochs: dict[str, int] = {}
    for name in "abcdef":
        out = beat(g, name, 0)
        epochs[name], owned[name] = out.member_epoch, out.assignment or frozenset()
        for _ in range(4):  # every member heartbeats and acks what it was told
            for m in list(epochs):
                res = beat(g, m, epochs[m], owned=owned[m])
                epochs[m] = res.member_epoch
                if res.assignment is not None:
                    owned[m] = res.assignment
                no_double_owner(g)
    assert g.state is ConsumerGroupState.STABLE
    sizes = sorted(len(g.members[m].assigned) for m in g.members)
    assert sizes == [1, 1, 1, 1, 1, 1]


def test_uniform_is_balanced_and_sticky() -> None:
    topics = {"x": 7, "y": 3}
    both = frozenset(topics)
    first = UniformAssignor().assign(
        {m: MemberSubscription(both, frozenset()) for m in "abc"}, topics)
    assert sorted(len(v) for v in first.values()) == [3, 3, 4]
    assert frozenset().union(*first.values()) == {(t, p) for t in topics
                                                  for p in range(topics[t])}
    second = UniformAssignor().assign(
        {m: MemberSubscription(both, first.get(m, frozenset())) for m in "abcd"}, topics)
    assert sorted(len(v) for v in second.values()) == [2, 2, 3, 3]
    for m in "abc":  # only what d needed moved
        assert second[m] <= first[m]


def test_uniform_with_different_subscriptions() -> None:
    out = UniformAssignor().assign({"a": MemberSubscription(frozenset({"x"}), frozenset()),
                                    "b": MemberSubscription(frozenset({"x", "y"}), frozenset())},
                                   {"x": 4, "y": 4})
    assert all(tp[0] == "x" for tp in out["a"])
    assert len(out["a"]) == len(out["b"]) == 4


def test_range_gives_contiguous_ranges() -> None:
    out = RangeAssignor().assign({m: MemberSubscription(frozenset({"x", "y"}), frozenset())
                                  for m in "ab"}, {"x": 3, "y": 3})
    assert out["a"] == {("x", 0), ("x", 1), ("y", 0), ("y", 1)}
    assert out["b"] == {("x", 2), ("y", 2)}


def test_assignors_config() -> None:
    assert [a.name for a in assignors_from_config(" range , uniform")] == ["range", "uniform"]
    assert set(ASSIGNORS) == {"uniform", "range"}
    with pytest.raises(KafkaApiError):
        assignors_from_config("cooperative-sticky")


def test_a_snapshot_restores_what_a_heartbeat_changed_unless_a_later_one_followed() -> None:
    g = group()
    a = beat(g, "a", 0)
    state = (g.group_epoch, g.target_epoch, dict(g.target), dict(g.owners),
             g.members["a"].assigned)
    first = g.snapshot(("b",))
    beat(g, "b", 0)
    assert g.restore(first)
    assert (g.group_epoch, g.target_epoch, dict(g.target), dict(g.owners),
            g.members["a"].assigned) == state and set(g.members) == {"a"}
    first = g.snapshot(("a",))
    beat(g, "a", a.member_epoch, topics=["t", "u"])
    g.snapshot(("a",))  # a later change on top: the first one is no longer revertible
    assert not g.restore(first)
    assert g.members["a"].subscribed_topic_names == ("t", "u")
