"""Record-level RecordBatch v2 codec: layout, round trips, iteration and corruption."""

from __future__ import annotations

import contextlib
import struct
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slog.core import compression, records
from slog.core.batch import (
    HEADER_SIZE,
    compute_crc,
    parse_header,
    set_base_offset,
    validate_batch,
)
from slog.core.errors import CorruptRecordError
from slog.core.records import (
    LOG_APPEND_TIME,
    BatchBuilder,
    Record,
    build_batch,
    decode_records,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    iter_decoded_batches,
    iter_records,
)

ALL_CODECS = list(compression.CODEC_NAMES)
COMPRESSING = ALL_CODECS[1:]
HEADER = struct.Struct(">qiibIhiqqqhii")
TS = 1_700_000_000_000


def make_batch(
    section: bytes,
    record_count: int,
    *,
    codec: int = 0,
    attributes: int | None = None,
    base_offset: int = 0,
    base_timestamp: int = TS,
    max_timestamp: int = TS,
) -> bytes:
    """A batch around a hand-made records section, with a correct CRC."""
    attrs = codec if attributes is None else attributes
    out = bytearray(HEADER_SIZE) + (compression.compress(codec, section) if codec else section)
    HEADER.pack_into(
        out, 0, base_offset, len(out) - 12, -1, 2, 0, attrs,
        max(record_count - 1, 0), base_timestamp, max_timestamp, -1, -1, -1, record_count,
    )  # fmt: skip
    struct.pack_into(">I", out, 17, compute_crc(out, 0, len(out)))
    return bytes(out)


def fix_crc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, 17, compute_crc(batch, 0, len(batch)))
    return bytes(batch)


def expected(base_offset: int, items: list[tuple], log_append_time: int | None = None) -> list:
    return [
        Record(
            base_offset + i,
            log_append_time if log_append_time is not None else ts,
            None if key is None else bytes(key),
            None if value is None else bytes(value),
            tuple((k, None if v is None else bytes(v)) for k, v in headers),
        )
        for i, (key, value, headers, ts) in enumerate(items)
    ]


# ------------------------------------------------------------------ varints

VARINT_VECTORS = [
    (0, b"\x00"),
    (-1, b"\x01"),
    (1, b"\x02"),
    (-2, b"\x03"),
    (63, b"\x7e"),
    (-64, b"\x7f"),
    (64, b"\x80\x01"),
    (-65, b"\x81\x01"),
    (8191, b"\xfe\x7f"),
    (8192, b"\x80\x80\x01"),
    (2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
    (-(2**31), b"\xff\xff\xff\xff\x0f"),
]


@pytest.mark.parametrize(("value", "encoded"), VARINT_VECTORS)
def test_varint_vectors(value: int, encoded: bytes) -> None:
    assert encode_varint(value) == encoded
    assert decode_varint(encoded) == (value, len(encoded))
    assert decode_varint(b"\xaa" + encoded + b"\xbb", 1) == (value, 1 + len(encoded))


def test_varlong_extremes() -> None:
    assert encode_varlong(2**63 - 1) == b"\xfe" + b"\xff" * 8 + b"\x01"
    assert encode_varlong(-(2**63)) == b"\xff" * 9 + b"\x01"
    assert decode_varlong(encode_varlong(-(2**63))) == (-(2**63), 10)


def test_varint_range_checks() -> None:
    for bad in (2**31, -(2**31) - 1):
        with pytest.raises(ValueError, match="int32"):
            encode_varint(bad)
    for bad in (2**63, -(2**63) - 1):
        with pytest.raises(ValueError, match="int64"):
            encode_varlong(bad)


@pytest.mark.parametrize(
    ("data", "reader", "reason"),
    [
        (b"\x80\x80\x80\x80\x80\x01", decode_varint, "longer than 5"),
        (b"\xff\xff\xff\xff\x1f", decode_varint, "overflows 32"),
        (b"\x80" * 10 + b"\x01", decode_varlong, "longer than 10"),
        (b"\xff" * 9 + b"\x03", decode_varlong, "overflows 64"),
        (b"\x80\x80", decode_varint, "truncated"),
        (b"", decode_varlong, "truncated"),
    ],
)
def test_malformed_varints(data: bytes, reader, reason: str) -> None:
    with pytest.raises(CorruptRecordError, match=reason):
        reader(data)


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip(value: int) -> None:
    encoded = encode_varint(value)
    assert len(encoded) <= 5
    assert decode_varint(encoded) == (value, len(encoded))
    assert decode_varlong(encoded) == (value, len(encoded))


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(value: int) -> None:
    encoded = encode_varlong(value)
    assert len(encoded) <= 10
    assert decode_varlong(encoded) == (value, len(encoded))


def test_encoding_tables_match_the_general_encoder() -> None:
    for n, enc in enumerate(records._ENC):
        assert enc == encode_varint(n)
        assert records._OD_NULL_KEY[n] == enc + encode_varint(-1)
    for n, enc in records._ATTR_TS.items():
        assert enc == b"\x00" + encode_varlong(n)
    for b in range(256):
        if b < 0x80:
            assert records._DEC1[b] == decode_varint(bytes([b]))[0]
        else:
            assert records._DEC1[b] is None


# ------------------------------------------------------------------ layout


def test_exact_record_and_header_layout() -> None:
    builder = BatchBuilder(
        producer_id=77,
        producer_epoch=3,
        base_sequence=10,
        is_transactional=True,
        partition_leader_epoch=5,
    )
    builder.append(b"k", b"vv", [("h", b"1")], timestamp=TS)
    builder.append(None, None, timestamp=TS + 300)
    builder.append(b"", b"", timestamp=TS - 1)
    batch = builder.build(base_offset=42)

    record1 = b"\x00\x00\x00" + b"\x02k" + b"\x04vv" + b"\x02" + b"\x02h" + b"\x021"
    record2 = b"\x00" + b"\xd8\x04" + b"\x02" + b"\x01" + b"\x01" + b"\x00"
    record3 = b"\x00" + b"\x01" + b"\x04" + b"\x00" + b"\x00" + b"\x00"
    section = b"".join(bytes([len(r) * 2]) + r for r in (record1, record2, record3))
    assert batch[HEADER_SIZE:] == section

    fields = HEADER.unpack_from(batch)
    crc = compute_crc(batch, 0, len(batch))
    assert fields == (
        42,  # baseOffset
        len(batch) - 12,  # batchLength
        5,  # partitionLeaderEpoch
        2,  # magic
        crc,
        0x10,  # attributes: transactional, CreateTime, no compression
        2,  # lastOffsetDelta
        TS,  # baseTimestamp: the first record's
        TS + 300,  # maxTimestamp
        77,
        3,
        10,
        3,  # recordCount
    )
    header = validate_batch(batch)
    assert header.is_transactional and not header.is_control and header.last_sequence == 12


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_attributes_flags(codec: int) -> None:
    builder = BatchBuilder(compression=codec, timestamp_type=LOG_APPEND_TIME, is_control=True)
    builder.append(None, b"x" * 200, timestamp=TS)
    header = validate_batch(builder.build())
    assert header.compression == codec
    assert header.is_log_append_time and header.is_control and not header.is_transactional


def test_builder_argument_checks() -> None:
    with pytest.raises(ValueError, match="codec"):
        BatchBuilder(compression=5)
    with pytest.raises(ValueError, match="timestamp_type"):
        BatchBuilder(timestamp_type=2)
    with pytest.raises(ValueError, match="no records"):
        BatchBuilder().build()


# ------------------------------------------------------------------ round trips

SAMPLE = [
    (None, b"value-0", (), TS),
    (b"key-1", None, (), TS + 5),  # tombstone
    (None, None, (), TS + 1),
    (b"", b"", (), TS + 2),  # empty, not null
    (b"k", b"v", (("trace", b"abc"), ("nullable", None), ("ключ-é-😀", b"\x00\xff")), TS + 10),
    (bytearray(b"ba-key"), memoryview(b"mv-value"), (("", b""),), TS - 7),  # negative delta
    (b"big", b"B" * 20_000, (("h", b"H" * 9000),), TS + 10**9),  # past the fast tables
    (b"x" * 70, b"y" * 150, (), 0),
]


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_round_trip_every_codec(codec: int) -> None:
    batch = build_batch(SAMPLE, base_offset=1000, compression=codec)
    header, got = decode_records(batch)
    assert got == expected(1000, SAMPLE)
    assert header.compression == codec
    assert header.record_count == len(SAMPLE)
    assert header.base_timestamp == TS
    assert header.max_timestamp == TS + 10**9
    assert all(type(r.key) in (bytes, type(None)) for r in got)
    assert all(isinstance(r, Record) for r in got)


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_large_batch(codec: int) -> None:
    items = [
        (None if i % 3 else b"key-%d" % i, b"value-%06d-" % i + b"z" * (i % 300), (), TS + i // 7)
        for i in range(20_000)
    ]
    batch = build_batch(items, base_offset=5, compression=codec)
    if codec:
        assert len(batch) < sum(len(v) for _, v, _, _ in items) // 2
    header, got = decode_records(batch)
    assert header.last_offset_delta == 19_999
    assert got == expected(5, items)


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_log_append_time(codec: int) -> None:
    builder = BatchBuilder(compression=codec, timestamp_type=LOG_APPEND_TIME)
    for i in range(10):
        builder.append(None, b"v%d" % i, timestamp=TS + (i * 37) % 11)
    header, got = decode_records(builder.build())
    assert header.max_timestamp == TS + 10
    assert [r.timestamp for r in got] == [TS + 10] * 10


def test_default_timestamp_is_now() -> None:
    before = time.time_ns() // 1_000_000
    builder = BatchBuilder()
    builder.append(None, b"a")
    builder.append(None, b"b")
    after = time.time_ns() // 1_000_000
    _, got = decode_records(builder.build())
    assert all(before <= r.timestamp <= after for r in got)


def test_offsets_follow_base_offset() -> None:
    builder = BatchBuilder()
    for i in range(5):
        builder.append(None, b"%d" % i, timestamp=TS)
    first = builder.build(0)
    second = builder.build(100)  # the builder stays usable
    assert [r.offset for r in decode_records(first)[1]] == [0, 1, 2, 3, 4]
    assert [r.offset for r in decode_records(second)[1]] == [100, 101, 102, 103, 104]
    # baseOffset is outside the CRC: rewriting it in place keeps the batch valid.
    moved = bytearray(first)
    set_base_offset(moved, 0, 7)
    assert [r.offset for r in decode_records(moved)[1]] == [7, 8, 9, 10, 11]


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_builder_is_reusable_after_build(codec: int) -> None:
    builder = BatchBuilder(compression=codec)
    builder.append(None, b"a" * 100, timestamp=TS)
    first = builder.build()
    builder.append(b"k", b"b", timestamp=TS + 1)
    builder.set_producer_state(8, 2, 40, True)
    header, got = decode_records(builder.build(10))
    assert [r.value for r in got] == [b"a" * 100, b"b"]
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (8, 2, 40)
    assert header.is_transactional and header.compression == codec
    assert not validate_batch(first).is_transactional


def test_size_estimate_and_record_count() -> None:
    builder = BatchBuilder()
    assert builder.size_estimate() == HEADER_SIZE and builder.record_count == 0
    sizes = [builder.append(None, b"v" * n, timestamp=TS) for n in (10, 200, 30_000)]
    assert sizes == sorted(sizes) and sizes[-1] == builder.size_estimate()
    assert builder.record_count == 3
    assert len(builder.build()) == builder.size_estimate()

    packed = BatchBuilder(compression=compression.LZ4)
    for _ in range(100):
        estimate = packed.append(None, b"compressible " * 10, timestamp=TS)
    assert len(packed.build()) < estimate


def test_headers_accept_lists_iterators_and_bytes_keys() -> None:
    builder = BatchBuilder()
    builder.append(None, b"a", [("k1", b"v1"), ("k2", None)], timestamp=TS)
    builder.append(b"k", None, iter([("it", b"x")]), timestamp=TS)  # slow path after the fast one
    builder.append(None, b"b", ((b"raw", b"y"),), timestamp=TS)
    _, got = decode_records(builder.build())
    assert [r.headers for r in got] == [
        (("k1", b"v1"), ("k2", None)),
        (("it", b"x"),),
        (("raw", b"y"),),
    ]


@pytest.mark.parametrize(
    ("key", "value", "headers", "timestamp", "match"),
    [
        (None, "text", (), TS, "value must be bytes"),
        (42, b"v", (), TS, "key must be bytes"),
        (None, b"v", (), 1.5, "integer"),
        (None, b"v", (("only-key",),), TS, "pair"),
        (None, b"v", ((7, b"x"),), TS, "header key"),
        (None, b"v", (("k", "str"),), TS, "header value"),
    ],
)
def test_bad_input_is_rejected_without_trace(key, value, headers, timestamp, match) -> None:
    builder = BatchBuilder()
    builder.append(b"good", b"record", timestamp=TS)
    size = builder.size_estimate()
    with pytest.raises(TypeError, match=match):
        builder.append(key, value, headers, timestamp)
    assert builder.record_count == 1 and builder.size_estimate() == size
    builder.append(None, b"after", timestamp=TS + 1)
    header, got = decode_records(builder.build())
    assert header.max_timestamp == TS + 1
    assert [r.value for r in got] == [b"record", b"after"]


def test_offset_deltas_past_the_table() -> None:
    builder = BatchBuilder()
    n = len(records._ENC) + 10
    for _ in range(n):
        builder.append(None, b"", timestamp=TS)
    _, got = decode_records(builder.build())
    assert [r.offset for r in got] == list(range(n))


def test_decode_accepts_bytearray_memoryview_and_position() -> None:
    batch = build_batch(SAMPLE[:5], base_offset=3)
    for buf, pos in ((bytearray(batch), 0), (memoryview(batch), 0), (b"junk" + batch, 4)):
        _, got = decode_records(buf, pos)
        assert got == expected(3, SAMPLE[:5])
        assert all(type(r.value) in (bytes, type(None)) for r in got)


header_strategy = st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=20))
record_strategy = st.tuples(
    st.none() | st.binary(max_size=40),
    st.none() | st.binary(max_size=300),
    st.lists(header_strategy, max_size=3).map(tuple),
    st.integers(-1, 2**50),
)


@settings(max_examples=150, deadline=None)
@given(
    items=st.lists(record_strategy, min_size=1, max_size=30),
    codec=st.sampled_from(ALL_CODECS),
    base_offset=st.integers(0, 2**62),
    log_append=st.booleans(),
)
def test_round_trip_property(items: list, codec: int, base_offset: int, log_append: bool) -> None:
    batch = build_batch(
        items, base_offset=base_offset, compression=codec, timestamp_type=int(log_append)
    )
    header, got = decode_records(batch)
    max_ts = max(ts for *_, ts in items)
    assert header.max_timestamp == max_ts
    assert got == expected(base_offset, items, max_ts if log_append else None)
    assert list(iter_records(batch)) == got


# ------------------------------------------------------------------ iteration


def three_batches(codec: int = 0) -> tuple[bytes, list[int], list[Record]]:
    batches = []
    offset = 0
    for n in (3, 1, 4):
        items = [(None, b"b%d-r%d" % (offset, i), (), TS + i) for i in range(n)]
        batches.append(build_batch(items, base_offset=offset, compression=codec))
        offset += n
    sizes = [len(b) for b in batches]
    data = b"".join(batches)
    return data, sizes, list(iter_records(data, allow_partial_tail=False))


@pytest.mark.parametrize("codec", [compression.NONE, compression.ZSTD])
def test_iter_records_spans_batches(codec: int) -> None:
    data, sizes, got = three_batches(codec)
    assert [r.offset for r in got] == list(range(8))
    assert [r.value for r in got][3] == b"b3-r0"
    # start/end select batches by byte position.
    middle = list(iter_records(data, sizes[0], sizes[0] + sizes[1]))
    assert [r.offset for r in middle] == [3]
    assert list(iter_records(b"")) == []
    assert list(iter_records(bytearray(data))) == got


def test_partial_tail_is_ignored_only_when_allowed() -> None:
    data, sizes, _ = three_batches()
    complete = sizes[0] + sizes[1]
    for cut in range(complete + 1, len(data)):
        partial = data[:cut]
        assert [r.offset for r in iter_records(partial)] == [0, 1, 2, 3], cut
        with pytest.raises(CorruptRecordError):
            list(iter_records(partial, allow_partial_tail=False))
        # The same applies when the limit comes from ``end`` rather than the buffer.
        assert len(list(iter_records(data, 0, cut))) == 4
    assert [len(b) for _, _, b in iter_decoded_batches(data[: len(data) - 1])] == [3, 1]


@pytest.mark.parametrize("codec", [compression.NONE, compression.LZ4])
def test_crc_mismatch_raises_even_with_partial_tail_allowed(codec: int) -> None:
    data, sizes, _ = three_batches(codec)
    bad = bytearray(data)
    bad[sizes[0] + HEADER_SIZE + 2] ^= 0x01  # inside the second batch's records
    with pytest.raises(CorruptRecordError, match="CRC mismatch") as info:
        list(iter_records(bad))
    assert info.value.offset == 3 and info.value.position == sizes[0]


def control_batch(offset: int) -> bytes:
    builder = BatchBuilder(
        is_control=True, is_transactional=True, producer_id=9, producer_epoch=0, base_sequence=-1
    )
    # Key: version 0, type 1 (COMMIT); value: version 0, coordinator epoch 0.
    builder.append(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00", timestamp=TS)
    return builder.build(offset)


def test_control_batches_are_skipped() -> None:
    first = build_batch([(None, b"a", (), TS), (None, b"b", (), TS)], base_offset=0)
    last = build_batch([(None, b"c", (), TS)], base_offset=3)
    data = first + control_batch(2) + last
    assert [(r.offset, r.value) for r in iter_records(data)] == [(0, b"a"), (1, b"b"), (3, b"c")]
    batches = list(iter_decoded_batches(data))
    assert [h.is_control for _, h, _ in batches] == [False, True, False]
    assert batches[1][2][0].key == b"\x00\x00\x00\x01"
    header, got = decode_records(control_batch(2))
    assert header.is_control and len(got) == 1


# ------------------------------------------------------------------ corruption


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_flipped_record_byte_is_detected(codec: int) -> None:
    batch = bytearray(build_batch(SAMPLE, base_offset=50, compression=codec))
    for index in (HEADER_SIZE, (HEADER_SIZE + len(batch)) // 2, len(batch) - 1):
        bad = bytearray(batch)
        bad[index] ^= 0x40
        with pytest.raises(CorruptRecordError, match="CRC") as info:
            decode_records(bad)
        assert info.value.offset == 50
        with pytest.raises(CorruptRecordError):
            list(iter_records(bad))


def rec(body: bytes) -> bytes:
    return encode_varint(len(body)) + body


GOOD = rec(b"\x00\x00\x00\x01\x02v\x00")


@pytest.mark.parametrize(
    ("section", "count", "reason"),
    [
        (encode_varint(500) + b"\x00" * 10, 1, "record length 500"),
        (rec(b"\x00\x00\x00\x01"), 1, "record length 4"),
        (encode_varint(-3) + b"\x00" * 10, 1, "record length -3"),
        (rec(b"\x00\x00\x00\x03\x02v\x00"), 1, "negative key length -2"),
        (rec(b"\x00\x00\x00\x01\x05\x00"), 1, "negative value length -3"),
        (rec(b"\x00\x00\x00\x08ab\x02v\x00"), 1, "runs past the end"),  # key past the record
        (rec(b"\x00\x00\x00\x04ab\x06v\x00") + GOOD, 2, "fields take"),  # value into the next
        (rec(b"\x00\x00\x00\x01\x02v\x00\x00"), 1, "fields take"),  # record longer than fields
        (rec(b"\x00" + b"\x80" * 10 + b"\x01\x00\x01\x02v\x00"), 1, "longer than 10"),
        (rec(b"\x00\x00" + b"\xff" * 5 + b"\x01\x01\x02v\x00"), 1, "longer than 5"),
        (rec(b"\x00\x00\xff\xff\xff\xff\x7f\x01\x02v\x00"), 1, "overflows 32"),
        (rec(b"\x00\x00\x00\x01\x02v\x01"), 1, "invalid header count -1"),
        (rec(b"\x00\x00\x00\x01\x02v\x7e\x00\x00"), 1, "invalid header count 63"),
        (rec(b"\x00\x00\x00\x01\x02v\x02\x03\x00"), 1, "negative header key length"),
        (rec(b"\x00\x00\x00\x01\x02v\x02\x02\xff\x00"), 1, "not valid utf-8"),
        (rec(b"\x00\x00\x00\x01\x02v\x02\x02k\x05"), 1, "negative header value length"),
        (GOOD, 2, "runs past the end"),  # header promises more records
        (GOOD + GOOD, 1, "bytes left after"),  # and fewer
        (GOOD + b"\x80", 2, "runs past the end"),  # truncated varint at the end
    ],
)
@pytest.mark.parametrize("codec", [compression.NONE, compression.GZIP])
def test_malformed_records_with_valid_crc(
    section: bytes, count: int, reason: str, codec: int
) -> None:
    batch = make_batch(section, count, codec=codec, base_offset=1000)
    with pytest.raises(CorruptRecordError, match=reason) as info:
        decode_records(batch)
    assert info.value.offset is not None and info.value.offset >= 1000
    assert info.value.position == 0
    with pytest.raises(CorruptRecordError, match=reason):
        list(iter_records(batch))


def test_good_hand_made_section_decodes() -> None:
    # The control for the malformed cases above: the same framing, well formed.
    _, got = decode_records(make_batch(GOOD + GOOD, 2, base_offset=7))
    assert got == [Record(7, TS, None, b"v", ()), Record(7, TS, None, b"v", ())]


@pytest.mark.parametrize("codec", COMPRESSING)
def test_undecompressable_section_with_valid_crc(codec: int) -> None:
    out = bytearray(make_batch(GOOD, 1, codec=codec, base_offset=20))
    out[HEADER_SIZE:] = b"\xff" * (len(out) - HEADER_SIZE)
    bad = fix_crc(out)
    with pytest.raises(CorruptRecordError) as info:
        decode_records(bad)
    assert info.value.offset == 20 and info.value.position == 0
    assert compression.codec_name(codec) in info.value.reason


@settings(max_examples=300, deadline=None)
@given(data=st.data(), codec=st.sampled_from([compression.NONE, compression.SNAPPY]))
def test_mutated_sections_raise_only_corrupt_record_error(data: st.DataObject, codec: int) -> None:
    section = bytearray(build_batch(SAMPLE[:6], compression=compression.NONE)[HEADER_SIZE:])
    for _ in range(data.draw(st.integers(1, 4))):
        index = data.draw(st.integers(0, len(section) - 1))
        section[index] = data.draw(st.integers(0, 255))
    section = section[: data.draw(st.integers(0, len(section)))]
    batch = make_batch(bytes(section), data.draw(st.integers(0, 8)), codec=codec)
    with contextlib.suppress(CorruptRecordError):
        decode_records(batch)


def test_parse_header_sees_what_build_wrote() -> None:
    batch = build_batch([(b"k", b"v", (), TS)], base_offset=9, producer_id=1, producer_epoch=2)
    header = parse_header(batch)
    assert (header.base_offset, header.producer_id, header.producer_epoch) == (9, 1, 2)
    assert header.size == len(batch)
