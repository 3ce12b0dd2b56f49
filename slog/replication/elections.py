"""Partition state transitions the controller makes: pure functions, no I/O.

Each returns the new :class:`PartitionState`, or None when nothing changes.
Kafka's rules:

* a new leader is the first replica, in replica order, that is alive and in
  the ISR (a clean election); only if the topic allows unclean election may
  an out-of-sync live replica lead, and then the ISR restarts as just it;
* a fenced broker leaves every ISR, except that the last member stays (KRaft
  does the same) so that it can lead again, cleanly, when it returns;
* every change bumps the partition epoch; a leader change bumps the leader
  epoch, which fences the old leader's writes and drives follower truncation.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from slog.core.metadata import NO_LEADER, PartitionState


def _changed(state: PartitionState, *, leader: int, isr: tuple[int, ...]) -> PartitionState:
    return replace(
        state,
        leader=leader,
        isr=isr,
        leader_epoch=state.leader_epoch + (1 if leader != state.leader else 0),
        partition_epoch=state.partition_epoch + 1,
    )


def clean_leader(state: PartitionState, live: Collection[int]) -> int:
    """The first live ISR member in replica order, or NO_LEADER."""
    return next((r for r in state.replicas if r in state.isr and r in live), NO_LEADER)


def on_broker_fenced(state: PartitionState, broker: int, live: Collection[int],
                     unclean_allowed: bool) -> PartitionState | None:
    """``broker`` died or was paused past its session timeout."""
    if broker not in state.replicas:
        return None
    isr = tuple(r for r in state.isr if r != broker) or state.isr
    leader = state.leader
    if leader in (broker, NO_LEADER):
        candidate = replace(state, isr=isr)
        leader = clean_leader(candidate, live)
        if leader == NO_LEADER and unclean_allowed:
            return unclean_election(candidate, live)
    if leader == state.leader and isr == state.isr:
        return None
    return _changed(state, leader=leader, isr=isr)


def elect_offline(state: PartitionState, live: Collection[int],
                  unclean_allowed: bool) -> PartitionState | None:
    """A leaderless partition gets a leader if a clean (or allowed unclean) one exists."""
    if state.leader != NO_LEADER and state.leader in live:
        return None
    leader = clean_leader(state, live)
    if leader != NO_LEADER:
        return _changed(state, leader=leader, isr=state.isr)
    if unclean_allowed:
        return unclean_election(state, live)
    if state.leader != NO_LEADER:  # the leader is gone and nobody can replace it
        return _changed(state, leader=NO_LEADER, isr=state.isr)
    return None


def unclean_election(state: PartitionState, live: Collection[int]) -> PartitionState | None:
    """Any live replica leads; whatever only the old ISR had is lost."""
    leader = next((r for r in state.replicas if r in live), NO_LEADER)
    if leader == NO_LEADER or leader == state.leader:
        return None
    return _changed(state, leader=leader, isr=(leader,))


def preferred_election(state: PartitionState, live: Collection[int]) -> PartitionState | None:
    """Move leadership back to the first replica if it is alive and in sync."""
    preferred = state.preferred_leader
    if preferred == state.leader or preferred not in live or preferred not in state.isr:
        return None
    return _changed(state, leader=preferred, isr=state.isr)


def with_isr(state: PartitionState, isr: tuple[int, ...]) -> PartitionState | None:
    """The leader's ISR change, already validated by the caller."""
    if isr == state.isr:
        return None
    return _changed(state, leader=state.leader, isr=isr)


def controlled_shutdown(state: PartitionState, broker: int,
                        live: Collection[int]) -> PartitionState | None:
    """Move leadership off ``broker`` before it stops, and take it out of the ISR."""
    if broker not in state.isr and state.leader != broker:
        return None  # already done: a new epoch here would be a write for nothing
    others = [r for r in live if r != broker]
    isr = tuple(r for r in state.isr if r != broker)
    if not isr:
        return None  # the last in-sync replica keeps the partition rather than losing it
    leader = state.leader
    if leader == broker:
        leader = next((r for r in state.replicas if r in isr and r in others), NO_LEADER)
        if leader == NO_LEADER:
            return None
    return _changed(state, leader=leader, isr=isr)
