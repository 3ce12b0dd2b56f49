"""A segment's ``.txnindex``: the transactions aborted in it (Kafka's TransactionIndex).

One 34-byte entry per ABORT marker stored in the segment, in marker order:
version int16 (0), producer id int64, first offset int64 (of the aborted
transaction), last offset int64 (the marker's) and the last stable offset once
the marker was written. Together the files give a partition its aborted
transactions at load without reading the log. Most segments never see an
abort, so the file is created by the first entry.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import NamedTuple

from slog.core.checkpoint import write_atomically
from slog.core.errors import SlogError, StorageError

TXN_INDEX_SUFFIX = ".txnindex"
TXN_INDEX_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
_FILE_MODE = 0o600


class CorruptTxnIndexError(SlogError):
    """A .txnindex that is not whole entries of a known version."""


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int


def encode_entry(entry: AbortedTxn) -> bytes:
    return _ENTRY.pack(TXN_INDEX_VERSION, *entry)


def decode_entries(data: bytes) -> list[AbortedTxn]:
    if len(data) % ENTRY_SIZE:
        raise CorruptTxnIndexError(f"{len(data)} bytes is not a whole number of entries")
    found = []
    for position in range(0, len(data), ENTRY_SIZE):
        version, *fields = _ENTRY.unpack_from(data, position)
        if version != TXN_INDEX_VERSION:
            raise CorruptTxnIndexError(f"entry {position // ENTRY_SIZE} has version {version}")
        found.append(AbortedTxn(*fields))
    return found


def read_aborted_txns(
    files: Iterable[tuple[int, Path]], unreadable: tuple[type[Exception], ...],
) -> tuple[list[AbortedTxn], list[tuple[int, Exception]]]:
    """The entries of the segments' ``.txnindex`` files (``files``: segment base and
    path, in offset order), in marker order, and the segments, by base in the same
    order, whose file raised one of ``unreadable`` (their entries are left out). A
    missing file is a segment with no abort (or one retention has just deleted).

    Shared by the log that owns the files (which deletes what does not read back) and
    the read-only reader of a replica's directory (which only replays more)."""
    found: list[AbortedTxn] = []
    failed: list[tuple[int, Exception]] = []
    for base, path in files:
        try:
            found.extend(decode_entries(path.read_bytes()))
        except FileNotFoundError:
            continue
        except unreadable as exc:
            failed.append((base, exc))
    return found, failed


class TransactionIndex:
    """The ``.txnindex`` at ``path``; not thread-safe (its log's lock guards it)."""

    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None
        self._unsynced = False

    def append(self, entry: AbortedTxn) -> None:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, _FILE_MODE)
        data = encode_entry(entry)
        if os.write(self._fd, data) != len(data):
            raise StorageError(f"{self.path}: short write")
        self._unsynced = True

    def entries(self) -> list[AbortedTxn]:
        """Every entry; raises CorruptTxnIndexError."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        return decode_entries(data)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries of markers at or after ``offset``."""
        entries = self.entries()
        kept = [e for e in entries if e.last_offset < offset]
        if len(kept) == len(entries):
            return
        # Cut, even to nothing, rather than unlinked: the cut is made durable by the
        # next fsync of this file (with the segment's), an unlink would need the
        # directory's, or a power loss could bring the removed entries back.
        os.truncate(self.path, len(kept) * ENTRY_SIZE)
        self._unsynced = True

    def replace_from(self, offset: int, entries: list[AbortedTxn]) -> None:
        """Make ``entries`` the entries of markers at or after ``offset`` (a replay
        derived them); the file is written, and fsynced, only if it differs."""
        current = self.entries()
        kept = [e for e in current if e.last_offset < offset]
        if current == kept + entries:
            return
        self.truncate_to(offset)
        for entry in entries:
            self.append(entry)
        self.flush()

    def remove_markers(self, marker_offsets: Collection[int]) -> None:
        """Drop the entries of the markers at ``marker_offsets`` (the cleaner removed
        them). The file is replaced in one rename, not cut and refilled: a crash must
        leave every entry or the kept ones, never lose the entry of a marker that stays."""
        entries = self.entries()
        kept = [e for e in entries if e.last_offset not in marker_offsets]
        if len(kept) == len(entries):
            return
        self.close()  # the append descriptor would write to the replaced file
        write_atomically(self.path, b"".join(encode_entry(e) for e in kept))
        self._unsynced = False

    def flush(self) -> None:
        if self._unsynced and self.path.exists():
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._unsynced = False

    def sync_fd(self) -> int | None:
        """A descriptor to fsync later (the caller closes it), None when nothing is unsynced."""
        if not self._unsynced or not self.path.exists():
            return None
        self._unsynced = False
        return os.open(self.path, os.O_RDONLY)

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
        self._unsynced = False
