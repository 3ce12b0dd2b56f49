"""keyless_records: the keyless-record check of compacted topics (pure code)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slog.core import compression as codecs
from slog.core.batch import CRC_POS
from slog.core.errors import CorruptRecordError
from slog.core.record_keys import MAX_DECOMPRESSED, keyless_records
from slog.core.records import build_batch

CODECS = [codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD]


def batch(keys: list[bytes | None], compression: int = codecs.NONE) -> bytes:
    return build_batch([(key, b"v" * 300, (("h", b"x"),), None) for key in keys],
                       compression=compression)


@pytest.mark.parametrize("compression", CODECS)
def test_finds_every_keyless_record_in_any_codec(compression: int) -> None:
    assert keyless_records(batch([b"a", b"", b"c"], compression)) == []  # "" is a key
    assert keyless_records(batch([None], compression)) == [0]
    assert keyless_records(batch([b"a", b"b", None, None], compression)) == [2, 3]


@given(keys=st.lists(st.one_of(st.none(), st.binary(max_size=300)), min_size=1, max_size=50))
def test_agrees_with_a_full_decode(keys: list[bytes | None]) -> None:
    assert keyless_records(batch(keys)) == [i for i, key in enumerate(keys) if key is None]


def test_control_batches_are_not_data() -> None:
    control = build_batch([(None, b"\x00\x00\x00\x00", (), None)], is_control=True,
                          is_transactional=True, producer_id=1, producer_epoch=0)
    assert keyless_records(control) == []


def test_corruption_is_reported_not_guessed() -> None:
    damaged = bytearray(batch([b"a", None]))
    damaged[CRC_POS] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        keyless_records(bytes(damaged))
    with pytest.raises(CorruptRecordError):
        keyless_records(b"\x00" * 10)


@pytest.mark.parametrize("compression", CODECS[1:])
def test_bounded_decompression_round_trips_and_refuses_bombs(compression: int) -> None:
    data = b"slog " * 50_000
    packed = codecs.compress(compression, data)
    assert codecs.decompress_at_most(compression, packed, len(data)) == data
    with pytest.raises(CorruptRecordError, match="more than"):
        codecs.decompress_at_most(compression, packed, len(data) - 1)


def test_bounded_decompression_of_raw_snappy_and_garbage() -> None:
    import cramjam

    raw = bytes(cramjam.snappy.compress_raw(b"x" * 10_000))  # librdkafka's framing
    assert codecs.decompress_at_most(codecs.SNAPPY, raw, 10_000) == b"x" * 10_000
    with pytest.raises(CorruptRecordError):
        codecs.decompress_at_most(codecs.SNAPPY, raw, 9_999)
    for codec in CODECS[1:]:
        with pytest.raises(CorruptRecordError):
            codecs.decompress_at_most(codec, b"\x01garbage\xff" * 10, 1 << 20)


def test_a_batch_expanding_past_the_limit_is_corrupt_not_allocated() -> None:
    bomb = build_batch([(None, bytes(MAX_DECOMPRESSED), (), None)], compression=codecs.ZSTD)
    assert len(bomb) < 100_000
    with pytest.raises(CorruptRecordError, match="more than"):
        keyless_records(bomb)


def test_long_varints_take_the_full_reader() -> None:
    # Offset deltas past 8191 and record lengths past 8 KiB need three varint bytes.
    keys: list[bytes | None] = [b"k"] * 9000 + [None]
    assert keyless_records(build_batch([(k, b"", (), 0) for k in keys])) == [9000]
    big = build_batch([(b"k", b"v" * 20_000, (), 0), (None, b"v" * 20_000, (), 10**9)])
    assert keyless_records(big) == [1]
