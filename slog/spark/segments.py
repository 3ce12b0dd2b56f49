"""Bounds, timestamps and records of one replica's partition log, read straight from
its segment files with core's read-only reader (:mod:`slog.core.segment_reader`):
no writes, locks or maps of a running broker's files, and no index rebuilt.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slog.core import batch
from slog.core.batch import BatchHeader
from slog.core.records import decode_records_as
from slog.core.segment_reader import batches_from, iter_segment, segment_bases


@dataclass(frozen=True)
class LogBounds:
    """What one replica's files hold: ``[start, end)``."""

    start: int
    end: int


def _first_base_offset(directory: Path, base: int) -> int | None:
    for _fpos, _chunk, _pos, header in iter_segment(directory, base):
        return header.base_offset
    return None


def log_start(directory: Path) -> int | None:
    """The first offset still in the log's files (None when it has none); cheap."""
    for base in segment_bases(directory):
        first = _first_base_offset(directory, base)
        if first is not None:
            return max(base, first)
    return None


def log_bounds(directory: Path, checkpointed_start: int | None = None) -> LogBounds:
    """The first and next offset of the log in ``directory`` (both 0 when empty)."""
    bases = segment_bases(directory)
    if not bases:
        start = checkpointed_start or 0
        return LogBounds(start, start)
    end = bases[-1]
    for _fpos, _chunk, _pos, header in iter_segment(directory, bases[-1]):
        end = header.next_offset
    start = bases[0]
    first = _first_base_offset(directory, bases[0])
    if first is not None:
        start = max(start, first)
    if checkpointed_start is not None:
        start = max(start, checkpointed_start)
    return LogBounds(min(start, end), end)


def offset_for_timestamp(directory: Path, timestamp_ms: int, end: int) -> int | None:
    """The first offset below ``end`` whose record timestamp is ≥ ``timestamp_ms``."""
    from slog.client.types import ConsumerRecord

    for chunk, pos, header in batches_from(directory, 0, end):
        if header.max_timestamp < timestamp_ms or header.attributes & batch.CONTROL_BIT:
            continue  # the batch header bounds every record's timestamp
        for record in decode_records_as(chunk, pos, header, ConsumerRecord, "", 0):
            if record.timestamp >= timestamp_ms and record.offset < end:
                return int(record.offset)
    return None


def read_records(directory: Path, topic: str, partition: int, start: int, end: int,
                 record_type: type[Any] | None = None,
                 hidden: Callable[[BatchHeader], bool] | None = None) -> Iterator[Any]:
    """Records with offsets in ``[start, end)``, control batches skipped (and the batches
    ``hidden`` says, such as aborted transactions').

    Records are ``record_type`` tuples (topic, partition, offset, timestamp,
    timestamp_type, key, value, headers); see ``decode_records_as``.
    """
    from slog.client.types import ConsumerRecord

    kind = record_type or ConsumerRecord
    for chunk, pos, header in batches_from(directory, start, end):
        if header.attributes & batch.CONTROL_BIT or (hidden is not None and hidden(header)):
            continue
        records = decode_records_as(chunk, pos, header, kind, topic, partition)
        if header.base_offset >= start and header.last_offset < end:
            yield from records
        else:
            yield from (r for r in records if start <= r[2] < end)
