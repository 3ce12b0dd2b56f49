"""Offsets committed inside a transaction (TxnOffsetCommit), held until the
transaction's marker reaches the group's ``__consumer_offsets`` partition: a
COMMIT stores them as the group's offsets, an ABORT drops them. Kept by the
group coordinator's broker, per producer id; a later commit of the same
partition in the same transaction replaces the earlier one."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from slog.groups.offsets import OffsetAndMetadata, TopicPartition

GroupOffsets = dict[str, dict[TopicPartition, OffsetAndMetadata]]


class PendingTxnOffsets:
    def __init__(self) -> None:
        self._pending: dict[int, GroupOffsets] = {}  # producer id -> group -> offsets
        self._epochs: dict[int, int] = {}

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

    def unstable(self, group_id: str) -> set[TopicPartition]:
        """The group's partitions with offsets waiting for a transaction's marker (an
        OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for them)."""
        return {tp for groups in self._pending.values() for tp in groups.get(group_id, ())}

    def pending_groups(self, producer_id: int) -> list[str]:
        return sorted(self._pending.get(producer_id, {}))
