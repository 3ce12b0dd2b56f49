"""core/segment_reader.py: reading a live log's segments read-only, and tailing them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from slog.core.cleaner import LogCleaner
from slog.core.log import PartitionLog
from slog.core.log_config import LogConfig
from slog.core.records import build_batch, decode_records_as
from slog.core.segment_reader import LogTail, iter_segment, segment_bases, segment_path

NOW_MS = 1_700_000_000_000


def append(log: PartitionLog, *records: tuple[bytes | None, bytes | None]) -> None:
    log.append(build_batch((k, v, (), NOW_MS) for k, v in records))


def offsets(batches: object) -> list[int]:
    return [r[2] for chunk, pos, header in batches  # type: ignore[attr-defined]
            for r in decode_records_as(chunk, pos, header, tuple, "", 0)]


def test_tail_yields_each_batch_once_across_polls_and_rolled_segments(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=400))  # preallocated
    tail = LogTail(log.directory)
    assert offsets(tail.poll()) == []  # nothing written: only the zeroed preallocation
    for i in range(3):
        append(log, (b"k", b"v%d" % i))
    assert offsets(tail.poll()) == [0, 1, 2]
    assert offsets(tail.poll()) == []
    for i in range(3, 20):
        append(log, (b"k", b"v%d" % i), (b"j", b"w%d" % i))
    assert len(segment_bases(log.directory)) > 2
    assert offsets(tail.poll()) == list(range(3, 37))
    assert offsets(tail.poll()) == []
    log.close()


def test_a_poll_reads_only_the_bytes_after_the_last_one(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=1 << 20))
    for i in range(50):
        append(log, (b"k", b"v%d" % i))
    tail = LogTail(log.directory)
    assert len(offsets(tail.poll())) == 50
    end = log.segments[-1].size
    append(log, (b"k", b"new"))
    reads: list[int] = []
    real_pread = os.pread

    def pread(fd: int, size: int, at: int) -> bytes:
        reads.append(at)
        return real_pread(fd, size, at)

    monkeypatch.setattr(os, "pread", pread)
    assert offsets(tail.poll()) == [50]
    assert reads[0] == end  # straight to the new batch, nothing before it read again
    log.close()


def test_stops_at_a_batch_failing_its_crc_and_reads_it_once_complete(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=1 << 20, preallocate=False))
    append(log, (b"a", b"1"))
    append(log, (b"b", b"2"))
    log.close()
    path = segment_path(log.directory, 0)
    end = path.stat().st_size
    written = build_batch([(b"c", b"3", (), NOW_MS)], base_offset=2)
    torn = bytearray(written)
    torn[-1] ^= 0xFF  # the last byte is not there yet: the CRC fails
    with open(path, "ab") as f:
        f.write(torn)
    tail = LogTail(log.directory)
    assert offsets(tail.poll()) == [0, 1]
    assert [h.base_offset for _, _, _, h in iter_segment(log.directory, 0)] == [0, 1]
    fd = os.open(path, os.O_WRONLY)
    os.pwrite(fd, written, end)
    os.close(fd)
    assert offsets(tail.poll()) == [2]


def test_a_segment_rewritten_by_compaction_is_read_again_without_repeats(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=600, preallocate=False, cleanup_policy="compact")
    log = PartitionLog.open(tmp_path / "t-0", config, time=lambda: NOW_MS / 1000)
    tail = LogTail(log.directory)
    append(log, (b"k0", b"x"))
    seen = offsets(tail.poll())  # the position is inside the segment about to be compacted
    append(log, (b"once", b"kept"))  # offset 1: survives, one batch earlier in the new file
    for i in range(2, 30):
        append(log, (b"k%d" % (i % 3), b"v%d" % i))
    assert LogCleaner().clean(log, force=True) > 0  # rewrites the closed segments
    append(log, (b"k9", b"last"))
    seen += offsets(tail.poll())
    assert seen == sorted(set(seen))  # nothing twice, in order
    assert seen[0] == 0 and seen[-1] == 30
    # Everything still in the log past the first poll was seen.
    kept = [o for base in segment_bases(log.directory)
            for o in offsets((c, p, h) for _, c, p, h in iter_segment(log.directory, base))]
    assert set(kept) <= set(seen)
    assert 1 in kept and 0 not in kept
    log.close()
