"""File locks (portalocker): broker liveness and controller election.

A lock held by a process is released by the OS the instant that process dies,
however it dies, so "can I take this lock?" is an exact liveness probe with no
session timeout to wait out.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

import portalocker

from slog.core.names import make_private_dir


class FileLock:
    """A non-blocking exclusive lock on one file, held until :meth:`release`."""

    def __init__(self, path: Path):
        self.path = path
        self._handle: IO[str] | None = None

    @property
    def held(self) -> bool:
        return self._handle is not None

    def try_acquire(self) -> bool:
        if self._handle is not None:
            return True
        make_private_dir(self.path.parent)
        handle = open(self.path, "a+")  # noqa: SIM115 - kept open while the lock is held
        os.chmod(self.path, 0o600)
        try:
            portalocker.lock(handle, portalocker.LOCK_EX | portalocker.LOCK_NB)
        except (portalocker.LockException, portalocker.AlreadyLocked, BlockingIOError):
            handle.close()
            return False
        self._handle = handle
        return True

    def release(self) -> None:
        if self._handle is None:
            return
        try:
            portalocker.unlock(self._handle)
        finally:
            self._handle.close()
            self._handle = None


def is_locked(path: Path) -> bool:
    """True if another process holds ``path``'s lock (probe: take it and let go)."""
    if not path.exists():
        return False
    probe = FileLock(path)
    if probe.try_acquire():
        probe.release()
        return False
    return True
