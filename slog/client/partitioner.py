"""Which partition a produced record goes to.

1. An explicit partition wins.
2. A keyed record goes to ``hash(key) mod partitions``, with one of three
   hashes, chosen by name so slog can share a keyed topic with other clients
   (the same key must land on the same partition whoever writes it, or per-key
   order and compaction break):

   * ``murmur3`` (slog's default): unsigned murmur3_32, seed 0 (``mmh3``).
   * ``murmur2``: the Java client's DefaultPartitioner, kafka-python's, and
     librdkafka's ``murmur2``/``murmur2_random``: murmur2 with Kafka's seed,
     the sign bit cleared (``& 0x7fffffff``), mod the count.
   * ``crc32``: librdkafka's ``consistent``/``consistent_random``: the IEEE
     crc32 of the key, mod the count.

   The same key always lands on the same partition while the partition count
   stays the same. A str key is hashed as its utf-8 bytes, which is what gets sent.
3. A record without a key sticks to one partition until the batch for that
   partition is closed (full, or sent on linger), then the topic switches to
   another random partition (KIP-480's sticky partitioner), whatever the key
   hash. Batches fill faster than with round-robin, which is the point.
"""

from __future__ import annotations

import random
import struct
import zlib
from collections.abc import Callable

import mmh3

from slog.client.errors import InvalidArgumentError

__all__ = ["DEFAULT_PARTITIONER", "PARTITIONERS", "KeyPartitioner", "Partitioner",
           "StickyPartitioner", "key_partition", "key_partitioner", "murmur2"]

KeyPartitioner = Callable[[bytes | str, int], int]

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
_SEED = 0x9747B28C  # the seed Kafka's Utils.murmur2 uses


def murmur2(data: bytes) -> int:
    """MurmurHash2 (32-bit) of ``data`` as Kafka's Java client computes it, unsigned.

    Words are read little-endian; a 1-3 byte tail is mixed in before the
    final avalanche, as in Austin Appleby's reference.
    """
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length & ~3
    for (k,) in struct.iter_unpack("<I", data[:whole]):
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    if tail:
        if tail == 3:
            h ^= data[whole + 2] << 16
        if tail >= 2:
            h ^= data[whole + 1] << 8
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


def _as_bytes(key: bytes | str) -> bytes:
    return key.encode() if isinstance(key, str) else key


def murmur3_partition(key: bytes | str, num_partitions: int) -> int:
    # mmh3 hashes a str as its utf-8 bytes, so no encode here.
    return mmh3.hash(key, signed=False) % num_partitions


def murmur2_partition(key: bytes | str, num_partitions: int) -> int:
    return (murmur2(_as_bytes(key)) & 0x7FFFFFFF) % num_partitions


def crc32_partition(key: bytes | str, num_partitions: int) -> int:
    return zlib.crc32(_as_bytes(key)) % num_partitions


PARTITIONERS: dict[str, KeyPartitioner] = {
    "murmur3": murmur3_partition,
    "murmur2": murmur2_partition,
    "crc32": crc32_partition,
}
DEFAULT_PARTITIONER = "murmur3"


def key_partitioner(name: str) -> KeyPartitioner:
    """The key hash called ``name``; InvalidArgumentError names the choices for anything
    else."""
    try:
        return PARTITIONERS[name]
    except KeyError:
        raise InvalidArgumentError(f"unknown partitioner {name!r}; choose one of "
                         f"{', '.join(PARTITIONERS)}") from None


def key_partition(key: bytes | str, num_partitions: int) -> int:
    """The partition of a keyed record with the default hash: unsigned murmur3_32 mod the count."""
    return murmur3_partition(key, num_partitions)


class StickyPartitioner:
    """The partition for null-key records, per topic, until a batch closes."""

    def __init__(self, rng: random.Random | None = None):
        self._rng = rng or random.Random()
        self._current: dict[str, int] = {}

    def partition(self, topic: str, num_partitions: int) -> int:
        current = self._current.get(topic)
        if current is None or current >= num_partitions:
            current = self._current[topic] = self._rng.randrange(num_partitions)
        return current

    def batch_closed(self, topic: str, partition: int, num_partitions: int) -> None:
        """A batch of ``topic``/``partition`` closed: move on if that was the sticky one."""
        if self._current.get(topic) != partition:
            return
        if num_partitions <= 1:
            return
        choice = self._rng.randrange(num_partitions - 1)
        # Any partition but the current one, uniformly.
        self._current[topic] = choice + 1 if choice >= partition else choice


class Partitioner:
    """Explicit partition, else key hash, else sticky (see the module docstring)."""

    def __init__(self, rng: random.Random | None = None, hash_name: str = DEFAULT_PARTITIONER):
        self.sticky = StickyPartitioner(rng)
        self.name = hash_name
        self._by_key = key_partitioner(hash_name)

    def partition(self, topic: str, key: bytes | str | None, num_partitions: int,
                  partition: int | None = None) -> int:
        if partition is not None:
            return partition
        if key is not None:
            return self._by_key(key, num_partitions)
        return self.sticky.partition(topic, num_partitions)

    def batch_closed(self, topic: str, partition: int, num_partitions: int) -> None:
        self.sticky.batch_closed(topic, partition, num_partitions)
