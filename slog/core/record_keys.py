"""Find a keyless record in a batch, reading only what leads up to each key.

A compacted log keeps the latest value per key, so a record without a key has
no place in it (Kafka's LogValidator refuses one). Checking that on produce
must not cost a full decode: each record is walked only up to its key length
(length, attributes, timestamp delta, offset delta, key length), then skipped
by its length. A compressed batch is decompressed once, up to MAX_DECOMPRESSED.
"""

from __future__ import annotations

from collections.abc import Callable

from slog.core import compression as codecs
from slog.core.batch import COMPRESSION_MASK, CONTROL_BIT, HEADER_SIZE, validate_batch
from slog.core.errors import CorruptRecordError
from slog.core.records import BytesLike, decode_varint, decode_varlong

__all__ = ["MAX_DECOMPRESSED", "keyless_records"]

# The most a compressed batch may expand to here. Appending never decompresses,
# but this check must, and a zstd frame of a few hundred bytes can hold
# gigabytes: a client must not be able to make the broker allocate them.
MAX_DECOMPRESSED = 64 * 1024 * 1024


def keyless_records(buf: BytesLike) -> list[int]:
    """The indexes within its batch of the records with a null key (none: all have keys).

    ``buf`` holds one batch. Its length, magic and CRC are checked first (a
    corrupt batch raises CorruptRecordError, as appending it would); so is
    each record's framing. Control batches carry markers, not data: none.
    """
    header = validate_batch(buf)
    if header.attributes & CONTROL_BIT:
        return []
    codec = header.attributes & COMPRESSION_MASK
    with memoryview(buf) as view:
        section = view[HEADER_SIZE:header.size]
        try:
            data: BytesLike = codecs.decompress_at_most(codec, section, MAX_DECOMPRESSED) \
                if codec else section.tobytes()
        finally:
            section.release()
    pos, end = 0, len(data)
    keyless = []
    for index in range(header.record_count):
        length, pos = _varint(data, pos)
        record_end = pos + length
        if length <= 0 or record_end > end:
            raise CorruptRecordError(f"record {index} has length {length} "
                                     f"({end - pos} bytes left in the batch)",
                                     offset=header.base_offset)
        body = pos + 1  # past the attributes byte
        _, body = _varint(data, body, decode_varlong)  # timestamp delta
        _, body = _varint(data, body)  # offset delta
        key_length, _ = _varint(data, body)
        if key_length < 0:
            keyless.append(index)
        pos = record_end
    return keyless


def _varint(data: BytesLike, pos: int, slow: Callable[[BytesLike, int], tuple[int, int]]
            = decode_varint) -> tuple[int, int]:
    """A zigzag varint at ``pos``: one or two bytes inline (lengths and deltas below
    8 KiB), else ``slow``'s full reader."""
    try:
        byte = data[pos]
        if byte < 0x80:
            return (byte >> 1) ^ -(byte & 1), pos + 1
        second = data[pos + 1]
    except IndexError:
        raise CorruptRecordError("truncated varint", position=pos) from None
    if second < 0x80:
        value = (byte & 0x7F) | (second << 7)
        return (value >> 1) ^ -(value & 1), pos + 2
    return slow(data, pos)
