"""The metadata log on disk: one writer (the controller), many tailing readers.

It is an ordinary slog partition log, ``metadata/__cluster_metadata-0``, whose
record values are JSON metadata records (see :mod:`slog.core.metadata_records`,
whose one codec both sides use), so ``slog dump-log`` and the storage engine's
recovery apply to it unchanged. A record this slog cannot use (a type from a newer
version, or fields that fail validation) is skipped with a warning, never a crash.

Readers in other processes tail the segment files with plain ``pread``: the
controller's mmap writes land in the shared page cache, a batch still being
written fails its CRC and is simply retried on the next poll, and the zeroed
preallocated tail reads as "no more data".
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from slog.core import batch
from slog.core.controller_lease import ControllerLease
from slog.core.errors import CorruptRecordError
from slog.core.log import PartitionLog
from slog.core.log_config import LogConfig
from slog.core.metadata_records import (
    InvalidRecordError,
    MetadataRecord,
    UnknownRecordTypeError,
    decode_record,
    encode_record,
)
from slog.core.names import make_private_dir
from slog.core.records import build_batch, decode_records

log = logging.getLogger("slog.metadata")

METADATA_PARTITION_DIR = "__cluster_metadata-0"
# Metadata batches are small; 8 MiB segments keep preallocation cheap. But each
# controller operation is one atomic batch, and the largest legal one (10,000
# partitions, or thousands of topics with configs, in one request) runs to
# megabytes: the batch limit must not be the topic default of ~1 MB.
METADATA_LOG_CONFIG = LogConfig(segment_bytes=8 * 1024 * 1024, retention_ms=-1, flush_messages=1,
                                max_message_bytes=64 * 1024 * 1024)


RELIST_S = 1.0


def metadata_log_dir(metadata_dir: Path) -> Path:
    return metadata_dir / METADATA_PARTITION_DIR


def _segment_files(directory: Path) -> list[tuple[int, Path]]:
    found = []
    for entry in directory.glob("*.log"):
        stem = entry.stem
        if stem.isdigit():
            found.append((int(stem), entry))
    return sorted(found)


# How long an append waits for the append lock: only a takeover in progress (a
# standby that found the lease expired) holds it for longer than an append.
APPEND_LOCK_WAIT_S = 2.0


class MetadataLogWriter:
    """The controller's handle: append records atomically, one batch per call.

    Open it under the lease's append lock, right after claiming the lease at
    ``epoch`` (:mod:`slog.core.controller_lease`): every append takes that lock and
    is refused (NotControllerError) once the lease carries another epoch.
    """

    def __init__(self, metadata_dir: Path, lease: ControllerLease, epoch: int):
        directory = metadata_log_dir(metadata_dir)
        make_private_dir(directory)
        self.epoch = epoch
        self._lease = lease
        # The previous controller may have died mid-write: always recover.
        self._log = PartitionLog.open(directory, METADATA_LOG_CONFIG, clean_shutdown=False)

    @classmethod
    def take_over(cls, metadata_dir: Path, lease: ControllerLease, controller: int,
                  incarnation: str, known_epoch: int) -> MetadataLogWriter:
        """Claim the lease at the next controller epoch (after ``known_epoch``, the
        metadata image's, and the lease's own) and open the log for it. The caller
        holds ``lease.exclusive()`` and has read the log to its end."""
        current = lease.read()
        epoch = max(known_epoch, current.epoch if current is not None else 0) + 1
        lease.claim(controller, incarnation, epoch)
        try:
            return cls(metadata_dir, lease, epoch)
        except BaseException:
            lease.release()  # a controller that cannot write must not keep the lease
            raise

    @property
    def end_offset(self) -> int:
        return self._log.log_end_offset

    def append(self, records: Sequence[MetadataRecord]) -> int:
        """Append ``records`` as one batch and fsync; returns the first offset.
        Raises NotControllerError (the lease has passed on) or LeaseBusyError."""
        now = int(time.time() * 1000)
        payload = build_batch(
            (None, json.dumps(encode_record(r), separators=(",", ":")).encode(), (), now)
            for r in records
        )
        with self._lease.exclusive(APPEND_LOCK_WAIT_S):
            self._lease.check(self.epoch)
            info = self._log.append(payload)
            self._log.flush()  # under the lock: a successor's recovery sees it whole
        return info.first_offset

    def read_all(self) -> Iterator[tuple[int, MetadataRecord]]:
        reader = MetadataLogReader(self._log.directory.parent)
        yield from reader.poll()

    def close(self) -> None:
        """Flush and trim the log: only while this writer's lease is held."""
        self._log.close()

    def abandon(self) -> None:
        """Let go of the files untouched: the lease has passed to another controller,
        which owns (and may already have recovered and extended) the log."""
        self._log.abandon()


class MetadataLogReader:
    """Tails the metadata log from any process; :meth:`poll` yields new records."""

    def __init__(self, metadata_dir: Path, start_offset: int = 0):
        self.directory = metadata_log_dir(metadata_dir)
        self.next_offset = start_offset
        self._segment_base: int | None = None
        self._position = 0  # byte position of next_offset's batch in that segment
        # The segment listing, re-read only when the directory changed (or after
        # RELIST_S, in case a roll fell in the same mtime tick as the last listing):
        # every broker polls 20 times a second, mostly to find nothing new.
        self._listing: list[tuple[int, Path]] = []
        self._listed: tuple[int, float] | None = None  # (directory mtime, monotonic time)
        self._unknown_types: set[str] = set()  # warned about once each

    def poll(self) -> Iterator[tuple[int, MetadataRecord]]:
        """Yield ``(offset, record)`` for every complete record past ``next_offset``."""
        while True:
            segments = self._segments()
            current = [(b, p) for b, p in segments if b <= self.next_offset]
            if not current:
                return
            base, path = current[-1]
            if base != self._segment_base:
                self._segment_base, self._position = base, 0
            before = self.next_offset
            yield from self._read_segment(path)
            # Move on only when a later segment starts exactly where we stopped.
            if self.next_offset == before or not any(b == self.next_offset for b, _ in segments):
                return

    def _segments(self) -> list[tuple[int, Path]]:
        try:
            mtime = os.stat(self.directory).st_mtime_ns
        except FileNotFoundError:
            return []
        now = time.monotonic()
        if self._listed is None or self._listed[0] != mtime or now - self._listed[1] > RELIST_S:
            self._listing = _segment_files(self.directory)
            self._listed = (mtime, now)
        return self._listing

    def _read_segment(self, path: Path) -> Iterator[tuple[int, MetadataRecord]]:
        try:
            handle = open(path, "rb")  # noqa: SIM115 - closed in finally
        except FileNotFoundError:
            return  # removed between listing and reading
        try:
            while True:
                head = os.pread(handle.fileno(), batch.LOG_OVERHEAD, self._position)
                if len(head) < batch.LOG_OVERHEAD:
                    return
                size = batch.peek_batch_size(head)
                if size < batch.HEADER_SIZE:
                    return  # zeroed preallocation: the end of written data
                data = os.pread(handle.fileno(), size, self._position)
                try:
                    header = batch.validate_batch(data)
                except CorruptRecordError:
                    return  # a batch still being written; read it next time
                _, records = decode_records(data)
                for record in records:
                    if record.offset >= self.next_offset and record.value is not None:
                        decoded = self._decode(record.offset, record.value)
                        if decoded is not None:
                            yield record.offset, decoded
                self.next_offset = max(self.next_offset, header.next_offset)
                self._position += size
        finally:
            handle.close()

    def _decode(self, offset: int, value: bytes) -> MetadataRecord | None:
        """The record at ``offset``, or None (and a warning) when it cannot be used."""
        try:
            return decode_record(json.loads(value))
        except UnknownRecordTypeError as exc:
            if exc.kind not in self._unknown_types:  # a newer slog may write many
                self._unknown_types.add(exc.kind)
                log.warning("skipping metadata records of type %r (first at offset %d): "
                            "written by a newer slog?", exc.kind, offset)
        except (InvalidRecordError, ValueError) as exc:  # ValueError: not JSON
            log.warning("skipping invalid metadata record at offset %d: %s", offset, exc)
        return None
