"""PartitionLog: one partition's ordered segments (Kafka's UnifiedLog/LocalLog).

The log appends whole record batches, serves zero-copy reads of whole batches,
truncates for followers, deletes old segments for retention, and recovers
from a crash by validating every batch after the recovery point.

Offsets: the log start offset is the first readable offset, the log end offset
(LEO) is one past the last one, and the recovery point is the offset below
which everything has been fsynced.
"""

from __future__ import annotations

import bisect
import concurrent.futures
import logging
import os
import shutil
import threading
import time as _time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import crc32c

from slog.core.aborted_txn_index import (
    TXN_INDEX_SUFFIX,
    AbortedTxn,
    CorruptTxnIndexError,
    read_aborted_txns,
)
from slog.core.batch import (
    TIMESTAMP_TYPE_BIT,
    BatchHeader,
    iter_batches,
    set_base_offset,
    set_partition_leader_epoch,
)
from slog.core.checkpoint import TEMP_SUFFIX, fsync_dir, write_atomically
from slog.core.errors import (
    CorruptRecordError,
    OffsetOutOfRangeError,
    SlogError,
    StorageError,
)
from slog.core.leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from slog.core.log_config import LogConfig
from slog.core.names import make_private_dir
from slog.core.producer_snapshot import (
    CorruptSnapshotError,
    SnapshotEntry,
    decode_snapshot,
    encode_snapshot,
    parse_snapshot_offset,
    snapshot_path,
)
from slog.core.records import decode_records
from slog.core.segment import (
    INDEX_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    RecoveryResult,
    parse_segment_base,
    segment_file_stem,
)

logger = logging.getLogger(__name__)

# Bytes of a batch before the CRC: baseOffset, batchLength, partitionLeaderEpoch, magic.
_PRE_CRC = 17
_ATTRIBUTES_POS = 21
_MAX_TIMESTAMP_POS = 35
_POST_MAX_TIMESTAMP = 43  # first byte after maxTimestamp


class RecordTooLargeError(SlogError):
    """A batch is larger than max.message.bytes (Kafka's MESSAGE_TOO_LARGE)."""


class AppendInfo(NamedTuple):
    """What an append did; offsets are the ones actually stored."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    valid_bytes: int
    record_count: int
    batches: list[tuple[int, BatchHeader]]  # (base offset, header as stored)


@dataclass(frozen=True)
class FetchSlice:
    """Zero-copy result of :meth:`PartitionLog.read`: whole batches, possibly from
    several segments. ``first_offset`` is the base offset of the first batch and
    ``next_offset`` where a consumer continues; both are the requested offset
    when nothing was returned."""

    views: list[memoryview] = field(default_factory=list)
    size: int = 0
    first_offset: int = -1
    next_offset: int = -1

    def tobytes(self) -> bytes:
        return b"".join(self.views)


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int


class TimestampAndOffset(NamedTuple):
    timestamp: int
    offset: int


# One thread fsyncs the segments every log rolls away from, in order, so that a
# produce that rolls does not wait for tens of megabytes to reach the disk (as
# Kafka, which flushes a rolled segment in the background). A log's recovery
# point passes a sealed segment only once its fsync is done.
_SEGMENT_SYNCER = concurrent.futures.ThreadPoolExecutor(
    max_workers=1, thread_name_prefix="segment-sync")


def _fsync_and_close(fds: list[int], next_offset: int) -> int:
    """fsync a sealed segment's files (the log, and its indexes if the roll cut them)."""
    try:
        for fd in fds:
            os.fsync(fd)
    finally:
        for fd in fds:
            os.close(fd)
    return next_offset


def _write_snapshot(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Write a producer-state snapshot under its final name in one rename.

    Not ``durable`` (at close): neither file nor rename is fsynced. A snapshot only
    saves replay, and one the disk did not keep whole fails its CRC and is
    deleted at load; an fsync pair per partition would slow every clean shutdown.
    """
    try:
        write_atomically(path, data, durable=durable)
    except (OSError, StorageError) as exc:  # the next roll or clean shutdown writes another
        logger.warning("producer-state snapshot %s not written: %s", path, exc)


class _DiskErrors:
    """Context manager reporting the disk refusing an operation as StorageError.

    A class rather than @contextmanager: it wraps every append.
    """

    def __init__(self, directory: Path):
        self._directory = directory

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type | None, exc: BaseException | None, tb: object) -> None:
        if isinstance(exc, OSError):
            raise StorageError(f"{self._directory}: {exc}") from exc


@dataclass
class SyncTicket:
    """One group-commit sync of a log, noted under its lock and done outside it."""

    target: int  # the log end it vouches for
    fd: int | None  # a duplicate of the active segment's descriptor; close() closes it
    generation: int  # the log's truncation count when it began: a later one voids it
    rolled: list[concurrent.futures.Future[int]]  # sealed segments' fsyncs to outwait
    errors: _DiskErrors

    def wait_rolled(self) -> None:
        with self.errors:
            for future in self.rolled:
                future.result()

    def fdatasync(self) -> None:
        with self.errors:
            if self.fd is not None:
                os.fdatasync(self.fd)

    def close(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)


class _AppendPlan(NamedTuple):
    chunks: list[bytes | bytearray | memoryview]  # what to write, in order
    batches: list[tuple[int, BatchHeader]]  # (position in the append, final header)
    total: int


class PartitionLog:
    """A partition's log in ``directory``. Create with :meth:`open`.

    Every method is safe to call from several threads; one lock serialises them.
    """

    def __init__(self, directory: Path, config: LogConfig, time: Callable[[], float]):
        self._directory = directory
        self._config = config
        self._time = time
        self._lock = threading.RLock()
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._log_start_offset = 0
        self._recovery_point = 0
        # Offsets below are on disk: fsynced by a flush, a rolled segment's sync or
        # a group-commit sync (begin_sync/finish_sync). Truncation bumps the
        # generation, so a sync that began before it cannot vouch for what was
        # appended after it.
        self._durable_offset = 0
        self._truncations = 0
        self._pending_syncs: list[concurrent.futures.Future[int]] = []  # oldest first
        self._device: int | None = None  # st_dev of the directory, once looked up
        self._last_flush_ms = self._now_ms()
        # Told (under this log's lock) when unflushed data gets a flush.ms deadline, so
        # the periodic flusher looks only at logs that have one (see flush_due_ms).
        self.flush_watch: Callable[[PartitionLog], None] | None = None
        # Told (outside the lock) when DeleteRecords moved the log start offset, so the
        # log manager checkpoints it at once: deleted records must stay deleted. It
        # writes every log's start, so a caller moving many logs tells it once.
        self.log_start_watch: Callable[[PartitionLog], None] | None = None
        self._closed = False
        self._disk_errors = _DiskErrors(directory)
        self._epoch_cache_dirty = False
        self._epoch_cache = LeaderEpochCache(
            directory / LEADER_EPOCH_CHECKPOINT, log_end_offset=lambda: self.log_end_offset
        )
        # Producer-state snapshots (slog.core.producer_snapshot): the offsets of the
        # files in the directory, and the writes handed to the segment syncer.
        self._snapshots: list[int] = []
        self._snapshot_writes: dict[int, concurrent.futures.Future[None]] = {}
        # Asked for the producer state (as of the log end) at every roll and at
        # close; set by the replica that owns the producer state.
        self.producer_state: Callable[[], list[SnapshotEntry]] | None = None
        # Set by a load: the segments from this offset on were rescanned, or their
        # .txnindex is unreadable, so their aborted-transaction entries must be
        # derived again from the batches (None: every .txnindex is complete).
        self.txn_index_stale_from: int | None = None

    # ================================================================= opening

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        clean_shutdown: bool = False,
        time: Callable[[], float] = _time.time,
        log_start_offset: int | None = None,
    ) -> PartitionLog:
        """Open (or create) the log in ``directory``.

        Without ``clean_shutdown`` every segment from the one holding
        ``recovery_point`` on is validated batch by batch and cut at the first
        bad byte. Missing or corrupt indexes are rebuilt in any case. A torn
        tail never stops the log from opening.
        """
        directory = Path(directory)
        make_private_dir(directory)
        log = cls(directory, config, time)
        with log._disk_errors:
            log._load(recovery_point, clean_shutdown, log_start_offset)
        return log

    @classmethod
    def create_new(
        cls,
        directory: Path,
        config: LogConfig,
        *,
        leader_epoch: int | None = None,
        time: Callable[[], float] = _time.time,
    ) -> PartitionLog:
        """A new empty log in the new, empty ``directory``, written without any fsync.

        For bulk creation: the caller fsyncs each new directory once, after all
        its files exist. A new leader's first epoch (``leader_epoch``, at offset
        0) is kept in memory and written with the log's next flush of data;
        until then an empty log has nothing a rebuild could get wrong.
        """
        directory = Path(directory)
        log = cls(directory, config, time)
        with log._disk_errors:
            segment = LogSegment.create(directory, 0, config, now_ms=log._now_ms(),
                                        sync_dir=False, new_directory=True)
            segment.activate()
            log._segments, log._bases = [segment], [0]
            if leader_epoch is not None:
                log._epoch_cache_dirty = log._epoch_cache.assign(leader_epoch, 0, flush=False)
        return log

    def _load(
        self, recovery_point: int, clean_shutdown: bool, log_start_offset: int | None
    ) -> None:
        rebuild_epochs = self._load_epoch_cache()
        segments = self._open_segments()
        now_ms = self._now_ms()
        if not segments:
            start = log_start_offset or 0
            segments = [LogSegment.create(self._directory, start, self._config, now_ms=now_ms)]
        first_recovered = self._recover(segments, recovery_point, clean_shutdown)
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        segments[-1].activate()
        leo = self.log_end_offset
        self._log_start_offset = max(segments[0].base_offset, min(log_start_offset or 0, leo))
        if rebuild_epochs:
            first_recovered = segments[0].base_offset
        if first_recovered is not None:
            self._rebuild_epochs_from(first_recovered)
        self.txn_index_stale_from = first_recovered
        self._epoch_cache.truncate_from_end(leo)
        self._epoch_cache.truncate_from_start(self._log_start_offset)
        # Clean: flushed at close. Unclean: recovery validated and fsynced the rest.
        self._recovery_point = self._durable_offset = leo

    def _load_epoch_cache(self) -> bool:
        """Load the leader-epoch checkpoint; True if it must be rebuilt from the log."""
        path = self._directory / LEADER_EPOCH_CHECKPOINT
        try:
            self._epoch_cache = LeaderEpochCache.load(
                path, log_end_offset=lambda: self.log_end_offset
            )
        except StorageError as exc:
            logger.warning("%s; rebuilding the leader-epoch cache from the log", exc)
            return True
        return not path.exists()

    def _open_segments(self) -> list[LogSegment]:
        """Open every ``.log`` file; clear leftovers of interrupted writes."""
        bases = []
        names = os.listdir(self._directory)
        for name in names:
            base = parse_segment_base(name)
            if base is not None:
                bases.append(base)
            elif name.endswith(TEMP_SUFFIX):
                (self._directory / name).unlink(missing_ok=True)
        stems = {segment_file_stem(b) for b in bases}
        for name in names:  # an index without its log is from a half-deleted segment
            stem, _, suffix = name.partition(".")
            if "." + suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX) and \
                    stem not in stems:
                (self._directory / name).unlink(missing_ok=True)
        self._snapshots = sorted(
            offset for name in names if (offset := parse_snapshot_offset(name)) is not None)
        now_ms = self._now_ms()
        return [
            LogSegment.open(self._directory, b, self._config, now_ms=now_ms) for b in sorted(bases)
        ]

    def _recover(
        self, segments: list[LogSegment], recovery_point: int, clean_shutdown: bool
    ) -> int | None:
        """Load or recover each segment in place; drop segments after corruption.

        Returns the base offset of the first segment that was rescanned, or None.
        """
        if clean_shutdown:
            must_recover_from = len(segments)
        else:
            bases = [s.base_offset for s in segments]
            must_recover_from = max(0, bisect.bisect_right(bases, recovery_point) - 1)
        first_recovered: int | None = None
        for i, segment in enumerate(segments):
            if i < must_recover_from and segment.load():
                continue
            if i < must_recover_from and i == len(segments) - 1:
                logger.warning(
                    "%s was not closed cleanly despite a clean shutdown; recovering",
                    segment.log_path,
                )
            if first_recovered is None:
                first_recovered = segment.base_offset
            result = segment.recover(
                min_offset=segments[i - 1].next_offset if i else 0,
                next_segment_base=segments[i + 1].base_offset if i + 1 < len(segments) else None,
            )
            if result.garbage_bytes:
                self._report_corruption(segment, result, segments[i + 1 :])
                del segments[i + 1 :]
                break
        return first_recovered

    def _report_corruption(
        self, segment: LogSegment, result: RecoveryResult, dropped: list[LogSegment]
    ) -> None:
        """Log the truncation and delete the segments after it: data past a
        corrupt byte cannot be trusted to follow on from what was kept."""
        logger.warning(
            "%s: truncated %d bytes of invalid data at offset %d (byte %d of %s): %s",
            self._directory.name,
            result.garbage_bytes,
            result.next_offset,
            result.valid_bytes,
            segment.log_path.name,
            result.reason,
        )
        for later in dropped:
            logger.warning(
                "%s: deleting segment %s after the corruption",
                self._directory.name,
                later.log_path.name,
            )
            later.delete()

    def _rebuild_epochs_from(self, offset: int) -> None:
        """Re-derive leader-epoch entries for offsets >= ``offset`` from batch headers."""
        cache = self._epoch_cache
        cache.truncate_from_end(offset)
        for segment in self._segments:
            if segment.next_offset <= offset:
                continue
            for _, header in segment.headers():
                epoch = header.partition_leader_epoch
                if header.base_offset >= offset and epoch >= 0 and epoch > cache.latest_epoch:
                    cache.assign(epoch, header.base_offset, flush=False)
        # An empty log without a checkpoint file stays without one: writing an empty
        # file would cost two fsyncs per log at every start of thousands of replicas.
        if cache.entries or cache.path is None or cache.path.exists():
            cache.flush()

    # ================================================================= properties

    @property
    def directory(self) -> Path:
        return self._directory

    @property
    def config(self) -> LogConfig:
        return self._config

    def update_config(self, config: LogConfig) -> None:
        """New settings apply to the next append, roll and retention check."""
        with self._lock:
            self._config = config
            for segment in self._segments:
                segment.config = config
            self._watch_flush()  # flush.ms may be new or shorter

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset if self._segments else 0

    @property
    def recovery_point(self) -> int:
        """Offsets below are on disk (waits for a rolled segment's fsync in flight)."""
        with self._lock:
            self._settle_syncs(wait=True)
            return self._recovery_point

    def _settle_syncs(self, *, wait: bool) -> None:
        """Move the recovery point past sealed segments whose fsync finished
        (all of them with ``wait``)."""
        while self._pending_syncs and (wait or self._pending_syncs[0].done()):
            future = self._pending_syncs.pop(0)
            try:
                synced = future.result()
            except OSError as exc:
                raise StorageError(f"{self._directory}: fsync of a rolled segment failed: "
                                   f"{exc}") from exc
            self._recovery_point = max(self._recovery_point, synced)

    @property
    def size_in_bytes(self) -> int:
        with self._lock:
            return sum(s.size for s in self._segments)

    @property
    def segments(self) -> list[LogSegment]:
        with self._lock:
            return list(self._segments)

    def assign_leader_epoch(self, epoch: int, start_offset: int) -> None:
        """A new leader epoch starts at ``start_offset`` (this broker became leader).

        The checkpoint file is written with the next flush of data, not now: a
        failover makes a broker leader of thousands of partitions at once, and two
        fsyncs each would stall it for seconds. Nothing is lost in a crash: recovery
        re-derives the epochs of every unflushed batch from its header, and an epoch
        without data has nothing to answer for.
        """
        with self._lock:
            if self._epoch_cache.assign(epoch, start_offset, flush=False):
                self._epoch_cache_dirty = True

    @property
    def leader_epoch_cache(self) -> LeaderEpochCache:
        return self._epoch_cache

    @property
    def closed(self) -> bool:
        return self._closed

    # ================================================================= append

    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        assign_offsets: bool = True,
        leader_epoch: int | None = None,
        append_time_ms: int | None = None,
    ) -> AppendInfo:
        """Append one or more batches, all or nothing.

        Leader (``assign_offsets``): batches get consecutive offsets from the
        LEO, ``leader_epoch`` is stamped if given, and LogAppendTime topics
        get the append time. Follower: offsets are kept and must start at or
        after the LEO. Raises CorruptRecordError, RecordTooLargeError,
        ValueError (follower offsets) or StorageError (disk).
        """
        view = _byte_view(records)
        batches = list(iter_batches(view))
        with self._lock, self._disk_errors:
            self._check_open()
            if not batches:
                leo = self.log_end_offset
                return AppendInfo(leo, leo - 1, -1, -1, -1, 0, 0, [])
            now_ms = self._now_ms()
            append_time = -1
            if assign_offsets:
                self._check_leader_batches(batches)
                if self._config.log_append_time:
                    append_time = now_ms if append_time_ms is None else append_time_ms
                plan = _plan_leader_append(
                    view, batches, self.log_end_offset, leader_epoch, append_time
                )
            else:
                self._check_follower_batches(batches)
                plan = _AppendPlan([view], batches, len(view))
            self._maybe_roll(plan, now_ms).append(plan.chunks, plan.batches, plan.total)
            self._assign_epochs(plan.batches)
            if not self._flush_if_due(now_ms):
                self._watch_flush()
            return _append_info(plan, append_time)

    def _check_leader_batches(self, batches: list[tuple[int, BatchHeader]]) -> None:
        limit = self._config.max_message_bytes
        for position, header in batches:
            if header.size > limit:
                raise RecordTooLargeError(
                    f"batch of {header.size} bytes at byte {position} is larger than "
                    f"max.message.bytes ({limit})"
                )
            if header.record_count != header.last_offset_delta + 1:
                raise CorruptRecordError(
                    f"record count {header.record_count} does not match lastOffsetDelta "
                    f"{header.last_offset_delta}",
                    position=position,
                )

    def _check_follower_batches(self, batches: list[tuple[int, BatchHeader]]) -> None:
        expected = self.log_end_offset
        for _, header in batches:
            if header.base_offset < expected:
                raise ValueError(
                    f"{self._directory.name}: batch at offset {header.base_offset} is below "
                    f"the expected offset {expected} (log end offset {self.log_end_offset})"
                )
            expected = header.next_offset

    def _maybe_roll(self, plan: _AppendPlan, now_ms: int) -> LogSegment:
        active = self._segments[-1]
        first, last = plan.batches[0][1], plan.batches[-1][1]
        max_timestamp = max(h.max_timestamp for _, h in plan.batches)
        if active.should_roll(plan.total, max_timestamp, last.last_offset, now_ms):
            self._roll(first.base_offset, now_ms)
        return self._segments[-1]

    def _roll(self, new_base: int, now_ms: int) -> None:
        """Seal the active segment (trimmed now, fsynced in the background) and
        start one at ``new_base``."""
        active = self._segments[-1]
        active.reserve_seal_entry()  # a full disk fails here, before anything changed
        segment = LogSegment.create(self._directory, new_base, self._config, now_ms=now_ms)
        fds = active.seal(sync=False)
        self._segments.append(segment)
        self._bases.append(new_base)
        if fds is not None:
            self._pending_syncs.append(
                _SEGMENT_SYNCER.submit(_fsync_and_close, fds, active.next_offset))
        if self.producer_state is not None:
            # Encoded now (the state is as of new_base: the append that rolls is not
            # tracked yet), written behind the sealed segment's fsync, off this thread.
            data = encode_snapshot(self.producer_state())
            self._snapshot_writes = {o: f for o, f in self._snapshot_writes.items()
                                     if not f.done()}
            self._snapshot_writes[new_base] = _SEGMENT_SYNCER.submit(
                _write_snapshot, snapshot_path(self._directory, new_base), data)
            self._note_snapshot(new_base)
        logger.debug("%s: rolled segment %d", self._directory.name, new_base)

    def _assign_epochs(self, batches: list[tuple[int, BatchHeader]]) -> None:
        cache = self._epoch_cache
        for _, header in batches:
            epoch = header.partition_leader_epoch
            if epoch >= 0 and epoch > cache.latest_epoch:
                try:
                    cache.assign(epoch, header.base_offset)
                except StorageError as exc:
                    # Kept in memory; written again by the next flush.
                    logger.error("%s: %s", self._directory.name, exc)
                    self._epoch_cache_dirty = True

    # ================================================================= flush

    def flush(self) -> None:
        """fsync everything appended so far and advance the recovery point."""
        with self._lock, self._disk_errors:
            self._check_open()
            self._flush(self._now_ms())

    def maybe_flush(self, now_ms: int | None = None) -> bool:
        """Apply flush.ms / flush.messages; for a periodic scheduler. True if flushed."""
        with self._lock, self._disk_errors:
            if self._closed:
                return False
            return self._flush_if_due(self._now_ms() if now_ms is None else now_ms)

    def flush_due_ms(self) -> int | None:
        """When flush.ms next requires a flush: None without flush.ms or unflushed data."""
        with self._lock:
            if self._config.flush_ms is None or self._closed or \
                    self.log_end_offset <= self._recovery_point:
                return None
            return self._last_flush_ms + self._config.flush_ms

    def _watch_flush(self) -> None:
        if self.flush_watch is not None and self._config.flush_ms is not None:
            self.flush_watch(self)

    def _flush_if_due(self, now_ms: int) -> bool:
        self._settle_syncs(wait=False)
        unflushed = self.log_end_offset - self._recovery_point
        if unflushed <= 0:
            return False
        by_count = self._config.flush_messages is not None and (
            unflushed >= self._config.flush_messages
        )
        by_time = self._config.flush_ms is not None and (
            now_ms - self._last_flush_ms >= self._config.flush_ms
        )
        if by_count or by_time:
            self._flush(now_ms)
        return by_count or by_time

    def _flush(self, now_ms: int) -> None:
        self._settle_syncs(wait=True)  # older segments were fsynced after they were sealed
        self._segments[-1].flush()
        # An empty log's first epoch needs no file: a restart rebuilds the same (nothing).
        if self._epoch_cache_dirty and self.log_end_offset > self.log_start_offset:
            self._epoch_cache.flush()
            self._epoch_cache_dirty = False
        self._recovery_point = self._durable_offset = self.log_end_offset
        self._last_flush_ms = now_ms

    # ================================================================= group commit

    @property
    def durable_offset(self) -> int:
        """Offsets below are on disk, as far as this log has been told."""
        return self._durable_offset

    def sync_data(self) -> int:
        """fdatasync everything appended so far; returns the new durable offset.

        On a worker thread: the lock is held only to note what to sync, never while
        the disk works, so appends and reads go on meanwhile and the next sync covers
        what they added. Indexes are not synced: recovery rebuilds them from the
        recovery point, which this does not move. Raises StorageError.
        """
        ticket = self.begin_sync()
        if ticket is None:
            return self._durable_offset
        try:
            ticket.wait_rolled()
            ticket.fdatasync()
        finally:
            ticket.close()
        return self.finish_sync(ticket)

    def begin_sync(self, *, with_fd: bool = True) -> SyncTicket | None:
        """Note, under the lock, what a sync of this log must cover (None: nothing);
        the caller does the I/O (alone, or one syncfs for many logs: group commit
        across logs, slog.replication.log_sync), then calls :meth:`finish_sync`.

        ``with_fd=False``: the ticket holds no descriptor, for a caller whose syncfs
        of this log's file system covers it (a roll meanwhile closes nothing it needs)."""
        with self._lock, self._disk_errors:
            self._check_open()
            target = self.log_end_offset
            if target <= self._durable_offset:
                return None
            # A duplicate, as a roll may close the active segment's descriptor.
            fd = self._segments[-1].duplicate_fd() if with_fd else None
            return SyncTicket(target, fd, self._truncations, list(self._pending_syncs),
                              self._disk_errors)

    @property
    def device(self) -> int:
        """The file system this log lives on (its st_dev: what one syncfs covers);
        looked up once. Raises OSError if the directory is gone."""
        if self._device is None:
            self._device = os.stat(self._directory).st_dev
        return self._device

    def finish_sync(self, ticket: SyncTicket) -> int:
        """The ticket's data is on disk: move the durable offset, unless the log was
        truncated meanwhile (the sync cannot vouch for records that took the removed
        offsets). Returns the durable offset."""
        ticket.close()
        with self._lock:
            if ticket.generation == self._truncations:
                self._durable_offset = max(self._durable_offset, ticket.target)
            return self._durable_offset

    # ================================================================= read

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_message: bool = True,
    ) -> FetchSlice:
        """Whole batches starting with the one that contains ``offset``.

        At most ``max_bytes``, except that with ``min_one_message`` the first
        batch comes whole even if larger. Only batches entirely below
        ``max_offset`` (the high watermark for consumers) are returned. Raises
        OffsetOutOfRangeError outside [log start, LEO]; the LEO itself is empty.
        """
        with self._lock:
            self._check_open()
            leo = self.log_end_offset
            if offset < self._log_start_offset or offset > leo:
                raise OffsetOutOfRangeError(offset, self._log_start_offset, leo)
            views: list[memoryview] = []
            total = 0
            first_offset = next_offset = offset
            for segment in self._segments[self._segment_index(offset) :]:
                result = segment.read(
                    max(offset, segment.base_offset),
                    max_bytes - total,
                    max_offset,
                    min_one_message and not views,
                )
                if result is None:
                    continue  # nothing at or after offset in this segment
                if result.view is not None:
                    if not views:
                        first_offset = result.first_offset
                    views.append(result.view)
                    total += len(result.view)
                    next_offset = result.next_offset
                if result.done or total >= max_bytes:
                    break
            return FetchSlice(views, total, first_offset, next_offset)

    def _segment_index(self, offset: int) -> int:
        """Index of the segment that would contain ``offset``."""
        return max(0, bisect.bisect_right(self._bases, offset) - 1)

    # ================================================================= timestamps

    def offset_for_timestamp(self, timestamp_ms: int) -> OffsetAndTimestamp | None:
        """First offset whose record timestamp is >= ``timestamp_ms`` (ListOffsets)."""
        with self._lock:
            self._check_open()
            for segment in self._segments:
                if segment.max_timestamp < timestamp_ms:
                    continue
                found = segment.find_offset_by_timestamp(timestamp_ms, self._log_start_offset)
                if found is not None:
                    return OffsetAndTimestamp(*found)
            return None

    def max_timestamp_and_offset(self) -> TimestampAndOffset:
        """The largest record timestamp and the offset of the first record that has it,
        as Kafka answers since 3.8 (KAFKA-16310); (-1, -1) if none.

        The segments keep, as the time index does, the last offset of the batch with
        the largest timestamp, so that batch is read and its records looked at (in a
        LOG_APPEND_TIME batch every record has the batch's time: its first)."""
        with self._lock:
            best = TimestampAndOffset(-1, -1)
            for segment in self._segments:
                if segment.max_timestamp > best.timestamp:
                    best = TimestampAndOffset(
                        segment.max_timestamp, segment.offset_of_max_timestamp
                    )
            if best.offset < 0:
                return best
            try:
                batch = self.read(best.offset, 1).tobytes()
                header, records = decode_records(batch)
            except (SlogError, ValueError):  # gone to retention meanwhile, or unreadable
                return best
            # Records below the log start (DeleteRecords) are gone, though their batch
            # remains: the first record with the timestamp at or above it.
            first = next((r.offset for r in records if r.offset >= self._log_start_offset
                          and (header.is_log_append_time or r.timestamp == best.timestamp)),
                         best.offset)
            return TimestampAndOffset(best.timestamp, first)

    # ================================================================= truncation

    def truncate_to(self, offset: int) -> bool:
        """Remove every batch with an offset >= ``offset`` (a follower diverged).

        A batch that straddles ``offset`` goes too, so the LEO may end up below
        it. True if anything was removed.
        """
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        with self._lock, self._disk_errors:
            self._check_open()
            self._settle_syncs(wait=True)  # no fsync in flight may move the recovery point
            if offset >= self.log_end_offset:
                return False
            if offset < self._segments[0].base_offset:
                self._truncate_fully(offset)
                return True
            keep = self._segment_index(offset)
            self._delete_tail_segments(keep + 1)
            segment = self._segments[keep]
            segment.activate()
            segment.truncate_to(offset, now_ms=self._now_ms())
            leo = self.log_end_offset
            self._delete_snapshots(lambda o: o > leo, durably=True)
            self._epoch_cache.truncate_from_end(leo)
            self._log_start_offset = min(self._log_start_offset, leo)
            self._recovery_point = min(self._recovery_point, leo)
            self._durable_offset = min(self._durable_offset, leo)
            self._truncations += 1
            logger.info("%s: truncated to offset %d", self._directory.name, leo)
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and continue with an empty log at ``offset``."""
        if offset < 0:
            raise ValueError(f"cannot start the log at negative offset {offset}")
        with self._lock, self._disk_errors:
            self._check_open()
            self._truncate_fully(offset)

    def _truncate_fully(self, offset: int) -> None:
        self._settle_syncs(wait=True)
        self._delete_tail_segments(0)
        self._delete_snapshots(lambda _o: True, durably=True)
        segment = LogSegment.create(self._directory, offset, self._config, now_ms=self._now_ms())
        self._segments, self._bases = [segment], [offset]
        self._log_start_offset = offset
        self._recovery_point = self._durable_offset = offset  # nothing below it to lose
        self._truncations += 1
        self._epoch_cache.clear()
        logger.info("%s: truncated fully, starting at offset %d", self._directory.name, offset)

    def _delete_tail_segments(self, first: int) -> None:
        for segment in self._segments[first:]:
            segment.delete()
        del self._segments[first:]
        del self._bases[first:]

    # ================================================================= retention

    def enforce_retention(
        self, now_ms: int | None = None, *, high_watermark: int | None = None
    ) -> int:
        """Delete old whole segments, never the active one; returns how many.

        A segment goes when it lies wholly below the log start offset, when its
        largest timestamp is older than retention.ms, or while the log is over
        retention.bytes (the last two only with cleanup.policy delete). With
        ``high_watermark`` only segments wholly below it are candidates.
        """
        with self._lock, self._disk_errors:
            self._check_open()
            now = self._now_ms() if now_ms is None else now_ms
            deleted = self._delete_below_log_start(high_watermark)
            if not self._config.delete_enabled:
                return deleted
            retention_ms = self._config.retention_ms
            if retention_ms >= 0:
                deleted += self._delete_old_segments(
                    lambda seg, _next: now - seg.largest_timestamp > retention_ms,
                    high_watermark,
                    "retention.ms",
                )
            if self._config.retention_bytes >= 0:
                excess = self.size_in_bytes - self._config.retention_bytes

                def over_size(segment: LogSegment, _next_base: int) -> bool:
                    nonlocal excess
                    if excess < segment.size:
                        return False
                    excess -= segment.size
                    return True

                deleted += self._delete_old_segments(over_size, high_watermark, "retention.bytes")
            return deleted

    def maybe_increment_log_start_offset(self, offset: int, *, checkpoint: bool = True) -> bool:
        """Advance the log start offset (DeleteRecords); True if it moved.

        Segments wholly below it are deleted now; ``log_start_watch`` is told, unless
        ``checkpoint`` is False: then the caller calls ``checkpoint_log_start`` once
        after moving several logs.
        """
        with self._lock, self._disk_errors:
            self._check_open()
            if offset > self.log_end_offset:
                raise OffsetOutOfRangeError(offset, self._log_start_offset, self.log_end_offset)
            if offset <= self._log_start_offset:
                return False
            self._log_start_offset = offset
            # The epoch file follows with the next flush (see truncate_from_start).
            self._epoch_cache.truncate_from_start(offset, flush=False)
            self._epoch_cache_dirty = True
            self._delete_below_log_start(None)
            self._delete_old_snapshots()
        if checkpoint:
            self.checkpoint_log_start()
        return True

    def checkpoint_log_start(self) -> None:
        """Have the log start offset written down now (see ``log_start_watch``)."""
        if self.log_start_watch is not None:
            self.log_start_watch(self)

    def _delete_below_log_start(self, high_watermark: int | None) -> int:
        start = self._log_start_offset
        return self._delete_old_segments(
            lambda _seg, next_base: next_base <= start, high_watermark, "log start offset"
        )

    def _delete_old_segments(
        self,
        predicate: Callable[[LogSegment, int], bool],
        high_watermark: int | None,
        reason: str,
    ) -> int:
        """Delete the longest prefix of non-active segments for which
        ``predicate(segment, next segment's base offset)`` holds."""
        upper = self.log_end_offset if high_watermark is None else high_watermark
        victims = []
        for segment, next_base in zip(self._segments[:-1], self._bases[1:], strict=True):
            if next_base > upper or not predicate(segment, next_base):
                break
            victims.append(segment)
        if not victims:
            return 0
        del self._segments[: len(victims)]
        del self._bases[: len(victims)]
        for segment in victims:
            logger.info(
                "%s: deleting segment %d (%s)", self._directory.name, segment.base_offset, reason
            )
            segment.delete()
        self._log_start_offset = max(self._log_start_offset, self._bases[0])
        self._epoch_cache.truncate_from_start(self._log_start_offset)
        self._delete_old_snapshots()
        return len(victims)

    # ================================================================= compaction

    def replace_segment(self, old: LogSegment, cleaned: Path | None) -> bool:
        """Swap a closed segment for the log cleaner's rewrite of it.

        ``cleaned`` holds a subset of ``old``'s batches at their original
        offsets; it replaces ``old``'s file in one rename, so a crash leaves
        either version (indexes are rebuilt from the file). ``cleaned=None``
        drops a segment that ended up empty (never the first one: it carries
        the log start). False, with nothing changed, if ``old`` is no longer a
        closed segment of this log (retention, truncation or a roll raced us).
        """
        with self._lock, self._disk_errors:
            self._check_open()
            index = next((i for i, s in enumerate(self._segments) if s is old), None)
            if index is None or index == len(self._segments) - 1:
                if cleaned is not None:
                    cleaned.unlink(missing_ok=True)
                return False
            if cleaned is None:
                if index == 0:
                    raise ValueError("the first segment cannot be dropped, only emptied")
                # Its .txnindex goes with it: an emptied segment kept no ABORT marker.
                old.delete()
                del self._segments[index]
                del self._bases[index]
                return True
            old.close()
            # The .txnindex stays: its entries name offsets, which cleaning keeps
            # (those of removed markers went before: remove_txn_entries).
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                old.log_path.with_suffix(suffix).unlink(missing_ok=True)
            os.replace(cleaned, old.log_path)
            fsync_dir(self._directory)
            segment = LogSegment.open(self._directory, old.base_offset, self._config,
                                      now_ms=self._now_ms())
            segment.recover(
                min_offset=self._segments[index - 1].next_offset if index else 0,
                next_segment_base=self._bases[index + 1],
            )
            segment.seal()
            self._segments[index] = segment
            return True

    def remove_txn_entries(self, segment: LogSegment, marker_offsets: Collection[int]) -> None:
        """Drop the ``.txnindex`` entries of ABORT markers the cleaner is about to
        remove from ``segment``. Before the swap: an entry outliving its marker
        would have read_committed readers skip its producer's later records, while
        a marker outliving its entry (a crash in between) is harmless, its
        transaction's records being gone already."""
        with self._lock, self._disk_errors:
            self._check_open()
            segment.txn_index.remove_markers(marker_offsets)

    def delete_snapshots_through(self, offset: int) -> None:
        """Durably delete the producer-state snapshots at or below ``offset``. The
        cleaner calls it before a rewrite without a marker at ``offset`` or below
        is swapped in: a snapshot taken while that marker's transaction was open
        would, once replayed from, leave it open for ever (the replay meets no
        marker). Deleting first means a crash in between leaves the markers, and
        a load without those snapshots replays from an older one or the log start."""
        with self._lock, self._disk_errors:
            self._check_open()
            self._delete_snapshots(lambda o: o <= offset, durably=True)

    # ================================================================= producer state

    def latest_producer_snapshot(
        self, limit: int | None = None
    ) -> tuple[int, list[SnapshotEntry]] | None:
        """The newest readable producer-state snapshot at or below the log end (and
        ``limit``): (its offset, its entries). One past the log end is deleted (the log
        lost what it described), so is one that does not read back."""
        with self._lock, self._disk_errors:
            self._wait_snapshot_writes()
            leo = self.log_end_offset
            if self._delete_snapshots(lambda o: o > leo, durably=True):
                logger.warning("%s: deleted producer-state snapshots past the log end %d",
                               self._directory.name, leo)
            for offset in reversed(list(self._snapshots)):
                if limit is not None and offset > limit:
                    continue
                path = snapshot_path(self._directory, offset)
                try:
                    return offset, decode_snapshot(path.read_bytes())
                except (OSError, CorruptSnapshotError) as exc:
                    logger.warning("%s: deleting unreadable producer-state snapshot %s: %s",
                                   self._directory.name, path.name, exc)
                    path.unlink(missing_ok=True)
                    self._snapshots.remove(offset)
            return None

    @property
    def snapshot_offsets(self) -> list[int]:
        with self._lock:
            return list(self._snapshots)

    def _note_snapshot(self, offset: int) -> None:
        if offset not in self._snapshots:
            bisect.insort(self._snapshots, offset)

    def _wait_snapshot_writes(self) -> None:
        """Let queued snapshot writes land first: one landing after its file was
        deleted would bring back a snapshot of records that are gone."""
        writes, self._snapshot_writes = self._snapshot_writes, {}
        for write in writes.values():
            write.result()

    def _delete_snapshots(self, doomed: Callable[[int], bool], *, durably: bool) -> bool:
        """Delete the snapshots whose offset is ``doomed``; True if any was.

        ``durably`` (truncation): the directory is fsynced, or a crash could bring
        back a deleted snapshot whose offset the log has meanwhile refilled. Else
        (retention) a snapshot still being written is left for a later pass."""
        if durably:
            self._wait_snapshot_writes()
        writing = {o for o, f in self._snapshot_writes.items() if not f.done()}
        victims = [o for o in self._snapshots if doomed(o) and o not in writing]
        for offset in victims:
            snapshot_path(self._directory, offset).unlink(missing_ok=True)
            self._snapshots.remove(offset)
        if victims and durably:
            fsync_dir(self._directory)
        return bool(victims)

    def _delete_old_snapshots(self) -> None:
        """A snapshot below the log start is of no use: a load does not start from one."""
        start = self._log_start_offset
        self._delete_snapshots(lambda o: o < start, durably=False)

    def _snapshot_at_close(self) -> None:
        """Kafka's snapshot at clean shutdown: the next load replays nothing."""
        leo = self.log_end_offset
        if self.producer_state is None or leo == 0 or leo in self._snapshots:
            return
        self._wait_snapshot_writes()
        _write_snapshot(snapshot_path(self._directory, leo),
                        encode_snapshot(self.producer_state()), durable=False)
        self._note_snapshot(leo)

    def read_txn_indexes(self) -> tuple[list[AbortedTxn], int | None]:
        """Every segment's ``.txnindex`` entries, in marker order, and the offset from
        which they cannot be trusted (``txn_index_stale_from``, or the first segment
        whose file does not read back: that file is deleted)."""
        with self._lock, self._disk_errors:
            segments = {segment.base_offset: segment for segment in self._segments}
            found, failed = read_aborted_txns(
                ((base, segment.txn_index.path) for base, segment in segments.items()),
                unreadable=(CorruptTxnIndexError,))
            stale_from = self.txn_index_stale_from
            for base, exc in failed:
                txn_index = segments[base].txn_index
                logger.warning("%s: %s: %s; deriving it again", self._directory.name,
                               txn_index.path.name, exc)
                txn_index.delete()
                if stale_from is None or base < stale_from:
                    stale_from = base
            return found, stale_from

    def replace_txn_entries(self, offset: int, derived: list[AbortedTxn]) -> None:
        """The aborted transactions whose markers are at or after ``offset`` are
        ``derived`` (a replay found them): each segment's .txnindex is made to say so,
        rewritten (and fsynced) only where it differs. The indexes are then complete."""
        with self._lock, self._disk_errors:
            by_segment: dict[int, list[AbortedTxn]] = {}
            for entry in derived:
                by_segment.setdefault(self._segment_index(entry.last_offset), []).append(entry)
            for i, segment in enumerate(self._segments):
                if segment.next_offset > offset or segment.is_active:
                    segment.txn_index.replace_from(offset, by_segment.get(i, []))
            self.txn_index_stale_from = None

    def append_aborted_txn(self, entry: AbortedTxn) -> None:
        """Index an aborted transaction in the segment holding its ABORT marker."""
        with self._lock, self._disk_errors:
            self._check_open()
            self._segments[self._segment_index(entry.last_offset)].txn_index.append(entry)

    # ================================================================= lifecycle

    def close(self) -> None:
        """Flush, trim the active segment to its real size, and release the files."""
        with self._lock, self._disk_errors:
            if self._closed:
                return
            # A log that never held a byte has nothing to sync: closing thousands of
            # idle partitions would otherwise cost an fsync each.
            if self.log_end_offset or self._segments[-1].size:
                self._flush(self._now_ms())
            self._snapshot_at_close()
            for segment in self._segments:
                segment.close()
            self._closed = True

    def abandon(self) -> None:
        """Close without flushing or trimming anything: another process now writes
        this log (a controller deposed while paused leaves the metadata log so)."""
        with self._lock:
            if self._closed:
                return
            for segment in self._segments:
                segment.abandon()
            self._closed = True

    def delete(self) -> None:
        """Remove the log directory; readers holding views keep their bytes."""
        with self._lock, self._disk_errors:
            self._wait_snapshot_writes()
            for segment in self._segments:
                segment.delete()
            self._segments, self._bases = [], []
            self._closed = True
            shutil.rmtree(self._directory, ignore_errors=True)

    # ================================================================= helpers

    def _now_ms(self) -> int:
        return int(self._time() * 1000)

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(f"log {self._directory} is closed")

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self._directory.name}, start={self._log_start_offset}, "
            f"end={self.log_end_offset}, segments={len(self._segments)})"
        )


# ===================================================================== append planning


def _byte_view(records: bytes | bytearray | memoryview) -> memoryview:
    view = memoryview(records)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


def _plan_leader_append(
    view: memoryview,
    batches: list[tuple[int, BatchHeader]],
    next_offset: int,
    leader_epoch: int | None,
    append_time: int,
) -> _AppendPlan:
    """Rewrite each batch's header into a small new prefix; the body is written
    straight from the request buffer, so no batch is copied in Python."""
    chunks: list[bytes | bytearray | memoryview] = []
    planned = []
    position = 0
    for pos, header in batches:
        epoch = header.partition_leader_epoch if leader_epoch is None else leader_epoch
        if append_time >= 0:
            prefix, final = _stamp_append_time(view, pos, header, next_offset, epoch, append_time)
        else:
            prefix = bytearray(view[pos : pos + _PRE_CRC])
            set_base_offset(prefix, 0, next_offset)
            set_partition_leader_epoch(prefix, 0, epoch)
            final = BatchHeader(next_offset, header.batch_length, epoch, *header[3:])
        chunks.append(prefix)
        chunks.append(view[pos + len(prefix) : pos + header.size])
        planned.append((position, final))
        position += header.size
        next_offset = final.next_offset
    return _AppendPlan(chunks, planned, position)


def _stamp_append_time(
    view: memoryview, pos: int, header: BatchHeader, base_offset: int, epoch: int, append_time: int
) -> tuple[bytearray, BatchHeader]:
    """LogAppendTime: set maxTimestamp and the timestamp-type bit, then re-CRC.

    The CRC covers attributes..end; it is computed over the new header bytes
    continued over the unchanged body, without joining them.
    """
    prefix = bytearray(view[pos : pos + _POST_MAX_TIMESTAMP])
    set_base_offset(prefix, 0, base_offset)
    set_partition_leader_epoch(prefix, 0, epoch)
    attributes = header.attributes | TIMESTAMP_TYPE_BIT
    prefix[_ATTRIBUTES_POS : _ATTRIBUTES_POS + 2] = attributes.to_bytes(2, "big", signed=True)
    prefix[_MAX_TIMESTAMP_POS:_POST_MAX_TIMESTAMP] = append_time.to_bytes(8, "big", signed=True)
    crc = crc32c.crc32c(prefix[_ATTRIBUTES_POS:])
    crc = crc32c.crc32c(view[pos + _POST_MAX_TIMESTAMP : pos + header.size], crc)
    prefix[_PRE_CRC:_ATTRIBUTES_POS] = crc.to_bytes(4, "big")
    final = header._replace(
        base_offset=base_offset,
        partition_leader_epoch=epoch,
        attributes=attributes,
        max_timestamp=append_time,
        crc=crc,
    )
    return prefix, final


def _append_info(plan: _AppendPlan, append_time: int) -> AppendInfo:
    max_timestamp, offset_of_max = -1, -1
    records = 0
    for _, header in plan.batches:
        records += header.record_count
        if header.max_timestamp > max_timestamp:
            max_timestamp, offset_of_max = header.max_timestamp, header.last_offset
    first, last = plan.batches[0][1], plan.batches[-1][1]
    return AppendInfo(
        first_offset=first.base_offset,
        last_offset=last.last_offset,
        max_timestamp=max_timestamp,
        offset_of_max_timestamp=offset_of_max,
        log_append_time=append_time,
        valid_bytes=plan.total,
        record_count=records,
        batches=[(h.base_offset, h) for _, h in plan.batches],
    )
