"""What wakes a broker's metadata and controller loops: changes in the data dir.

Brokers learn of each other only through the shared data dir. Instead of
looking at it several times a second, each broker watches (``core/dir_watch``):

* the metadata log's directory: an append (the controller's ``pwritev``) or a
  new segment wakes the metadata loop at once;
* ``controller.lock``: its holder closing it (it stopped or died) wakes the
  controller loop, which then tries to take it;
* each ``brokers/<id>/``: alive.lock closed (that broker died), ``starting``,
  ``shutting-down`` or ``broker.json`` appearing or going wake the controller's
  liveness check, and a standby's look at the controller lease (its holder
  may be the broker that died). Heartbeats change only an mtime, which is not watched: the
  controller looks at heartbeats when they could next go stale.

Lock probes keep their files open (``FileLock``) so that probing never looks
like a holder letting go. Without a watch, both loops poll as they always did.
"""

from __future__ import annotations

import asyncio
import logging

from slog.core.datadir import known_broker_ids
from slog.core.dir_watch import CLOSE_WRITE, CREATE, DELETE, MODIFY, MOVED_FROM, MOVED_TO, DirWatch
from slog.core.due import Wakeup
from slog.core.metadata_log import metadata_log_dir
from slog.core.names import DataDirLayout, make_private_dir

log = logging.getLogger("slog.broker")

_METADATA_EVENTS = MODIFY | CREATE | MOVED_TO | DELETE
_ENTRY_EVENTS = CREATE | DELETE | MOVED_TO | MOVED_FROM | CLOSE_WRITE


class DataDirWakeups:
    def __init__(self, layout: DataDirLayout):
        self._layout = layout
        self._metadata_dir = metadata_log_dir(layout.metadata_dir)
        files = layout.broker(0)
        self._liveness_files = {files.alive_lock.name, files.starting.name,
                                files.shutting_down.name, files.info.name}
        self.metadata = Wakeup()
        self.controller = Wakeup()
        self._watch: DirWatch | None = None

    @property
    def metadata_watched(self) -> bool:
        return self._watch is not None and self._watch.watches(self._metadata_dir)

    @property
    def liveness_watched(self) -> bool:
        """controller.lock and every broker's files are watched."""
        return self._watch is not None and self._watch.watches(self._layout.root) and \
            self._watch.watches(self._layout.brokers_dir) and \
            all(self._watch.watches(self._layout.broker_dir(b))
                for b in known_broker_ids(self._layout))

    def start(self) -> None:
        """Watch the data dir (inside the running loop); without inotify, do nothing."""
        watch = DirWatch.open()
        if watch is None:
            return
        # The first controller makes it; watching needs it now.
        make_private_dir(self._metadata_dir)
        watch.add(self._metadata_dir, _METADATA_EVENTS)
        watch.add(self._layout.root, CLOSE_WRITE)
        watch.add(self._layout.brokers_dir, CREATE | MOVED_TO)
        self._watch = watch
        self._watch_broker_dirs()
        asyncio.get_running_loop().add_reader(watch.fileno(), self._on_notice)

    def _watch_broker_dirs(self) -> None:
        assert self._watch is not None
        for broker_id in known_broker_ids(self._layout):
            directory = self._layout.broker_dir(broker_id)
            if not self._watch.watches(directory):
                self._watch.add(directory, _ENTRY_EVENTS)

    def _on_notice(self) -> None:
        assert self._watch is not None
        changes = self._watch.read()
        if changes.lost:  # anything may have changed: look at everything
            log.info("data dir notices were lost; looking at everything")
            self._watch_broker_dirs()
            self.metadata.set()
            self.controller.set()
            return
        if changes.in_dir(self._metadata_dir):
            self.metadata.set()
        if self._layout.controller_lock.name in changes.in_dir(self._layout.root):
            self.controller.set()
        if changes.in_dir(self._layout.brokers_dir):  # a new broker
            self._watch_broker_dirs()
            self.controller.set()
        for directory, names in changes.names.items():
            if directory.parent == self._layout.brokers_dir and names & self._liveness_files:
                self.controller.set()

    def close(self) -> None:
        if self._watch is not None:
            asyncio.get_running_loop().remove_reader(self._watch.fileno())
            self._watch.close()
            self._watch = None
