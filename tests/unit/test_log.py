"""PartitionLog: appends, reads, truncation, retention, timestamps, flushing, epochs."""

from __future__ import annotations

import errno
import mmap
import os
from pathlib import Path

import pytest

from slog.core.batch import TIMESTAMP_TYPE_BIT, iter_batches, parse_header, validate_batch
from slog.core.errors import CorruptRecordError, OffsetOutOfRangeError, StorageError
from slog.core.leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from slog.core.log import FetchSlice, PartitionLog, RecordTooLargeError
from slog.core.log_config import LogConfig
from tests.unit.batchgen import BASE_TIMESTAMP, make_batch, make_sized_batch


class Clock:
    """An injectable time source in seconds, like time.time."""

    def __init__(self, ms: int = BASE_TIMESTAMP):
        self.ms = ms

    def __call__(self) -> float:
        return self.ms / 1000


def config(**overrides: object) -> LogConfig:
    settings: dict[str, object] = {"segment_bytes": 4096, "index_interval_bytes": 256}
    settings.update(overrides)
    return LogConfig(**settings)  # type: ignore[arg-type]


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def log(tmp_path: Path, clock: Clock) -> PartitionLog:
    return PartitionLog.open(tmp_path / "topic-0", config(), time=clock)


def fill(log: PartitionLog, count: int, size: int = 200, **kwargs: object) -> None:
    for _ in range(count):
        log.append(make_sized_batch(0, size), **kwargs)  # type: ignore[arg-type]


def stored_batches(log: PartitionLog) -> list:
    data = log.read(log.log_start_offset, 1 << 30).tobytes()
    return [header for _, header in iter_batches(data)]


# ==================================================================== append


def test_leader_append_assigns_offsets_from_leo(log: PartitionLog) -> None:
    first = log.append(make_batch(999, [b"a", b"b", b"c"]))
    second = log.append(make_batch(0, [b"d"]))
    assert (first.first_offset, first.last_offset) == (0, 2)
    assert (second.first_offset, second.last_offset) == (3, 3)
    assert log.log_end_offset == 4
    headers = stored_batches(log)
    assert [h.base_offset for h in headers] == [0, 3]
    data = log.read(0, 1 << 20).tobytes()
    for position, _ in iter_batches(data):  # base offset is outside the CRC
        validate_batch(data, position)


def test_append_of_several_batches_in_one_request(log: PartitionLog) -> None:
    records = make_batch(0, [b"a"] * 3) + make_batch(0, [b"b"] * 2) + make_batch(0, [b"c"])
    info = log.append(records)
    assert info.first_offset == 0 and info.last_offset == 5
    assert info.record_count == 6
    assert info.valid_bytes == len(records)
    assert [base for base, _ in info.batches] == [0, 3, 5]
    assert [h.record_count for _, h in info.batches] == [3, 2, 1]
    assert info.log_append_time == -1


def test_append_info_timestamps(log: PartitionLog) -> None:
    info = log.append(
        make_batch(0, [b"a", b"b"], timestamps=[50, 70]) + make_batch(0, [b"c"], timestamps=[60])
    )
    assert info.max_timestamp == 70
    assert info.offset_of_max_timestamp == 1


def test_append_accepts_bytes_bytearray_and_memoryview(log: PartitionLog) -> None:
    raw = bytearray(make_batch(123, [b"x"]))
    before = bytes(raw)
    log.append(bytes(raw))
    log.append(raw)
    log.append(memoryview(raw))
    assert raw == before  # the caller's buffer is not modified
    assert [h.base_offset for h in stored_batches(log)] == [0, 1, 2]


def test_append_is_all_or_nothing(log: PartitionLog) -> None:
    log.append(make_batch(0))
    bad = bytearray(make_batch(0, [b"b"]))
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append(make_batch(0, [b"a"]) + bytes(bad))
    with pytest.raises(CorruptRecordError):
        log.append(make_batch(0, [b"a"]) + make_batch(0, [b"b"])[:-5])  # torn last batch
    assert log.log_end_offset == 1
    assert log.size_in_bytes == len(make_batch(0))


def test_record_too_large(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", config(max_message_bytes=500))
    log.append(make_sized_batch(0, 500))
    with pytest.raises(RecordTooLargeError):
        log.append(make_sized_batch(0, 300) + make_sized_batch(0, 501))
    assert log.log_end_offset == 1
    log.append(make_sized_batch(1, 501), assign_offsets=False)  # followers take what leaders took


def test_leader_rejects_inconsistent_record_count(log: PartitionLog) -> None:
    batch = bytearray(make_batch(0, [b"a", b"b"]))
    batch[57:61] = (3).to_bytes(4, "big")  # recordCount is inside the CRC: fix it up
    import crc32c

    batch[17:21] = crc32c.crc32c(bytes(batch[21:])).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError, match="record count"):
        log.append(bytes(batch))


def test_empty_append_is_a_no_op(log: PartitionLog) -> None:
    log.append(make_batch(0))
    info = log.append(b"")
    assert info.record_count == 0 and info.batches == []
    assert info.first_offset == 1
    assert log.log_end_offset == 1


def test_leader_epoch_is_stamped_and_cached(log: PartitionLog) -> None:
    log.append(make_batch(0, [b"a"]), leader_epoch=3)
    log.append(make_batch(0, [b"b"]), leader_epoch=3)
    info = log.append(make_batch(0, [b"c"]), leader_epoch=5)
    assert info.batches[0][1].partition_leader_epoch == 5
    assert [h.partition_leader_epoch for h in stored_batches(log)] == [3, 3, 5]
    assert log.leader_epoch_cache.entries == [(3, 0), (5, 2)]
    # Without a leader epoch the producer's value (-1) is kept and the cache untouched.
    log.append(make_batch(0, [b"d"]))
    assert stored_batches(log)[-1].partition_leader_epoch == -1
    assert log.leader_epoch_cache.latest_epoch == 5


def test_log_append_time(tmp_path: Path, clock: Clock) -> None:
    log = PartitionLog.open(
        tmp_path / "t-0", config(message_timestamp_type="LogAppendTime"), time=clock
    )
    info = log.append(make_batch(0, [b"a", b"b"], timestamps=[5, 6]), leader_epoch=1)
    assert info.log_append_time == clock.ms
    assert info.max_timestamp == clock.ms
    info = log.append(make_batch(0, [b"c"]), append_time_ms=42)
    assert info.log_append_time == 42
    data = log.read(0, 1 << 20).tobytes()
    headers = []
    for position, _ in iter_batches(data):
        headers.append(validate_batch(data, position))  # CRC was recomputed
    assert [h.max_timestamp for h in headers] == [clock.ms, 42]
    assert all(h.attributes & TIMESTAMP_TYPE_BIT for h in headers)
    assert headers[0].partition_leader_epoch == 1
    assert log.offset_for_timestamp(clock.ms) == (0, clock.ms)


def test_follower_append_keeps_offsets(log: PartitionLog) -> None:
    log.append(make_batch(0, [b"a"] * 3, leader_epoch=2), assign_offsets=False)
    info = log.append(
        make_batch(3, [b"b"], leader_epoch=2) + make_batch(10, [b"c"], leader_epoch=4),
        assign_offsets=False,
    )
    assert (info.first_offset, info.last_offset) == (3, 10)
    assert log.log_end_offset == 11
    assert log.leader_epoch_cache.entries == [(2, 0), (4, 10)]
    with pytest.raises(ValueError, match="below the expected offset 11"):
        log.append(make_batch(10, [b"x"]), assign_offsets=False)
    with pytest.raises(ValueError):
        log.append(make_batch(20) + make_batch(15), assign_offsets=False)
    assert log.log_end_offset == 11
    assert log.read(5, 1 << 20).first_offset == 10  # gap: the next batch


def test_follower_append_into_new_log_at_offset(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", config())
    log.truncate_fully_and_start_at(100)
    log.append(make_batch(100, [b"a"] * 2), assign_offsets=False)
    assert log.log_end_offset == 102
    assert log.segments[0].base_offset == 100


# ==================================================================== rolling


def test_roll_by_size_and_recovery_point(log: PartitionLog) -> None:
    fill(log, 60)
    segments = log.segments
    assert len(segments) == 3  # 20 batches of 200 bytes fit in 4096
    assert [s.base_offset for s in segments] == [0, 20, 40]
    assert all(s.size <= 4096 for s in segments)
    assert [s.is_active for s in segments] == [False, False, True]
    for sealed in segments[:-1]:
        assert sealed.log_path.stat().st_size == sealed.size  # trimmed on roll
    assert log.recovery_point == 40  # everything before the active segment was fsynced


def test_a_roll_without_room_for_the_final_time_entry_changes_nothing(
        log: PartitionLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The first append added no index entry, so no index room was taken; the roll
    # takes the final entry's room before it creates the next segment.
    log.append(make_sized_batch(0, 3000))
    with monkeypatch.context() as patch:
        patch.setattr(os, "posix_fallocate", _refuse_for_a_full_disk)
        with pytest.raises(StorageError):
            log.append(make_sized_batch(0, 3000))
    assert log.log_end_offset == 1
    assert len(log.segments) == 1 and log.segments[0].is_active
    assert sorted(p.name for p in (tmp_path / "topic-0").glob("*.log")) == \
        ["00000000000000000000.log"]
    log.append(make_sized_batch(0, 3000))  # room again: the roll goes ahead
    sealed, active = log.segments
    assert (sealed.time_index.entries, active.base_offset, log.log_end_offset) == (1, 1, 2)


def _refuse_for_a_full_disk(fd: int, offset: int, length: int) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_roll_by_time(tmp_path: Path, clock: Clock) -> None:
    log = PartitionLog.open(tmp_path / "t-0", config(segment_ms=1000), time=clock)
    log.append(make_batch(0, timestamps=[BASE_TIMESTAMP]))
    log.append(make_batch(0, timestamps=[BASE_TIMESTAMP + 1000]))
    assert len(log.segments) == 1
    log.append(make_batch(0, timestamps=[BASE_TIMESTAMP + 1001]))
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_update_config_applies_to_next_roll(log: PartitionLog) -> None:
    fill(log, 5)
    log.update_config(config(segment_bytes=1000))
    fill(log, 5)
    assert len(log.segments) > 1
    assert log.config.segment_bytes == 1000


# ==================================================================== read


@pytest.fixture
def multi(log: PartitionLog) -> PartitionLog:
    """Batches of 3 records each (offsets 0-2, 3-5, ...) across several segments."""
    for i in range(40):
        log.append(make_batch(0, [bytes([i]) * 60] * 3))
    assert len(log.segments) >= 3
    return log


def batch_size(log: PartitionLog) -> int:
    return len(make_batch(0, [b"\0" * 60] * 3))


def test_read_offset_inside_batch_returns_that_batch(multi: PartitionLog) -> None:
    result = multi.read(4, batch_size(multi))
    assert result.first_offset == 3
    assert result.size == batch_size(multi)
    header = parse_header(result.views[0])
    assert header.base_offset == 3 and header.last_offset == 5


def test_read_whole_batches_within_max_bytes(multi: PartitionLog) -> None:
    size = batch_size(multi)
    result = multi.read(0, size * 3 + size // 2)
    assert result.size == size * 3
    assert result.next_offset == 9
    assert [h.base_offset for _, h in iter_batches(result.tobytes())] == [0, 3, 6]


def test_read_min_one_message(multi: PartitionLog) -> None:
    size = batch_size(multi)
    assert multi.read(0, 10).size == size
    assert multi.read(1, 10).next_offset == 3
    assert multi.read(0, 0).size == size
    empty = multi.read(0, 10, min_one_message=False)
    assert empty.size == 0 and empty.views == []


def test_read_stops_at_high_watermark(multi: PartitionLog) -> None:
    size = batch_size(multi)
    result = multi.read(0, 1 << 20, max_offset=9)
    assert result.size == 3 * size  # batches ending at 2, 5, 8
    assert result.next_offset == 9
    assert multi.read(0, 1 << 20, max_offset=10).next_offset == 9  # batch 9-11 straddles
    assert multi.read(0, 1 << 20, max_offset=8).size == 2 * size  # batch 6-8 not below HW
    assert multi.read(9, 1 << 20, max_offset=9).size == 0
    hw_in_later_segment = multi.log_end_offset - 3
    result = multi.read(0, 1 << 20, max_offset=hw_in_later_segment)
    assert len(result.views) == len(multi.segments)
    assert parse_header(result.views[-1][-size:]).next_offset == hw_in_later_segment


def test_read_spans_segments(multi: PartitionLog) -> None:
    result = multi.read(0, 1 << 20)
    assert len(result.views) == len(multi.segments)
    assert result.size == multi.size_in_bytes
    offsets = [h.base_offset for _, h in iter_batches(result.tobytes())]
    assert offsets == list(range(0, 120, 3))
    assert result.next_offset == multi.log_end_offset
    boundary = multi.segments[1].base_offset
    size = batch_size(multi)
    result = multi.read(boundary - 1, 2 * size)
    assert len(result.views) == 2
    assert result.first_offset == boundary - 3


def test_read_range_checks(multi: PartitionLog) -> None:
    leo = multi.log_end_offset
    at_end = multi.read(leo, 1000)
    assert isinstance(at_end, FetchSlice)
    assert at_end.size == 0 and at_end.first_offset == at_end.next_offset == leo
    with pytest.raises(OffsetOutOfRangeError):
        multi.read(leo + 1, 1000)
    with pytest.raises(OffsetOutOfRangeError):
        multi.read(-1, 1000)


def test_consumer_loop_with_next_offset(multi: PartitionLog) -> None:
    offset, chunks = 0, []
    while offset < multi.log_end_offset:
        result = multi.read(offset, 1000)
        chunks.append(result.tobytes())
        offset = result.next_offset
    assert b"".join(chunks) == multi.read(0, 1 << 30).tobytes()


def test_read_is_zero_copy(multi: PartitionLog) -> None:
    result = multi.read(0, 1 << 20)
    for view in result.views:
        assert isinstance(view, memoryview)
        assert isinstance(view.obj, mmap.mmap)
        assert view.readonly


def test_views_survive_truncation_roll_and_close(multi: PartitionLog) -> None:
    result = multi.read(0, 1 << 20)
    before = [bytes(v) for v in result.views]
    multi.append(make_batch(0))
    multi.close()
    assert [bytes(v) for v in result.views] == before
    with pytest.raises(StorageError):
        multi.read(0, 100)


def test_truncation_zero_fills_live_views(multi: PartitionLog) -> None:
    view = multi.read(multi.segments[-1].base_offset, 1 << 20).views[0]
    multi.truncate_to(multi.segments[-1].base_offset)
    assert bytes(view) == bytes(len(view))  # zeroed, still mapped: no SIGBUS


# ==================================================================== truncation


def test_truncate_to_inside_and_across_segments(multi: PartitionLog) -> None:
    segments_before = len(multi.segments)
    assert multi.truncate_to(100)
    assert multi.log_end_offset == 99  # batch 99-101 straddles 100: dropped whole
    assert multi.truncate_to(31)
    assert multi.log_end_offset == 30
    assert len(multi.segments) < segments_before
    assert multi.segments[-1].is_active
    assert multi.recovery_point <= 30
    assert not multi.truncate_to(30)
    info = multi.append(make_batch(0, [b"new"]))
    assert info.first_offset == 30
    assert multi.read(30, 1000).first_offset == 30


def test_truncate_to_segment_base_leaves_empty_active_segment(multi: PartitionLog) -> None:
    base = multi.segments[1].base_offset
    multi.truncate_to(base)
    assert multi.log_end_offset == base
    assert multi.segments[-1].base_offset == base
    assert multi.segments[-1].size == 0


def test_truncate_below_first_segment_truncates_fully(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", config())
    log.truncate_fully_and_start_at(50)
    fill(log, 5)
    log.truncate_to(10)
    assert log.log_start_offset == log.log_end_offset == 10


def test_truncate_fully_and_start_at(multi: PartitionLog, tmp_path: Path) -> None:
    multi.append(make_batch(0), leader_epoch=7)
    multi.truncate_fully_and_start_at(1000)
    assert multi.log_start_offset == multi.log_end_offset == 1000
    assert [s.base_offset for s in multi.segments] == [1000]
    assert sorted(p.name for p in multi.directory.glob("*.log")) == ["00000000000000001000.log"]
    assert multi.leader_epoch_cache.entries == []
    info = multi.append(make_batch(0))
    assert info.first_offset == 1000
    with pytest.raises(OffsetOutOfRangeError):
        multi.read(999, 100)


def test_truncation_keeps_epoch_cache_consistent(log: PartitionLog) -> None:
    fill(log, 10, leader_epoch=1)
    fill(log, 10, leader_epoch=2)
    fill(log, 10, leader_epoch=4)
    assert log.leader_epoch_cache.entries == [(1, 0), (2, 10), (4, 20)]
    log.truncate_to(15)
    assert log.leader_epoch_cache.entries == [(1, 0), (2, 10)]
    assert log.leader_epoch_cache.end_offset_for(2) == (2, 15)
    log.truncate_to(10)
    assert log.leader_epoch_cache.entries == [(1, 0)]


def test_truncate_then_reopen(multi: PartitionLog, tmp_path: Path) -> None:
    multi.truncate_to(50)
    expected = multi.read(0, 1 << 20).tobytes()
    multi.close()
    for clean in (True, False):
        reopened = PartitionLog.open(multi.directory, config(), clean_shutdown=clean)
        assert reopened.log_end_offset == 48
        assert reopened.read(0, 1 << 20).tobytes() == expected
        reopened.close()


# ==================================================================== retention


def test_time_retention_deletes_old_segments_but_never_the_active_one(
    tmp_path: Path, clock: Clock
) -> None:
    log = PartitionLog.open(tmp_path / "t-0", config(retention_ms=10_000), time=clock)
    for i in range(60):
        log.append(make_sized_batch(0, 200, timestamp=BASE_TIMESTAMP + i * 1000))
    assert len(log.segments) == 3
    assert log.enforce_retention(BASE_TIMESTAMP + 19_000 + 10_000) == 0  # not yet older
    assert log.enforce_retention(BASE_TIMESTAMP + 19_000 + 10_001) == 1
    assert log.log_start_offset == 20
    with pytest.raises(OffsetOutOfRangeError):
        log.read(19, 100)
    assert log.enforce_retention(BASE_TIMESTAMP + 10**9) == 1  # the active one stays
    assert [s.base_offset for s in log.segments] == [40]
    assert log.read(40, 1 << 20).size == 20 * 200


def test_retention_forever(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", config(retention_ms=-1))
    fill(log, 60)
    assert log.enforce_retention(BASE_TIMESTAMP + 10**12) == 0


def test_size_retention(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", config(retention_bytes=8000, retention_ms=-1))
    fill(log, 100)  # 5 segments of 4000 bytes
    assert log.enforce_retention() == 3
    assert log.size_in_bytes == 8000
    assert log.log_start_offset == 60


def test_retention_respects_high_watermark(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", config(retention_bytes=0, retention_ms=-1))
    fill(log, 100)
    assert log.enforce_retention(high_watermark=45) == 2  # segments [0,20) and [20,40)
    assert log.log_start_offset == 40


def test_compact_policy_skips_retention(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", config(retention_bytes=0, cleanup_policy="compact"))
    fill(log, 100)
    assert log.enforce_retention() == 0


def test_retention_truncates_epoch_cache_from_start(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", config(retention_bytes=4000, retention_ms=-1))
    fill(log, 30, leader_epoch=1)
    fill(log, 30, leader_epoch=2)
    log.enforce_retention()
    assert log.log_start_offset == 40
    assert log.leader_epoch_cache.entries == [(2, 40)]


def test_maybe_increment_log_start_offset(log: PartitionLog) -> None:
    fill(log, 60)
    assert log.maybe_increment_log_start_offset(25)
    assert log.log_start_offset == 25
    assert [s.base_offset for s in log.segments] == [20, 40]  # [0,20) is now wholly below
    assert not log.maybe_increment_log_start_offset(10)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(24, 100)
    assert log.read(25, 100).first_offset == 25
    with pytest.raises(OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(61)


# ==================================================================== timestamps


def test_offset_for_timestamp_across_segments(log: PartitionLog) -> None:
    for i in range(60):
        log.append(make_batch(0, [b"a" * 150], timestamps=[1000 + 10 * i]))
    assert len(log.segments) > 1
    assert log.offset_for_timestamp(0) == (0, 1000)
    assert log.offset_for_timestamp(1000) == (0, 1000)
    assert log.offset_for_timestamp(1001) == (1, 1010)
    assert log.offset_for_timestamp(1555) == (56, 1560)
    assert log.offset_for_timestamp(1590) == (59, 1590)
    assert log.offset_for_timestamp(1591) is None
    assert log.max_timestamp_and_offset() == (1590, 59)


def test_offset_for_timestamp_within_batch(log: PartitionLog) -> None:
    log.append(make_batch(0, [b"a", b"b", b"c", b"d"], timestamps=[100, 300, 200, 400]))
    assert log.offset_for_timestamp(150) == (1, 300)
    assert log.offset_for_timestamp(350) == (3, 400)


def test_max_timestamp_is_the_record_that_has_it_not_its_batch_end(log: PartitionLog) -> None:
    """As Kafka since 3.8 (KAFKA-16310), which librdkafka's admin test checks: the
    offset of the first record with the largest timestamp, inside its batch."""
    log.append(make_batch(0, [b"a", b"b", b"c"], timestamps=[100, 400, 250]))
    log.append(make_batch(0, [b"d", b"e"], timestamps=[300, 350]))
    assert log.max_timestamp_and_offset() == (400, 1)
    log.append(make_batch(0, [b"f", b"g", b"h"], timestamps=[500, 700, 700]))
    assert log.max_timestamp_and_offset() == (700, 6)


def test_max_timestamp_of_empty_log(log: PartitionLog) -> None:
    assert log.max_timestamp_and_offset() == (-1, -1)
    assert log.offset_for_timestamp(0) is None


# ==================================================================== flushing


def test_flush_advances_recovery_point(log: PartitionLog) -> None:
    fill(log, 5)
    assert log.recovery_point == 0
    log.flush()
    assert log.recovery_point == 5


def test_flush_messages(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", config(flush_messages=3))
    fill(log, 2)
    assert log.recovery_point == 0
    fill(log, 1)
    assert log.recovery_point == 3


def test_flush_ms(tmp_path: Path, clock: Clock) -> None:
    log = PartitionLog.open(tmp_path / "t-0", config(flush_ms=1000), time=clock)
    fill(log, 2)
    assert log.recovery_point == 0
    assert not log.maybe_flush()
    clock.ms += 1000
    assert log.maybe_flush()
    assert log.recovery_point == 2


def test_close_trims_and_reopen_is_clean(multi: PartitionLog) -> None:
    expected = multi.read(0, 1 << 20).tobytes()
    active = multi.segments[-1]
    multi.close()
    assert active.log_path.stat().st_size == active.size
    multi.close()  # idempotent
    reopened = PartitionLog.open(multi.directory, config(), clean_shutdown=True)
    assert reopened.read(0, 1 << 20).tobytes() == expected
    assert reopened.recovery_point == reopened.log_end_offset


def test_delete_removes_directory(multi: PartitionLog) -> None:
    view = multi.read(0, 100).views[0]
    snapshot = bytes(view)
    multi.delete()
    assert not multi.directory.exists()
    assert bytes(view) == snapshot


# ==================================================================== leader-epoch cache


def epoch_cache(tmp_path: Path, leo: int = 100) -> LeaderEpochCache:
    return LeaderEpochCache(tmp_path / LEADER_EPOCH_CHECKPOINT, log_end_offset=lambda: leo)


def test_epoch_cache_assign_and_latest(tmp_path: Path) -> None:
    cache = epoch_cache(tmp_path)
    assert cache.latest_epoch == -1
    assert cache.assign(1, 0)
    assert not cache.assign(1, 5)  # same epoch, later offset: nothing to do
    assert cache.assign(3, 10)
    assert cache.latest_epoch == 3
    assert cache.entries == [(1, 0), (3, 10)]
    assert cache.epoch_for_offset(9) == 1
    assert cache.epoch_for_offset(10) == 3


def test_epoch_cache_assign_drops_non_monotonic_entries(tmp_path: Path) -> None:
    cache = epoch_cache(tmp_path)
    cache.assign(1, 0)
    cache.assign(3, 10)
    cache.assign(4, 20)
    cache.assign(2, 15)  # lower epoch: epochs >= 2 go
    assert cache.entries == [(1, 0), (2, 15)]
    cache.assign(5, 15)  # same start offset: replaces
    assert cache.entries == [(1, 0), (5, 15)]
    with pytest.raises(ValueError):
        cache.assign(-1, 3)


def test_end_offset_for(tmp_path: Path) -> None:
    cache = epoch_cache(tmp_path, leo=100)
    assert cache.end_offset_for(0) == (-1, -1)
    cache.assign(2, 10)
    cache.assign(4, 30)
    cache.assign(7, 60)
    assert cache.end_offset_for(7) == (7, 100)  # latest: the LEO
    assert cache.end_offset_for(7, log_end_offset=80) == (7, 80)
    assert cache.end_offset_for(4) == (4, 60)
    assert cache.end_offset_for(5) == (4, 60)  # largest epoch <= 5, next one's start
    assert cache.end_offset_for(2) == (2, 30)
    assert cache.end_offset_for(1) == (1, 10)  # before everything: first start offset
    assert cache.end_offset_for(8) == (-1, -1)
    assert cache.end_offset_for(-1) == (-1, -1)


def test_epoch_cache_truncation(tmp_path: Path) -> None:
    cache = epoch_cache(tmp_path)
    for epoch, start in [(1, 0), (2, 10), (3, 20), (5, 30)]:
        cache.assign(epoch, start)
    cache.truncate_from_end(20)
    assert cache.entries == [(1, 0), (2, 10)]
    cache.truncate_from_start(15)
    assert cache.entries == [(2, 15)]
    cache.truncate_from_start(10)  # already past it
    assert cache.entries == [(2, 15)]
    cache.truncate_from_end(0)
    assert cache.entries == []


def test_epoch_cache_persistence_format(tmp_path: Path) -> None:
    cache = epoch_cache(tmp_path)
    cache.assign(1, 0)
    cache.assign(4, 25)
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    assert path.read_text() == "0\n2\n1 0\n4 25\n"
    assert path.stat().st_mode & 0o777 == 0o600
    loaded = LeaderEpochCache.load(path)
    assert loaded.entries == [(1, 0), (4, 25)]
    cache.truncate_from_end(25)
    assert LeaderEpochCache.load(path).entries == [(1, 0)]
    assert LeaderEpochCache.load(tmp_path / "missing").entries == []


@pytest.mark.parametrize(
    "text", ["1\n0\n", "0\n2\n1 0\n", "0\n1\nx y\n", "0\n2\n3 10\n2 20\n", "0\n1\n1 2 3\n"]
)
def test_epoch_cache_rejects_malformed_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    path.write_text(text)
    with pytest.raises(StorageError):
        LeaderEpochCache.load(path)


def test_epoch_cache_survives_reopen_and_is_rebuilt_when_lost(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", config())
    fill(log, 25, leader_epoch=1)
    fill(log, 25, leader_epoch=3)
    log.close()
    reopened = PartitionLog.open(tmp_path / "t-0", config(), clean_shutdown=True)
    assert reopened.leader_epoch_cache.entries == [(1, 0), (3, 25)]
    reopened.close()
    checkpoint = tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT
    checkpoint.unlink()
    rebuilt = PartitionLog.open(tmp_path / "t-0", config(), clean_shutdown=True)
    assert rebuilt.leader_epoch_cache.entries == [(1, 0), (3, 25)]
    assert checkpoint.exists()
    rebuilt.close()
    checkpoint.write_text("garbage")
    rebuilt = PartitionLog.open(tmp_path / "t-0", config(), clean_shutdown=True)
    assert rebuilt.leader_epoch_cache.entries == [(1, 0), (3, 25)]
    assert rebuilt.leader_epoch_cache.end_offset_for(1) == (1, 25)
    assert rebuilt.leader_epoch_cache.end_offset_for(3) == (3, 50)


# ==================================================================== DeleteRecords


def test_delete_records_moves_the_start_and_deletes_whole_segments_below(
        tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", config(retention_ms=-1))
    log.assign_leader_epoch(0, 0)
    fill(log, 30, leader_epoch=0)
    log.assign_leader_epoch(1, 30)
    fill(log, 30, leader_epoch=1)  # 20 records a segment
    log.flush()
    assert [s.base_offset for s in log.segments] == [0, 20, 40]
    assert log.maybe_increment_log_start_offset(25)
    assert [s.base_offset for s in log.segments] == [20, 40]  # [20,40) holds 25
    with pytest.raises(OffsetOutOfRangeError):
        log.read(24, 100)
    assert log.read(25, 200).size == 200
    assert not log.maybe_increment_log_start_offset(10)  # never backwards
    with pytest.raises(OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(61)  # past the end
    assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == \
        [(0, 25), (1, 30)]
    # A crash before the epoch file is rewritten: reopening at the checkpointed log
    # start gives the same epochs (the file's older entries are cut on load).
    reopened = PartitionLog.open(tmp_path / "t-0", config(retention_ms=-1),
                                 recovery_point=0, clean_shutdown=False, log_start_offset=25)
    assert reopened.log_start_offset == 25
    assert [(e.epoch, e.start_offset) for e in reopened.leader_epoch_cache.entries] == \
        [(0, 25), (1, 30)]
    reopened.close()
