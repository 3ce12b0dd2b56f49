"""The group coordinator's rules, driven directly with a controlled clock.

The coordinator runs over real PartitionLogs (see ``local_log``), so every
write goes to a log that a fresh coordinator then loads back.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slog.core.consumer_protocol import Subscription, encode_subscription
from slog.core.kafka_errors import ErrorCode
from slog.core.offsets_records import OffsetKey, decode_key
from slog.core.records import BatchBuilder, iter_decoded_batches
from slog.groups.coordinator import GroupConfig, GroupCoordinator, ListedGroup
from slog.groups.group import GroupState, GroupSummary
from slog.groups.manager import GroupMetadataManager
from slog.groups.member import JoinResult, SyncResult
from slog.groups.offsets import OffsetAndMetadata, TopicPartition
from slog.groups.requests import (
    HeartbeatRequest,
    JoinGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from slog.transactions.offsets import PendingTxnOffsets
from tests.groups.local_log import LocalOffsetsLog

RANGE = (("range", encode_subscription(Subscription(("t",)))),)


class Box:
    """Catches one callback answer."""

    def __init__(self) -> None:
        self.values: list[Any] = []

    def __call__(self, value: Any) -> None:
        self.values.append(value)

    @property
    def value(self) -> Any:
        assert len(self.values) <= 1, self.values
        return self.values[0] if self.values else None


class Harness:
    def __init__(self, root: Path, log: LocalOffsetsLog | None = None, **config: Any):
        self.now = 0.0
        self.log = log or LocalOffsetsLog(root)
        self.manager = GroupMetadataManager(self.log, 1, lambda: 1_700_000_000_000 +
                                            int(self.now))
        self.coordinator = GroupCoordinator(
            GroupConfig(min_session_timeout_ms=10, **config), self.manager,
            clock=lambda: self.now, wall=lambda: 1_700_000_000_000 + int(self.now))
        self.manager.on_election(0)  # no event loop: loads in place

    def join(self, group: str = "g", member: str = "", *, version: int = 5,
             instance: str | None = None, protocols: Any = RANGE, session: int = 1000,
             rebalance: int = 1000, protocol_type: str = "consumer",
             client: str = "client") -> Box:
        box = Box()
        self.coordinator.handle_join_group(JoinGroupRequest(
            group, member, instance, client, "/127.0.0.1", rebalance, session, protocol_type,
            protocols, require_known_member_id=version >= 4 and instance is None,
            support_skip_assignment=version >= 9), box)
        return box

    def join_new(self, group: str = "g", **kwargs: Any) -> Box:
        """A v4+ newcomer: MEMBER_ID_REQUIRED, then the real join."""
        first = self.join(group, **kwargs).value
        assert first.error is ErrorCode.member_id_required
        return self.join(group, first.member_id, **kwargs)

    def sync(self, result: JoinResult, group: str = "g",
             assignments: dict[str, bytes] | None = None, generation: int | None = None,
             instance: str | None = None) -> Box:
        box = Box()
        self.coordinator.handle_sync_group(SyncGroupRequest(
            group, result.generation_id if generation is None else generation,
            result.member_id, instance, "consumer", result.protocol_name, assignments or {}), box)
        return box

    def heartbeat(self, result: JoinResult, group: str = "g", generation: int | None = None
                  ) -> ErrorCode:
        return self.coordinator.handle_heartbeat(HeartbeatRequest(
            group, result.member_id, None,
            result.generation_id if generation is None else generation))

    def commit(self, group: str, member: str, generation: int,
               offsets: dict[tuple[str, int], int], metadata: str = "", *,
               version: int = 8) -> dict[Any, ErrorCode]:
        box = Box()
        self.coordinator.handle_commit_offsets(OffsetCommitRequest(
            group, member, None, generation,
            {tp: OffsetAndMetadata(o, -1, metadata, 1_700_000_000_000)
             for tp, o in offsets.items()}, report_unknown_group=version >= 9), box)
        return box.value

    def advance(self, ms: float) -> None:
        self.now += ms
        self.coordinator.expire()

    def state(self, group: str = "g") -> GroupState:
        found = self.manager.get(group)
        return GroupState.DEAD if found is None else found.state


@pytest.fixture
def h(tmp_path: Path) -> Iterator[Harness]:
    harness = Harness(tmp_path)
    yield harness
    harness.log.close()


def _fetched(coordinator: GroupCoordinator, group_id: str,
             partitions: list[TopicPartition] | None) -> dict[TopicPartition,
                                                           OffsetAndMetadata | None]:
    error, offsets = coordinator.handle_fetch_offsets(OffsetFetchRequest(group_id, partitions))
    assert error is ErrorCode.none
    return offsets


def stable_pair(h: Harness) -> tuple[JoinResult, JoinResult]:
    """Two members, generation 2, both synced."""
    a = h.join_new().value
    h.sync(a, assignments={a.member_id: b"a1"})
    b_box = h.join_new()
    assert b_box.value is None  # waits for the leader to rejoin
    assert h.heartbeat(a) is ErrorCode.rebalance_in_progress
    a = h.join(member=a.member_id).value
    b = b_box.value
    assert a.generation_id == b.generation_id == 2
    b_sync = h.sync(b)
    assert b_sync.value is None  # a follower waits for the leader's assignment
    a_sync = h.sync(a, assignments={a.member_id: b"for-a", b.member_id: b"for-b"})
    assert (a_sync.value.assignment, b_sync.value.assignment) == (b"for-a", b"for-b")
    return a, b


def test_first_joiner_gets_an_id_then_leads(h: Harness) -> None:
    first = h.join(version=4).value
    assert first.error is ErrorCode.member_id_required and first.member_id.startswith("client-")
    joined = h.join(member=first.member_id, version=4).value
    assert (joined.error, joined.generation_id, joined.leader_id) == \
        (ErrorCode.none, 1, first.member_id)
    assert [m.member_id for m in joined.members] == [first.member_id]
    assert h.state() is GroupState.COMPLETING_REBALANCE
    synced = h.sync(joined, assignments={joined.member_id: b"mine"}).value
    assert synced == SyncResult(ErrorCode.none, "consumer", "range", b"mine")
    assert h.state() is GroupState.STABLE


def test_old_clients_join_without_the_member_id_round(h: Harness) -> None:
    joined = h.join(version=3).value
    assert joined.error is ErrorCode.none and joined.generation_id == 1


def test_rebalance_when_a_member_arrives(h: Harness) -> None:
    a, b = stable_pair(h)
    assert a.leader_id == a.member_id and b.members == ()
    assert {m.member_id for m in a.members} == {a.member_id, b.member_id}
    assert h.heartbeat(a) is ErrorCode.none and h.heartbeat(b) is ErrorCode.none


def test_heartbeat_and_sync_errors(h: Harness) -> None:
    a, _ = stable_pair(h)
    assert h.heartbeat(a, generation=1) is ErrorCode.illegal_generation
    beat = h.coordinator.handle_heartbeat
    assert beat(HeartbeatRequest("g", "stranger", None, 2)) is ErrorCode.unknown_member_id
    assert beat(HeartbeatRequest("nope", "x", None, 1)) is ErrorCode.unknown_member_id
    assert h.sync(a, generation=7).value.error is ErrorCode.illegal_generation
    assert beat(HeartbeatRequest("", "x", None, 1)) is ErrorCode.invalid_group_id


def test_session_timeout_evicts_a_silent_member(h: Harness) -> None:
    a, b = stable_pair(h)
    for _ in range(5):
        h.advance(300)
        assert h.heartbeat(a) in (ErrorCode.none, ErrorCode.rebalance_in_progress)
    assert h.heartbeat(a) is ErrorCode.rebalance_in_progress  # b missed its session
    rejoined = h.join(member=a.member_id).value
    assert rejoined.generation_id == 3 and [m.member_id for m in rejoined.members] == \
        [a.member_id]
    assert h.heartbeat(b, generation=2) is ErrorCode.unknown_member_id


def test_a_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout(h: Harness) -> None:
    a, b = stable_pair(h)
    assert h.heartbeat(b) is ErrorCode.none
    c = h.join_new()
    rejoin_a = h.join(member=a.member_id)
    h.advance(500)
    assert h.heartbeat(b) is ErrorCode.rebalance_in_progress  # alive, but never rejoins
    h.advance(600)  # past the 1000 ms rebalance timeout
    assert rejoin_a.value.generation_id == c.value.generation_id == 3
    assert {m.member_id for m in rejoin_a.value.members} == {a.member_id, c.value.member_id}


def test_members_that_never_sync_are_removed(h: Harness) -> None:
    a = h.join_new(session=5000).value
    b_box = h.join_new(session=5000)
    a = h.join(member=a.member_id, session=5000).value
    b = b_box.value
    h.sync(a, assignments={})
    assert h.state() is GroupState.STABLE
    h.advance(1100)  # b never sent SyncGroup within the 1000 ms rebalance timeout
    assert h.heartbeat(b) is ErrorCode.unknown_member_id
    assert h.heartbeat(a) is ErrorCode.rebalance_in_progress


def test_static_member_restart_within_session_keeps_its_assignment(h: Harness) -> None:
    joined = h.join(instance="host-1").value
    assert joined.error is ErrorCode.none and joined.member_id.startswith("host-1-")
    h.sync(joined, assignments={joined.member_id: b"p0"}, instance="host-1")
    # The process restarts: same instance id, no member id, no LeaveGroup.
    again = h.join(instance="host-1").value
    assert (again.error, again.generation_id) == (ErrorCode.none, 1)
    assert again.member_id != joined.member_id
    assert h.state() is GroupState.STABLE  # no rebalance
    synced = h.sync(again, instance="host-1").value
    assert synced.assignment == b"p0"
    # The old incarnation is fenced.
    box = Box()
    h.coordinator.handle_sync_group(
        SyncGroupRequest("g", 1, joined.member_id, "host-1", None, None, {}), box)
    assert box.value.error is ErrorCode.fenced_instance_id


def test_static_member_gone_for_longer_than_its_session_is_removed(h: Harness) -> None:
    joined = h.join(instance="host-1").value
    h.sync(joined, assignments={}, instance="host-1")
    h.advance(1500)
    assert h.state() is GroupState.EMPTY


def test_a_session_that_ran_out_counts_before_the_timer_looks(h: Harness) -> None:
    """librdkafka's admin test waits a static member's session out, then deletes its group
    at once: the deletion must not depend on the expiry timer having woken already."""
    joined = h.join(instance="host-1").value
    h.sync(joined, assignments={}, instance="host-1")
    h.now += 1000  # exactly the session: no expire() has run
    assert h.state() is GroupState.STABLE
    assert h.coordinator.handle_delete_groups(["g"]) == {"g": ErrorCode.none}
    assert h.state() is GroupState.DEAD


def test_group_max_size(tmp_path: Path) -> None:
    h = Harness(tmp_path, max_size=2)
    stable_pair(h)
    third = h.join(version=4).value
    assert third.error is ErrorCode.group_max_size_reached
    assert h.state() is GroupState.STABLE and h.manager.get("g").size == 2  # type: ignore[union-attr]


def test_inconsistent_protocols(h: Harness) -> None:
    a = h.join(version=3).value
    assert h.join(version=3, protocol_type="connect").value.error is \
        ErrorCode.inconsistent_group_protocol
    assert h.join(version=3, protocols=(("sticky", b""),)).value.error is \
        ErrorCode.inconsistent_group_protocol
    assert h.join(group="other", version=3, protocols=()).value.error is \
        ErrorCode.inconsistent_group_protocol
    assert h.manager.get("g").generation_id == a.generation_id  # type: ignore[union-attr]


def test_session_timeout_bounds(tmp_path: Path) -> None:
    h = Harness(tmp_path, max_session_timeout_ms=5000)
    assert h.join(session=5).value.error is ErrorCode.invalid_session_timeout
    assert h.join(session=6000).value.error is ErrorCode.invalid_session_timeout


def test_initial_rebalance_delay_gathers_early_members(tmp_path: Path) -> None:
    h = Harness(tmp_path, initial_rebalance_delay_ms=300)
    first, second = h.join(version=3, rebalance=2000), h.join(version=3, rebalance=2000)
    assert first.value is None and second.value is None
    h.advance(200)
    third = h.join(version=3, rebalance=2000)  # a late joiner: the delay starts over
    h.advance(200)
    h.advance(200)
    assert third.value is None
    h.advance(200)
    assert {b.value.generation_id for b in (first, second, third)} == {1}
    assert len(first.value.members) == 3


def test_commit_rules(h: Harness) -> None:
    tp = ("t", 0)
    # A "simple" consumer (no group management) may commit to an empty group.
    assert h.commit("solo", "", -1, {tp: 5}) == {tp: ErrorCode.none}
    assert _fetched(h.coordinator, "solo", [tp])[tp].offset == 5  # type: ignore[union-attr]
    assert h.commit("never-seen", "m", 3, {tp: 5}) == {tp: ErrorCode.illegal_generation}
    # v9 (KIP-848) names the problem; a simple consumer's commit still creates the group.
    assert h.commit("never-seen", "m", 3, {tp: 5}, version=9) == \
        {tp: ErrorCode.group_id_not_found}
    assert h.commit("solo-v9", "", -1, {tp: 6}, version=9) == {tp: ErrorCode.none}
    a, b = stable_pair(h)
    assert h.commit("g", "", -1, {tp: 1}) == {tp: ErrorCode.unknown_member_id}
    assert h.commit("g", "stranger", 2, {tp: 1}) == {tp: ErrorCode.unknown_member_id}
    assert h.commit("g", a.member_id, 1, {tp: 1}) == {tp: ErrorCode.illegal_generation}
    assert h.commit("g", a.member_id, 2, {tp: 1}, metadata="x" * 5000) == \
        {tp: ErrorCode.offset_metadata_too_large}
    assert h.commit("g", a.member_id, 2, {tp: 7}) == {tp: ErrorCode.none}
    h.join_new()  # a newcomer: PreparingRebalance, commits still accepted
    assert h.commit("g", b.member_id, 2, {tp: 8}) == {tp: ErrorCode.none}
    error, offsets = h.coordinator.handle_fetch_offsets(OffsetFetchRequest("g", None))
    assert error is ErrorCode.none and offsets[tp].offset == 8  # type: ignore[union-attr]


def test_list_groups_by_state_and_type(h: Harness) -> None:
    stable_pair(h)
    h.commit("simple", "", -1, {("t", 0): 1})
    everything = h.coordinator.handle_list_groups()
    assert everything == (ErrorCode.none, [("g", "consumer", "Stable", "classic"),
                                           ("simple", "", "Empty", "classic")])
    # Both filters ignore case, as Kafka's; a type no group has matches nothing.
    assert h.coordinator.handle_list_groups(types=["CLASSIC"]) == everything
    assert h.coordinator.handle_list_groups(["stable"], ["Classic"])[1] == [everything[1][0]]
    for other in ("consumer", "share", "streams", "no-such-type"):
        assert h.coordinator.handle_list_groups(types=[other]) == (ErrorCode.none, [])
    assert h.coordinator.handle_list_groups(["empty"], ["consumer", "classic"])[1] == \
        [everything[1][1]]


def test_describing_a_group_that_does_not_exist(h: Harness) -> None:
    assert h.coordinator.handle_describe_group("missing")[0] is ErrorCode.group_id_not_found
    h.commit("old", "", -1, {("t", 0): 3})
    assert h.coordinator.handle_describe_group("old")[1].state == "Empty"
    h.coordinator.handle_delete_groups(["old"])
    assert h.coordinator.handle_describe_group("old")[0] is ErrorCode.group_id_not_found


def test_commit_while_completing_the_rebalance(h: Harness) -> None:
    joined = h.join(version=3).value
    assert h.commit("g", joined.member_id, 1, {("t", 0): 1}) == \
        {("t", 0): ErrorCode.rebalance_in_progress}


def test_leave_group(h: Harness) -> None:
    a, b = stable_pair(h)
    error, errors = h.coordinator.handle_leave_group(
        "g", [(b.member_id, None), ("stranger", None)])
    assert (error, errors) == (ErrorCode.none, [ErrorCode.none, ErrorCode.unknown_member_id])
    assert h.heartbeat(a) is ErrorCode.rebalance_in_progress
    rejoined = h.join(member=a.member_id).value
    assert [m.member_id for m in rejoined.members] == [a.member_id]


def test_leave_by_group_instance_id(h: Harness) -> None:
    joined = h.join(instance="host-1").value
    h.sync(joined, assignments={}, instance="host-1")
    assert h.coordinator.handle_leave_group("g", [("", "host-1")]) == \
        (ErrorCode.none, [ErrorCode.none])
    assert h.state() is GroupState.EMPTY


def test_delete_groups(h: Harness) -> None:
    stable_pair(h)
    h.commit("old", "", -1, {("t", 0): 3})
    errors = h.coordinator.handle_delete_groups(["g", "old", "missing"])
    assert errors == {"g": ErrorCode.non_empty_group, "old": ErrorCode.none,
                      "missing": ErrorCode.group_id_not_found}
    assert _fetched(h.coordinator, "old", [("t", 0)]) == {("t", 0): None}


def test_offset_delete_spares_subscribed_topics(h: Harness) -> None:
    a, _ = stable_pair(h)
    h.commit("g", a.member_id, 2, {("t", 0): 1, ("other", 0): 2})
    error, errors = h.coordinator.handle_delete_offsets("g", [("t", 0), ("other", 0)])
    assert error is ErrorCode.none
    assert errors == {("t", 0): ErrorCode.group_subscribed_to_topic, ("other", 0): ErrorCode.none}
    assert set(_fetched(h.coordinator, "g", None)) == {("t", 0)}
    assert h.coordinator.handle_delete_offsets("missing", [("t", 0)])[0] is \
        ErrorCode.group_id_not_found


def test_offsets_of_an_empty_group_expire(tmp_path: Path) -> None:
    h = Harness(tmp_path, offsets_retention_ms=10_000, offsets_retention_check_ms=1000)
    joined = h.join(version=3).value
    h.sync(joined, assignments={})
    h.commit("g", joined.member_id, 1, {("t", 0): 4})
    h.coordinator.handle_leave_group("g", [(joined.member_id, None)])
    h.advance(5000)
    assert _fetched(h.coordinator, "g", [("t", 0)])[("t", 0)] is not None
    h.advance(6000)
    assert _fetched(h.coordinator, "g", [("t", 0)])[("t", 0)] is None
    assert h.state() is GroupState.DEAD  # empty and without offsets: gone


def test_an_offset_awaiting_its_marker_keeps_the_group_from_expiring(tmp_path: Path) -> None:
    """As Kafka: a partition with a transactional offset still to be committed or aborted
    keeps its committed offset, and the group stays; DeleteGroups drops the pending one."""
    h = Harness(tmp_path, offsets_retention_ms=10_000, offsets_retention_check_ms=1000)
    pending = PendingTxnOffsets()
    h.manager.txn_offsets = pending
    h.commit("g", "", -1, {("t", 0): 4})
    pending.add(9, 0, "g", {("t", 0): OffsetAndMetadata(5, -1, "", 1_700_000_000_000)})
    h.advance(11_000)
    assert _fetched(h.coordinator, "g", [("t", 0)])[("t", 0)] is not None
    assert h.state() is GroupState.EMPTY
    assert h.coordinator.handle_delete_groups(["g"]) == {"g": ErrorCode.none}
    assert pending.partitions_of("g") == set()
    assert pending.take(9, lambda group: True) == {}  # the marker brings nothing back


def test_offsets_awaiting_a_marker_make_an_unknown_group_id_a_group(tmp_path: Path) -> None:
    """As Kafka's TxnOffsetCommit: an unknown group id without a generation becomes an
    Empty simple group once its offsets are held, before any marker; it stays while they
    wait and, after an ABORT (they are dropped), expires as an empty group without
    offsets. One with a generation is refused and makes nothing."""
    h = Harness(tmp_path, offsets_retention_ms=10_000, offsets_retention_check_ms=1000)
    pending = PendingTxnOffsets()
    h.manager.txn_offsets = pending
    offsets = {("t", 0): OffsetAndMetadata(5, -1, "", 1_700_000_000_000)}
    assert h.coordinator.validate_txn_offset_commit(
        OffsetCommitRequest("g", "m", None, 3, offsets)) is ErrorCode.illegal_generation
    assert h.coordinator.validate_txn_offset_commit(
        OffsetCommitRequest("g", "", None, -1, offsets)) is None
    assert h.state() is GroupState.DEAD  # nothing yet: the offsets are not written
    pending.add(9, 0, "g", offsets)
    h.manager.create_txn_offset_groups(["g"])
    assert h.coordinator.handle_list_groups()[1] == [ListedGroup("g", "", "Empty", "classic")]
    assert h.coordinator.handle_describe_group("g") == (
        ErrorCode.none, GroupSummary("Empty", "", "", ()))
    assert _fetched(h.coordinator, "g", None) == {}
    h.advance(11_000)
    assert h.state() is GroupState.EMPTY  # held by its pending offsets
    assert pending.take(9, lambda group: True) == {"g": offsets}  # the ABORT
    assert h.state() is GroupState.EMPTY
    h.advance(1000)
    assert h.state() is GroupState.DEAD


def test_a_loading_coordinator_makes_the_groups_of_restored_pending_offsets(h: Harness
                                                                          ) -> None:
    """Offsets restored as pending before the load finished (or after: the broker calls
    create_txn_offset_groups then) give their groups, as Kafka's replay of the
    transactional records does; a group id of a partition not led here makes none."""
    pending = PendingTxnOffsets()
    h.manager.txn_offsets = pending
    h.commit("known", "", -1, {("t", 0): 1})
    h.manager.on_resignation(0)
    offset = OffsetAndMetadata(5, -1, "", 1_700_000_000_000)
    pending.add(9, 0, "new", {("t", 0): offset})
    pending.add(9, 0, "known", {("t", 1): offset})
    h.manager.create_txn_offset_groups(["new"])
    assert h.manager.get("new") is None  # not loaded here (yet)
    h.manager.on_election(0)
    assert h.state("new") is GroupState.EMPTY
    assert _fetched(h.coordinator, "known", None) == {
        ("t", 0): OffsetAndMetadata(1, -1, "", 1_700_000_000_000)}


def test_deleting_a_topic_drops_its_offsets_awaiting_a_marker(h: Harness) -> None:
    """As Kafka: a topic's deletion removes the offsets of open transactions too, in groups
    with state here and in groups whose first commit is transactional, and tombstones
    them so a reload does not hold them again."""
    pending = PendingTxnOffsets()
    h.manager.txn_offsets = pending
    h.commit("g", "", -1, {("kept", 0): 1})
    offset = OffsetAndMetadata(5, -1, "", 1_700_000_000_000)
    pending.add(9, 0, "g", {("t", 0): offset, ("kept", 0): offset})
    pending.add(9, 0, "new", {("t", 1): offset})
    assert h.coordinator.remove_offsets_of_deleted_topics(["t"]) == 2
    assert pending.partitions_of("g") == {("kept", 0)}
    assert pending.group_ids() == {"g"}
    chunk, _ = h.log.read(0, 0)
    tombstoned = {(key.group, key.topic, key.partition)
                  for _, _, records in iter_decoded_batches(chunk) for record in records
                  if record.value is None and isinstance(key := decode_key(record.key or b""),
                                                         OffsetKey)}
    assert tombstoned == {("g", "t", 0), ("new", "t", 1)}


def test_txn_offset_commit_needs_no_member_fields_in_an_active_group(h: Harness) -> None:
    """TxnOffsetCommit's member id, instance id and generation are optional (as Kafka); a
    plain OffsetCommit without them is refused while the group has members."""
    a, _ = stable_pair(h)
    offsets = {("t", 0): OffsetAndMetadata(1, -1, "", 1_700_000_000_000)}
    assert h.coordinator.validate_txn_offset_commit(
        OffsetCommitRequest("g", "", None, -1, offsets)) is None
    assert h.commit("g", "", -1, {("t", 0): 1}) == {("t", 0): ErrorCode.unknown_member_id}
    for member, generation, code in ((a.member_id, 1, ErrorCode.illegal_generation),
                                     ("nobody", 2, ErrorCode.unknown_member_id),
                                     (a.member_id, 2, None)):
        assert h.coordinator.validate_txn_offset_commit(
            OffsetCommitRequest("g", member, None, generation, offsets)) is code


def test_a_new_coordinator_loads_groups_and_offsets_from_the_log(h: Harness, tmp_path: Path
                                                                 ) -> None:
    a, b = stable_pair(h)
    h.commit("g", a.member_id, 2, {("t", 0): 11, ("t", 1): 12})
    h.commit("g", a.member_id, 2, {("t", 0): 13})
    h.commit("simple", "", -1, {("t", 0): 1})
    h.coordinator.handle_delete_groups(["simple"])
    fresh = Harness(tmp_path, log=h.log)
    group = fresh.manager.get("g")
    assert group is not None and group.state is GroupState.STABLE
    assert group.generation_id == 2 and set(group.members) == {a.member_id, b.member_id}
    assert group.get(b.member_id).assignment == b"for-b"
    assert _fetched(fresh.coordinator, "g", None) == {
        ("t", 0): OffsetAndMetadata(13, -1, "", 1_700_000_000_000),
        ("t", 1): OffsetAndMetadata(12, -1, "", 1_700_000_000_000)}
    assert fresh.manager.get("simple") is None
    # The loaded members keep their generation if they go on heartbeating...
    assert fresh.heartbeat(a) is ErrorCode.none
    # ...and one that does not is expired after its session timeout.
    fresh.advance(600)
    assert fresh.heartbeat(a) is ErrorCode.none
    fresh.advance(600)
    assert fresh.heartbeat(a) is ErrorCode.rebalance_in_progress


def test_loading_skips_unknown_and_invalid_records_with_a_warning(
        h: Harness, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    h.commit("solo", "", -1, {("t", 0): 5})

    def text(value: str) -> bytes:
        return struct.pack(">h", len(value)) + value.encode()

    builder = BatchBuilder()
    for key, value in [
        (b"\x00\x0c" + text("solo"), b"from a newer coordinator"),  # unknown key version
        (b"\x00\x0c" + text("other"), b"again"),
        (b"\x00\x0b" + text("solo"), None),
        (b"\x00\x01" + text("solo") + text("t") + struct.pack(">i", -1),  # partition -1
         b"\x00\x03" + struct.pack(">qi", 9, 0) + text("") + struct.pack(">q", 1)),
        (b"\x00\x01" + text("solo") + text("t") + struct.pack(">i", 0),  # value v9: newer
         b"\x00\x09" + b"\x00" * 24),
        (b"\x00\x02" + text("solo"), b"\x00\x03" + text("consumer") + struct.pack(">i", -4)),
    ]:
        builder.append(key, value, (), 1)
    h.log.append(0, builder.build())
    with caplog.at_level(logging.WARNING, logger="slog.groups"):
        fresh = Harness(tmp_path, log=h.log)
    assert _fetched(fresh.coordinator, "solo", None) == {
        ("t", 0): OffsetAndMetadata(5, -1, "", 1_700_000_000_000)}
    warnings = [r.getMessage() for r in caplog.records]
    assert sum("unknown key versions" in w and "{11: 1, 12: 2}" in w for w in warnings) == 1
    assert sum("skipping unreadable" in w for w in warnings) == 3


def test_requests_wait_while_the_partition_loads(h: Harness, tmp_path: Path) -> None:
    a, _ = stable_pair(h)

    async def scenario() -> None:
        fresh = Harness.__new__(Harness)
        fresh.now = 0.0
        fresh.log = h.log
        fresh.manager = GroupMetadataManager(h.log, 1, lambda: 0)
        fresh.coordinator = GroupCoordinator(GroupConfig(min_session_timeout_ms=10),
                                             fresh.manager, clock=lambda: 0, wall=lambda: 0)
        fresh.manager.on_election(0)  # in a loop: a background load
        assert fresh.join(version=3).value.error is ErrorCode.coordinator_load_in_progress
        assert fresh.sync(a).value.error is ErrorCode.rebalance_in_progress
        assert fresh.heartbeat(a) is ErrorCode.none  # answered blindly while loading
        await asyncio.sleep(0.05)
        assert fresh.heartbeat(a) is ErrorCode.none
        assert fresh.heartbeat(a, generation=9) is ErrorCode.illegal_generation

    asyncio.run(scenario())


def test_a_partition_named_ours_but_not_yet_taken_is_loading(h: Harness) -> None:
    """Between the metadata naming this broker leader and its replica taking the role
    (new logs are made on a worker thread), clients are told to wait, not to look
    for another coordinator: librdkafka surfaces NOT_COORDINATOR to a consumer."""
    h.manager.on_resignation(0)
    assert h.join(version=3).value.error is ErrorCode.not_coordinator
    h.log.becoming.add(0)
    assert h.join(version=3).value.error is ErrorCode.coordinator_load_in_progress
    h.log.becoming.clear()
    h.manager.on_election(0)
    assert h.join(version=3).value.error is ErrorCode.none


def test_losing_the_partition_answers_pending_requests(h: Harness) -> None:
    a = h.join_new().value
    h.sync(a, assignments={})
    waiting = h.join_new()
    h.manager.on_resignation(0)
    assert waiting.value.error is ErrorCode.not_coordinator
    assert h.heartbeat(a) is ErrorCode.not_coordinator


def test_expiry_looks_only_at_groups_with_something_due(h: Harness) -> None:
    """A tick pops the groups whose earliest deadline passed, not every group."""
    for name in ("g1", "g2", "g3"):
        joined = h.join_new(name).value
        h.sync(joined, name, assignments={joined.member_id: b""})
    h.advance(0)  # the requests woke all three: looked at once, rescheduled
    looked: list[str] = []
    expire_group = h.coordinator._expire_group

    def counting(group: Any, now: float) -> None:
        looked.append(group.group_id)
        expire_group(group, now)

    h.coordinator._expire_group = counting  # type: ignore[method-assign]
    for _ in range(4):
        h.advance(100)  # ticks up to 400 ms: every session (1000 ms) still runs
    assert looked == []
    g2 = h.manager.get("g2")
    member = next(iter(g2.members.values()))
    assert h.coordinator.handle_heartbeat(
        HeartbeatRequest("g2", member.member_id, None, g2.generation_id)) is ErrorCode.none
    h.advance(1)  # the heartbeat woke g2 only
    assert looked == ["g2"]
    looked.clear()
    h.now = 999
    h.advance(1)  # g1 and g3 missed their sessions; g2 heartbeated at 400
    assert sorted(looked) == ["g1", "g3"]
    assert h.state("g1") is GroupState.EMPTY and h.state("g3") is GroupState.EMPTY
    assert h.state("g2") is GroupState.STABLE
