"""Group commit for one log: which fsync to run next, and whom each one releases.

With ``write.caching=false`` an append is acknowledged only once it is on disk.
One fdatasync at a time runs per log, and it covers everything appended before
it started: appends that arrive while it runs wait for the next one, which then
covers all of them at once. So a log under load pays one fsync per disk round
trip, not one per append.

Across logs, :class:`SyncRounds` batches those syncs into passes, one at a time
per broker: a pass covers every log that asked since the previous pass began, so
a produce to a thousand partitions costs one pass (one syncfs), not a thousand
fdatasyncs each with its own thread hop.

These are pure state machines (no I/O, no clock, no event loop): the caller
starts a sync when it says so and reports how far the sync reached.
"""

from __future__ import annotations

from typing import Generic, TypeVar

Waiter = TypeVar("Waiter")
Member = TypeVar("Member")


class GroupCommit(Generic[Waiter]):
    """Offsets below :attr:`durable` are on disk; waiters want some offset to be.

    ``need`` and ``done`` answer True when the caller must start a sync now; the
    caller then reports exactly one ``done`` or ``failed`` for it.
    """

    def __init__(self, durable: int = 0):
        self.durable = durable
        self.running = False
        self.syncs = 0  # syncs completed
        self.synced_offsets = 0  # offsets they made durable, summed (records per fsync)
        self._wanted = durable  # the end someone asked to be made durable
        self._waiters: list[tuple[int, Waiter]] = []  # (end that must be durable, waiter)

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def need(self, end: int, waiter: Waiter | None = None) -> bool:
        """Offsets below ``end`` must reach the disk; ``waiter`` (if any) is released
        by the ``done`` that gets there. True: start a sync now."""
        if end <= self.durable:
            return False  # the caller answers its waiter itself: nothing to wait for
        if waiter is not None:
            self._waiters.append((end, waiter))
        self._wanted = max(self._wanted, end)
        if self.running:
            return False  # the sync in flight may not cover it: the next one will
        self.running = True
        return True

    def done(self, durable: int) -> tuple[list[Waiter], bool]:
        """The sync in flight finished with offsets below ``durable`` on disk.

        Returns the waiters it released and whether to start another sync now
        (something was appended and asked for while it ran)."""
        self.running = False
        self.syncs += 1
        if durable > self.durable:
            self.synced_offsets += durable - self.durable
            self.durable = durable
        released = [w for end, w in self._waiters if end <= durable]
        self._waiters = [(end, w) for end, w in self._waiters if end > durable]
        again = self._wanted > self.durable
        self.running = again
        return released, again

    def failed(self) -> list[Waiter]:
        """The sync in flight failed: every waiter gets the error, nothing is retried
        until someone asks again."""
        self.running = False
        self._wanted = self.durable
        waiters, self._waiters = [w for _, w in self._waiters], []
        return waiters

    def truncated(self, end: int) -> list[Waiter]:
        """The log was cut back to ``end``: what was above it is no longer there to
        become durable, so its waiters are returned to be failed."""
        self.durable = min(self.durable, end)
        self._wanted = min(self._wanted, end)
        gone = [w for e, w in self._waiters if e > end]
        self._waiters = [(e, w) for e, w in self._waiters if e <= end]
        return gone


class SyncRounds(Generic[Member]):
    """Broker-wide: which logs the next sync pass covers; one pass runs at a time.

    ``want`` and ``done`` answer True when the caller must start a pass now; it
    then ``take``s the pass's logs and reports one ``done`` when the pass ended.
    """

    def __init__(self) -> None:
        self.running = False
        self.passes = 0  # passes completed
        self._next: dict[Member, None] = {}  # insertion-ordered set: who asked, first first

    @property
    def queued(self) -> int:
        return len(self._next)

    def want(self, member: Member) -> bool:
        """``member`` asks to be synced; True: start a pass now."""
        self._next[member] = None
        if self.running:
            return False  # the pass in flight began before it asked: the next one
        self.running = True
        return True

    def take(self) -> list[Member]:
        """The logs the pass starting now covers (each once)."""
        batch = list(self._next)
        self._next.clear()
        return batch

    def done(self) -> bool:
        """The pass in flight ended; True: start the next one now (some asked meanwhile)."""
        self.passes += 1
        self.running = bool(self._next)
        return self.running
