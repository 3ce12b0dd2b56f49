"""Cross-implementation checks against kafka-python's v2 record code, both directions.

kafka-python's codecs need the ``python-snappy``, ``lz4`` and ``zstandard``
modules; a codec whose module is missing is skipped with the reason shown.
"""

from __future__ import annotations

import pytest
from kafka import codec as kafka_codec
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from slog.core import compression
from slog.core.batch import HEADER_SIZE, compute_crc, validate_batch
from slog.core.records import (
    LOG_APPEND_TIME,
    BatchBuilder,
    Record,
    build_batch,
    decode_records,
    iter_records,
)

TS = 1_700_000_000_000

_AVAILABLE = {
    compression.NONE: True,
    compression.GZIP: kafka_codec.has_gzip(),
    compression.SNAPPY: kafka_codec.has_snappy(),
    compression.LZ4: kafka_codec.has_lz4(),
    compression.ZSTD: kafka_codec.has_zstd(),
}
_MODULE = {
    compression.SNAPPY: "python-snappy",
    compression.LZ4: "lz4",
    compression.ZSTD: "zstandard",
}

CODECS = [
    pytest.param(
        codec,
        id=compression.codec_name(codec),
        marks=pytest.mark.skipif(
            not _AVAILABLE[codec],
            reason=f"kafka-python needs the {_MODULE.get(codec)} package for this codec",
        ),
    )
    for codec in compression.CODEC_NAMES
]

# Compressible values, so kafka-python does not fall back to an uncompressed batch.
ITEMS = [(None, b"value %d " % i * 8, (), TS + i) for i in range(50)] + [
    (b"key", None, (), TS - 3),
    (b"", b"", (("h1", b"v1"), ("null", None), ("ünï-ключ", b"\x00\x01")), TS + 1000),
    (b"k" * 300, b"v" * 40_000, (("big", b"B" * 5000),), TS + 5),
    (None, None, (("only", b""),), TS),
]


def kafka_python_view(batch: bytes) -> list[tuple]:
    """Read one batch with kafka-python; check its CRC on the way."""
    kbatch = DefaultRecordBatch(bytearray(batch))
    assert kbatch.validate_crc()
    return [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in kbatch]


def as_tuples(records: list[Record]) -> list[tuple]:
    return [tuple(r) for r in records]


def expected(base_offset: int, items: list[tuple]) -> list[tuple]:
    return [
        (base_offset + i, ts, key, value, tuple(headers))
        for i, (key, value, headers, ts) in enumerate(items)
    ]


# ------------------------------------------------------------------ slog -> kafka-python


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_reads_slog_batches(codec: int) -> None:
    batch = build_batch(
        ITEMS,
        base_offset=1234,
        compression=codec,
        producer_id=4000,
        producer_epoch=7,
        base_sequence=99,
        is_transactional=True,
        partition_leader_epoch=3,
    )
    kbatch = DefaultRecordBatch(bytearray(batch))
    assert kbatch.compression_type == codec
    assert kbatch.base_offset == 1234
    assert kbatch.last_offset_delta == len(ITEMS) - 1
    assert kbatch.leader_epoch == 3
    assert (kbatch.producer_id, kbatch.producer_epoch, kbatch.base_sequence) == (4000, 7, 99)
    assert kbatch.is_transactional and not kbatch.is_control_batch
    assert kbatch.first_timestamp == TS
    assert kbatch.max_timestamp == TS + 1000
    assert kafka_python_view(batch) == expected(1234, ITEMS)


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_reads_slog_log_append_time(codec: int) -> None:
    builder = BatchBuilder(compression=codec, timestamp_type=LOG_APPEND_TIME)
    for i in range(20):
        builder.append(b"k%d" % i, b"payload " * 20, timestamp=TS + i * 3)
    kbatch = DefaultRecordBatch(bytearray(builder.build()))
    assert kbatch.timestamp_type == 1
    assert {r.timestamp for r in kbatch} == {TS + 57}


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_reads_consecutive_slog_batches(codec: int) -> None:
    data = b"".join(
        build_batch(ITEMS[i : i + 10], base_offset=i, compression=codec)
        for i in range(0, len(ITEMS), 10)
    )
    memory = MemoryRecords(data)
    seen = []
    while memory.has_next():
        kbatch = memory.next_batch()
        assert kbatch.validate_crc()
        seen.extend((r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in kbatch)
    assert seen == expected(0, ITEMS)


# ------------------------------------------------------------------ kafka-python -> slog


def kafka_python_batch(codec: int, items: list[tuple], **producer: int) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=producer.get("is_transactional", False),
        producer_id=producer.get("producer_id", -1),
        producer_epoch=producer.get("producer_epoch", -1),
        base_sequence=producer.get("base_sequence", -1),
        batch_size=10 * 1024 * 1024,
    )
    for offset, (key, value, headers, ts) in enumerate(items):
        assert builder.append(offset, ts, key, value, list(headers)) is not None
    return bytes(builder.build())


@pytest.mark.parametrize("codec", CODECS)
def test_slog_reads_kafka_python_batches(codec: int) -> None:
    batch = kafka_python_batch(
        codec, ITEMS, producer_id=55, producer_epoch=1, base_sequence=0, is_transactional=True
    )
    header, got = decode_records(batch)
    assert header.compression == codec, "kafka-python fell back to no compression"
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (55, 1, 0)
    assert header.is_transactional
    assert header.record_count == len(ITEMS)
    assert as_tuples(got) == expected(0, ITEMS)


@pytest.mark.parametrize("codec", CODECS)
def test_slog_reads_kafka_python_memory_records_with_gaps(codec: int) -> None:
    # Skipped offsets stand for a compacted batch: deltas are not the record index.
    builder = MemoryRecordsBuilder(magic=2, compression_type=codec, batch_size=1 << 20, offset=0)
    want = []
    for i in range(30):
        if i % 4 == 0:
            builder.skip(2)
        value = b"memory records value %d" % i * 4
        metadata = builder.append(TS + i, b"key-%d" % i, value, [("i", b"%d" % i)])
        want.append((metadata.offset, TS + i, b"key-%d" % i, value, (("i", b"%d" % i),)))
    builder.close()
    data = bytes(builder.buffer())
    assert as_tuples(list(iter_records(data))) == want
    assert validate_batch(data).compression == codec


# ------------------------------------------------------------------ snappy framings


def _with_section(batch: bytes, section: bytes) -> bytes:
    """Swap the records section of a snappy batch and fix length and CRC."""
    out = bytearray(batch[:HEADER_SIZE]) + section
    out[8:12] = (len(out) - 12).to_bytes(4, "big")
    out[17:21] = compute_crc(out, 0, len(out)).to_bytes(4, "big")
    return bytes(out)


@pytest.mark.skipif(not kafka_codec.has_snappy(), reason="kafka-python needs python-snappy")
def test_raw_snappy_batches_read_by_both() -> None:
    # librdkafka's framing: the records section is one raw snappy buffer.
    plain = build_batch(ITEMS, base_offset=10)
    snappy_batch = build_batch(ITEMS, base_offset=10, compression=compression.SNAPPY)
    raw = kafka_codec.snappy_encode(plain[HEADER_SIZE:], xerial_compatible=False)
    assert not raw.startswith(b"\x82SNAPPY")
    batch = _with_section(snappy_batch, raw)
    assert as_tuples(decode_records(batch)[1]) == expected(10, ITEMS)
    assert kafka_python_view(batch) == expected(10, ITEMS)


@pytest.mark.skipif(not kafka_codec.has_snappy(), reason="kafka-python needs python-snappy")
def test_slog_reads_small_block_xerial_from_kafka_python() -> None:
    plain = build_batch(ITEMS, base_offset=0)
    snappy_batch = build_batch(ITEMS, base_offset=0, compression=compression.SNAPPY)
    xerial = kafka_codec.snappy_encode(plain[HEADER_SIZE:], xerial_blocksize=1000)
    assert xerial.startswith(b"\x82SNAPPY\x00")
    batch = _with_section(snappy_batch, xerial)
    assert as_tuples(decode_records(batch)[1]) == expected(0, ITEMS)


@pytest.mark.skipif(not kafka_codec.has_snappy(), reason="kafka-python needs python-snappy")
def test_slog_snappy_section_is_what_kafka_python_decodes() -> None:
    plain = build_batch(ITEMS)
    packed = build_batch(ITEMS, compression=compression.SNAPPY)
    assert kafka_codec.snappy_decode(packed[HEADER_SIZE:]) == plain[HEADER_SIZE:]
