"""LogSegment: one ``<base offset>.log`` file of record batches plus its two indexes.

The ``.log`` file is memory-mapped read-only and reads hand out memoryview
slices of the map, so fetch responses go to the socket without copying.
Appends are written with ``pwritev`` at the end of the valid data: the bytes
land in the same page cache the map shows, and unlike stores into a fresh
shared mapping they take no page fault per 4 KiB page (1.6x the throughput
in our measurement). File space is allocated ahead with ``posix_fallocate``, so a
full disk fails an append with StorageError before any byte is written.

Views handed out may outlive the map's owner (a socket writer still sending),
hence two rules: a map with live views is never closed, only dropped (it is
unmapped when the last view dies); and bytes that a live view may cover are
never cut from the file while mapped. Truncation zero-fills instead, and
trimming on roll and close only removes the preallocated tail that no view
can reference.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from slog.core.aborted_txn_index import TXN_INDEX_SUFFIX, TransactionIndex
from slog.core.batch import (
    HEADER_SIZE,
    MAGIC,
    MIN_BATCH_LENGTH,
    BatchHeader,
    parse_header,
    validate_batch,
)
from slog.core.checkpoint import fsync_dir
from slog.core.errors import CorruptRecordError, StorageError
from slog.core.index import (
    FILE_MODE,
    CorruptIndexError,
    OffsetIndex,
    TimeIndex,
    allocate,
    map_file,
    release_map,
)
from slog.core.log_config import INT32_MAX, LogConfig
from slog.core.mapped_pages import TOUCHED
from slog.core.records import BytesLike, decode_records

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)

# A segment's first allocation when segments are not preallocated, then doubling.
# Not a MiB: a thousand partitions each taking a little data held a MiB apiece, on
# tmpfs a MiB of zeroed memory each (0.3 ms per partition's first append). Not
# 64 KiB either: each growth (an fallocate and a new map) costs about 30 us, and
# a partition taking 150 KB grew three times. Measured over 1,000 logs taking
# three 55 KB appends each, per append: 64 KiB 84 us, 256 KiB 53 us, 1 MiB 51 us
# on ext4; 85, 58 and 153 us on tmpfs.
_FIRST_ALLOCATION = 256 * 1024
_ZEROS = bytes(1024 * 1024)
_IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024

logger = logging.getLogger(__name__)


def segment_file_stem(base_offset: int) -> str:
    """Kafka's file name: the base offset zero-padded to 20 digits."""
    return f"{base_offset:020d}"


def parse_segment_base(file_name: str) -> int | None:
    """Base offset of a ``<20 digits>.log`` name, None for any other file."""
    stem, dot, suffix = file_name.partition(".")
    if dot and "." + suffix == LOG_SUFFIX and len(stem) == 20 and stem.isdigit():
        return int(stem)
    return None


class SegmentRead(NamedTuple):
    """What one segment contributes to a fetch."""

    view: memoryview | None  # whole batches, zero copy; None if nothing qualified
    first_offset: int  # base offset of the first batch in ``view``
    next_offset: int  # where the next read should start
    done: bool  # stopped by max_offset or max_size, so the caller must not go on


@dataclass(frozen=True)
class RecoveryResult:
    valid_bytes: int
    garbage_bytes: int  # non-zero bytes dropped within 1 MiB after the last valid batch
    next_offset: int
    reason: str | None  # why the scan stopped, when garbage was dropped


class LogSegment:
    """One segment; create with :meth:`create` (new, active) or :meth:`open` (existing)."""

    # Set by _reset_index_state.
    _max_ts: int
    _offset_of_max_ts: int
    _bytes_since_index: int

    def __init__(self, directory: Path, base_offset: int, config: LogConfig, *, now_ms: int):
        stem = directory / segment_file_stem(base_offset)
        self.base_offset = base_offset
        self.config = config
        self.log_path = stem.with_suffix(LOG_SUFFIX)
        self.created_ms = now_ms
        self._fd: int | None = None  # only while active: appends and fsync need it
        self._map: mmap.mmap | None = None
        self._view: memoryview | None = None
        self._touched_in = -1  # the TOUCHED generation the map was last registered in
        self._capacity = 0  # bytes mapped (= file length)
        self._size = 0  # bytes of valid batches
        self._synced_size = 0  # of which known to be on disk (fsynced, or found there)
        self._next_offset = base_offset
        self._rolling_ts: int | None = None
        self._reset_index_state()
        index_existed = (
            stem.with_suffix(INDEX_SUFFIX).exists() and stem.with_suffix(TIME_INDEX_SUFFIX).exists()
        )
        self.offset_index = OffsetIndex(
            stem.with_suffix(INDEX_SUFFIX), base_offset, config.segment_index_bytes
        )
        self.time_index = TimeIndex(
            stem.with_suffix(TIME_INDEX_SUFFIX), base_offset, config.segment_index_bytes
        )
        self._indexes_missing = not index_existed
        # Aborted transactions whose markers are in this segment (kept by the cleaner).
        self.txn_index = TransactionIndex(stem.with_suffix(TXN_INDEX_SUFFIX))

    # ------------------------------------------------------------ lifecycle

    @classmethod
    def create(
        cls, directory: Path, base_offset: int, config: LogConfig, *, now_ms: int,
        sync_dir: bool = True, new_directory: bool = False,
    ) -> LogSegment:
        """A new empty active segment; stale files with the same name are replaced
        (none in a ``new_directory``: four unlinks saved per new log).

        ``sync_dir=False``: the caller fsyncs ``directory`` (bulk creation does it
        once for all the files of a new log)."""
        stem = directory / segment_file_stem(base_offset)
        for suffix in () if new_directory else SEGMENT_SUFFIXES:
            stem.with_suffix(suffix).unlink(missing_ok=True)
        fd = os.open(stem.with_suffix(LOG_SUFFIX), os.O_RDWR | os.O_CREAT | os.O_EXCL, FILE_MODE)
        try:
            segment = cls(directory, base_offset, config, now_ms=now_ms)
        except BaseException:
            os.close(fd)
            raise
        segment._fd = fd
        segment._indexes_missing = False
        if sync_dir:
            fsync_dir(directory)
        return segment

    @classmethod
    def open(
        cls, directory: Path, base_offset: int, config: LogConfig, *, now_ms: int
    ) -> LogSegment:
        """Map an existing segment. Its size is the file length until
        :meth:`load` or :meth:`recover` establishes the real end."""
        segment = cls(directory, base_offset, config, now_ms=now_ms)
        fd = os.open(segment.log_path, os.O_RDWR)
        try:
            length = os.fstat(fd).st_size
            segment._install_map(map_file(fd, length, writable=False), length)
        finally:
            os.close(fd)
        segment._size = segment._synced_size = length
        return segment

    def activate(self) -> None:
        """Make this the segment appends go to (after open or truncation into it)."""
        if self._fd is None:
            self._fd = os.open(self.log_path, os.O_RDWR)

    def seal(self, *, sync: bool = True) -> list[int] | None:
        """Stop being active (roll): final time-index entry, trim, fsync, drop the fd.

        With ``sync=False`` neither the log file nor the cut of the index files is
        fsynced here (the index maps are still msynced): descriptors of the files are
        returned, which the caller fsyncs and closes.
        """
        if self._fd is None:
            return None
        self._append_seal_entry()
        # Nothing written since the last fsync and no tail to cut: the file is as the
        # disk has it already. Closing ten thousand idle logs cost an fsync each.
        settled = self._size == self._synced_size and self._capacity <= self._size
        self._trim()
        cut = [index.path for index in (self.offset_index, self.time_index) if index.trim()]
        deferred = None
        if sync and settled:
            self.offset_index.flush()
            self.time_index.flush()
            self.txn_index.flush()
        elif sync:
            self.flush()
        else:
            self.offset_index.flush()
            self.time_index.flush()
            deferred = [os.dup(self._fd), *(os.open(path, os.O_RDONLY) for path in cut)]
            txn_fd = self.txn_index.sync_fd()
            if txn_fd is not None:
                deferred.append(txn_fd)
        os.close(self._fd)
        self._fd = None
        return deferred

    def _append_seal_entry(self) -> None:
        """Kafka's time-index entry on becoming inactive: the segment's largest
        timestamp, for lookups without a scan.

        A roll reserved its room (:meth:`reserve_seal_entry`); closing a segment
        whose appends never needed an index entry allocates it now. Should the disk
        be full then, the entry is left out: the index is still right without it
        (timestamp lookups scan on from the entry before, and :meth:`load` finds the
        largest timestamp again in the batches after the last offset-index entry).
        """
        try:
            self.time_index.maybe_append(self._max_ts, self._offset_of_max_ts,
                                         skip_full_check=True)
        except StorageError as exc:
            logger.warning("%s: no room for the final time-index entry (%s); "
                           "it is left out", self.log_path, exc)

    def close(self) -> None:
        self.seal()
        self.txn_index.flush()  # an abort appended to a sealed segment (a replay)
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        self._release()

    def abandon(self) -> None:
        """Let go of the files without writing, trimming or syncing them: another
        process has taken the log over (a deposed metadata writer)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._release()
        self.offset_index.abandon()
        self.time_index.abandon()
        self.txn_index.close()

    def delete(self) -> None:
        """Remove the files. Live views keep reading their (unlinked) pages."""
        self.abandon()
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        self.log_path.unlink(missing_ok=True)

    def flush(self) -> None:
        """fsync the log (written with pwritev) and msync the index maps."""
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()
        if self._fd is not None:
            os.fsync(self._fd)
            self._synced_size = self._size

    def duplicate_fd(self) -> int | None:
        """A descriptor of the log file that a roll or close leaves open (the caller
        closes it), for an fdatasync outside the log's lock; None unless active."""
        return None if self._fd is None else os.dup(self._fd)

    # ------------------------------------------------------------ properties

    @property
    def size(self) -> int:
        return self._size

    @property
    def is_active(self) -> bool:
        return self._fd is not None

    @property
    def next_offset(self) -> int:
        """One past the last offset in this segment (its base offset when empty)."""
        return self._next_offset

    @property
    def max_timestamp(self) -> int:
        """Largest batch maxTimestamp, -1 if none."""
        return self._max_ts

    @property
    def offset_of_max_timestamp(self) -> int:
        return self._offset_of_max_ts

    @property
    def largest_timestamp(self) -> int:
        """What time retention compares: the max timestamp, else the file's mtime."""
        if self._max_ts >= 0:
            return self._max_ts
        return os.stat(self.log_path).st_mtime_ns // 1_000_000

    @property
    def rolling_timestamp(self) -> int | None:
        """maxTimestamp of the first append, which segment.ms is measured from."""
        if self._rolling_ts is None and self._size >= HEADER_SIZE:
            assert self._map is not None
            self._touched()
            self._rolling_ts = parse_header(self._map, 0).max_timestamp
        return self._rolling_ts

    # ------------------------------------------------------------ appends

    def should_roll(self, incoming: int, max_timestamp: int, last_offset: int, now_ms: int) -> bool:
        """Kafka's rule: full by size or index, too old, or offsets out of int32 range."""
        if last_offset - self.base_offset > INT32_MAX:
            return True
        if self._size == 0:
            return False  # an empty segment grows to fit one oversized append
        return (
            self._size + incoming > self.config.segment_bytes
            or self._time_waited(now_ms, max_timestamp) > self.config.segment_ms
            or self.offset_index.is_full
            or self.time_index.is_full
        )

    def _time_waited(self, now_ms: int, max_timestamp: int) -> int:
        rolling = self.rolling_timestamp
        if rolling is not None and rolling >= 0 and max_timestamp >= 0:
            return max_timestamp - rolling
        return now_ms - self.created_ms

    def append(
        self, chunks: list[BytesLike], batches: list[tuple[int, BatchHeader]], total: int
    ) -> None:
        """Write ``total`` bytes of whole batches at the end.

        ``batches`` holds (position within the appended bytes, final header).
        Space is allocated before writing, for the bytes and for the index
        entries they add, so a full disk raises StorageError with nothing changed.
        """
        if self._fd is None:
            raise StorageError(f"segment {self.log_path} is not active")
        start = self._size
        self._ensure_capacity(start + total)
        entries = self._index_entries_due(batches)
        if entries:
            # Only what this append adds: a segment's first append adds none, and a
            # producer touching a thousand new partitions paid two index files each.
            self.offset_index.ensure_room(entries)
            self.time_index.ensure_room(entries)
        _pwritev_all(self._fd, chunks, start, self.log_path)
        if start == 0:
            self._rolling_ts = max(h.max_timestamp for _, h in batches)
        for relative, header in batches:
            self._index_batch(start + relative, header)
        self._size = start + total
        self._next_offset = batches[-1][1].next_offset

    def _index_entries_due(self, batches: list[tuple[int, BatchHeader]]) -> int:
        """How many entries (at most) :meth:`_index_batch` adds to each index for ``batches``."""
        since, interval, due = self._bytes_since_index, self.config.index_interval_bytes, 0
        for _, header in batches:
            if since > interval:
                due += 1
                since = 0
            since += header.size
        return due

    def reserve_seal_entry(self) -> None:
        """Room for the time-index entry :meth:`seal` adds, and file space for the
        entries kept in memory. A roll takes them before it creates the next segment,
        so a full disk fails that append with nothing changed."""
        self.time_index.ensure_room(1)
        self.offset_index.materialize()
        self.time_index.materialize()

    def _index_batch(self, position: int, header: BatchHeader) -> None:
        if header.max_timestamp > self._max_ts:
            self._max_ts = header.max_timestamp
            self._offset_of_max_ts = header.last_offset
        if self._bytes_since_index > self.config.index_interval_bytes:
            if not self.offset_index.is_full:
                self.offset_index.append(header.last_offset, position)
            self.time_index.maybe_append(self._max_ts, self._offset_of_max_ts)
            self._bytes_since_index = 0
        self._bytes_since_index += header.size

    def _ensure_capacity(self, needed: int) -> None:
        if needed <= self._capacity:
            return
        assert self._fd is not None
        step = max(2 * self._capacity, _FIRST_ALLOCATION)
        if self.config.preallocate:
            target = max(needed, self.config.segment_bytes)
        else:
            target = max(needed, min(self.config.segment_bytes, step))
        allocate(self._fd, self._capacity, target, self.log_path)
        self._remap(target)

    # ------------------------------------------------------------ reads

    def _headers(self, start: int, end: int) -> Iterator[tuple[int, BatchHeader]]:
        """Walk batch headers of trusted data (structure checked, CRC not)."""
        mapped, pos = self._map, start
        if mapped is None:  # only an empty file has no map
            return
        self._touched()
        while pos < end:
            if end - pos < HEADER_SIZE:
                raise CorruptRecordError("truncated batch header", position=pos)
            header = parse_header(mapped, pos)
            if (
                header.batch_length < MIN_BATCH_LENGTH
                or header.magic != MAGIC
                or pos + header.size > end
            ):
                raise CorruptRecordError(
                    "malformed batch header", offset=header.base_offset, position=pos
                )
            yield pos, header
            pos += header.size

    def translate_offset(self, offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= ``offset``."""
        position = self._checked(self.offset_index.lookup, offset)
        for pos, header in self._headers(position, self._size):
            if header.last_offset >= offset:
                return pos, header
        return None

    def read(
        self, offset: int, max_size: int, max_offset: int | None, min_one_message: bool
    ) -> SegmentRead | None:
        """Whole batches from the one containing ``offset``; None if none is here.

        Only batches whose last offset is below ``max_offset`` qualify (Kafka
        stops at the position of the batch holding the high watermark).
        """
        found = self.translate_offset(offset)
        if found is None:
            return None
        start, first = found
        if max_offset is not None and first.last_offset >= max_offset:
            return SegmentRead(None, first.base_offset, offset, True)
        # The region ends at the batch holding max_offset, or at the segment end.
        region_end, region_next = self._size, self._next_offset
        if max_offset is not None and max_offset < self._next_offset:
            limit = self.translate_offset(max_offset)
            if limit is not None:
                region_end, region_next = limit[0], limit[1].base_offset
        budget_end = start + max_size
        if region_end <= budget_end:
            end, next_offset, done = region_end, region_next, region_end < self._size
        elif min_one_message and first.size > max_size:
            end, next_offset, done = start + first.size, first.next_offset, True
        else:
            end, next_offset = self._last_boundary(start, budget_end, region_end, region_next)
            done = True
        if end == start:
            return SegmentRead(None, first.base_offset, offset, True)
        assert self._view is not None
        return SegmentRead(self._view[start:end], first.base_offset, next_offset, done)

    def _last_boundary(
        self, start: int, limit: int, region_end: int, region_next: int
    ) -> tuple[int, int]:
        """The last batch boundary <= ``limit`` and the offset that follows it,
        jumping ahead with the index instead of walking every batch."""
        position = max(start, self._checked(self.offset_index.floor_by_position, limit))
        for pos, header in self._headers(position, region_end):
            if pos + header.size > limit:
                return pos, header.base_offset
        return region_end, region_next

    def _checked(self, lookup: Callable[[int], tuple[int, int]], key: int) -> int:
        """Position from an offset-index lookup, verified against the log.

        The open-time sanity check only sees order and bounds; an entry that is
        wrong but still in order is caught here, where it costs one header
        parse, and the indexes are rebuilt.
        """
        offset, position = lookup(key)
        if position and not self._batch_ends_at(position, offset):
            self._rebuild_indexes(f"offset index entry ({offset}, {position}) is wrong")
            offset, position = lookup(key)
        return position

    def _checked_time_entry(self, timestamp: int) -> int:
        """Offset to search from for ``timestamp``, its time-index entry verified."""
        found_ts, offset = self.time_index.lookup(timestamp)
        if found_ts >= 0:
            found = self.translate_offset(offset)
            if found is None or found[1].max_timestamp != found_ts:
                self._rebuild_indexes(f"time index entry ({found_ts}, {offset}) is wrong")
                found_ts, offset = self.time_index.lookup(timestamp)
        return offset

    def _batch_ends_at(self, position: int, last_offset: int) -> bool:
        if position + HEADER_SIZE > self._size:
            return False
        assert self._map is not None
        self._touched()
        header = parse_header(self._map, position)
        return header.magic == MAGIC and header.last_offset == last_offset

    def _rebuild_indexes(self, reason: str) -> None:
        """Re-derive both indexes from the (trusted) batch headers."""
        logger.warning("%s: %s; rebuilding its indexes", self.log_path, reason)
        self.offset_index.reset()
        self.time_index.reset()
        self._reset_index_state()
        for position, header in self._headers(0, self._size):
            self._index_batch(position, header)
        if not self.is_active:  # as seal() leaves them, and durably: sealed for good
            self.time_index.maybe_append(self._max_ts, self._offset_of_max_ts, skip_full_check=True)
            self.offset_index.trim(sync=True)
            self.time_index.trim(sync=True)

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``starting_offset``
        whose timestamp is >= ``timestamp``."""
        ts_offset = self._checked_time_entry(timestamp)
        position = self._checked(self.offset_index.lookup, max(ts_offset, starting_offset))
        for pos, header in self._headers(position, self._size):
            if header.max_timestamp < timestamp or header.last_offset < starting_offset:
                continue
            if header.is_log_append_time:
                return max(header.base_offset, starting_offset), header.max_timestamp
            assert self._view is not None
            _, records = decode_records(self._view, pos)
            for record in records:
                if record.timestamp >= timestamp and record.offset >= starting_offset:
                    return record.offset, record.timestamp
        return None

    # ------------------------------------------------------------ truncation

    def truncate_to(self, offset: int, *, now_ms: int) -> int:
        """Drop batches whose last offset is >= ``offset``; returns bytes dropped.

        The dropped range is zero-filled rather than cut from the file, since a
        reader may still hold a view of it.
        """
        found = self.translate_offset(offset)
        if found is None:
            return 0
        self.activate()
        position = found[0]
        dropped = self._size - position
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self._zero_fill(position, self._size)
        self._size = position
        if not self.load():
            raise StorageError(f"{self.log_path}: indexes inconsistent after truncation")
        if position == 0:
            self.created_ms = now_ms
            self._rolling_ts = None
        return dropped

    def _zero_fill(self, start: int, end: int) -> None:
        assert self._fd is not None
        while start < end:
            start += os.pwrite(self._fd, memoryview(_ZEROS)[: min(len(_ZEROS), end - start)], start)

    # ------------------------------------------------------------ loading and recovery

    def load(self) -> bool:
        """Trust the files of a cleanly written segment: check the indexes and
        scan the short tail after the last index entry for the end offset.

        Returns False when anything is inconsistent; the caller then recovers.
        """
        if self._indexes_missing:
            return False
        try:
            self.offset_index.sanity_check(self._size)
            self.time_index.sanity_check(self._size)
        except CorruptIndexError as exc:
            logger.warning("index of %s is corrupt (%s); rebuilding it", self.log_path, exc)
            return False
        indexed_offset, position = self.offset_index.last_entry
        self._reset_index_state()
        if self.time_index.entries:
            self._max_ts, self._offset_of_max_ts = self.time_index.last_entry
        self._next_offset = self.base_offset
        try:
            for pos, header in self._headers(position, self._size):
                if (
                    pos == position
                    and self.offset_index.entries
                    and header.last_offset != indexed_offset
                ):
                    return False
                if header.max_timestamp > self._max_ts:
                    self._max_ts, self._offset_of_max_ts = header.max_timestamp, header.last_offset
                self._next_offset = header.next_offset
        except CorruptRecordError:
            return False
        if self.offset_index.entries and position >= self._size:
            return False
        if self._offset_of_max_ts >= self._next_offset and self._max_ts >= 0:
            return False
        self._bytes_since_index = self._size - position
        return True

    def recover(self, min_offset: int = 0, next_segment_base: int | None = None) -> RecoveryResult:
        """Validate every batch (CRC included), rebuild both indexes and cut the
        file after the last valid batch. Never raises for bad data.

        Offsets must keep increasing across segments: a batch below
        ``min_offset`` (the previous segment's end) or reaching
        ``next_segment_base`` is as invalid as a bad CRC.
        """
        self.activate()
        assert self._fd is not None
        file_length = os.fstat(self._fd).st_size
        if file_length != self._capacity:
            self._remap(file_length)
        self._reset_index_state()
        self.offset_index.reset()
        self.time_index.reset()
        position, reason = self._scan_valid(file_length, min_offset, next_segment_base)
        # Look for invalid bytes only just past the valid end: the rest of an
        # active segment is its preallocated zero tail, and reading all of it
        # made every restart after a crash touch 64 MiB per partition.
        window_end = min(file_length, position + len(_ZEROS))
        garbage = _nonzero_end(self._map, position, window_end) - position
        self._size = position
        self._rolling_ts = None
        self.txn_index.truncate_to(self._next_offset)  # markers past the valid end are gone
        if file_length > position:
            self._remap(position)
            os.ftruncate(self._fd, position)
        # Durably: a cut lost to a power loss fails the next load, and the segment is
        # recovered again at every start after every later power loss.
        self.offset_index.trim(sync=True)
        self.time_index.trim(sync=True)
        self._indexes_missing = False
        if position:  # no valid byte: nothing to make durable (a lost cut is redone)
            self.flush()
        return RecoveryResult(position, garbage, self._next_offset, reason if garbage else None)

    def _scan_valid(
        self, end: int, min_offset: int, next_segment_base: int | None
    ) -> tuple[int, str | None]:
        """Index valid batches from the start; returns where they end and why."""
        position, expected = 0, max(self.base_offset, min_offset)
        limit = INT32_MAX + self.base_offset + 1
        if next_segment_base is not None:
            limit = min(limit, next_segment_base)
        self._next_offset = self.base_offset
        mapped = self._map
        if mapped is None:  # only an empty file has no map
            return position, None
        self._touched()
        while position < end:
            try:
                header = validate_batch(mapped, position, end)
            except CorruptRecordError as exc:
                return position, exc.reason
            if header.base_offset < expected:
                return position, f"batch offset {header.base_offset} is below {expected}"
            if header.last_offset >= limit:
                return position, f"batch offset {header.last_offset} is beyond {limit - 1}"
            self._index_batch(position, header)
            position += header.size
            expected = self._next_offset = header.next_offset
        return position, None

    def headers(self) -> Iterator[tuple[int, BatchHeader]]:
        """Every batch header of the segment, in order."""
        return self._headers(0, self._size)

    # ------------------------------------------------------------ internals

    def _reset_index_state(self) -> None:
        self._max_ts = -1
        self._offset_of_max_ts = -1
        self._bytes_since_index = 0

    def _install_map(self, mapped: mmap.mmap | None, length: int) -> None:
        self._map = mapped
        self._view = memoryview(mapped) if mapped is not None else None
        self._touched_in = -1
        self._capacity = length

    def _touched(self) -> None:
        """The map is about to be read: register it for the next page release
        (once per release generation; reads are hot, registering is not free)."""
        if self._touched_in != TOUCHED.generation and self._map is not None:
            self._touched_in = TOUCHED.generation
            TOUCHED.touched(self._map)

    def _remap(self, length: int) -> None:
        assert self._fd is not None
        old_map, old_view = self._map, self._view
        self._install_map(map_file(self._fd, length, writable=False), length)
        _release_view(old_view)
        release_map(old_map)

    def _trim(self) -> None:
        """Cut the never-written preallocated tail; views only cover valid bytes."""
        assert self._fd is not None
        if self._capacity > self._size:
            self._remap(self._size)
            os.ftruncate(self._fd, self._size)

    def _release(self) -> None:
        _release_view(self._view)
        release_map(self._map)
        self._view = None
        self._map = None
        self._capacity = 0

    def __repr__(self) -> str:
        return (
            f"LogSegment(base={self.base_offset}, size={self._size}, "
            f"next={self._next_offset}, active={self.is_active})"
        )


def _release_view(view: memoryview | None) -> None:
    if view is None:
        return
    with contextlib.suppress(BufferError):  # exported directly: freed with its last user
        view.release()


def _pwritev_all(fd: int, chunks: list[BytesLike], position: int, path: Path) -> None:
    """Write the chunks back to back at ``position``; one pwritev call unless the
    kernel writes short or there are more than IOV_MAX chunks."""
    pending = [chunk for chunk in chunks if len(chunk)]
    try:
        while pending:
            written = os.pwritev(fd, pending[:_IOV_MAX], position)
            if written <= 0:
                raise StorageError(f"write to {path} made no progress")
            position += written
            pending = _after_written(pending, written)
    except OSError as exc:
        raise StorageError(f"cannot write to {path}: {exc.strerror}") from exc


def _after_written(chunks: list[BytesLike], written: int) -> list[BytesLike]:
    """What is left of ``chunks`` once their first ``written`` bytes are out."""
    for i, chunk in enumerate(chunks):
        if written < len(chunk):
            rest = chunks[i + 1 :]
            return [memoryview(chunk)[written:], *rest] if written else chunks[i:]
        written -= len(chunk)
    return []


def _nonzero_end(mapped: mmap.mmap | None, start: int, end: int) -> int:
    """One past the last non-zero byte in [start, end), or ``start`` if all zero."""
    if mapped is None:  # only an empty file has no map
        return start
    chunk = len(_ZEROS)
    high = end
    while high > start:
        low = max(start, high - chunk)
        data = mapped[low:high].rstrip(b"\0")
        if data:
            return low + len(data)
        high = low
    return start
