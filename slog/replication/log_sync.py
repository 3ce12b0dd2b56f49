"""Durable acknowledgements (``write.caching=false``): a log's group commit, run
off the event loop.

Each replica's log has one :class:`LogSyncer`. An append asks it to make the new
end durable; it runs ``PartitionLog.sync_data`` (an fdatasync outside the log's
lock) on a worker thread, one at a time per log, and when that returns it
releases whoever waited for those offsets and tells the partition, whose high
watermark may now move. What arrived meanwhile goes with the next sync
(:class:`slog.core.group_commit.GroupCommit` decides).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable
from dataclasses import dataclass

from slog.core.errors import SlogError, StorageError
from slog.core.group_commit import GroupCommit
from slog.core.log import PartitionLog

log = logging.getLogger("slog.replication.sync")

# Syncs of different logs run in parallel (the file system merges their journal
# commits); a few threads keep one slow disk from queueing every other log's.
SYNC_THREADS = 4
_EXECUTOR = concurrent.futures.ThreadPoolExecutor(max_workers=SYNC_THREADS,
                                                  thread_name_prefix="group-commit")


@dataclass
class SyncStats:
    """This process's group commits, for the broker's SIGUSR1 summary and the tests."""

    fsyncs: int = 0
    fsynced_records: int = 0  # offsets made durable (records per fsync = this / fsyncs)
    failures: int = 0

    def summary(self) -> str:
        return f"fsyncs={self.fsyncs} fsynced_records={self.fsynced_records} " \
               f"fsync_failures={self.failures}"


SYNC_STATS = SyncStats()


class LogSyncer:
    """Group commit for one log; ``on_durable`` is called (on the loop) when the
    durable offset moved."""

    def __init__(self, plog: PartitionLog, on_durable: Callable[[], None]):
        self._log = plog
        self._state: GroupCommit[asyncio.Future[None]] = GroupCommit(plog.durable_offset)
        self._on_durable = on_durable

    @property
    def durable_offset(self) -> int:
        return self._state.durable

    def request(self, end: int) -> None:
        """Make offsets below ``end`` durable; nobody waits here (the HW does)."""
        if self._state.need(end):
            self._start()

    async def wait(self, end: int) -> None:
        """Return once offsets below ``end`` are on disk; raises StorageError."""
        if end <= self._state.durable:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._state.need(end, future):
            self._start()
        await future

    def truncated(self, end: int) -> None:
        """The log was cut back to ``end``: waiters for offsets above it fail."""
        for waiter in self._state.truncated(end):
            _fail(waiter, StorageError(f"{self._log.directory.name}: truncated to {end} "
                                       "before the records were synced"))

    def _start(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a tool or test driving replicas without a loop: inline
            self._finished(_completed(self._log.sync_data))
            return
        loop.run_in_executor(_EXECUTOR, self._log.sync_data).add_done_callback(self._finished)

    def _finished(self, future: asyncio.Future[int] | concurrent.futures.Future[int]) -> None:
        try:
            durable = future.result()
        except (SlogError, OSError) as exc:
            if self._log.closed:  # deleted or moved away meanwhile: nothing is wrong
                log.debug("%s: closed before its fsync: %s", self._log.directory.name, exc)
            else:
                SYNC_STATS.failures += 1
                log.error("%s: fsync failed: %s", self._log.directory.name, exc)
            error = exc if isinstance(exc, StorageError) else StorageError(str(exc))
            for waiter in self._state.failed():
                _fail(waiter, error)
            return
        before = self._state.durable
        released, again = self._state.done(durable)
        SYNC_STATS.fsyncs += 1
        SYNC_STATS.fsynced_records += max(0, self._state.durable - before)
        for waiter in released:
            if not waiter.done():
                waiter.set_result(None)
        if self._state.durable > before:
            self._on_durable()
        if again:
            self._start()


def _fail(waiter: asyncio.Future[None], error: Exception) -> None:
    if not waiter.done():
        waiter.set_exception(error)


def _completed(call: Callable[[], int]) -> concurrent.futures.Future[int]:
    future: concurrent.futures.Future[int] = concurrent.futures.Future()
    try:
        future.set_result(call())
    except (SlogError, OSError) as exc:
        future.set_exception(exc)
    return future
