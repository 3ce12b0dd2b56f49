"""LogManager: every partition log of one broker, and the files that span them.

``logs_dir`` (``brokers/<id>/logs``) holds one ``<topic>-<partition>``
directory per log. Its parent holds:

* ``recovery-point-offset-checkpoint``: per log, the offset below which all
  data is fsynced; recovery after a crash rescans only what follows.
* ``log-start-offset-checkpoint``: log start offsets moved by DeleteRecords or
  retention, which the segment files alone cannot tell.
* ``clean-shutdown``: written last by :meth:`LogManager.shutdown` and removed
  by :meth:`LogManager.load`, so its absence at startup means a crash.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time as _time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from slog.core import gc_policy
from slog.core.checkpoint import OffsetCheckpointFile, fsync_dir, write_atomically
from slog.core.due import DueSchedule
from slog.core.errors import InvalidTopicError, StorageError
from slog.core.log import PartitionLog
from slog.core.log_config import LogConfig
from slog.core.names import (
    DATA_DIR_MODE,
    ensure_inside,
    make_private_dir,
    parse_partition_dir_name,
    partition_dir_name,
)

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = "clean-shutdown"
DELETE_SUFFIX = "-delete"
# Logs opened (after a crash: recovered) at once at start-up.
LOAD_THREADS = 8
# New logs' directory fsyncs in flight at once: 4 share journal commits as well as 8
# did (ext4, 1,000 directories in ~0.1 s), with fewer threads taking the GIL from
# the event loop as their syscalls return.
DIR_SYNC_THREADS = 4

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class NewLog:
    """What :meth:`LogManager.create_logs` needs to create one log."""

    config: LogConfig
    leader_epoch: int | None = None  # this broker leads it from offset 0 at this epoch
    prepare: Callable[[Path], None] | None = None  # writes more files into the new directory


class LogManager:
    """Opens, creates, deletes, flushes and checkpoints the logs under ``logs_dir``."""

    def __init__(
        self,
        logs_dir: Path,
        default_config: LogConfig,
        *,
        time: Callable[[], float] = _time.time,
    ):
        self.logs_dir = Path(logs_dir)
        self.default_config = default_config
        self._time = time
        self._lock = threading.RLock()
        # Logs with unflushed data and a flush.ms deadline (see flush_dirty_logs).
        self._flush_due: DueSchedule[PartitionLog] = DueSchedule()
        self._flush_lock = threading.Lock()
        self._logs: dict[TopicPartition, PartitionLog] = {}
        parent = self.logs_dir.parent
        self._recovery_points = OffsetCheckpointFile(parent / RECOVERY_POINT_CHECKPOINT)
        self._log_starts = OffsetCheckpointFile(parent / LOG_START_OFFSET_CHECKPOINT)
        self._clean_shutdown_file = parent / CLEAN_SHUTDOWN_FILE

    # ------------------------------------------------------------ startup

    def load(self, topic_configs: Mapping[str, LogConfig] | None = None) -> None:
        """Open every partition log; recover them if the last shutdown was not clean.

        ``topic_configs`` gives per-topic settings; others get the default.
        Directories left by an interrupted delete are removed.
        """
        configs = topic_configs or {}
        self._make_dir(self.logs_dir)
        clean = self._clean_shutdown_file.exists()
        recovery_points = self._read_checkpoint(self._recovery_points)
        log_starts = self._read_checkpoint(self._log_starts)
        if not clean and any(self.logs_dir.iterdir()):
            logger.warning("%s: no clean-shutdown marker; recovering unflushed data", self.logs_dir)
        with self._lock:
            found = {}
            for entry in sorted(self.logs_dir.iterdir()):
                key = self._partition_of(entry)
                if key is not None and key not in self._logs:
                    found[key] = entry

            def open_log(key: TopicPartition) -> PartitionLog:
                opened = PartitionLog.open(
                    found[key],
                    configs.get(key[0], self.default_config),
                    recovery_point=recovery_points.get(key, 0),
                    clean_shutdown=clean,
                    time=self._time,
                    log_start_offset=log_starts.get(key),
                )
                gc_policy.built()
                return opened

            # Opening waits on the file system (listing, mapping; after a crash,
            # fsyncs), which runs in parallel: Kafka's num.recovery.threads.per.data.dir.
            with ThreadPoolExecutor(LOAD_THREADS, thread_name_prefix="log-load") as pool:
                self._logs.update(zip(found, pool.map(open_log, found), strict=True))
            for key in found:
                self._logs[key].flush_watch = self._schedule_flush
                self._logs[key].log_start_watch = self._checkpoint_log_starts
            # From now on a crash must be detectable: drop the marker.
            if clean:
                self._clean_shutdown_file.unlink(missing_ok=True)
                fsync_dir(self._clean_shutdown_file.parent)
            self.checkpoint_recovery_points()

    def _partition_of(self, entry: Path) -> TopicPartition | None:
        """(topic, partition) of a log directory; cleans up deleted ones."""
        if not entry.is_dir():
            return None
        if entry.name.endswith(DELETE_SUFFIX):
            logger.info("removing %s left over from a topic deletion", entry)
            shutil.rmtree(entry, ignore_errors=True)
            return None
        try:
            return parse_partition_dir_name(entry.name)
        except InvalidTopicError:
            logger.warning("ignoring %s: not a <topic>-<partition> directory", entry)
            return None

    @staticmethod
    def _read_checkpoint(checkpoint: OffsetCheckpointFile) -> dict[TopicPartition, int]:
        try:
            return checkpoint.read()
        except StorageError as exc:
            # Losing it only costs a longer recovery scan.
            logger.warning("%s; ignoring it", exc)
            return {}

    # ------------------------------------------------------------ lookup and creation

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        with self._lock:
            return self._logs.get((topic, partition))

    def all_logs(self) -> dict[TopicPartition, PartitionLog]:
        with self._lock:
            return dict(self._logs)

    def get_or_create(
        self, topic: str, partition: int, config: LogConfig | None = None
    ) -> PartitionLog:
        """The log of ``topic``-``partition``, created empty if it does not exist."""
        with self._lock:
            log = self._logs.get((topic, partition))
            if log is not None:
                return log
            path = self._partition_path(topic, partition)
            existed = path.exists()
            self._make_dir(path)
            log = PartitionLog.open(
                path, config or self.default_config, clean_shutdown=not existed, time=self._time
            )
            log.flush_watch = self._schedule_flush
            log.log_start_watch = self._checkpoint_log_starts
            self._logs[(topic, partition)] = log
            return log

    def create_logs(
        self, wanted: Mapping[TopicPartition, NewLog]
    ) -> dict[TopicPartition, PartitionLog]:
        """Create many new, empty logs at once; returns those it created.

        Meant for a worker thread: a topic of thousands of partitions costs one
        fsync per new log directory (its files' names) plus one of ``logs_dir``
        (the directories' names), not several fsyncs per file. The directory
        fsyncs run on :data:`DIR_SYNC_THREADS` threads while this one goes on
        making files: each waits for a journal commit, and concurrent ones share
        commits (1,000 one after the other took 0.3-3 s on ext4 as the disk was
        busy, on 4-8 threads ~0.1 s). Those threads hold the GIL only between
        syscalls, so the event loop is not starved as it was when they made the
        files too. Logs already open, or
        whose directory exists on disk (a crash mid-creation), are left out:
        :meth:`get_or_create` opens and recovers those the ordinary way.
        """
        created: dict[TopicPartition, PartitionLog] = {}
        failure: OSError | StorageError | None = None
        root = self.logs_dir.resolve()  # once, not a realpath per log
        with ThreadPoolExecutor(DIR_SYNC_THREADS, thread_name_prefix="log-dir-sync") as syncer:
            synced = []
            try:
                for key, spec in wanted.items():
                    log = self._create_unsynced(root, key, spec)
                    if log is not None:
                        created[key] = log
                        synced.append(syncer.submit(fsync_dir, log.directory))
                        gc_policy.built()
            except (OSError, StorageError) as exc:
                failure = exc
            for done in synced:
                if (error := done.exception()) is not None and failure is None:
                    assert isinstance(error, OSError)
                    failure = error
        try:
            if failure is None and created:
                fsync_dir(self.logs_dir)
        except OSError as exc:
            failure = exc
        if failure is not None:
            for log in created.values():
                log.close()
            why = failure.strerror if isinstance(failure, OSError) else failure
            raise StorageError(f"cannot create logs in {self.logs_dir}: {why}") from failure
        with self._lock:
            for key, log in created.items():
                log.flush_watch = self._schedule_flush
                log.log_start_watch = self._checkpoint_log_starts
                self._logs.setdefault(key, log)
        return created

    def _create_unsynced(self, root: Path, key: TopicPartition,
                         spec: NewLog) -> PartitionLog | None:
        """A new log with its files in resolved ``root``, nothing fsynced; None if it
        is open or its directory exists already. The name is one validated path
        component and mkdir never follows a link, so the log cannot land outside."""
        if self.get(*key) is not None:
            return None
        path = root / partition_dir_name(*key)
        try:
            os.mkdir(path, DATA_DIR_MODE)
        except FileExistsError:
            return None
        log = PartitionLog.create_new(path, spec.config, leader_epoch=spec.leader_epoch,
                                      time=self._time)
        if spec.prepare is not None:
            try:
                spec.prepare(path)
            except BaseException:
                log.close()
                raise
        return log

    def _partition_path(self, topic: str, partition: int) -> Path:
        return ensure_inside(self.logs_dir, self.logs_dir / partition_dir_name(topic, partition))

    def delete(self, topic: str, partition: int) -> bool:
        """Close and remove a log; False if there is none.

        The directory is first renamed to ``<dir>.<uuid>-delete`` so a crash
        halfway through the removal is finished at the next load.
        """
        with self._lock:
            log = self._logs.pop((topic, partition), None)
            if log is None:
                return False
            log.close()
            gc_policy.discard()  # its objects may be frozen, in cycles
            doomed = log.directory.with_name(
                f"{log.directory.name}.{uuid.uuid4().hex}{DELETE_SUFFIX}"
            )
            try:
                os.rename(log.directory, doomed)
                fsync_dir(self.logs_dir)
            except OSError as exc:
                raise StorageError(f"cannot delete {log.directory}: {exc.strerror}") from exc
            shutil.rmtree(doomed, ignore_errors=True)
            return True

    # ------------------------------------------------------------ periodic work

    def enforce_retention(
        self,
        now_ms: int | None = None,
        *,
        high_watermarks: Mapping[TopicPartition, int] | None = None,
    ) -> int:
        """Apply retention to every log; returns the number of segments deleted."""
        marks = high_watermarks or {}
        return sum(
            log.enforce_retention(now_ms, high_watermark=marks.get(key))
            for key, log in self.all_logs().items()
        )

    def flush_dirty_logs(self, now_ms: int | None = None) -> None:
        """Flush the logs whose flush.ms is due (flush.messages is applied on append).

        Only logs that told us of a flush.ms deadline are looked at: with the
        default (no flush.ms) this costs nothing whatever the number of logs.
        """
        now = self._time() * 1000 if now_ms is None else now_ms
        with self._flush_lock:
            due = self._flush_due.pop_due(now)
        for log in due:
            log.maybe_flush(now_ms)
            self._schedule_flush(log)  # flush.ms not reached yet, or new data since

    def _schedule_flush(self, log: PartitionLog) -> None:
        """``PartitionLog.flush_watch``: called under the log's lock, on any thread."""
        at = log.flush_due_ms()
        if at is None:
            return
        with self._flush_lock:
            self._flush_due.schedule(log, at)

    def flush_all(self) -> None:
        for log in self.all_logs().values():
            log.flush()

    def checkpoint_recovery_points(self) -> None:
        """Persist recovery points and log start offsets of all open logs."""
        with self._lock:
            logs = {key: log for key, log in self._logs.items() if not log.closed}
            self._recovery_points.write({k: log.recovery_point for k, log in logs.items()})
            self._log_starts.write({k: log.log_start_offset for k, log in logs.items()})

    def _checkpoint_log_starts(self, _moved: PartitionLog) -> None:
        """``PartitionLog.log_start_watch``: a DeleteRecords (here or on the leader) moved
        a log start. Written now, not at the next periodic checkpoint: a restart in
        between would bring the deleted records back (segments partly below the log
        start are kept). One small file; DeleteRecords is rare."""
        with self._lock:
            self._log_starts.write({key: log.log_start_offset for key, log in self._logs.items()
                                    if not log.closed})

    def shutdown(self) -> None:
        """Flush and close every log, checkpoint, then mark the shutdown clean."""
        with self._lock:
            recovery_points: dict[TopicPartition, int] = {}
            log_starts: dict[TopicPartition, int] = {}
            for key, log in self._logs.items():
                log.close()
                recovery_points[key] = log.recovery_point
                log_starts[key] = log.log_start_offset
            self._recovery_points.write(recovery_points)
            self._log_starts.write(log_starts)
            self._logs.clear()
            write_atomically(self._clean_shutdown_file, b"")

    # ------------------------------------------------------------ helpers

    @staticmethod
    def _make_dir(path: Path) -> None:
        try:
            make_private_dir(path)
            fsync_dir(path.parent)
        except OSError as exc:
            raise StorageError(f"cannot create {path}: {exc.strerror}") from exc
