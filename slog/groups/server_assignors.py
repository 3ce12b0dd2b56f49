"""KIP-848's server-side assignors, ``uniform`` and ``range`` (pure).

A consumer-protocol group is assigned by its coordinator, not by a leader
member: on every group epoch bump the coordinator runs one of these over the
members' subscriptions and the subscribed topics' partition counts, and the
result becomes the group's target assignment. Partitions are ``(topic id,
index)``; topic ids are the metadata image's text form.

* ``uniform`` (Kafka's default) spreads every subscribed partition so that
  member loads differ by at most one where subscriptions allow it, and is
  sticky: a partition stays with the member that has it in the current target
  unless moving it is needed for balance.
* ``range`` gives each member a contiguous range of every topic it
  subscribes to, in member-id order (co-partitioned topics line up).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from slog.core.kafka_errors import ErrorCode, KafkaApiError

TopicIdPartition = tuple[str, int]
Assignment = frozenset[TopicIdPartition]


@dataclass(frozen=True)
class MemberSubscription:
    topic_ids: frozenset[str]
    current: Assignment  # the member's partitions in the current target assignment


class ServerAssignor(Protocol):
    name: str

    def assign(self, members: Mapping[str, MemberSubscription],
               partitions: Mapping[str, int]) -> dict[str, Assignment]:
        """member id -> its target partitions; ``partitions``: topic id -> count."""


class UniformAssignor:
    name = "uniform"

    def assign(self, members: Mapping[str, MemberSubscription],
               partitions: Mapping[str, int]) -> dict[str, Assignment]:
        owned: dict[str, set[TopicIdPartition]] = {m: set() for m in members}
        subscribers: dict[str, list[str]] = {}
        for member_id in sorted(members):
            for topic in members[member_id].topic_ids:
                if topic in partitions:
                    subscribers.setdefault(topic, []).append(member_id)
        # Sticky pass: keep what the current target gives, while still subscribed.
        taken: set[TopicIdPartition] = set()
        for member_id, sub in members.items():
            for tp in sub.current:
                if tp[0] in sub.topic_ids and tp[1] < partitions.get(tp[0], 0) \
                        and tp not in taken:
                    owned[member_id].add(tp)
                    taken.add(tp)
        # Shed what exceeds a fair share first, so the free pass can even things out.
        self._shed_excess(owned, subscribers, partitions, taken)
        for topic in sorted(subscribers):
            eligible = subscribers[topic]
            for index in range(partitions[topic]):
                tp = (topic, index)
                if tp not in taken:
                    least = min(eligible, key=lambda m: (len(owned[m]), m))
                    owned[least].add(tp)
                    taken.add(tp)
        self._balance(owned, members)
        return {m: frozenset(tps) for m, tps in owned.items()}

    @staticmethod
    def _shed_excess(owned: dict[str, set[TopicIdPartition]],
                     subscribers: Mapping[str, list[str]], partitions: Mapping[str, int],
                     taken: set[TopicIdPartition]) -> None:
        """With one subscription for all (the common case) the fair share is exact:
        ceil(total / members). Anything above goes back to the pool."""
        if not owned:
            return
        total = sum(partitions[t] for t in subscribers)
        share = -(-total // len(owned))
        for tps in owned.values():
            while len(tps) > share:
                tp = max(tps)
                tps.discard(tp)
                taken.discard(tp)

    @staticmethod
    def _balance(owned: dict[str, set[TopicIdPartition]],
                 members: Mapping[str, MemberSubscription]) -> None:
        """Move partitions from the most to the least loaded member that may take them
        until no move narrows the gap (heterogeneous subscriptions)."""
        moved = True
        while moved:
            moved = False
            for heavy in sorted(owned, key=lambda m: (-len(owned[m]), m)):
                for tp in sorted(owned[heavy]):
                    light = min((m for m in owned if tp[0] in members[m].topic_ids),
                                key=lambda m: (len(owned[m]), m))
                    if len(owned[light]) + 1 < len(owned[heavy]):
                        owned[heavy].discard(tp)
                        owned[light].add(tp)
                        moved = True
                        break
                if moved:
                    break


class RangeAssignor:
    name = "range"

    def assign(self, members: Mapping[str, MemberSubscription],
               partitions: Mapping[str, int]) -> dict[str, Assignment]:
        owned: dict[str, set[TopicIdPartition]] = {m: set() for m in members}
        for topic, count in sorted(partitions.items()):
            eligible = sorted(m for m, sub in members.items() if topic in sub.topic_ids)
            if not eligible:
                continue
            per, extra = divmod(count, len(eligible))
            start = 0
            for i, member_id in enumerate(eligible):
                size = per + (1 if i < extra else 0)
                owned[member_id].update((topic, p) for p in range(start, start + size))
                start += size
        return {m: frozenset(tps) for m, tps in owned.items()}


ASSIGNORS: dict[str, ServerAssignor] = {a.name: a for a in (UniformAssignor(), RangeAssignor())}


def assignors_from_config(names: str) -> tuple[ServerAssignor, ...]:
    """``group.consumer.assignors``: a comma-separated list; the first is the default."""
    chosen = []
    for name in (n.strip() for n in names.split(",")):
        if name not in ASSIGNORS:
            raise KafkaApiError(ErrorCode.invalid_config,
                                f"unknown group.consumer.assignors entry {name!r}; "
                                f"slog has {', '.join(ASSIGNORS)}")
        chosen.append(ASSIGNORS[name])
    if not chosen:
        raise KafkaApiError(ErrorCode.invalid_config, "group.consumer.assignors is empty")
    return tuple(chosen)
