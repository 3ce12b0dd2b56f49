"""Frame-level batch checks, against batches built by kafka-python (an independent codec)."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from slog.core import batch
from slog.core.errors import CorruptRecordError


def kafka_python_batch(values: list[bytes], *, base_ts: int = 1_700_000_000_000) -> bytearray:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=7,
        producer_epoch=1,
        base_sequence=5,
        batch_size=1 << 30,
    )
    for i, value in enumerate(values):
        builder.append(i, timestamp=base_ts + i, key=None, value=value, headers=[])
    return builder.build()


def test_header_fields_match_kafka_python() -> None:
    raw = kafka_python_batch([b"a", b"bb", b"ccc"])
    header = batch.validate_batch(raw)
    assert header.magic == 2
    assert header.record_count == 3
    assert header.last_offset_delta == 2
    assert header.size == len(raw)
    assert header.producer_id == 7 and header.producer_epoch == 1
    assert header.base_sequence == 5 and header.last_sequence == 7
    assert header.max_timestamp == 1_700_000_000_002


def test_offset_and_epoch_rewrite_keep_crc_valid() -> None:
    raw = kafka_python_batch([b"x"] * 4)
    batch.set_base_offset(raw, 0, 1234)
    batch.set_partition_leader_epoch(raw, 0, 9)
    header = batch.validate_batch(raw)
    assert header.base_offset == 1234
    assert header.next_offset == 1238
    assert header.partition_leader_epoch == 9


def test_iter_batches_walks_consecutive_batches() -> None:
    first, second = kafka_python_batch([b"1"]), kafka_python_batch([b"2", b"3"])
    buf = first + second
    positions = [pos for pos, _ in batch.iter_batches(buf)]
    assert positions == [0, len(first)]


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda b: b.__setitem__(16, 1), "magic"),
        (lambda b: b.__setitem__(len(b) - 1, b[-1] ^ 0xFF), "CRC"),
        (lambda b: b.__setitem__(slice(8, 12), (10).to_bytes(4, "big")), "minimum"),
        (lambda b: b.__setitem__(slice(8, 12), (10_000).to_bytes(4, "big")), "past the end"),
    ],
)
def test_corruption_names_the_reason(mutate, reason: str) -> None:
    raw = kafka_python_batch([b"payload"])
    mutate(raw)
    with pytest.raises(CorruptRecordError, match=reason) as info:
        batch.validate_batch(raw)
    assert info.value.position == 0


def test_truncated_tail_is_reported_with_position() -> None:
    good = kafka_python_batch([b"ok"])
    buf = good + kafka_python_batch([b"torn"])[:30]
    with pytest.raises(CorruptRecordError) as info:
        list(batch.iter_batches(buf))
    assert info.value.position == len(good)


@given(st.binary(max_size=200))
def test_random_bytes_only_raise_corrupt_record(data: bytes) -> None:
    with contextlib.suppress(CorruptRecordError):
        list(batch.iter_batches(data))
