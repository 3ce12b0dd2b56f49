"""What a chaos run records, and how it is written: one JSON object per line.

Every event has a ``type``; the checker only ever sees these dataclasses, so a
history read back from disk checks exactly like the one a run kept in memory.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import IO, Any


@dataclass(frozen=True, slots=True)
class Ack:
    """The broker acknowledged ``value`` at ``partition``/``offset``."""

    value: str
    partition: int
    offset: int
    time: float = 0.0


@dataclass(frozen=True, slots=True)
class Read:
    """A consumer (or the final read, or a replica's files) saw ``value`` at an offset.

    ``source`` names who read it: a consumer id, ``final`` or ``replica-<broker>``.
    ``generation`` is the group generation the consumer held (-1 without a group).
    """

    source: str
    partition: int
    offset: int
    value: str
    generation: int = -1


@dataclass(frozen=True, slots=True)
class Assignment:
    """Consumer ``consumer`` owned ``partitions`` in group generation ``generation``."""

    consumer: str
    generation: int
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Fault:
    """One nemesis step: what was done to which broker, when, and how long it took."""

    kind: str
    broker: int
    start: float
    end: float
    detail: str = ""
    events: int = 1  # broker faults in this step (a rolling restart hits every broker)


@dataclass
class History:
    acks: list[Ack] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    assignments: list[Assignment] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    failed_sends: int = 0  # delivery errors: indefinite, neither acked nor lost


_TYPES: dict[str, type] = {"ack": Ack, "read": Read, "assignment": Assignment, "fault": Fault}
_NAMES = {cls: name for name, cls in _TYPES.items()}


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
_ENCODER = json.JSONEncoder(separators=(",", ":"))  # json.dumps would build one per call


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


def event_json(type_name: str, event: Any) -> str:
    """One history line. The events' fields are strs, numbers and tuples of ints, so no
    deep copy (dataclasses.asdict) is needed: a run writes hundreds of thousands of
    events, and asdict took about half of the end-of-run replica reads."""
    values = {name: getattr(event, name) for name in _field_names(type(event))}
    return _ENCODER.encode({"type": type_name, **values})


def to_json(event: Ack | Read | Assignment | Fault) -> str:
    return event_json(_NAMES[type(event)], event)


def from_json(line: str) -> Ack | Read | Assignment | Fault:
    data: dict[str, Any] = json.loads(line)
    cls = _TYPES[data.pop("type")]
    if cls is Assignment:
        data["partitions"] = tuple(data["partitions"])
    return cls(**data)


class HistoryLog:
    """Thread-safe: keeps events in a History and, with a path, appends them as JSON lines."""

    def __init__(self, path: Path | None = None):
        self.history = History()
        self._lock = threading.Lock()
        self._file: IO[str] | None = path.open("a", encoding="utf-8") if path else None
        self.write_error: str | None = None  # the file stopped; the history in memory did not

    def add(self, event: Ack | Read | Assignment | Fault) -> None:
        with self._lock:
            if isinstance(event, Ack):
                self.history.acks.append(event)
            elif isinstance(event, Read):
                self.history.reads.append(event)
            elif isinstance(event, Assignment):
                self.history.assignments.append(event)
            else:
                self.history.faults.append(event)
            if self._file is not None:
                try:
                    self._file.write(to_json(event) + "\n")
                except OSError as exc:  # a full disk must not stop the run: keep checking
                    self.write_error = f"{exc}; the file stops at {len(self.history.acks)} acks"
                    self._file = None

    def add_all(self, events: Iterable[Ack | Read | Assignment | Fault]) -> None:
        for event in events:
            self.add(event)

    def failed_send(self) -> None:
        with self._lock:
            self.history.failed_sends += 1

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def read_history(lines: Iterable[str]) -> History:
    """A history back from JSON lines (blank lines skipped)."""
    log = HistoryLog()
    log.add_all(from_json(line) for line in lines if line.strip())
    return log.history


def iter_file(path: Path) -> Iterator[str]:
    with path.open(encoding="utf-8") as handle:
        yield from handle
