"""Partition assignors, run by the group leader: range, roundrobin, sticky, cooperative-sticky.

Pure functions of (partitions per topic, member subscriptions). Names, member
order and user data are Java's and librdkafka's, so a slog consumer can lead a
group of theirs and follow one of theirs:

* ``range``: per topic, the sorted subscribers get consecutive ranges, the
  first ``partitions % members`` of them one extra (Kafka's RangeAssignor).
* ``roundrobin``: all partitions, sorted, dealt one by one to the subscribers
  in sorted order (RoundRobinAssignor).
* ``sticky``: as balanced as subscriptions allow (no subscriber of a topic has
  two partitions fewer than another subscriber that has one of its
  partitions), keeping as many previously owned partitions as that permits.
* ``cooperative-sticky``: sticky, minus partitions that would move from one
  live owner to another in this generation: the owner first revokes them,
  rejoins, and the next (immediate) rebalance hands them over. With equal
  subscriptions that takes exactly one follow-up rebalance and only moved
  partitions are revoked; with mixed subscriptions it may take another.

Members sort as Java's MemberInfo does: static members (group.instance.id)
first by instance id, then the others by member id.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from slog.client.errors import InvalidArgumentError
from slog.core.consumer_protocol import (
    Subscription,
    WireFormatError,
    decode_sticky_user_data,
    encode_sticky_user_data,
)

Partition = tuple[str, int]
Assignment = dict[str, list[Partition]]
EAGER, COOPERATIVE = "eager", "cooperative"


@dataclass(frozen=True)
class MemberSubscription:
    """What the leader knows of a member from its JoinGroup metadata."""

    member_id: str
    topics: tuple[str, ...]
    group_instance_id: str | None = None
    owned: tuple[Partition, ...] = ()
    generation: int = -1  # of ``owned``; -1 when unknown

    @property
    def sort_key(self) -> tuple[int, str]:
        if self.group_instance_id is not None:
            return (0, self.group_instance_id)
        return (1, self.member_id)


def _sorted_members(members: Mapping[str, MemberSubscription]) -> list[MemberSubscription]:
    return sorted(members.values(), key=lambda m: m.sort_key)


@dataclass
class Assignor:
    """Base: subclasses implement :meth:`assign`; user data is only for the sticky ones."""

    name: str = ""
    protocol: str = EAGER

    def user_data(self, owned: Sequence[Partition], generation: int) -> bytes | None:
        return None

    def member(self, member_id: str, group_instance_id: str | None, sub: Subscription
               ) -> MemberSubscription:
        return MemberSubscription(member_id, sub.topics, group_instance_id)

    def assign(self, partitions_per_topic: Mapping[str, int],
               members: Mapping[str, MemberSubscription]) -> Assignment:
        raise NotImplementedError


class RangeAssignor(Assignor):
    def __init__(self) -> None:
        super().__init__("range")

    def assign(self, partitions_per_topic: Mapping[str, int],
               members: Mapping[str, MemberSubscription]) -> Assignment:
        out: Assignment = {m: [] for m in members}
        for topic in sorted({t for m in members.values() for t in m.topics}):
            count = partitions_per_topic.get(topic, 0)
            subscribers = [m for m in _sorted_members(members) if topic in m.topics]
            if not count or not subscribers:
                continue
            per, extra = divmod(count, len(subscribers))
            start = 0
            for i, member in enumerate(subscribers):
                length = per + (1 if i < extra else 0)
                out[member.member_id] += [(topic, p) for p in range(start, start + length)]
                start += length
        return out


class RoundRobinAssignor(Assignor):
    def __init__(self) -> None:
        super().__init__("roundrobin")

    def assign(self, partitions_per_topic: Mapping[str, int],
               members: Mapping[str, MemberSubscription]) -> Assignment:
        out: Assignment = {m: [] for m in members}
        ordered = _sorted_members(members)
        if not ordered:
            return out
        topics = sorted({t for m in ordered for t in m.topics})
        position = 0
        for topic in topics:
            for partition in range(partitions_per_topic.get(topic, 0)):
                # The next member (circularly) that subscribes to this topic.
                for step in range(len(ordered)):
                    member = ordered[(position + step) % len(ordered)]
                    if topic in member.topics:
                        out[member.member_id].append((topic, partition))
                        position = (position + step + 1) % len(ordered)
                        break
        return out


class StickyAssignor(Assignor):
    def __init__(self, name: str = "sticky", protocol: str = EAGER) -> None:
        super().__init__(name, protocol)

    def user_data(self, owned: Sequence[Partition], generation: int) -> bytes | None:
        # Java's StickyAssignor and librdkafka (for both sticky flavours) send the
        # previous assignment and its generation; Java's cooperative one reads the
        # generation from the subscription's own field first.
        return encode_sticky_user_data(owned, generation)

    def member(self, member_id: str, group_instance_id: str | None, sub: Subscription
               ) -> MemberSubscription:
        owned: tuple[Partition, ...] = sub.owned_partitions
        generation = sub.generation_id
        if sub.user_data:
            try:
                data = decode_sticky_user_data(sub.user_data)
            except WireFormatError:
                # Java's CooperativeStickyAssignor: the user data is just the generation.
                if len(sub.user_data) == 4 and generation < 0:
                    generation = int.from_bytes(sub.user_data, "big", signed=True)
            else:
                if not owned:
                    owned = data.previous_assignment
                if generation < 0 and data.generation is not None:
                    generation = data.generation
        return MemberSubscription(member_id, sub.topics, group_instance_id, owned, generation)

    def assign(self, partitions_per_topic: Mapping[str, int],
               members: Mapping[str, MemberSubscription]) -> Assignment:
        ordered = _sorted_members(members)
        current = _previous_owners(partitions_per_topic, ordered)
        assignment: Assignment = {m.member_id: [] for m in ordered}
        for tp, member_id in sorted(current.items()):
            assignment[member_id].append(tp)
        eligible = {m.member_id: set(m.topics) for m in ordered}
        subscribers = {t: [m.member_id for m in ordered if t in m.topics]
                       for t in {t for m in ordered for t in m.topics}}
        # How many partitions each member could take: the least flexible go first.
        potential = {m.member_id: sum(partitions_per_topic.get(t, 0) for t in m.topics)
                     for m in ordered}
        unowned = sorted(((t, p) for t in subscribers
                          for p in range(partitions_per_topic.get(t, 0))
                          if (t, p) not in current),
                         key=lambda tp: (len(subscribers[tp[0]]), tp))
        kept = {m: len(parts) for m, parts in assignment.items()}
        fresh: set[Partition] = set()
        for tp in unowned:  # least loaded, then the one that kept least, then the least flexible
            target = min(subscribers[tp[0]],
                         key=lambda m: (len(assignment[m]), kept[m], potential[m]))
            assignment[target].append(tp)
            fresh.add(tp)
        _balance(assignment, eligible, [m.member_id for m in ordered], fresh)
        for parts in assignment.values():
            parts.sort()
        if self.protocol == COOPERATIVE:
            _hold_back_transfers(assignment, ordered)
        return assignment


def _previous_owners(partitions_per_topic: Mapping[str, int],
                     ordered: Sequence[MemberSubscription]) -> dict[Partition, str]:
    """Who owned what, from the members' own claims: a claim counts while the member
    still subscribes to the topic and the partition exists; when two members claim
    one partition the more recent generation wins."""
    claims: dict[Partition, tuple[int, str]] = {}
    for member in ordered:
        for tp in member.owned:
            topic, partition = tp
            if topic not in member.topics or not 0 <= partition < \
                    partitions_per_topic.get(topic, 0):
                continue
            best = claims.get(tp)
            if best is None or member.generation > best[0]:
                claims[tp] = (member.generation, member.member_id)
    return {tp: owner for tp, (_, owner) in claims.items()}


def _balance(assignment: Assignment, eligible: Mapping[str, set[str]], order: list[str],
             fresh: set[Partition]) -> None:
    """Even out loads until no subscriber of a topic has two partitions fewer than a
    member holding one of that topic's partitions.

    Newly placed partitions move first, along chains when needed (A takes one from
    B, B one from C, ...), so previously owned partitions only move when balance
    cannot be reached otherwise: that keeps the assignment a fixed point, which
    the cooperative protocol needs to finish in two rounds.
    """
    while _shift_fresh(assignment, eligible, order, fresh) or \
            _move_any(assignment, eligible, order):
        pass


def _shift_fresh(assignment: Assignment, eligible: Mapping[str, set[str]], order: list[str],
                 fresh: set[Partition]) -> bool:
    """One augmenting path of fresh partitions into an underloaded member."""
    for taker in sorted(order, key=lambda m: len(assignment[m])):
        wanted_load = len(assignment[taker]) + 2
        parent: dict[str, tuple[str, Partition]] = {}
        queue, seen = [taker], {taker}
        while queue:
            receiver = queue.pop(0)
            for giver in order:
                if giver in seen:
                    continue
                tp = next((tp for tp in assignment[giver]
                           if tp in fresh and tp[0] in eligible[receiver]), None)
                if tp is None:
                    continue
                parent[giver] = (receiver, tp)
                if len(assignment[giver]) >= wanted_load:
                    while giver != taker:  # move along the path back to the taker
                        receiver, tp = parent[giver]
                        assignment[giver].remove(tp)
                        assignment[receiver].append(tp)
                        giver = receiver
                    return True
                seen.add(giver)
                queue.append(giver)
    return False


def _move_any(assignment: Assignment, eligible: Mapping[str, set[str]], order: list[str]
              ) -> bool:
    """Move one partition from the most loaded member to a subscriber with two fewer."""
    for donor in sorted(order, key=lambda m: -len(assignment[m])):
        load = len(assignment[donor])
        for tp in sorted(assignment[donor], reverse=True):
            takers = [m for m in order if tp[0] in eligible[m]
                      and len(assignment[m]) <= load - 2]
            if takers:
                target = min(takers, key=lambda m: len(assignment[m]))
                assignment[donor].remove(tp)
                assignment[target].append(tp)
                return True
    return False


def _hold_back_transfers(assignment: Assignment, members: Sequence[MemberSubscription]
                         ) -> None:
    """Cooperative rule (Java's adjustAssignment): a partition that one member still
    owns and another would get is assigned to nobody this generation, so the owner
    can revoke it first."""
    owned = {m.member_id: set(m.owned) for m in members}
    claimed = Counter(tp for m in members for tp in set(m.owned))
    for member_id, parts in assignment.items():
        mine = owned.get(member_id, set())
        assignment[member_id] = [tp for tp in parts
                                 if tp in mine or claimed[tp] == 0]


ASSIGNORS = {
    "range": RangeAssignor,
    "roundrobin": RoundRobinAssignor,
    "sticky": StickyAssignor,
    "cooperative-sticky": lambda: StickyAssignor("cooperative-sticky", COOPERATIVE),
}


def make_assignors(names: Sequence[str]) -> list[Assignor]:
    """Assignors by name, in preference order (Kafka's partition.assignment.strategy)."""
    out = []
    for name in names:
        factory = ASSIGNORS.get(name)
        if factory is None:
            raise InvalidArgumentError(
                f"unknown assignor {name!r}; use one of {', '.join(ASSIGNORS)}")
        out.append(factory())
    return out
