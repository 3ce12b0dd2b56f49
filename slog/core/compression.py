"""Compression codecs of Kafka record batches, with the framings real clients use.

The codec id lives in the low three bits of a batch's attributes and covers the
whole records section. Each codec is framed the way the Java client writes it so
that any Kafka client can read what slog writes:

* gzip: a standard gzip stream (RFC 1952). Several concatenated members are
  accepted on read.
* snappy: the xerial/snappy-java stream when writing (16-byte header, then
  ``[int32 length][raw snappy block]`` per 32 KiB of input). On read both that
  and a bare raw snappy buffer (what librdkafka writes) are accepted.
* lz4: a standard LZ4 frame with independent blocks, which is all the Java
  client's reader supports.
* zstd: a standard zstd frame; frames without a content size and several
  concatenated frames are accepted on read.

Corrupt input always raises :class:`CorruptRecordError`, whatever the codec
library threw, so callers handle one exception type.
"""

from __future__ import annotations

import struct
import zlib

import cramjam

from slog.core.errors import CorruptRecordError

# collections.abc.Buffer only exists from 3.12 on.
BytesLike = bytes | bytearray | memoryview

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_NAMES: dict[int, str] = {
    NONE: "none",
    GZIP: "gzip",
    SNAPPY: "snappy",
    LZ4: "lz4",
    ZSTD: "zstd",
}
_CODEC_BY_NAME: dict[str, int] = {name: codec for codec, name in CODEC_NAMES.items()}

# Levels the Java client uses by default, except lz4 where we take the fast
# compressor (as librdkafka does): the HC levels cost ~5x the CPU for ~8% size.
DEFAULT_GZIP_LEVEL = 6
DEFAULT_LZ4_LEVEL = 1
DEFAULT_ZSTD_LEVEL = 3

# xerial/snappy-java stream header: marker byte, "SNAPPY", NUL, version, compat.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK_SIZE = 32 * 1024  # snappy-java's default, which the Java producer uses
_INT32 = struct.Struct(">i")


def codec_from_name(name: str) -> int:
    """Map a ``compression.type`` value ("gzip", "lz4", ...) to its codec id."""
    try:
        return _CODEC_BY_NAME[name.strip().lower()]
    except (KeyError, AttributeError):
        valid = ", ".join(sorted(_CODEC_BY_NAME))
        raise ValueError(f"unknown compression type {name!r} (expected one of: {valid})") from None


def codec_name(codec: int) -> str:
    """The name of a codec id, for messages and configs."""
    try:
        return CODEC_NAMES[codec]
    except KeyError:
        raise ValueError(f"unknown compression codec id {codec!r}") from None


def compress(codec: int, data: BytesLike, level: int | None = None) -> bytes:
    """Compress a records section with ``codec``; ``level`` overrides the default.

    Raises ValueError for an unknown codec id.
    """
    if codec == LZ4:
        return _lz4_compress(data, DEFAULT_LZ4_LEVEL if level is None else level)
    if codec == ZSTD:
        level = DEFAULT_ZSTD_LEVEL if level is None else level
        return bytes(cramjam.zstd.compress(data, level=level))
    if codec == SNAPPY:
        return _xerial_compress(data)
    if codec == GZIP:
        # zlib with wbits=31 writes a gzip member; measured ~15% faster than cramjam.
        return zlib.compress(data, DEFAULT_GZIP_LEVEL if level is None else level, 31)
    if codec == NONE:
        return bytes(data)
    raise ValueError(f"unknown compression codec id {codec!r}")


def decompress(codec: int, data: BytesLike) -> bytes:
    """Decompress a records section; any failure raises CorruptRecordError."""
    try:
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
        if codec == SNAPPY:
            return _snappy_decompress(data)
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == NONE:
            return bytes(data)
    except CorruptRecordError:
        raise
    except Exception as exc:  # codec libraries raise assorted types on bad input
        raise CorruptRecordError(f"{CODEC_NAMES[codec]} decompression failed: {exc}") from exc
    raise CorruptRecordError(f"unknown compression codec id {codec}")


def _lz4_compress(data: BytesLike, level: int) -> bytes:
    # Independent blocks and no content checksum, like the Java producer: its
    # reader decodes each block on its own and cannot follow linked blocks.
    compressor = cramjam.lz4.Compressor(level=level, content_checksum=False, block_linked=False)
    # The streaming compressor only takes bytes; the copy is cheap next to lz4 itself.
    compressor.compress(data if type(data) is bytes else bytes(data))
    return bytes(compressor.finish())


def _xerial_compress(data: BytesLike) -> bytes:
    view = memoryview(data).cast("B")
    parts = [XERIAL_HEADER]
    pack = _INT32.pack
    compress_raw = cramjam.snappy.compress_raw
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = bytes(compress_raw(view[start : start + XERIAL_BLOCK_SIZE]))
        parts.append(pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: BytesLike) -> bytes:
    view = memoryview(data).cast("B")
    # Version and compat are not checked: some producers write them little-endian,
    # and there has only ever been one xerial block format.
    if len(view) < len(XERIAL_HEADER) or view[: len(XERIAL_MAGIC)] != XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    parts = []
    decompress_raw = cramjam.snappy.decompress_raw
    pos = len(XERIAL_HEADER)
    end = len(view)
    while pos < end:
        if end - pos < 4:
            raise CorruptRecordError(f"xerial snappy stream ends inside a block length at {pos}")
        (length,) = _INT32.unpack_from(view, pos)
        pos += 4
        if length < 0 or pos + length > end:
            raise CorruptRecordError(
                f"xerial snappy block of {length} bytes at {pos} runs past the end ({end})"
            )
        parts.append(bytes(decompress_raw(view[pos : pos + length])))
        pos += length
    return b"".join(parts)


def decompress_at_most(codec: int, data: BytesLike, max_bytes: int) -> bytes:
    """Decompress as :func:`decompress` does, but never produce more than ``max_bytes``.

    For records a broker decodes from a client: a zstd frame of a few hundred
    bytes can hold gigabytes. Snappy blocks state their length up front; the
    stream codecs decompress into a buffer that grows (from 8x the input) up
    to ``max_bytes``. Output beyond that raises CorruptRecordError.
    """
    if codec == NONE:
        if len(data) > max_bytes:
            raise CorruptRecordError(f"records section of {len(data)} bytes exceeds {max_bytes}")
        return bytes(data)
    if codec == SNAPPY:
        if _snappy_length(data) > max_bytes:
            raise CorruptRecordError(f"snappy data decompresses to more than {max_bytes} bytes")
        return decompress(codec, data)
    module = {GZIP: cramjam.gzip, LZ4: cramjam.lz4, ZSTD: cramjam.zstd}.get(codec)
    if module is None:
        raise CorruptRecordError(f"unknown compression codec id {codec}")
    size = min(max_bytes, max(64 * 1024, 8 * len(data)))
    while True:
        out = bytearray(size)
        try:
            written = module.decompress_into(data, out)
        except Exception as exc:  # cramjam says "failed to write whole buffer" when full
            if size >= max_bytes:
                raise CorruptRecordError(
                    f"{CODEC_NAMES[codec]} data is corrupt or decompresses to more than "
                    f"{max_bytes} bytes: {exc}") from exc
            size = min(max_bytes, size * 4)
            continue
        return bytes(memoryview(out)[:written])


def _snappy_length(data: BytesLike) -> int:
    """The decompressed size snappy data declares (raw, or the sum of its xerial blocks)."""
    view = memoryview(data).cast("B")
    try:
        if len(view) < len(XERIAL_HEADER) or view[: len(XERIAL_MAGIC)] != XERIAL_MAGIC:
            return int(cramjam.snappy.decompress_raw_len(view))
        total, pos, end = 0, len(XERIAL_HEADER), len(view)
        while pos + 4 <= end:
            (length,) = _INT32.unpack_from(view, pos)
            pos += 4
            if length < 0 or pos + length > end:
                break  # decompress() reports the bad framing
            total += int(cramjam.snappy.decompress_raw_len(view[pos : pos + length]))
            pos += length
        return total
    except Exception as exc:  # the codec library raises assorted types on bad input
        raise CorruptRecordError(f"snappy decompression failed: {exc}") from exc
