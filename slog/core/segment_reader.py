"""Read a replica's segment files from outside the broker that owns them, read-only.

A running broker preallocates its segments, appends with ``pwritev``, trims
them on roll and deletes or replaces them (retention, compaction). A reader in
another process never opens them for writing, never locks or maps them (a map
of a file the broker trims could fault) and never rebuilds an index: it
``pread``s whole batches and stops at the first byte that is not a complete
valid batch (the zeroed preallocated tail, or a batch still being written). A
segment that disappears under it was deleted by retention; an open descriptor
keeps a segment readable even if it is deleted or replaced while we read.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path

from slog.core import batch
from slog.core.batch import BatchHeader
from slog.core.errors import CorruptRecordError
from slog.core.records import iter_valid_batches
from slog.core.segment import parse_segment_base, segment_file_stem

CHUNK_BYTES = 8 * 1024 * 1024
# A tail reads little at a time: most polls find a few new batches, or none.
TAIL_CHUNK_BYTES = 64 * 1024

# (file position of the batch, chunk holding it, its position in the chunk, header)
SegmentBatch = tuple[int, bytes, int, BatchHeader]


def segment_bases(directory: Path) -> list[int]:
    """Base offsets of the ``.log`` segments in ``directory``, ascending."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    bases = [parse_segment_base(name) for name in names if name.endswith(".log")]
    return sorted(b for b in bases if b is not None)


def segment_path(directory: Path, base: int) -> Path:
    return directory / f"{segment_file_stem(base)}.log"


def iter_segment(directory: Path, base: int, start_position: int = 0,
                 chunk_bytes: int = CHUNK_BYTES) -> Iterator[SegmentBatch]:
    """Each valid batch of one segment from ``start_position``; see :func:`iter_file`."""
    try:
        fd = os.open(segment_path(directory, base), os.O_RDONLY)
    except FileNotFoundError:
        return  # deleted by retention between listing and opening
    try:
        yield from iter_file(fd, start_position, chunk_bytes)
    finally:
        os.close(fd)


def iter_file(fd: int, start_position: int = 0, chunk_bytes: int = CHUNK_BYTES
              ) -> Iterator[SegmentBatch]:
    """Each valid batch of an open segment from ``start_position``, until the written
    data ends; ``chunk_bytes`` at a time (a batch larger than that in one read)."""
    file_pos = start_position
    while True:
        chunk = os.pread(fd, chunk_bytes, file_pos)
        if len(chunk) < batch.LOG_OVERHEAD:
            return
        used = 0
        try:
            for pos, header in iter_valid_batches(chunk):
                yield file_pos + pos, chunk, pos, header
                used = pos + header.size
        except CorruptRecordError:
            return  # a batch still being written: the end of readable data
        if used == 0:
            size = batch.peek_batch_size(chunk)
            if size < batch.HEADER_SIZE or size <= len(chunk):
                return  # zeroed preallocated tail, or a batch that did not validate
            # One batch larger than a chunk: read exactly it.
            whole = os.pread(fd, size, file_pos)
            if len(whole) < size:
                return
            try:
                header = batch.validate_batch(whole)
            except CorruptRecordError:
                return
            yield file_pos, whole, 0, header
            used = size
        file_pos += used


INDEX_ENTRY = struct.Struct(">ii")  # relative offset, position (core/index.py's OffsetIndex)


def _indexed_position(directory: Path, base: int, offset: int) -> int:
    """A batch position at or before ``offset`` from the segment's offset index, checked
    against the log itself; 0 when there is no usable entry (the index is only a hint)."""
    try:
        data = (directory / f"{segment_file_stem(base)}.index").read_bytes()
    except OSError:
        return 0
    position = 0
    for relative, pos in INDEX_ENTRY.iter_unpack(data[: len(data) - len(data) % 8]):
        if pos <= 0 or base + relative > offset:
            break  # the zeroed preallocated tail, or past the offset
        position = pos
    if position == 0:
        return 0
    for _fpos, _chunk, _pos, header in iter_segment(directory, base, position):
        if header.base_offset <= offset:
            return position
        break
    return 0


def batches_from(directory: Path, start: int, end: int
                 ) -> Iterator[tuple[bytes, int, BatchHeader]]:
    """Every valid batch that holds offsets in ``[start, end)``, across segments."""
    bases = segment_bases(directory)
    first = max((i for i, b in enumerate(bases) if b <= start), default=0)
    for i, base in enumerate(bases[first:]):
        if base >= end:
            return
        position = _indexed_position(directory, base, start) if i == 0 else 0
        for _fpos, chunk, pos, header in iter_segment(directory, base, position):
            if header.base_offset >= end:
                return
            if header.last_offset >= start:
                yield chunk, pos, header


class LogTail:
    """Follows one partition directory: each :meth:`poll` yields only batches it has not
    yielded before, reading from the byte where the last poll stopped.

    The position is kept only for the same file: a segment replaced by compaction
    (a new inode) is read again from its start, skipping the offsets already
    yielded. The owner starts a new tail when the log may have been truncated
    (a new leader or leader epoch).
    """

    def __init__(self, directory: Path):
        self.directory = directory
        self.next_offset = 0
        self._file: tuple[int, int] | None = None  # (base, inode) the position is in
        self._position = 0

    def poll(self) -> Iterator[tuple[bytes, int, BatchHeader]]:
        """``(chunk, position in chunk, header)`` of every new valid batch, in order."""
        bases = segment_bases(self.directory)
        first = max((i for i, b in enumerate(bases) if b <= self.next_offset), default=0)
        for base in bases[first:]:
            yield from self._segment(base)

    def _segment(self, base: int) -> Iterator[tuple[bytes, int, BatchHeader]]:
        try:
            fd = os.open(segment_path(self.directory, base), os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            current = (base, os.fstat(fd).st_ino)
            position = self._position if current == self._file else 0
            for file_pos, chunk, pos, header in iter_file(fd, position, TAIL_CHUNK_BYTES):
                self._file, self._position = current, file_pos + header.size
                if header.last_offset >= self.next_offset:
                    self.next_offset = header.next_offset
                    yield chunk, pos, header
        finally:
            os.close(fd)
