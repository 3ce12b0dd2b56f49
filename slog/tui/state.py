"""What the dashboard knows between refreshes (pure: fed snapshots and errors).

The app keeps one :class:`DashboardState`; each refresh either lands a
snapshot (with any metadata-log events) or records why the cluster could not
be reached. The last good snapshot stays on screen while it is unreachable.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from slog.tui.events import ERROR, Event, condense, diff_events
from slog.tui.history import History
from slog.tui.model import ClusterSnapshot

MAX_EVENTS = 500


@dataclass(frozen=True)
class Connection:
    reachable: bool
    since: float  # when the current reachable/unreachable spell began
    error: str | None = None


class DashboardState:
    def __init__(self, *, events_from_log: bool = False):
        self.snapshot: ClusterSnapshot | None = None
        self.history = History()
        self.events: deque[Event] = deque(maxlen=MAX_EVENTS)
        self.connection: Connection | None = None
        self.events_from_log = events_from_log

    def update(self, snapshot: ClusterSnapshot, log_events: Iterable[Event] = (),
               events_from_log: bool | None = None) -> list[Event]:
        """Take a new snapshot; returns the events it brought (also kept in ``events``)."""
        if events_from_log is not None:
            self.events_from_log = events_from_log
        new = list(log_events)
        if self.connection is not None and not self.connection.reachable:
            new.append(Event(snapshot.taken_at, "connection", "cluster reachable again"))
        new += diff_events(self.snapshot, snapshot, include_metadata=not self.events_from_log)
        new = condense(sorted(new, key=lambda e: e.at))
        self.events.extend(new)
        self.snapshot = snapshot
        self.history.add(snapshot)
        if self.connection is None or not self.connection.reachable:
            self.connection = Connection(True, snapshot.taken_at)
        return new

    def unreachable(self, error: str, at: float) -> list[Event]:
        """A refresh failed to reach any broker."""
        if self.connection is not None and not self.connection.reachable:
            self.connection = Connection(False, self.connection.since, error)
            return []
        self.connection = Connection(False, at, error)
        event = Event(at, "connection", f"cluster unreachable: {error}", ERROR)
        self.events.append(event)
        return [event]

    @property
    def reachable(self) -> bool:
        return self.connection is not None and self.connection.reachable

