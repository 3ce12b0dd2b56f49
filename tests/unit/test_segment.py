"""LogSegment on real files: allocation, appends, zero-copy reads, trimming, truncation."""

from __future__ import annotations

import errno
import mmap
import os
from pathlib import Path

import pytest

from slog.core.batch import iter_batches
from slog.core.log_config import LogConfig
from slog.core.segment import LogSegment, parse_segment_base, segment_file_stem
from tests.unit.batchgen import make_batch, make_sized_batch

NOW_MS = 1_700_000_000_000


def config(**overrides: object) -> LogConfig:
    settings: dict[str, object] = {"segment_bytes": 64 * 1024, "index_interval_bytes": 300}
    settings.update(overrides)
    return LogConfig(**settings)  # type: ignore[arg-type]


def append(segment: LogSegment, data: bytes) -> None:
    batches = list(iter_batches(data))
    segment.append([data], batches, len(data))


def filled_segment(tmp_path: Path, count: int = 40, size: int = 200, **overrides: object):
    segment = LogSegment.create(tmp_path, 100, config(**overrides), now_ms=NOW_MS)
    batches = [make_sized_batch(100 + i, size, timestamp=NOW_MS + i) for i in range(count)]
    for batch in batches:
        append(segment, batch)
    return segment, batches


def test_file_names() -> None:
    assert segment_file_stem(0) == "00000000000000000000"
    assert segment_file_stem(1234) == "00000000000000001234"
    assert parse_segment_base("00000000000000001234.log") == 1234
    assert parse_segment_base("00000000000000001234.index") is None
    assert parse_segment_base("1234.log") is None
    assert parse_segment_base("leader-epoch-checkpoint") is None


def test_create_preallocates_real_blocks_on_first_append(tmp_path: Path) -> None:
    segment = LogSegment.create(tmp_path, 0, config(segment_bytes=1 << 20, preallocate=True),
                                now_ms=NOW_MS)
    assert segment.log_path.stat().st_size == 0
    append(segment, make_batch(0))
    stat = segment.log_path.stat()
    assert stat.st_size == 1 << 20
    assert stat.st_blocks * 512 >= 1 << 20  # posix_fallocate, not a sparse file
    for suffix in (".log", ".index", ".timeindex"):
        path = tmp_path / f"{segment_file_stem(0)}{suffix}"
        assert path.stat().st_mode & 0o777 == 0o600


def test_without_preallocate_the_file_grows_in_steps(tmp_path: Path) -> None:
    segment = LogSegment.create(
        tmp_path, 0, config(segment_bytes=8 << 20, preallocate=False), now_ms=NOW_MS
    )
    append(segment, make_sized_batch(0, 1000))
    assert segment.log_path.stat().st_size == 256 << 10  # not a MiB per new partition
    append(segment, make_sized_batch(1, 300_000))
    assert segment.log_path.stat().st_size == 512 << 10  # doubling
    big = make_sized_batch(2, 1_500_000)
    append(segment, big)  # more than double: exactly what it needs
    assert segment.log_path.stat().st_size == segment.size == 301_000 + len(big)
    append(segment, make_sized_batch(3, 1000))
    assert segment.log_path.stat().st_size == 2 * segment.size - 2000


def test_append_tracks_offsets_timestamps_and_index(tmp_path: Path) -> None:
    segment, _ = filled_segment(tmp_path)
    assert segment.next_offset == 140
    assert segment.size == 40 * 200
    assert segment.max_timestamp == NOW_MS + 39
    assert segment.offset_of_max_timestamp == 139
    # An entry roughly every index_interval_bytes (300) of 200-byte batches.
    assert 15 <= segment.offset_index.entries <= 20
    assert segment.time_index.entries == segment.offset_index.entries


def test_reads_are_zero_copy_views_of_the_map(tmp_path: Path) -> None:
    segment, batches = filled_segment(tmp_path)
    result = segment.read(105, 10_000, None, True)
    assert result is not None
    assert isinstance(result.view, memoryview)
    assert isinstance(result.view.obj, mmap.mmap)
    assert result.view.readonly
    assert result.first_offset == 105
    assert bytes(result.view) == b"".join(batches[5:40])
    assert not result.done  # reached the end of the segment


def test_read_honours_max_size_and_min_one(tmp_path: Path) -> None:
    segment, batches = filled_segment(tmp_path)
    result = segment.read(100, 999, None, True)
    assert result is not None and result.done
    assert bytes(result.view) == b"".join(batches[:4])
    result = segment.read(100, 50, None, True)
    assert bytes(result.view) == batches[0]
    assert segment.read(100, 50, None, False).view is None


def test_read_stops_before_max_offset(tmp_path: Path) -> None:
    segment, batches = filled_segment(tmp_path)
    result = segment.read(100, 1 << 20, 110, True)
    assert bytes(result.view) == b"".join(batches[:10])
    assert result.done
    assert segment.read(110, 1 << 20, 110, True).view is None


def test_read_past_end_is_none(tmp_path: Path) -> None:
    segment, _ = filled_segment(tmp_path)
    assert segment.read(140, 1000, None, True) is None


def test_translate_offset_inside_multi_record_batch(tmp_path: Path) -> None:
    segment = LogSegment.create(tmp_path, 0, config(), now_ms=NOW_MS)
    append(segment, make_batch(0, [b"a"] * 5))
    append(segment, make_batch(5, [b"b"] * 5))
    position, header = segment.translate_offset(7)
    assert header.base_offset == 5
    assert position == len(make_batch(0, [b"a"] * 5))


def test_seal_trims_preallocated_tail_and_keeps_views_valid(tmp_path: Path) -> None:
    segment, batches = filled_segment(tmp_path, preallocate=True)
    view = segment.read(100, 1 << 20, None, True).view
    assert segment.log_path.stat().st_size == 64 * 1024
    segment.seal()
    assert not segment.is_active
    assert segment.log_path.stat().st_size == segment.size == 40 * 200
    assert segment.offset_index.path.stat().st_size == segment.offset_index.entries * 8
    assert bytes(view) == b"".join(batches)  # old view still readable after the remap
    again = segment.read(120, 1 << 20, None, True)
    assert bytes(again.view) == b"".join(batches[20:])


def test_close_with_live_view_does_not_unmap_it(tmp_path: Path) -> None:
    segment, batches = filled_segment(tmp_path)
    view = segment.read(100, 1 << 20, None, True).view
    segment.close()
    assert bytes(view[:200]) == batches[0]
    segment.delete()
    assert not segment.log_path.exists()
    assert bytes(view[-200:]) == batches[-1]  # pages live on while mapped


def test_truncate_zero_fills_instead_of_shrinking(tmp_path: Path) -> None:
    segment, batches = filled_segment(tmp_path)
    view = segment.read(100, 1 << 20, None, True).view
    dropped = segment.truncate_to(120, now_ms=NOW_MS)
    assert dropped == 20 * 200
    assert segment.next_offset == 120
    assert segment.size == 20 * 200
    assert segment.log_path.stat().st_size == 64 * 1024  # no ftruncate while active
    assert bytes(view[: 20 * 200]) == b"".join(batches[:20])
    assert bytes(view[20 * 200 :]) == bytes(20 * 200)
    assert segment.offset_index.last_entry[0] < 120
    assert segment.max_timestamp == NOW_MS + 19
    append(segment, make_sized_batch(120, 200))
    assert segment.next_offset == 121


def test_truncate_in_middle_of_batch_drops_whole_batch(tmp_path: Path) -> None:
    segment = LogSegment.create(tmp_path, 0, config(), now_ms=NOW_MS)
    append(segment, make_batch(0, [b"a"] * 5))
    append(segment, make_batch(5, [b"b"] * 5))
    segment.truncate_to(7, now_ms=NOW_MS)
    assert segment.next_offset == 5


def test_open_after_close_loads_state(tmp_path: Path) -> None:
    segment, batches = filled_segment(tmp_path)
    segment.close()
    reopened = LogSegment.open(tmp_path, 100, config(), now_ms=NOW_MS)
    assert reopened.load()
    assert reopened.next_offset == 140
    assert reopened.max_timestamp == NOW_MS + 39
    assert reopened.size == 40 * 200
    assert bytes(reopened.read(130, 1 << 20, None, True).view) == b"".join(batches[30:])


def test_should_roll_rules(tmp_path: Path) -> None:
    cfg = config(segment_bytes=1000, segment_ms=60_000, segment_index_bytes=24)
    segment = LogSegment.create(tmp_path, 0, cfg, now_ms=NOW_MS)
    assert not segment.should_roll(5000, NOW_MS, 0, NOW_MS)  # empty: never by size
    append(segment, make_sized_batch(0, 400, timestamp=NOW_MS))
    assert not segment.should_roll(400, NOW_MS, 1, NOW_MS)
    assert segment.should_roll(601, NOW_MS, 1, NOW_MS)  # size
    assert segment.should_roll(10, NOW_MS + 60_001, 1, NOW_MS)  # segment.ms by timestamps
    assert not segment.should_roll(10, NOW_MS + 60_000, 1, NOW_MS)
    assert segment.should_roll(10, NOW_MS, 1 << 31, NOW_MS)  # relative offset overflow


def test_should_roll_when_index_full(tmp_path: Path) -> None:
    cfg = config(segment_bytes=1 << 20, index_interval_bytes=0, segment_index_bytes=24)
    segment = LogSegment.create(tmp_path, 0, cfg, now_ms=NOW_MS)
    for i in range(4):
        append(segment, make_sized_batch(i, 100, timestamp=NOW_MS + i))
    assert segment.offset_index.entries == 3
    assert segment.offset_index.is_full
    assert segment.should_roll(100, NOW_MS, 5, NOW_MS)


def test_find_offset_by_timestamp_decodes_records(tmp_path: Path) -> None:
    segment = LogSegment.create(tmp_path, 0, config(), now_ms=NOW_MS)
    append(segment, make_batch(0, [b"a", b"b", b"c"], timestamps=[10, 30, 20]))
    append(segment, make_batch(3, [b"d", b"e"], timestamps=[40, 50]))
    assert segment.find_offset_by_timestamp(5, 0) == (0, 10)
    assert segment.find_offset_by_timestamp(25, 0) == (1, 30)
    assert segment.find_offset_by_timestamp(31, 0) == (3, 40)
    assert segment.find_offset_by_timestamp(50, 0) == (4, 50)
    assert segment.find_offset_by_timestamp(51, 0) is None
    assert segment.find_offset_by_timestamp(5, 2) == (2, 20)  # not before the log start


def test_pwritev_of_many_chunks(tmp_path: Path) -> None:
    segment = LogSegment.create(tmp_path, 0, config(segment_bytes=1 << 20), now_ms=NOW_MS)
    batches = [make_sized_batch(i, 100) for i in range(3000)]  # > IOV_MAX chunks
    data = b"".join(batches)
    chunks = [memoryview(b)[:50] for b in batches] + [memoryview(b)[50:] for b in batches]
    order = []
    for b in range(3000):
        order += [chunks[b], chunks[3000 + b]]
    segment.append(order, list(iter_batches(data)), len(data))
    assert bytes(segment.read(0, 1 << 20, None, True).view) == data


@pytest.mark.parametrize("preallocate", [True, False])
def test_oversized_append_into_empty_segment_grows_it(tmp_path: Path, preallocate: bool) -> None:
    segment = LogSegment.create(
        tmp_path, 0, config(segment_bytes=1000, preallocate=preallocate), now_ms=NOW_MS
    )
    big = make_sized_batch(0, 5000)
    append(segment, big)
    assert bytes(segment.read(0, 1, None, True).view) == big


def test_short_writes_resume_where_the_kernel_stopped() -> None:
    from slog.core.segment import _after_written

    chunks = [b"abc", memoryview(b"defg"), b"hi"]
    assert _after_written(chunks, 0) == chunks
    assert [bytes(c) for c in _after_written(chunks, 2)] == [b"c", b"defg", b"hi"]
    assert [bytes(c) for c in _after_written(chunks, 3)] == [b"defg", b"hi"]
    assert [bytes(c) for c in _after_written(chunks, 8)] == [b"i"]
    assert _after_written(chunks, 9) == []


def count_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = os.fsync

    def counting(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    return calls


def test_closing_a_synced_segment_costs_no_fsync(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # Ten thousand idle logs closed at shutdown cost an fsync each; one that holds
    # nothing new, with no tail to cut, is on disk as it is already.
    idle = LogSegment.create(tmp_path, 0, config(preallocate=False), now_ms=NOW_MS)
    written, _ = filled_segment(tmp_path)
    fsyncs = count_fsyncs(monkeypatch)
    idle.close()
    assert fsyncs == []
    written.close()  # unsynced data and a tail to cut: fsynced
    assert len(fsyncs) == 1


def test_a_segment_flushed_then_closed_is_fsynced_once(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    segment, batches = filled_segment(tmp_path, preallocate=False)
    segment.seal()
    fsyncs = count_fsyncs(monkeypatch)
    reopened = LogSegment.open(tmp_path, 100, config(preallocate=False), now_ms=NOW_MS)
    reopened.load()
    reopened.activate()
    reopened.close()
    assert fsyncs == []
    assert reopened.size == len(b"".join(batches))


def test_index_files_are_written_only_when_a_roll_seals_the_segment(tmp_path: Path) -> None:
    # A producer touching a thousand new partitions made two index files each grow,
    # map and dirty a page (written back by every group commit's syncfs) for a few
    # entries: an active segment keeps its first page of entries in memory.
    segment = LogSegment.create(tmp_path, 0, config(index_interval_bytes=300), now_ms=NOW_MS)
    append(segment, make_sized_batch(0, 1000, timestamp=NOW_MS))
    assert segment.offset_index.entries == segment.time_index.entries == 0
    append(segment, make_sized_batch(1, 1000, timestamp=NOW_MS + 1))  # 1000 > 300 bytes since
    assert segment.offset_index.entries == segment.time_index.entries == 1
    assert segment.offset_index.path.stat().st_size == 0
    assert segment.time_index.path.stat().st_size == 0
    assert segment.translate_offset(1) is not None  # served from memory
    segment.reserve_seal_entry()  # what a roll does first: a full disk fails it here
    for index in (segment.offset_index, segment.time_index):
        stat = index.path.stat()
        assert stat.st_size > 0 and stat.st_blocks * 512 >= stat.st_size  # real blocks
    segment.seal()
    reopened = LogSegment.open(tmp_path, 0, config(index_interval_bytes=300), now_ms=NOW_MS)
    assert reopened.load()
    assert reopened.offset_index.all_entries() == segment.offset_index.all_entries()
    assert reopened.time_index.all_entries() == segment.time_index.all_entries()


def test_after_a_crash_the_active_segment_rebuilds_the_entries_kept_in_memory(
        tmp_path: Path) -> None:
    segment, batches = filled_segment(tmp_path)
    entries = segment.offset_index.all_entries()
    assert len(entries) > 10 and segment.offset_index.path.stat().st_size == 0
    segment.abandon()  # killed: nothing written at close
    reopened = LogSegment.open(tmp_path, 100, config(), now_ms=NOW_MS)
    result = reopened.recover()
    assert result.garbage_bytes == 0 and reopened.next_offset == 100 + len(batches)
    assert reopened.offset_index.all_entries() == entries
    assert reopened.offset_index.path.stat().st_size == len(entries) * 8


def full_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", refuse)


def test_closing_on_a_full_disk_leaves_out_only_the_final_time_entry(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    segment = LogSegment.create(tmp_path, 0, config(), now_ms=NOW_MS)
    append(segment, make_sized_batch(0, 1000, timestamp=NOW_MS + 7))
    with monkeypatch.context() as patch:
        full_disk(patch)
        segment.close()  # the time index has no room for its final entry, and gets none
    assert segment.time_index.path.stat().st_size == 0
    reopened = LogSegment.open(tmp_path, 0, config(), now_ms=NOW_MS)
    assert reopened.time_index.entries == 0
    assert reopened.load()  # the indexes are still right without it
    assert reopened.max_timestamp == NOW_MS + 7
    assert reopened.next_offset == 1
