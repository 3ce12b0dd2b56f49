"""Committed offsets of one group (the offsets half of Kafka's GroupMetadata).

An offset becomes visible only once its record is in ``__consumer_offsets``:
:meth:`GroupOffsets.prepare` counts a commit in flight, :meth:`complete`
applies it when the append succeeded. Appends can finish out of order when
they wait for replication, so every committed value remembers the log offset
of its record and an older record never replaces a newer one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

TopicPartition = tuple[str, int]
NO_EPOCH = -1


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = NO_EPOCH
    metadata: str = ""
    commit_timestamp_ms: int = 0
    # Only OffsetCommit v2-v4 with an explicit retention time sets this
    # (Kafka's old per-offset expiry); otherwise retention follows the group.
    expire_timestamp_ms: int | None = None


@dataclass(frozen=True)
class CommittedOffset:
    value: OffsetAndMetadata
    record_offset: int  # where its record sits in __consumer_offsets


class GroupOffsets:
    def __init__(self) -> None:
        self.committed: dict[TopicPartition, CommittedOffset] = {}
        self._pending: dict[TopicPartition, int] = {}

    def __len__(self) -> int:
        return len(self.committed)

    def get(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        entry = self.committed.get(tp)
        return None if entry is None else entry.value

    def prepare(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self._pending[tp] = self._pending.get(tp, 0) + 1

    def complete(self, tp: TopicPartition, value: OffsetAndMetadata, record_offset: int,
                 *, appended: bool) -> None:
        left = self._pending.get(tp, 1) - 1
        if left:
            self._pending[tp] = left
        else:
            self._pending.pop(tp, None)
        if appended:
            self.load(tp, value, record_offset)

    @property
    def has_offsets(self) -> bool:
        """Committed or being committed: such a group is not garbage yet."""
        return bool(self.committed) or bool(self._pending)

    def has_pending(self, tp: TopicPartition | None = None) -> bool:
        return bool(self._pending) if tp is None else tp in self._pending

    def load(self, tp: TopicPartition, value: OffsetAndMetadata | None, record_offset: int
             ) -> None:
        """Apply a record (None: a tombstone) unless a later record already applied."""
        current = self.committed.get(tp)
        if current is not None and current.record_offset > record_offset:
            return
        if value is None:
            self.committed.pop(tp, None)
        else:
            self.committed[tp] = CommittedOffset(value, record_offset)

    def remove(self, tps: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Forget these offsets; returns the ones that existed (they need tombstones)."""
        return [tp for tp in tps if self.committed.pop(tp, None) is not None]

    def expired(self, now_ms: int, retention_ms: int,
                base_timestamp: Callable[[OffsetAndMetadata], int],
                keep_topics: frozenset[str] = frozenset()) -> list[TopicPartition]:
        """Kafka's getExpiredOffsets: past retention from ``base_timestamp``, or past an
        explicit expire timestamp; never offsets being committed or of ``keep_topics``."""
        out = []
        for tp, entry in self.committed.items():
            if tp[0] in keep_topics or tp in self._pending:
                continue
            value = entry.value
            if value.expire_timestamp_ms is not None:
                if now_ms >= value.expire_timestamp_ms:
                    out.append(tp)
            elif now_ms - base_timestamp(value) >= retention_ms:
                out.append(tp)
        return out
