"""Sparse segment indexes, Kafka's OffsetIndex (.index) and TimeIndex (.timeindex).

Both are arrays of fixed-size big-endian entries in a memory-mapped file:

* OffsetIndex: (relative offset int32, position int32), 8 bytes. One entry per
  ``index.interval.bytes`` of log; the offset is the last offset of the batch
  that starts at the position.
* TimeIndex: (timestamp int64, relative offset int32), 12 bytes, strictly
  increasing timestamps; the offset is where the largest timestamp so far was.

An index is only a cache of the log: any doubt about it (bad length, entries
out of order or pointing past the log when opened; an entry that does not
match the batch it points at when used) makes the segment rebuild it by
scanning the batch headers.

The file grows in steps with ``posix_fallocate`` instead of being one sparse
preallocated file, so a full disk shows up as a StorageError when allocating,
never as SIGBUS on an mmap write, and idle partitions cost no disk.

An active segment's first page of entries is kept in memory, and the file is
written when the segment is sealed or closed, or when the entries outgrow the
page. A producer writing to a thousand new partitions made two index files
each grow, map and dirty a page (and every later group-commit ``syncfs`` write
them back) for a few entries apiece. Nothing is lost by it: after a crash the
active segment is always rescanned and its indexes rebuilt, and a roll writes
the sealed segment's indexes before it creates the next segment.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import mmap
import os
import struct
from pathlib import Path
from typing import ClassVar

from slog.core.errors import SlogError, StorageError

logger = logging.getLogger("slog.core.index")

FILE_MODE = 0o600
_INITIAL_INDEX_BYTES = 4096  # the first file allocation, and the most kept in memory
_FIRST_MEMORY_BYTES = 256  # in memory, grown by doubling up to the page


class CorruptIndexError(SlogError):
    """An index file failed its sanity check; the segment rebuilds it from the log."""


# ---------------------------------------------------------------- file helpers


def allocate(fd: int, old_size: int, new_size: int, path: Path) -> None:
    """Grow the file behind ``fd`` to ``new_size`` bytes with real blocks.

    Raises StorageError (disk full, file too large) and leaves the file at its
    old size. Filesystems without fallocate get a plain (sparse) ftruncate.
    """
    if new_size <= old_size:
        return
    try:
        os.posix_fallocate(fd, old_size, new_size - old_size)
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.ENOSYS):
            os.ftruncate(fd, new_size)
            return
        with contextlib.suppress(OSError):
            os.ftruncate(fd, old_size)  # drop any partly allocated tail
        raise StorageError(
            f"cannot allocate {new_size - old_size} bytes for {path}: {exc.strerror}"
        ) from exc


def release_map(mapped: mmap.mmap | None) -> None:
    """Unmap now if no memoryview still refers to the map, else when the last one dies."""
    if mapped is None:
        return
    with contextlib.suppress(BufferError):
        # A reader (e.g. a socket writer) may still hold a view: it unmaps when that dies.
        mapped.close()


def map_file(fd: int, length: int, *, writable: bool) -> mmap.mmap | None:
    if length == 0:
        return None
    access = mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ
    return mmap.mmap(fd, length, access=access)


# ---------------------------------------------------------------- indexes


class _Index:
    """Fixed-size entries in an mmap'd file; subclasses give the entry layout."""

    ENTRY: ClassVar[struct.Struct]

    def __init__(self, path: Path, base_offset: int, max_index_size: int):
        self.path = path
        self.base_offset = base_offset
        self._entry_size = self.ENTRY.size
        # The entries: the file's map, or (``_in_memory``, the file still empty) a buffer.
        self._map: mmap.mmap | bytearray | None = None
        self._in_memory = False
        self._dirty = False  # written since the last msync
        fd = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
        try:
            length = os.fstat(fd).st_size
            self._length_ok = length % self._entry_size == 0
            self._entries = length // self._entry_size
            self._capacity = length
            self._map = map_file(fd, length, writable=True)
        finally:
            os.close(fd)  # the map keeps the file; growth and trim reopen it
        # An existing index may be longer than a since-lowered segment.index.bytes.
        self.max_entries = max(max_index_size // self._entry_size, self._entries)

    # -------------------------------------------------------------- basics

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def is_full(self) -> bool:
        return self._entries >= self.max_entries

    @property
    def size_in_bytes(self) -> int:
        return self._entries * self._entry_size

    def entry(self, n: int) -> tuple[int, ...]:
        """The n-th entry as stored (relative offsets are not rebased)."""
        assert self._map is not None
        return self.ENTRY.unpack_from(self._map, n * self._entry_size)

    def all_entries(self) -> list[tuple[int, ...]]:
        if self._map is None or not self._entries:
            return []
        return list(self.ENTRY.iter_unpack(self._map[: self.size_in_bytes]))

    def _floor(self, target: int, field: int) -> int:
        """Index of the last entry whose ``field`` is <= target, or -1."""
        low, high = 0, self._entries - 1
        found = -1
        unpack, size, mapped = self.ENTRY.unpack_from, self._entry_size, self._map
        if mapped is None:  # only an empty file has no map
            return found
        while low <= high:
            mid = (low + high) >> 1
            if unpack(mapped, mid * size)[field] <= target:
                found = mid
                low = mid + 1
            else:
                high = mid - 1
        return found

    def _first_at_or_above(self, target: int, field: int) -> int:
        """Number of entries whose ``field`` is < target (fields are monotonic)."""
        return self._floor(target - 1, field) + 1

    # -------------------------------------------------------------- writes

    def ensure_room(self, more: int) -> None:
        """Make room for ``more`` entries now, so appends cannot fail later: in memory
        within the first page of an empty file, else allocated in the file."""
        wanted = min(self._entries + more, self.max_entries) * self._entry_size
        if wanted <= self._capacity:
            return
        if (self._in_memory or not self._capacity) and wanted <= _INITIAL_INDEX_BYTES:
            self._grow_in_memory(wanted)
            return
        new_capacity = max(
            wanted,
            min(self.max_entries * self._entry_size, max(2 * self._capacity, _INITIAL_INDEX_BYTES)),
        )
        new_capacity -= new_capacity % self._entry_size
        if self._in_memory:
            self._to_file(new_capacity)
        else:
            self._resize_file(new_capacity, grow=True)

    def materialize(self) -> None:
        """Give entries kept in memory their file space (and write them there): a roll
        does it before anything changes, so a full disk fails the roll, not the seal."""
        if self._in_memory:
            self._to_file(self._capacity)

    def _grow_in_memory(self, wanted: int) -> None:
        capacity = max(wanted, min(_INITIAL_INDEX_BYTES,
                                   max(2 * self._capacity, _FIRST_MEMORY_BYTES)))
        capacity -= capacity % self._entry_size
        if isinstance(self._map, bytearray):
            self._map.extend(bytes(capacity - self._capacity))
        else:
            self._map = bytearray(capacity)
        self._capacity = capacity
        self._in_memory = True

    def _to_file(self, capacity: int, *, sync: bool = False) -> None:
        """Move the in-memory entries into the (empty) file, allocated to ``capacity``."""
        used = self.size_in_bytes
        mapped = None
        if capacity:
            fd = os.open(self.path, os.O_RDWR)
            try:
                allocate(fd, 0, capacity, self.path)
                mapped = map_file(fd, capacity, writable=True)
                assert mapped is not None and self._map is not None
                mapped[:used] = self._map[:used]
                if sync:
                    mapped.flush()
                    os.fsync(fd)
            finally:
                os.close(fd)
        self._map, self._capacity, self._in_memory = mapped, capacity, False
        self._dirty = not sync and used > 0

    def _append(self, *values: int) -> None:
        if self._entries >= self.max_entries:
            raise ValueError(f"index {self.path} is full ({self._entries} entries)")
        position = self._entries * self._entry_size
        if position + self._entry_size > self._capacity:
            self.ensure_room(1)
        assert self._map is not None
        self.ENTRY.pack_into(self._map, position, *values)
        self._entries += 1
        self._dirty = True

    def _truncate_entries(self, keep: int) -> None:
        """Keep the first ``keep`` entries and zero the rest, so stale entries never resurface."""
        if keep >= self._entries:
            return
        assert self._map is not None
        start, end = keep * self._entry_size, self._entries * self._entry_size
        self._map[start:end] = bytes(end - start)
        self._entries = keep
        self._dirty = True

    def reset(self) -> None:
        """Forget every entry (before a rebuild)."""
        self._truncate_entries(0)
        self._length_ok = True

    def trim(self, *, sync: bool = False) -> bool:
        """Cut the file to the entries in use, or write there the entries kept in
        memory (on roll and close); True if the file changed.

        A sealed segment's cut must reach the disk (``sync``, or a roll fsyncs the file
        in the background): otherwise a power loss brings back the preallocated zeros
        after the last entry, and every sealed segment's index is found corrupt and
        rebuilt at the next start (the power-loss test saw restarts slow down with each
        loss, to past 30 s). An active segment's index grows again when it reopens.
        """
        if self._in_memory:
            try:
                self._to_file(self.size_in_bytes, sync=sync)
            except StorageError as exc:
                # The file stays empty: a valid index without entries (lookups scan).
                logger.warning("%s: index entries not written: %s", self.path, exc)
                return False
            return self._capacity > 0
        if self._capacity == self.size_in_bytes:
            return False
        self._resize_file(self.size_in_bytes, grow=False, sync=sync)
        return True

    def _resize_file(self, new_capacity: int, *, grow: bool, sync: bool = False) -> None:
        old = self._map
        assert not isinstance(old, bytearray)
        fd = os.open(self.path, os.O_RDWR)
        try:
            if grow:
                allocate(fd, self._capacity, new_capacity, self.path)
            else:
                self.flush()
                os.ftruncate(fd, new_capacity)
                if sync:
                    os.fsync(fd)
            self._map = map_file(fd, new_capacity, writable=True)
            self._capacity = new_capacity
        finally:
            os.close(fd)
        release_map(old)

    def flush(self) -> None:
        """msync the entries written since the last flush (a flush of a map
        covers the file's pages dirtied through earlier maps too)."""
        if isinstance(self._map, mmap.mmap) and self._dirty:
            self._map.flush()
        self._dirty = False

    def close(self) -> None:
        self.trim()
        self.flush()
        self._release()

    def abandon(self) -> None:
        """Unmap without trimming or syncing: another process owns the file now."""
        self._release()

    def _release(self) -> None:
        if isinstance(self._map, mmap.mmap):
            release_map(self._map)
        self._map = None
        self._in_memory = False

    def delete(self) -> None:
        self.abandon()
        self.path.unlink(missing_ok=True)

    # -------------------------------------------------------------- checks

    def sanity_check(self, log_size: int) -> None:
        """Raise CorruptIndexError unless the entries are well formed for a log of ``log_size``."""
        if not self._length_ok:
            raise CorruptIndexError(
                f"{self.path} has a length that is not a multiple of {self._entry_size}"
            )
        entries = self.all_entries()
        self._check_entries(entries, log_size)

    def _check_entries(self, entries: list[tuple[int, ...]], log_size: int) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path.name}, entries={self._entries})"


class OffsetIndex(_Index):
    """Maps offsets to byte positions in the segment's .log file."""

    ENTRY = struct.Struct(">ii")

    def append(self, offset: int, position: int) -> None:
        relative = offset - self.base_offset
        if self._entries and relative <= self.entry(self._entries - 1)[0]:
            raise ValueError(f"offset {offset} is not larger than the last entry of {self.path}")
        self._append(relative, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """The largest entry with offset <= ``offset``, or (base offset, 0)."""
        n = self._floor(offset - self.base_offset, 0)
        if n < 0:
            return self.base_offset, 0
        relative, position = self.entry(n)
        return self.base_offset + relative, position

    def floor_by_position(self, position: int) -> tuple[int, int]:
        """The entry with the largest position <= ``position``, or (base offset, 0)."""
        n = self._floor(position, 1)
        if n < 0:
            return self.base_offset, 0
        relative, found = self.entry(n)
        return self.base_offset + relative, found

    @property
    def last_entry(self) -> tuple[int, int]:
        """(offset, position) of the last entry, or (base offset, 0) when empty."""
        if not self._entries:
            return self.base_offset, 0
        relative, position = self.entry(self._entries - 1)
        return self.base_offset + relative, position

    def truncate_to(self, offset: int) -> None:
        """Remove entries for offsets >= ``offset``."""
        self._truncate_entries(self._first_at_or_above(offset - self.base_offset, 0))

    def _check_entries(self, entries: list[tuple[int, ...]], log_size: int) -> None:
        previous = (-1, -1)
        for relative, position in entries:
            if relative <= previous[0] or position <= previous[1] or relative < 0:
                raise CorruptIndexError(
                    f"{self.path}: entry ({relative}, {position}) is out of order"
                )
            previous = (relative, position)
        if entries and previous[1] >= log_size:
            raise CorruptIndexError(
                f"{self.path}: last position {previous[1]} is beyond the log size {log_size}"
            )


class TimeIndex(_Index):
    """Maps timestamps to offsets; one slot is kept free for the entry added on roll."""

    ENTRY = struct.Struct(">qi")

    @property
    def is_full(self) -> bool:
        return self._entries >= self.max_entries - 1

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, or (-1, base offset) when empty."""
        if not self._entries:
            return -1, self.base_offset
        timestamp, relative = self.entry(self._entries - 1)
        return timestamp, self.base_offset + relative

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Append only a timestamp larger than the last one (Kafka's maybeAppend)."""
        if timestamp < 0 or (self._entries and timestamp <= self.last_entry[0]):
            return
        if self._entries >= self.max_entries or (self.is_full and not skip_full_check):
            return
        self._append(timestamp, offset - self.base_offset)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """The entry with the largest timestamp <= ``timestamp``, or (-1, base offset)."""
        n = self._floor(timestamp, 0)
        if n < 0:
            return -1, self.base_offset
        found_ts, relative = self.entry(n)
        return found_ts, self.base_offset + relative

    def truncate_to(self, offset: int) -> None:
        """Remove entries pointing at offsets >= ``offset``."""
        self._truncate_entries(self._first_at_or_above(offset - self.base_offset, 1))

    def _check_entries(self, entries: list[tuple[int, ...]], log_size: int) -> None:
        previous = (-1, -1)
        for timestamp, relative in entries:
            if timestamp <= previous[0] or relative < previous[1] or relative < 0:
                raise CorruptIndexError(
                    f"{self.path}: entry ({timestamp}, {relative}) is out of order"
                )
            previous = (timestamp, relative)
        if entries and log_size == 0:
            raise CorruptIndexError(f"{self.path} has entries but the log is empty")
