"""Leader-epoch cache: where each leader epoch started in a partition log (KIP-101).

Followers ask the leader for the end offset of their latest epoch
(OffsetForLeaderEpoch) and truncate to it, instead of trusting the high
watermark, which can be stale after a failover. The cache is persisted as
Kafka's ``leader-epoch-checkpoint`` text file on every change.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

from slog.core.checkpoint import format_versioned_lines, parse_versioned_lines, write_atomically
from slog.core.errors import StorageError

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

logger = logging.getLogger(__name__)


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochCache:
    """Ordered (epoch, start offset) entries, strictly increasing in both.

    ``path`` None keeps the cache in memory only. ``log_end_offset`` supplies
    the LEO for :meth:`end_offset_for` when the caller does not pass one.
    """

    def __init__(
        self,
        path: Path | None,
        entries: Iterable[EpochEntry] = (),
        *,
        log_end_offset: Callable[[], int] | None = None,
    ):
        self.path = path
        self.log_end_offset = log_end_offset
        self._lock = threading.RLock()
        self._entries: list[EpochEntry] = []
        for entry in entries:
            self._append(EpochEntry(*entry))

    @classmethod
    def load(
        cls, path: Path, *, log_end_offset: Callable[[], int] | None = None
    ) -> LeaderEpochCache:
        """Read ``path``; a missing file is an empty cache, a malformed one a StorageError."""
        try:
            text = path.read_text()
        except FileNotFoundError:
            return cls(path, log_end_offset=log_end_offset)
        except (OSError, UnicodeDecodeError) as exc:
            raise StorageError(f"cannot read {path}: {exc}") from exc
        entries = []
        for epoch, offset in parse_versioned_lines(path, text, 2):
            try:
                entries.append(EpochEntry(int(epoch), int(offset)))
            except ValueError:
                raise StorageError(f"malformed line {epoch} {offset} in {path}") from None
        for before, after in itertools.pairwise(entries):
            if after.epoch <= before.epoch or after.start_offset <= before.start_offset:
                raise StorageError(f"{path} is not monotonic at epoch {after.epoch}")
        return cls(path, entries, log_end_offset=log_end_offset)

    # ------------------------------------------------------------------ queries

    @property
    def entries(self) -> list[EpochEntry]:
        with self._lock:
            return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        """The newest epoch, or UNDEFINED_EPOCH (-1) if the cache is empty."""
        with self._lock:
            return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    @property
    def earliest_entry(self) -> EpochEntry | None:
        with self._lock:
            return self._entries[0] if self._entries else None

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch in which ``offset`` was written, or UNDEFINED_EPOCH."""
        with self._lock:
            starts = [e.start_offset for e in self._entries]
            i = bisect.bisect_right(starts, offset) - 1
            return self._entries[i].epoch if i >= 0 else UNDEFINED_EPOCH

    def end_offset_for(self, epoch: int, log_end_offset: int | None = None) -> tuple[int, int]:
        """Kafka's OffsetForLeaderEpoch answer: ``(epoch, end offset)``.

        For the latest epoch the end is the LEO. Otherwise it is the largest
        epoch <= ``epoch`` with the start offset of the next higher epoch as
        its end; when ``epoch`` predates every entry, ``(epoch, first start)``.
        ``(-1, -1)`` when nothing is known.
        """
        with self._lock:
            if epoch == UNDEFINED_EPOCH or not self._entries:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if epoch == self._entries[-1].epoch:
                return epoch, self._resolve_leo(log_end_offset)
            epochs = [e.epoch for e in self._entries]
            higher = bisect.bisect_right(epochs, epoch)
            if higher == len(epochs):
                # Newer than anything we know of: never valid for the latest leader.
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if higher == 0:
                return epoch, self._entries[0].start_offset
            return self._entries[higher - 1].epoch, self._entries[higher].start_offset

    def _resolve_leo(self, log_end_offset: int | None) -> int:
        if log_end_offset is not None:
            return log_end_offset
        if self.log_end_offset is None:
            raise ValueError("end_offset_for needs the log end offset")
        return self.log_end_offset()

    # ------------------------------------------------------------------ updates

    def assign(self, epoch: int, start_offset: int, *, flush: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; True if the cache changed.

        Entries that would break monotonicity (an epoch >= ``epoch`` or a start
        >= ``start_offset``) are dropped first, as in Kafka. ``flush=False``
        leaves the checkpoint file to the caller.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"cannot assign epoch {epoch} at offset {start_offset}")
        with self._lock:
            latest = self._entries[-1] if self._entries else None
            if latest is not None and latest.epoch == epoch and latest.start_offset <= start_offset:
                return False
            removed = self._remove_from_end(
                lambda e: e.epoch >= epoch or e.start_offset >= start_offset
            )
            if len(removed) > 1 or (removed and removed[0].start_offset != start_offset):
                logger.warning(
                    "leader epoch %d at offset %d replaced non-monotonic entries %s in %s",
                    epoch,
                    start_offset,
                    removed,
                    self.path,
                )
            self._append(EpochEntry(epoch, start_offset))
            if flush:
                self.flush()
            return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after ``end_offset`` (the log was truncated there)."""
        with self._lock:
            if end_offset >= 0 and self._remove_from_end(lambda e: e.start_offset >= end_offset):
                self.flush()

    def truncate_from_start(self, start_offset: int, *, flush: bool = True) -> None:
        """Forget epochs wholly before ``start_offset``; the one spanning it now starts there.

        ``flush=False`` leaves the file to the owner's next flush: loading a log
        truncates its epochs from its log start again, so entries below it on disk
        are harmless, and a write per partition made DeleteRecords cost an fsync each.
        """
        with self._lock:
            if start_offset < 0 or not self._entries:
                return
            if self._entries[0].start_offset >= start_offset:
                return
            keep_from = bisect.bisect_right([e.start_offset for e in self._entries], start_offset)
            spanning = self._entries[keep_from - 1]
            self._entries[:keep_from] = [EpochEntry(spanning.epoch, start_offset)]
            if flush:
                self.flush()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.flush()

    def flush(self) -> None:
        """Persist the entries (no-op for an in-memory cache)."""
        if self.path is None:
            return
        with self._lock:
            rows = [f"{e.epoch} {e.start_offset}" for e in self._entries]
            write_atomically(self.path, format_versioned_lines(rows))

    def _append(self, entry: EpochEntry) -> None:
        if self._entries:
            last = self._entries[-1]
            if entry.epoch <= last.epoch or entry.start_offset <= last.start_offset:
                raise ValueError(f"epoch entry {entry} does not follow {last}")
        self._entries.append(entry)

    def _remove_from_end(self, predicate: Callable[[EpochEntry], bool]) -> list[EpochEntry]:
        removed: list[EpochEntry] = []
        while self._entries and predicate(self._entries[-1]):
            removed.insert(0, self._entries.pop())
        return removed

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self.path}, {self.entries})"
