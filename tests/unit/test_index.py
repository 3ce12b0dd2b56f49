"""OffsetIndex and TimeIndex on real mmap'd files, and index use by the log."""

from __future__ import annotations

from pathlib import Path

import pytest

from slog.core.index import CorruptIndexError, OffsetIndex, TimeIndex
from slog.core.log import PartitionLog
from slog.core.log_config import LogConfig
from tests.unit.batchgen import make_sized_batch

BASE = 1000


def offset_index(tmp_path: Path, max_size: int = 1024) -> OffsetIndex:
    return OffsetIndex(tmp_path / "00000000000000001000.index", BASE, max_size)


def closed_index(tmp_path: Path, entries: int) -> None:
    """An offset index file of ``entries`` entries (offset BASE + i at 10 * i), closed."""
    index = offset_index(tmp_path)
    for i in range(1, entries + 1):
        index.append(BASE + i, 10 * i)
    index.close()


def time_index(tmp_path: Path, max_size: int = 1200) -> TimeIndex:
    return TimeIndex(tmp_path / "00000000000000001000.timeindex", BASE, max_size)


# ------------------------------------------------------------------ OffsetIndex


def test_offset_lookup_returns_largest_entry_at_or_below(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    for i in range(1, 50):
        index.append(BASE + 10 * i, 100 * i)
    assert index.lookup(BASE) == (BASE, 0)  # below the first entry: segment start
    assert index.lookup(BASE + 9) == (BASE, 0)
    assert index.lookup(BASE + 10) == (BASE + 10, 100)
    assert index.lookup(BASE + 255) == (BASE + 250, 2500)
    assert index.lookup(BASE + 10_000) == (BASE + 490, 4900)
    assert index.lookup(0) == (BASE, 0)


def test_offset_lookup_on_empty_index(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    assert index.entries == 0
    assert index.lookup(BASE + 5) == (BASE, 0)
    assert index.floor_by_position(1 << 20) == (BASE, 0)


def test_floor_by_position(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    for i in range(1, 10):
        index.append(BASE + i, 1000 * i)
    assert index.floor_by_position(999) == (BASE, 0)
    assert index.floor_by_position(1000) == (BASE + 1, 1000)
    assert index.floor_by_position(5500) == (BASE + 5, 5000)
    assert index.floor_by_position(10**9) == (BASE + 9, 9000)


def test_offset_index_rejects_out_of_order(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    index.append(BASE + 5, 100)
    with pytest.raises(ValueError):
        index.append(BASE + 5, 200)


def test_offset_index_full_and_growth(tmp_path: Path) -> None:
    index = offset_index(tmp_path, max_size=80)  # 10 entries
    assert index.max_entries == 10
    for i in range(10):
        assert not index.is_full
        index.append(BASE + i + 1, i + 1)
    assert index.is_full
    with pytest.raises(ValueError):
        index.append(BASE + 100, 100)


def test_offset_index_grows_by_allocation_not_preallocated(tmp_path: Path) -> None:
    index = offset_index(tmp_path, max_size=10 * 1024 * 1024)
    assert index.path.stat().st_size == 0  # idle partitions cost no disk
    for i in range(1, 513):  # a page of entries lives in memory
        index.append(BASE + i, 10 * i)
    assert index.path.stat().st_size == 0
    index.append(BASE + 513, 5130)  # the page outgrown: the file gets them all
    size = index.path.stat().st_size
    assert 513 * 8 <= size < 10 * 1024 * 1024
    assert index.path.stat().st_blocks * 512 >= size  # real blocks, not a sparse hole
    assert index.lookup(BASE + 1) == (BASE + 1, 10)
    assert index.lookup(BASE + 10_000) == (BASE + 513, 5130)
    index.close()
    assert index.path.stat().st_size == 513 * 8


def test_entries_kept_in_memory_reach_the_file_when_closed(tmp_path: Path) -> None:
    closed_index(tmp_path, 7)
    assert offset_index(tmp_path).path.stat().st_size == 7 * 8
    reopened = offset_index(tmp_path)
    assert reopened.entries == 7
    assert reopened.lookup(BASE + 5) == (BASE + 5, 50)


def test_materialize_gives_entries_in_memory_their_file_space(tmp_path: Path) -> None:
    index = time_index(tmp_path)
    index.maybe_append(10, BASE + 1)
    index.maybe_append(20, BASE + 2)
    assert index.path.stat().st_size == 0
    index.materialize()
    stat = index.path.stat()
    assert stat.st_size >= 2 * 12 and stat.st_blocks * 512 >= stat.st_size
    index.maybe_append(30, BASE + 3)  # appends go on into the file
    assert index.lookup(25) == (20, BASE + 2)
    assert index.trim()
    assert index.path.stat().st_size == 3 * 12
    assert index.all_entries() == [(10, 1), (20, 2), (30, 3)]


def test_truncating_entries_kept_in_memory(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    for i in range(1, 11):
        index.append(BASE + 10 * i, 100 * i)
    index.truncate_to(BASE + 55)
    assert index.entries == 5 and index.lookup(BASE + 10_000) == (BASE + 50, 500)
    index.close()
    assert [e[0] for e in offset_index(tmp_path).all_entries()] == [10, 20, 30, 40, 50]


def test_offset_truncate_to(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    for i in range(1, 11):
        index.append(BASE + 10 * i, 100 * i)
    index.truncate_to(BASE + 55)
    assert index.entries == 5
    assert index.lookup(BASE + 10_000) == (BASE + 50, 500)
    index.truncate_to(BASE + 50)  # removes the entry for 50 itself
    assert index.entries == 4
    index.truncate_to(BASE)
    assert index.entries == 0
    index.append(BASE + 3, 30)  # usable after truncation
    assert index.lookup(BASE + 3) == (BASE + 3, 30)


def test_trim_and_reopen_keeps_entries(tmp_path: Path) -> None:
    closed_index(tmp_path, 7)
    assert (tmp_path / "00000000000000001000.index").stat().st_size == 7 * 8
    reopened = offset_index(tmp_path)
    assert reopened.entries == 7
    reopened.sanity_check(log_size=1000)
    assert reopened.lookup(BASE + 4) == (BASE + 4, 40)


def test_sanity_check_detects_corruption(tmp_path: Path) -> None:
    closed_index(tmp_path, 4)
    path = tmp_path / "00000000000000001000.index"
    data = bytearray(path.read_bytes())
    data[-8:] = bytes(8)  # last entry zeroed, as in an untrimmed file
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptIndexError):
        offset_index(tmp_path).sanity_check(log_size=1000)
    path.write_bytes(bytes(data[:-3]))  # not a whole number of entries
    with pytest.raises(CorruptIndexError):
        offset_index(tmp_path).sanity_check(log_size=1000)


def test_sanity_check_detects_position_past_log(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    index.append(BASE + 1, 500)
    index.sanity_check(log_size=501)
    with pytest.raises(CorruptIndexError):
        index.sanity_check(log_size=500)


# ------------------------------------------------------------------ TimeIndex


def test_time_index_only_appends_increasing_timestamps(tmp_path: Path) -> None:
    index = time_index(tmp_path)
    index.maybe_append(100, BASE + 1)
    index.maybe_append(100, BASE + 2)  # not larger: ignored
    index.maybe_append(90, BASE + 3)
    index.maybe_append(-1, BASE + 4)  # no timestamp
    index.maybe_append(200, BASE + 5)
    assert index.all_entries() == [(100, 1), (200, 5)]
    assert index.last_entry == (200, BASE + 5)


def test_time_index_lookup(tmp_path: Path) -> None:
    index = time_index(tmp_path)
    for i in range(1, 20):
        index.maybe_append(1000 * i, BASE + 10 * i)
    assert index.lookup(999) == (-1, BASE)
    assert index.lookup(1000) == (1000, BASE + 10)
    assert index.lookup(5500) == (5000, BASE + 50)
    assert index.lookup(10**12) == (19000, BASE + 190)


def test_time_index_keeps_a_slot_for_the_roll_entry(tmp_path: Path) -> None:
    index = time_index(tmp_path, max_size=36)  # 3 entries
    index.maybe_append(1, BASE + 1)
    index.maybe_append(2, BASE + 2)
    assert index.is_full
    index.maybe_append(3, BASE + 3)  # refused: the last slot is reserved
    assert index.entries == 2
    index.maybe_append(3, BASE + 3, skip_full_check=True)
    assert index.entries == 3


def test_time_index_truncate_and_sanity(tmp_path: Path) -> None:
    index = time_index(tmp_path)
    for i in range(1, 6):
        index.maybe_append(100 * i, BASE + 10 * i)
    index.truncate_to(BASE + 30)
    assert index.all_entries() == [(100, 10), (200, 20)]
    index.sanity_check(log_size=100)
    index.close()
    path = tmp_path / "00000000000000001000.timeindex"
    path.write_bytes(path.read_bytes() + bytes(12))  # zero tail entry: out of order
    with pytest.raises(CorruptIndexError):
        time_index(tmp_path).sanity_check(log_size=100)


# ------------------------------------------------------------------ through the log


def small_config(**overrides: object) -> LogConfig:
    settings: dict[str, object] = {
        "segment_bytes": 2048,
        "index_interval_bytes": 200,
        "segment_index_bytes": 4096,
    }
    settings.update(overrides)
    return LogConfig(**settings)  # type: ignore[arg-type]


def fill(log: PartitionLog, count: int, size: int = 150) -> list[bytes]:
    batches = [make_sized_batch(0, size) for _ in range(count)]
    for batch in batches:
        log.append(batch)
    return batches


def assert_every_offset_readable(log: PartitionLog) -> None:
    for offset in range(log.log_start_offset, log.log_end_offset):
        fetched = log.read(offset, 1, min_one_message=True)
        assert fetched.first_offset == offset  # single-record batches
        view = fetched.views[0]
        assert int.from_bytes(view[0:8], "big") == offset


def test_index_lookups_across_rolls(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", small_config())
    fill(log, 200)
    assert len(log.segments) > 10
    for segment in log.segments[:-1]:
        assert segment.offset_index.entries > 0
        assert segment.size <= 2048
    assert_every_offset_readable(log)
    log.close()
    reopened = PartitionLog.open(tmp_path / "t-0", small_config(), clean_shutdown=True)
    assert_every_offset_readable(reopened)


def test_index_lookups_after_retention(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", small_config(retention_bytes=6000))
    fill(log, 200)
    deleted = log.enforce_retention()
    assert deleted > 0
    assert log.log_start_offset == log.segments[0].base_offset > 0
    assert log.size_in_bytes <= 6000
    assert_every_offset_readable(log)
    fill(log, 30)
    assert_every_offset_readable(log)
