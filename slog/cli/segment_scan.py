"""Offline reading of one partition's segment files for ``slog dump-log``; no I/O here.

Unlike the broker's recovery, which stops at the first bad batch and cuts the
file there, this walks on past batches whose CRC does not match (their frame is
still sound) so that a dump shows everything that can be shown, and reports
instead of repairing. It stops only where the framing itself breaks (a length
running past the end, a wrong magic), or at the zero-filled tail that an
active segment keeps preallocated.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from slog.core.batch import (
    CRC_POS,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    MIN_BATCH_LENGTH,
    BatchHeader,
    compute_crc,
    parse_header,
)
from slog.core.index import OffsetIndex, TimeIndex
from slog.core.records import Record, decode_records

LOG, INDEX, TIME_INDEX = ".log", ".index", ".timeindex"


@dataclass(frozen=True)
class ScannedBatch:
    position: int
    header: BatchHeader
    computed_crc: int

    @property
    def crc_valid(self) -> bool:
        return self.computed_crc == self.header.crc


@dataclass
class LogScan:
    batches: list[ScannedBatch] = field(default_factory=list)
    valid_bytes: int = 0  # where the readable batches end
    zero_padding: int = 0  # preallocated zero bytes after them
    error: str | None = None  # why the walk stopped early

    @property
    def invalid_batches(self) -> list[ScannedBatch]:
        return [b for b in self.batches if not b.crc_valid]


def scan_log(data: bytes) -> LogScan:
    """Every batch frame of a ``.log`` file, CRCs checked but not enforced."""
    scan = LogScan()
    pos, end = 0, len(data)
    while pos < end:
        if not any(data[pos:pos + LOG_OVERHEAD]) and not data[pos:].strip(b"\0"):
            scan.zero_padding = end - pos
            break
        if end - pos < HEADER_SIZE:
            scan.error = (f"truncated batch at byte {pos}: {end - pos} bytes left, "
                          f"a batch header needs {HEADER_SIZE}")
            break
        header = parse_header(data, pos)
        problem = _frame_problem(header, pos, end)
        if problem:
            scan.error = f"bad batch at byte {pos} (base offset {header.base_offset}): {problem}"
            break
        scan.batches.append(ScannedBatch(pos, header, compute_crc(data, pos, header.size)))
        pos += header.size
    scan.valid_bytes = pos
    return scan


def _frame_problem(header: BatchHeader, pos: int, end: int) -> str | None:
    if header.batch_length < MIN_BATCH_LENGTH:
        return f"batch length {header.batch_length} is below the minimum {MIN_BATCH_LENGTH}"
    if pos + header.size > end:
        return (f"batch length {header.batch_length} runs past the end of the file "
                f"({end - pos - LOG_OVERHEAD} bytes left): the file is truncated")
    if header.magic != MAGIC:
        return f"magic {header.magic} is not 2 (only v2 batches are stored)"
    if header.last_offset_delta < 0 or header.record_count < 0:
        return "negative record count or offset delta"
    return None


def batch_records(data: bytes, batch: ScannedBatch) -> list[Record]:
    """The batch's records; one with a bad CRC is decoded from a copy with the CRC fixed,
    so its contents can still be inspected. Raises CorruptRecordError if they don't decode."""
    if batch.crc_valid:
        return decode_records(data, batch.position)[1]
    copy = bytearray(data[batch.position:batch.position + batch.header.size])
    copy[CRC_POS:CRC_POS + 4] = batch.computed_crc.to_bytes(4, "big")
    return decode_records(bytes(copy), 0)[1]


# -- indexes ------------------------------------------------------------------------------

def index_entries(data: bytes, suffix: str) -> tuple[list[tuple[int, int]], int]:
    """Entries of an ``.index`` ((relative offset, position)) or ``.timeindex``
    ((timestamp, relative offset)) file, without the zero-filled preallocated tail;
    and the count of bytes that do not make up a whole entry."""
    entry = OffsetIndex.ENTRY if suffix == INDEX else TimeIndex.ENTRY
    whole = len(data) - len(data) % entry.size
    entries: list[tuple[int, int]] = [
        (int(a), int(b)) for a, b in entry.iter_unpack(data[:whole])]
    # An all-zero entry after the first one is unused space (Kafka reads it the same way).
    for n in range(1, len(entries)):
        if entries[n] == (0, 0):
            entries = entries[:n]
            break
    if entries and entries[0] == (0, 0) and suffix == TIME_INDEX:
        entries = []
    return entries, len(data) - whole


@dataclass(frozen=True)
class IndexMismatch:
    entry: int  # its number in the file
    indexed: str
    found: str


def verify_offset_index(entries: list[tuple[int, int]], base_offset: int,
                        scan: LogScan) -> list[IndexMismatch]:
    """Each entry must point at a batch start and name that batch's last offset."""
    by_position = {b.position: b.header for b in scan.batches}
    mismatches = []
    previous = (-1, -1)
    for n, (relative, position) in enumerate(entries):
        offset = base_offset + relative
        indexed = f"offset {offset} at position {position}"
        header = by_position.get(position)
        if relative <= previous[0] or position <= previous[1]:
            mismatches.append(IndexMismatch(n, indexed, "entry out of order"))
        elif header is None:
            mismatches.append(IndexMismatch(n, indexed, "no batch starts at that position"))
        elif header.last_offset != offset:
            mismatches.append(IndexMismatch(
                n, indexed, f"the batch there ends at offset {header.last_offset}"))
        previous = (relative, position)
    return mismatches


def verify_time_index(entries: list[tuple[int, int]], base_offset: int,
                      scan: LogScan) -> list[IndexMismatch]:
    """Each entry's timestamp must be the largest one in the log up to its offset,
    and that offset must be the last offset of a batch."""
    running_max: dict[int, int] = {}  # batch last offset -> max timestamp so far
    largest = -1
    for batch in scan.batches:
        largest = max(largest, batch.header.max_timestamp)
        running_max[batch.header.last_offset] = largest
    mismatches = []
    previous = (-1, -1)
    for n, (timestamp, relative) in enumerate(entries):
        offset = base_offset + relative
        indexed = f"timestamp {timestamp} at offset {offset}"
        if timestamp <= previous[0] or relative < previous[1]:
            mismatches.append(IndexMismatch(n, indexed, "entry out of order"))
        elif offset not in running_max:
            mismatches.append(IndexMismatch(n, indexed, "no batch ends at that offset"))
        elif running_max[offset] != timestamp:
            mismatches.append(IndexMismatch(
                n, indexed, f"the largest timestamp up to it is {running_max[offset]}"))
        previous = (timestamp, relative)
    return mismatches
