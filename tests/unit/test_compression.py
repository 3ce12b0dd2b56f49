"""Codecs of slog.core.compression: round trips, framings other clients use, corruption."""

from __future__ import annotations

import contextlib
import gzip
import os
import struct

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slog.core import compression
from slog.core.compression import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    XERIAL_BLOCK_SIZE,
    XERIAL_HEADER,
    ZSTD,
    codec_from_name,
    codec_name,
    compress,
    decompress,
)
from slog.core.errors import CorruptRecordError

ALL_CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
COMPRESSING = [GZIP, SNAPPY, LZ4, ZSTD]

# Compressible but not trivial: repeated structure with random parts.
PAYLOAD = b"".join(b"record-%06d:" % i + os.urandom(6).hex().encode() for i in range(6000))


def test_codec_ids_match_kafka() -> None:
    assert (NONE, GZIP, SNAPPY, LZ4, ZSTD) == (0, 1, 2, 3, 4)


@pytest.mark.parametrize(
    ("name", "codec"),
    [("none", 0), ("gzip", 1), ("snappy", 2), ("lz4", 3), ("zstd", 4), ("LZ4", 3), (" Gzip ", 1)],
)
def test_codec_from_name(name: str, codec: int) -> None:
    assert codec_from_name(name) == codec


@pytest.mark.parametrize("name", ["brotli", "", "producer", "lz5"])
def test_codec_from_name_rejects_unknown(name: str) -> None:
    with pytest.raises(ValueError, match="unknown compression type") as info:
        codec_from_name(name)
    assert "gzip" in str(info.value)  # the message lists the valid names


def test_codec_name() -> None:
    assert [codec_name(c) for c in ALL_CODECS] == ["none", "gzip", "snappy", "lz4", "zstd"]
    with pytest.raises(ValueError):
        codec_name(9)


@pytest.mark.parametrize("codec", ALL_CODECS)
@pytest.mark.parametrize("size", [0, 1, 100, XERIAL_BLOCK_SIZE, 70_000, len(PAYLOAD)])
def test_round_trip(codec: int, size: int) -> None:
    data = PAYLOAD[:size]
    packed = compress(codec, data)
    assert isinstance(packed, bytes)
    if codec != NONE and size > 1000:
        assert len(packed) < len(data)
    assert decompress(codec, packed) == data


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_accepts_bytearray_and_memoryview(codec: int) -> None:
    data = PAYLOAD[:5000]
    for wrapped in (bytearray(data), memoryview(data), memoryview(b"xx" + data)[2:]):
        packed = compress(codec, wrapped)
        assert decompress(codec, bytearray(packed)) == data
        assert decompress(codec, memoryview(packed)) == data


@settings(max_examples=60, deadline=None)
@given(codec=st.sampled_from(ALL_CODECS), data=st.binary(max_size=3000))
def test_round_trip_property(codec: int, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", COMPRESSING)
def test_level_override(codec: int) -> None:
    fast = compress(codec, PAYLOAD, level=1)
    assert decompress(codec, fast) == PAYLOAD


def test_compress_rejects_unknown_codec() -> None:
    with pytest.raises(ValueError, match="unknown compression codec"):
        compress(5, b"abc")


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_decompress_unknown_codec_is_corruption(codec: int) -> None:
    # The id comes from a batch's attributes, so a bad one is corrupt data.
    with pytest.raises(CorruptRecordError, match="unknown compression codec"):
        decompress(codec, b"abc")


# ------------------------------------------------------------------ gzip


def test_gzip_writes_a_standard_gzip_stream() -> None:
    packed = compress(GZIP, PAYLOAD)
    assert packed[:2] == b"\x1f\x8b"
    assert gzip.decompress(packed) == PAYLOAD


def test_gzip_reads_multiple_members() -> None:
    packed = gzip.compress(PAYLOAD[:1000]) + gzip.compress(PAYLOAD[1000:])
    assert decompress(GZIP, packed) == PAYLOAD


# ------------------------------------------------------------------ snappy


def _xerial_blocks(packed: bytes) -> list[bytes]:
    blocks = []
    pos = len(XERIAL_HEADER)
    while pos < len(packed):
        (length,) = struct.unpack_from(">i", packed, pos)
        blocks.append(packed[pos + 4 : pos + 4 + length])
        pos += 4 + length
    assert pos == len(packed)
    return blocks


def test_snappy_writes_xerial_framing() -> None:
    packed = compress(SNAPPY, PAYLOAD)
    assert packed[:16] == b"\x82SNAPPY\x00" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x01"
    blocks = _xerial_blocks(packed)
    # One raw snappy block per 32 KiB of input, like snappy-java.
    assert len(blocks) == -(-len(PAYLOAD) // XERIAL_BLOCK_SIZE)
    raw = [bytes(cramjam.snappy.decompress_raw(block)) for block in blocks]
    assert all(len(chunk) == XERIAL_BLOCK_SIZE for chunk in raw[:-1])
    assert b"".join(raw) == PAYLOAD


def test_snappy_reads_raw_snappy() -> None:
    # librdkafka writes plain raw snappy without the xerial header.
    raw = bytes(cramjam.snappy.compress_raw(PAYLOAD))
    assert not raw.startswith(b"\x82SNAPPY")
    assert decompress(SNAPPY, raw) == PAYLOAD


def test_snappy_reads_xerial_with_little_endian_version() -> None:
    # Some producers write the version/compat ints little-endian; they carry no information.
    packed = compress(SNAPPY, PAYLOAD)
    odd = b"\x82SNAPPY\x00" + struct.pack("<ii", 1, 1) + packed[16:]
    assert decompress(SNAPPY, odd) == PAYLOAD


def test_snappy_xerial_with_empty_payload() -> None:
    assert compress(SNAPPY, b"") == XERIAL_HEADER
    assert decompress(SNAPPY, XERIAL_HEADER) == b""


@pytest.mark.parametrize(
    "tail",
    [
        b"\x00\x00",  # block length cut short
        b"\x00\x00\x00\x10abc",  # block runs past the end
        b"\xff\xff\xff\xff",  # negative block length
        b"\x00\x00\x00\x03\xff\xff\xff",  # garbage raw snappy
    ],
)
def test_snappy_corrupt_xerial(tail: bytes) -> None:
    with pytest.raises(CorruptRecordError, match="snappy"):
        decompress(SNAPPY, XERIAL_HEADER + tail)


# ------------------------------------------------------------------ lz4


def test_lz4_writes_independent_blocks() -> None:
    packed = compress(LZ4, PAYLOAD)
    assert packed[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic
    flg = packed[4]
    assert flg >> 6 == 0b01  # frame version 1
    assert flg & 0x20, "blocks must be independent: the Java client cannot read linked blocks"
    assert not flg & 0x04, "no content checksum, as the Java producer writes"
    assert (packed[5] >> 4) & 0x7 == 4  # 64 KiB maximum block size


def test_lz4_reads_frames_from_other_writers() -> None:
    lz4_frame = pytest.importorskip("lz4.frame")
    for kwargs in (
        {},
        {"block_linked": True, "content_checksum": True},
        {"store_size": True, "block_size": lz4_frame.BLOCKSIZE_MAX4MB},
        {"block_linked": False, "store_size": False},
    ):
        assert decompress(LZ4, lz4_frame.compress(PAYLOAD, **kwargs)) == PAYLOAD


# ------------------------------------------------------------------ zstd


def test_zstd_reads_frames_without_content_size() -> None:
    zstandard = pytest.importorskip("zstandard")
    packed = zstandard.ZstdCompressor(write_content_size=False).compress(PAYLOAD)
    assert zstandard.get_frame_parameters(packed).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress(ZSTD, packed) == PAYLOAD
    streamer = zstandard.ZstdCompressor().compressobj()
    streamed = streamer.compress(PAYLOAD) + streamer.flush()
    assert decompress(ZSTD, streamed) == PAYLOAD


def test_zstd_reads_concatenated_frames() -> None:
    packed = compress(ZSTD, PAYLOAD[:5000]) + compress(ZSTD, PAYLOAD[5000:])
    assert decompress(ZSTD, packed) == PAYLOAD


def test_zstd_writes_a_standard_frame() -> None:
    zstandard = pytest.importorskip("zstandard")
    packed = compress(ZSTD, PAYLOAD)
    assert packed[:4] == b"\x28\xb5\x2f\xfd"
    assert zstandard.ZstdDecompressor().decompress(packed, max_output_size=len(PAYLOAD)) == PAYLOAD


# ------------------------------------------------------------------ corruption


@pytest.mark.parametrize("codec", COMPRESSING)
def test_truncated_input_raises_corrupt_record_error(codec: int) -> None:
    packed = compress(codec, PAYLOAD)
    for cut in (len(packed) // 2, len(packed) - 1):
        with pytest.raises(CorruptRecordError) as info:
            decompress(codec, packed[:cut])
        assert codec_name(codec) in info.value.reason


@pytest.mark.parametrize("codec", COMPRESSING)
@pytest.mark.parametrize("garbage", [b"", b"\x00", b"not compressed at all" * 5, os.urandom(300)],
                         ids=["empty", "zero", "text", "random"])  # the same ids in every run
def test_garbage_raises_corrupt_record_error(codec: int, garbage: bytes) -> None:
    # Random bytes may happen to form a tiny valid raw snappy stream, so only
    # the exception type is pinned: it must never be the library's own.
    try:
        decompress(codec, garbage)
    except CorruptRecordError as exc:
        assert "decompression failed" in exc.reason or "snappy" in exc.reason
    else:
        assert codec == SNAPPY and garbage, "only raw snappy may accept such bytes"


@settings(max_examples=100, deadline=None)
@given(codec=st.sampled_from(COMPRESSING), data=st.data())
def test_flipped_bytes_never_raise_a_foreign_exception(codec: int, data: st.DataObject) -> None:
    packed = bytearray(compress(codec, PAYLOAD[:3000]))
    index = data.draw(st.integers(0, len(packed) - 1))
    packed[index] ^= data.draw(st.integers(1, 255))
    with contextlib.suppress(CorruptRecordError):
        decompress(codec, bytes(packed))


def test_module_constants_are_exported() -> None:
    assert compression.CODEC_NAMES[LZ4] == "lz4"
