"""Exceptions raised by the storage layer.

Each maps onto one Kafka error code at the protocol boundary, so the broker can
answer a client precisely instead of dropping the connection.
"""

from __future__ import annotations


class SlogError(Exception):
    """Base class of every error slog raises on purpose."""


class CorruptRecordError(SlogError):
    """A record batch failed validation (length, magic or CRC)."""

    def __init__(self, reason: str, *, offset: int | None = None, position: int | None = None):
        where = []
        if offset is not None:
            where.append(f"offset {offset}")
        if position is not None:
            where.append(f"byte {position}")
        suffix = f" at {', '.join(where)}" if where else ""
        super().__init__(f"corrupt record batch{suffix}: {reason}")
        self.reason = reason
        self.offset = offset
        self.position = position


class InvalidTopicError(SlogError):
    """A topic name breaks Kafka's naming rules."""


class InvalidNameError(SlogError):
    """A group id or other identifier is not acceptable."""


class StorageError(SlogError):
    """The disk refused a write (full, read-only, I/O error)."""


class OffsetOutOfRangeError(SlogError):
    """A read asked for an offset outside [log start, log end]."""

    def __init__(self, offset: int, log_start: int, log_end: int):
        super().__init__(f"offset {offset} is outside the log range [{log_start}, {log_end}]")
        self.offset = offset
        self.log_start = log_start
        self.log_end = log_end


class DataDirError(SlogError):
    """The data directory is missing, unusable, or locked by another process."""
