"""Offsets committed inside a transaction (TxnOffsetCommit), held until the
transaction's marker reaches the group's ``__consumer_offsets`` partition: a
COMMIT stores them as the group's offsets, an ABORT drops them. Kept by the
group coordinator's broker, per producer id; a later commit of the same
partition in the same transaction replaces the earlier one.

A committed transaction's offsets count as pending until their append to
``__consumer_offsets`` completes: an OffsetFetch in between would otherwise find
neither the pending offset nor the stored one and answer the previous offset."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping

from slog.groups.offsets import OffsetAndMetadata, TopicPartition

GroupOffsets = dict[str, dict[TopicPartition, OffsetAndMetadata]]


class PendingTxnOffsets:
    def __init__(self) -> None:
        self._pending: dict[int, GroupOffsets] = {}  # producer id -> group -> offsets
        self._epochs: dict[int, int] = {}
        self._storing: dict[str, Counter[TopicPartition]] = {}  # group -> appends in flight

    def add(self, producer_id: int, producer_epoch: int, group_id: str,
            offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        if self._epochs.get(producer_id, producer_epoch) != producer_epoch:
            self._pending.pop(producer_id, None)  # a new epoch: the old transaction is over
        self._epochs[producer_id] = producer_epoch
        self._pending.setdefault(producer_id, {}).setdefault(group_id, {}).update(offsets)

    def take(self, producer_id: int, placed_here: Callable[[str], bool]) -> GroupOffsets:
        """The producer's pending offsets of the groups ``placed_here`` (the marker's
        offsets partition holds them), removed."""
        groups = self._pending.get(producer_id)
        if not groups:
            return {}
        taken = {group: offsets for group, offsets in groups.items() if placed_here(group)}
        for group in taken:
            del groups[group]
        if not groups:
            del self._pending[producer_id]
            self._epochs.pop(producer_id, None)
        return taken

    def drop(self, placed_here: Callable[[str], bool]) -> None:
        """The offsets partition moved away: its groups' pending offsets go with it."""
        for producer_id in list(self._pending):
            self.take(producer_id, placed_here)

    def forget(self, group_id: str, partitions: Iterable[TopicPartition] | None = None
               ) -> None:
        """The group (or these of its partitions' offsets) was deleted: every open
        transaction's offsets for it go, so no marker brings them back (as Kafka's
        tombstones of a deleted group's pending offsets)."""
        dropped = None if partitions is None else set(partitions)
        for producer_id, groups in list(self._pending.items()):
            offsets = groups.get(group_id)
            if offsets is None:
                continue
            for tp in list(offsets) if dropped is None else dropped.intersection(offsets):
                del offsets[tp]
            if not offsets:
                del groups[group_id]
            if not groups:
                del self._pending[producer_id]
                self._epochs.pop(producer_id, None)

    def storing(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        """Committed offsets of ``group_id`` are being appended: still unstable."""
        # list(): a Mapping would be read as counts, not as keys.
        self._storing.setdefault(group_id, Counter()).update(list(partitions))

    def stored(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        """The append :meth:`storing` announced is over (done or failed)."""
        counts = self._storing.get(group_id)
        if counts is None:
            return
        counts.subtract(list(partitions))
        for tp in [tp for tp, n in counts.items() if n <= 0]:
            del counts[tp]
        if not counts:
            del self._storing[group_id]

    def partitions_of(self, group_id: str) -> set[TopicPartition]:
        """The group's partitions with an offset waiting for its transaction's marker
        or for the append that stores it."""
        return {tp for groups in self._pending.values()
                for tp in groups.get(group_id, {})} | set(self._storing.get(group_id, ()))

    def group_ids(self) -> set[str]:
        return {group for groups in self._pending.values() for group in groups} | \
            set(self._storing)

    def pending_groups(self, producer_id: int) -> list[str]:
        return sorted(self._pending.get(producer_id, {}))
