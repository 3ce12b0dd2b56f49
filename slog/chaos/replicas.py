"""Each replica's log read straight from its segment files (read-only, brokers stopped)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from slog.core import batch
from slog.core.errors import CorruptRecordError
from slog.core.records import decode_records


def valid_batches(path: Path) -> Iterator[tuple[int, int, bytes]]:
    """(position, last offset, bytes) of each valid batch of one segment, up to the first
    invalid byte (where recovery would truncate)."""
    data = path.read_bytes()
    pos = 0
    while pos + batch.HEADER_SIZE <= len(data):
        size = batch.peek_batch_size(data, pos)
        if size < batch.HEADER_SIZE or pos + size > len(data):
            return
        raw = data[pos:pos + size]
        try:
            header = batch.validate_batch(raw)
        except CorruptRecordError:
            return
        yield pos, header.last_offset, raw
        pos += size


def segments(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.log"), key=lambda p: int(p.stem))


def replica_records(directory: Path) -> Iterator[tuple[int, bytes | None]]:
    """(offset, value) of every record in one replica's partition directory."""
    for path in segments(directory):
        for _, _, raw in valid_batches(path):
            _, records = decode_records(raw)
            for record in records:
                yield record.offset, record.value
