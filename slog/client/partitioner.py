"""Which partition a produced record goes to.

1. An explicit partition wins.
2. A keyed record goes to ``murmur3_32(key) mod partitions``, the hash taken
   as unsigned with seed 0 (the ``mmh3`` package). The same key always lands
   on the same partition while the partition count stays the same.
   Note: the Java client hashes with murmur2, so a key may land on a
   different partition than a Java producer would pick for it.
3. A record without a key sticks to one partition until the batch for that
   partition is closed (full, or sent on linger), then the topic switches to
   another random partition (KIP-480's sticky partitioner). Batches fill
   faster than with round-robin, which is the point.
"""

from __future__ import annotations

import random

import mmh3

_hash = mmh3.hash


def key_partition(key: bytes | str, num_partitions: int) -> int:
    """The partition of a keyed record: unsigned murmur3_32 of the key, mod the count.

    A str key is hashed as its utf-8 bytes, which is what gets sent.
    """
    return _hash(key, signed=False) % num_partitions


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

    def __init__(self, rng: random.Random | None = None):
        self.sticky = StickyPartitioner(rng)

    def partition(self, topic: str, key: bytes | str | None, num_partitions: int,
                  partition: int | None = None) -> int:
        if partition is not None:
            return partition
        if key is not None:
            return _hash(key, signed=False) % num_partitions
        return self.sticky.partition(topic, num_partitions)

    def batch_closed(self, topic: str, partition: int, num_partitions: int) -> None:
        self.sticky.batch_closed(topic, partition, num_partitions)
