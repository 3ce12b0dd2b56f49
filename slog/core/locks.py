"""File locks (portalocker): broker liveness and controller election.

A lock held by a process is released by the OS the instant that process dies,
however it dies, so "can I take this lock?" is an exact liveness probe with no
session timeout to wait out.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import IO

import portalocker

from slog.core.names import make_private_dir


class FileLock:
    """A non-blocking exclusive lock on one file, held until :meth:`release`.

    A failed attempt keeps its file open for the next one: brokers watch the
    data dir for the close of a lock file (its holder died or let go), and a
    waiter that opened and closed the file at every try would wake the others,
    which would wake it back.
    """

    def __init__(self, path: Path):
        self.path = path
        self._handle: IO[str] | None = None
        self._held = False

    @property
    def held(self) -> bool:
        return self._held

    def try_acquire(self) -> bool:
        if self._held:
            return True
        handle = self._open()
        try:
            portalocker.lock(handle, portalocker.LOCK_EX | portalocker.LOCK_NB)
        except (portalocker.LockException, portalocker.AlreadyLocked, BlockingIOError):
            return False
        self._held = True
        return True

    def held_by_another(self) -> bool:
        """True if another process holds the lock: take it and let go at once (the
        holder may be restarting and retries). No file, no holder."""
        if self._held:
            return False
        if not self.path.exists():
            return False
        if not self.try_acquire():
            return True
        self._unlock()
        return False

    def lost(self) -> bool:
        """True when the lock is held on a file that is no longer at its path: the path is
        gone or names another file (its directory was removed, or removed and made again).
        Whoever looks at the path then sees no holder. An I/O error tells nothing: False."""
        if not self._held or self._handle is None:
            return False
        try:
            return not self._is_at_path()
        except FileNotFoundError:
            return True
        except (OSError, ValueError):  # ValueError: released (closed) meanwhile
            return False

    def unlock(self) -> None:
        """Let go of the lock but keep the file open: no close for watchers to see."""
        self._unlock()

    def release(self) -> None:
        """Let go of the lock (if held) and close the file."""
        if self._handle is None:
            return
        try:
            self._unlock()
        finally:
            self._handle.close()
            self._handle = None

    def _unlock(self) -> None:
        if self._held and self._handle is not None:
            self._held = False
            portalocker.unlock(self._handle)

    def _is_at_path(self) -> bool:
        """Whether the open file is the one at the path (same device and inode); raises
        FileNotFoundError when nothing is there."""
        assert self._handle is not None
        held = os.fstat(self._handle.fileno())
        at_path = os.stat(self.path)
        return (at_path.st_dev, at_path.st_ino) == (held.st_dev, held.st_ino)

    def _open(self) -> IO[str]:
        """The file, opened once; again if it was replaced (a lock on the old file
        would not exclude anyone)."""
        if self._handle is not None:
            try:
                if self._is_at_path():
                    return self._handle
            except FileNotFoundError:
                pass
            self._handle.close()
            self._handle = None
        make_private_dir(self.path.parent)
        handle = open(self.path, "a+")  # noqa: SIM115 - kept open for the next attempt
        os.chmod(self.path, 0o600)
        self._handle = handle
        return handle


def is_locked(path: Path) -> bool:
    """True if another process holds ``path``'s lock (probe: take it and let go).

    The file is opened read-only: brokers watch lock files for a close by a writer
    (their holder died or let go), which a probe must not look like. For a probe
    asked again and again, keep a :class:`FileLock` and ask its
    :meth:`FileLock.held_by_another`."""
    try:
        handle = open(path)  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return False
    with handle:
        try:
            portalocker.lock(handle, portalocker.LOCK_EX | portalocker.LOCK_NB)
        except (portalocker.LockException, portalocker.AlreadyLocked, BlockingIOError):
            return True
        portalocker.unlock(handle)
        return False


def held_steadily(path: Path, probes: int = 3, gap_s: float = 0.01) -> bool:
    """:func:`is_locked`, believed only when ``probes`` probes ``gap_s`` apart all say so.

    Brokers probe each other's locks the same way, so one refusal may be another
    prober's instant hold on a dead broker's lock; a live holder refuses every time.
    """
    for attempt in range(probes):
        if not is_locked(path):
            return False
        if attempt + 1 < probes:
            time.sleep(gap_s)
    return True
