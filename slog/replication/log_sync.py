"""Durable acknowledgements (``write.caching=false``): group commit, within a log
and across the broker's logs, run off the event loop.

Each replica's log has one :class:`LogSyncer`. An append asks it to make the new
end durable; :class:`slog.core.group_commit.GroupCommit` decides when that log
needs a sync, and what arrived meanwhile goes with the next one. The syncs of
all logs run in broker-wide passes (:class:`SyncPasses`), one at a time on a
worker thread: a pass groups the logs by file system, notes each log's end under
its lock (``begin_sync``), then makes them all durable at once, one ``syncfs`` of
the file system when it covers at least :data:`SYNCFS_MIN_LOGS` logs there (a
thousand partitions' appends cost one journal commit and one cache flush, not a
thousand), else one fdatasync per log. Back on the loop it releases whoever
waited for those offsets and tells the partitions, whose high watermarks may
now move.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ctypes
import logging
import os
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from slog.core.errors import SlogError, StorageError
from slog.core.group_commit import GroupCommit, SyncRounds
from slog.core.log import PartitionLog, SyncTicket

log = logging.getLogger("slog.replication.sync")

# A pass syncs a file system with one syncfs once it covers this many of its logs:
# from about a handful of files one syncfs beats their fdatasyncs (measured on
# ext4: 6 files 0.16 ms against 0.7 ms, 1,000 files 6 ms against 45 ms with 16
# threads). Below it, fdatasync each: syncfs also writes back other programs'
# dirty data on that file system, which a few fdatasyncs need not wait for.
SYNCFS_MIN_LOGS = 8

# One pass at a time per event loop; a second thread serves another loop (tests).
_EXECUTOR = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="group-commit")
# A pass's fdatasyncs (fewer than SYNCFS_MIN_LOGS, or no syncfs) run side by side.
_FDATASYNCS = concurrent.futures.ThreadPoolExecutor(max_workers=SYNCFS_MIN_LOGS - 1,
                                                    thread_name_prefix="fdatasync")

Outcome = int | SlogError | OSError  # a log's new durable offset, or why not


@dataclass
class SyncStats:
    """This process's group commits, for the broker's SIGUSR1 summary and the tests."""

    fsyncs: int = 0  # sync calls made: fdatasyncs of one log, syncfs of many
    fsynced_records: int = 0  # offsets made durable (records per fsync = this / fsyncs)
    passes: int = 0  # broker-wide passes (each one thread hop for every log in it)
    syncfs: int = 0  # how many of the fsyncs were syncfs
    failures: int = 0
    slowest_pass_s: float = 0.0  # since the last summary: what a disk stall looks like

    def count(self, result: PassResult) -> None:
        self.fsyncs += result.fdatasyncs + result.syncfs
        self.syncfs += result.syncfs
        self.slowest_pass_s = max(self.slowest_pass_s, result.seconds)

    def summary(self) -> str:
        slowest, self.slowest_pass_s = self.slowest_pass_s, 0.0
        return f"fsyncs={self.fsyncs} fsynced_records={self.fsynced_records} " \
               f"sync_passes={self.passes} syncfs={self.syncfs} " \
               f"slowest_sync_pass_us={slowest * 1e6:.0f} fsync_failures={self.failures}"


SYNC_STATS = SyncStats()


@dataclass
class PassResult:
    outcomes: list[Outcome]  # per log, in the order given
    fdatasyncs: int = 0
    syncfs: int = 0
    seconds: float = 0.0  # how long the pass took, noting and I/O


def _load_syncfs() -> Callable[[int], None] | None:
    """libc's syncfs, if it reports write-back errors (Linux 5.8 on; before, a failed
    write-back went unreported, so only fdatasync can vouch for data)."""
    try:
        major, minor = (int(part) for part in os.uname().release.split(".")[:2])
        libc = ctypes.CDLL(None, use_errno=True)
        call = libc.syncfs  # ctypes releases the GIL during the call
    except (ValueError, OSError, AttributeError):
        return None
    if (major, minor) < (5, 8):
        return None

    def syncfs(fd: int) -> None:
        if call(fd) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, os.strerror(errno))

    return syncfs


_syncfs = _load_syncfs()


class LogSyncer:
    """Group commit for one log; ``on_durable`` is called (on the loop) when the
    durable offset moved."""

    def __init__(self, plog: PartitionLog, on_durable: Callable[[], None]):
        self.log = plog
        self._state: GroupCommit[asyncio.Future[None]] = GroupCommit(plog.durable_offset)
        self._on_durable = on_durable

    @property
    def durable_offset(self) -> int:
        return self._state.durable

    def request(self, end: int) -> None:
        """Make offsets below ``end`` durable; nobody waits here (the HW does)."""
        if self._state.need(end):
            self._start()

    def waiter(self, end: int) -> asyncio.Future[None] | None:
        """A future done once offsets below ``end`` are on disk (None: they are), or
        failed with StorageError; a caller that stops waiting may cancel it."""
        if end <= self._state.durable:
            return None
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._state.need(end, future):
            self._start()
        return future

    def truncated(self, end: int) -> None:
        """The log was cut back to ``end``: waiters for offsets above it fail."""
        for waiter in self._state.truncated(end):
            _fail(waiter, StorageError(f"{self.log.directory.name}: truncated to {end} "
                                       "before the records were synced"))

    def _start(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a tool or test driving replicas without a loop: inline
            result = sync_logs([self.log])
            SYNC_STATS.count(result)
            self.finished(result.outcomes[0])
            return
        SyncPasses.of(loop).add(self)

    def finished(self, outcome: Outcome) -> None:
        """The pass that covered this log ended (on the loop)."""
        if not isinstance(outcome, int):
            if self.log.closed:  # deleted or moved away meanwhile: nothing is wrong
                log.debug("%s: closed before its fsync: %s", self.log.directory.name, outcome)
            else:
                SYNC_STATS.failures += 1
                log.error("%s: fsync failed: %s", self.log.directory.name, outcome)
            error = outcome if isinstance(outcome, StorageError) else StorageError(str(outcome))
            for waiter in self._state.failed():
                _fail(waiter, error)
            return
        before = self._state.durable
        released, again = self._state.done(outcome)
        SYNC_STATS.fsynced_records += max(0, self._state.durable - before)
        for waiter in released:
            if not waiter.done():
                waiter.set_result(None)
        if self._state.durable > before:
            self._on_durable()
        if again:
            self._start()


class SyncPasses:
    """The broker's sync passes (one per event loop): every log that asked while a
    pass ran goes with the next one."""

    _by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, SyncPasses] = \
        weakref.WeakKeyDictionary()

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self._loop = loop
        self._rounds: SyncRounds[LogSyncer] = SyncRounds()

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> SyncPasses:
        passes = cls._by_loop.get(loop)
        if passes is None:
            passes = cls._by_loop[loop] = cls(loop)
        return passes

    def add(self, syncer: LogSyncer) -> None:
        if self._rounds.want(syncer):
            self._start()

    def _start(self) -> None:
        batch = self._rounds.take()
        future = self._loop.run_in_executor(_EXECUTOR, sync_logs, [s.log for s in batch])
        future.add_done_callback(lambda done: self._finished(batch, done))

    def _finished(self, batch: list[LogSyncer],
                  future: asyncio.Future[PassResult]) -> None:
        try:
            result = future.result()
        except Exception as exc:  # a bug in the pass: fail its waiters, keep the broker
            log.exception("sync pass failed")
            result = PassResult([StorageError(f"sync pass failed: {exc}")] * len(batch))
        SYNC_STATS.passes += 1
        SYNC_STATS.count(result)
        for syncer, outcome in zip(batch, result.outcomes, strict=True):
            syncer.finished(outcome)
        if self._rounds.done():
            self._start()


def sync_logs(logs: Sequence[PartitionLog]) -> PassResult:
    """One pass, on a worker thread: make each log's end durable. Each log's outcome
    is its new durable offset or its error (it never raises for one log's error).

    Logs are grouped by file system first: one that gets a syncfs needs a
    descriptor of one of its logs only, so the pass makes no system call per log
    there (each would hand the GIL to the event loop and wait to get it back)."""
    started = time.monotonic()
    result = PassResult([0] * len(logs))
    outcomes = result.outcomes
    groups: dict[int, list[int]] = {}  # st_dev → positions in ``logs``
    for i, plog in enumerate(logs):
        try:
            groups.setdefault(plog.device, []).append(i)
        except OSError as exc:  # its directory is gone (deleted meanwhile)
            outcomes[i] = exc
    tickets: dict[int, SyncTicket] = {}  # by position in ``logs``
    plan = [(members, _syncfs is not None and len(members) >= SYNCFS_MIN_LOGS)
            for members in groups.values()]  # each group, and whether one syncfs covers it
    for members, one_syncfs in plan:
        have_fd = False
        for i in members:
            try:
                ticket = logs[i].begin_sync(with_fd=not (one_syncfs and have_fd))
            except (SlogError, OSError) as exc:
                outcomes[i] = exc
                continue
            outcomes[i] = logs[i].durable_offset
            if ticket is not None:
                tickets[i] = ticket
                have_fd = have_fd or ticket.fd is not None
    try:
        for members, one_syncfs in plan:
            synced = [i for i in members if i in tickets]
            if synced:
                _sync_group(logs, synced, tickets, one_syncfs, result)
    finally:
        for ticket in tickets.values():
            ticket.close()
    for i, ticket in tickets.items():
        if isinstance(outcomes[i], int):
            outcomes[i] = logs[i].finish_sync(ticket)
    result.seconds = time.monotonic() - started
    return result


def _sync_group(logs: Sequence[PartitionLog], members: list[int],
                tickets: dict[int, SyncTicket], one_syncfs: bool, result: PassResult) -> None:
    """Put the tickets' data of one file system on disk (one syncfs, or an
    fdatasync each), noting failures and sync calls in ``result``."""
    outcomes = result.outcomes
    for i in members:
        try:
            tickets[i].wait_rolled()
        except (SlogError, OSError) as exc:
            outcomes[i] = exc
    with_fd = [i for i in members if tickets[i].fd is not None]
    if not with_fd:
        return  # no active segment among them: the rolled ones' syncs covered it
    if one_syncfs and _syncfs is not None:
        result.syncfs += 1
        fd = tickets[with_fd[0]].fd
        assert fd is not None
        try:
            _syncfs(fd)
        except OSError as exc:  # it cannot tell whose data failed: fail them all
            for i in members:
                outcomes[i] = StorageError(f"{logs[i].directory}: syncfs: {exc}")
        return
    result.fdatasyncs += len(with_fd)
    # Side by side, as the disk merges their flushes (a pass must not be slower
    # than the per-log syncs it replaced); the last one on this thread.
    *others, last = with_fd
    running = [(i, _FDATASYNCS.submit(tickets[i].fdatasync)) for i in others]
    for i, call in [*running, (last, None)]:
        try:
            call.result() if call is not None else tickets[i].fdatasync()
        except (SlogError, OSError) as exc:
            outcomes[i] = exc


def _fail(waiter: asyncio.Future[None], error: Exception) -> None:
    if not waiter.done():
        waiter.set_exception(error)
