"""Change notices for a few directories of the data dir (inotify on Linux).

Brokers share one data dir and learn of each other's writes from it: the
metadata log, ``controller.lock``, each broker's liveness files. Polling
those files costs every broker a wake-up many times a second to find
nothing new; a watch costs nothing until something changes, and tells at
once. Without inotify (another OS, the library missing, the per-user watch
limit reached) :meth:`DirWatch.open` returns None and callers poll as
before. A lost notice (a queue overflow, a watched directory removed) is
reported as :attr:`Changes.lost`, so the caller can look at everything.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("slog.watch")

try:
    import inotify_simple
except (ImportError, OSError):  # not Linux: callers poll
    inotify_simple = None

# inotify's event bits (linux/inotify.h), named here so the module type-checks
# without the library.
MODIFY = 0x002
CLOSE_WRITE = 0x008
MOVED_FROM = 0x040
MOVED_TO = 0x080
CREATE = 0x100
DELETE = 0x200
_OVERFLOW = 0x4000
_IGNORED = 0x8000  # the watch is gone: its directory was removed or unmounted


@dataclass
class Changes:
    """What one read of the watch found: names changed per directory."""
    names: dict[Path, set[str]] = field(default_factory=dict)
    lost: bool = False  # notices were dropped: anything may have changed

    def in_dir(self, directory: Path) -> set[str]:
        return self.names.get(directory, set())


class DirWatch:
    """Watches directories (not recursively) for the given events on their entries."""

    def __init__(self, inotify: Any):
        self._inotify = inotify
        self._dirs: dict[int, Path] = {}  # watch descriptor -> directory

    @classmethod
    def open(cls) -> DirWatch | None:
        if inotify_simple is None:
            return None
        try:
            return cls(inotify_simple.INotify(nonblocking=True))
        except OSError as exc:  # e.g. the per-user instance limit
            log.warning("cannot watch the data dir (%s); polling it instead", exc)
            return None

    def fileno(self) -> int:
        fd: int = self._inotify.fileno()
        return fd

    def add(self, directory: Path, mask: int) -> bool:
        """Watch ``directory``; False (with a warning) when it cannot be watched."""
        try:
            wd: int = self._inotify.add_watch(os.fspath(directory), mask)
        except OSError as exc:
            log.warning("cannot watch %s (%s); polling it instead", directory, exc)
            return False
        self._dirs[wd] = directory
        return True

    def watches(self, directory: Path) -> bool:
        return directory in self._dirs.values()

    def read(self) -> Changes:
        """Every notice queued since the last read (none: an empty Changes)."""
        changes = Changes()
        try:
            events: Iterable[Any] = self._inotify.read(timeout=0)
        except BlockingIOError:
            return changes
        for event in events:
            if event.mask & _OVERFLOW:
                changes.lost = True
                continue
            directory = self._dirs.get(event.wd)
            if event.mask & _IGNORED:
                self._dirs.pop(event.wd, None)
                changes.lost = True
            elif directory is not None:
                changes.names.setdefault(directory, set()).add(event.name)
        return changes

    def close(self) -> None:
        self._inotify.close()
