"""Log compaction: the latest record per key survives, at its original offset, in valid batches."""

from __future__ import annotations

from pathlib import Path

import pytest

from slog.core import compression as codecs
from slog.core.batch import iter_batches
from slog.core.cleaner import LogCleaner, rebuild_batch
from slog.core.log import PartitionLog
from slog.core.log_config import LogConfig
from slog.core.records import BatchBuilder, Record, decode_records, iter_decoded_batches

NOW_MS = 1_700_000_000_000


def compacted_log(path: Path, **overrides: object) -> PartitionLog:
    config = LogConfig(segment_bytes=600, preallocate=False, cleanup_policy="compact",
                       **overrides)  # type: ignore[arg-type]
    return PartitionLog.open(path, config, time=lambda: NOW_MS / 1000)


def append(log: PartitionLog, records: list[tuple[bytes | None, bytes | None]],
           compression: int = codecs.NONE, timestamp: int = NOW_MS) -> None:
    builder = BatchBuilder(compression=compression)
    for key, value in records:
        builder.append(key, value, (("h", b"1"),), timestamp)
    log.append(builder.build())


def everything(log: PartitionLog) -> list[Record]:
    data = log.read(log.log_start_offset, 1 << 30).tobytes()
    list(iter_batches(data))  # every batch valid: length, magic, CRC
    return [r for _, _, records in iter_decoded_batches(data, allow_partial_tail=False)
            for r in records]


def test_latest_value_per_key_survives_at_its_offset(tmp_path: Path) -> None:
    log = compacted_log(tmp_path / "t-0")
    for round_ in range(20):
        append(log, [(b"k%d" % (i % 4), b"v%d-%d" % (round_, i)) for i in range(3)])
    before = {r.offset: r for r in everything(log)}
    assert len(log.segments) > 3
    assert LogCleaner().clean(log, force=True) > 0
    after = everything(log)
    offsets = [r.offset for r in after]
    assert offsets == sorted(offsets)
    for record in after:  # unchanged, and where it was
        assert before[record.offset] == record
    closed_end = log.segments[-1].base_offset
    cleaned_keys = [r.key for r in after if r.offset < closed_end]
    latest = {}
    for r in before.values():
        latest[r.key] = r.offset
    for record in after:  # superseded records are gone from the cleaned part
        if record.offset < closed_end:
            assert cleaned_keys.count(record.key) == 1
            later = [r for r in after if r.key == record.key and r.offset > record.offset]
            assert later or latest[record.key] == record.offset
    assert log.log_end_offset == 60 and log.log_start_offset == 0


def test_cleaned_log_reopens_after_a_crash(tmp_path: Path) -> None:
    log = compacted_log(tmp_path / "t-0")
    for round_ in range(10):
        append(log, [(b"a", b"%d" % round_), (b"b", b"%d" % round_)])
    LogCleaner().clean(log, force=True)
    kept = everything(log)
    log.close()
    reopened = PartitionLog.open(tmp_path / "t-0", log.config, clean_shutdown=False)
    assert everything(reopened) == kept
    reopened.close()


def test_tombstones_remain_until_delete_retention(tmp_path: Path) -> None:
    log = compacted_log(tmp_path / "t-0", delete_retention_ms=60_000)
    append(log, [(b"gone", b"1"), (b"kept", b"1")], timestamp=NOW_MS - 120_000)
    append(log, [(b"gone", None)], timestamp=NOW_MS - 30_000)  # a recent tombstone
    append(log, [(b"old", b"1")], timestamp=NOW_MS - 120_000)
    append(log, [(b"old", None)], timestamp=NOW_MS - 90_000)  # an old tombstone
    for i in range(12):
        append(log, [(b"filler%d" % i, b"x" * 40)])
    LogCleaner(time=lambda: NOW_MS / 1000).clean(log, force=True)
    keys = [(r.key, r.value) for r in everything(log)]
    assert (b"gone", None) in keys and (b"gone", b"1") not in keys
    assert all(k != b"old" for k, _ in keys)
    assert (b"kept", b"1") in keys


def test_compressed_batches_stay_compressed_and_valid(tmp_path: Path) -> None:
    log = compacted_log(tmp_path / "t-0")
    for round_ in range(8):
        append(log, [(b"k1", b"a%d" % round_), (b"k2", b"b%d" % round_)],
               compression=codecs.ZSTD)
    LogCleaner().clean(log, force=True)
    data = log.read(0, 1 << 30).tobytes()
    headers = [h for _, h in iter_batches(data)]
    assert all(h.compression == codecs.ZSTD for h in headers)
    assert {r.key for r in everything(log)} == {b"k1", b"k2"}


def test_keyless_records_are_kept(tmp_path: Path) -> None:
    log = compacted_log(tmp_path / "t-0")
    for round_ in range(10):
        append(log, [(None, b"n%d" % round_), (b"k", b"%d" % round_)])
    LogCleaner().clean(log, force=True)
    values = [r.value for r in everything(log) if r.key is None]
    assert values == [b"n%d" % i for i in range(10)]


def test_rebuilt_batch_keeps_offsets_and_producer_fields() -> None:
    builder = BatchBuilder(producer_id=7, producer_epoch=2, base_sequence=40)
    for i in range(5):
        builder.append(b"k%d" % i, b"v", (), NOW_MS + i)
    original, records = decode_records(builder.build(base_offset=100))
    rebuilt, kept = decode_records(rebuild_batch(original, [records[1], records[3]]))
    assert [r.offset for r in kept] == [101, 103]
    assert (rebuilt.base_offset, rebuilt.last_offset_delta, rebuilt.record_count) == (100, 4, 2)
    assert (rebuilt.producer_id, rebuilt.producer_epoch, rebuilt.base_sequence) == (7, 2, 40)
    assert rebuilt.max_timestamp == NOW_MS + 3


def test_only_compacted_logs_and_only_when_dirty(tmp_path: Path) -> None:
    compacted = compacted_log(tmp_path / "c-0")
    plain = PartitionLog.open(tmp_path / "p-0", LogConfig(segment_bytes=600, preallocate=False))
    for log in (compacted, plain):
        for _ in range(10):
            append(log, [(b"same", b"x" * 30)])
    cleaner = LogCleaner(backoff_ms=0)
    logs = {("c", 0): compacted, ("p", 0): plain}
    assert cleaner.maybe_clean(logs, {}) > 0
    assert len(everything(plain)) == 10
    assert cleaner.maybe_clean(logs, {}) == 0  # nothing new since: not dirty
    disabled = LogCleaner(backoff_ms=0, enabled=False)
    assert disabled.maybe_clean(logs, {}) == 0


@pytest.mark.parametrize("high_watermark", [0, 5])
def test_nothing_above_the_high_watermark_is_cleaned(tmp_path: Path, high_watermark: int
                                                     ) -> None:
    log = compacted_log(tmp_path / "t-0")
    for _ in range(10):
        append(log, [(b"same", b"x" * 30)])
    LogCleaner().clean(log, high_watermark, force=True)
    offsets = [r.offset for r in everything(log)]
    assert [o for o in offsets if o >= high_watermark] == list(range(high_watermark, 10))
