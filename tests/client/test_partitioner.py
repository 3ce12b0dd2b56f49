"""The partitioner: key hashing and the sticky choice for null keys (pure code)."""

from __future__ import annotations

import random
import zlib

import mmh3
from hypothesis import given
from hypothesis import strategies as st

from slog.client.partitioner import (
    Partitioner,
    StickyPartitioner,
    key_partition,
    key_partitioner,
    murmur2,
)


@given(key=st.binary(max_size=64), partitions=st.integers(1, 1000))
def test_key_partition_is_unsigned_murmur3_mod_count(key: bytes, partitions: int) -> None:
    chosen = key_partition(key, partitions)
    assert chosen == mmh3.hash(key, signed=False) % partitions
    assert 0 <= chosen < partitions
    assert key_partition(key, partitions) == chosen  # same key, same partition


@given(key=st.binary(max_size=64), partitions=st.integers(1, 100))
def test_partitioner_hashes_keys_and_honours_explicit_partitions(key: bytes,
                                                                 partitions: int) -> None:
    partitioner = Partitioner()
    assert partitioner.partition("t", key, partitions) == key_partition(key, partitions)
    assert partitioner.partition("t", key, partitions, partition=0) == 0


def test_known_hash_values() -> None:
    # Fixed points, so a change of hash function or seed cannot slip by.
    assert key_partition(b"", 7) == 0
    assert key_partition(b"alice", 1000) == mmh3.hash(b"alice", 0, signed=False) % 1000
    assert mmh3.hash(b"alice", signed=False) == 1280413405


def test_sticky_stays_until_its_batch_closes_then_moves() -> None:
    sticky = StickyPartitioner(random.Random(7))
    first = sticky.partition("t", 5)
    assert all(sticky.partition("t", 5) == first for _ in range(100))
    sticky.batch_closed("t", (first + 1) % 5, 5)  # another partition's batch: no change
    assert sticky.partition("t", 5) == first
    sticky.batch_closed("t", first, 5)
    second = sticky.partition("t", 5)
    assert second != first and 0 <= second < 5


def test_sticky_spreads_over_every_partition() -> None:
    sticky = StickyPartitioner(random.Random(1))
    seen = set()
    for _ in range(200):
        current = sticky.partition("t", 4)
        seen.add(current)
        sticky.batch_closed("t", current, 4)
    assert seen == {0, 1, 2, 3}


def test_sticky_with_one_partition_and_shrinking_counts() -> None:
    sticky = StickyPartitioner(random.Random(3))
    assert sticky.partition("t", 1) == 0
    sticky.batch_closed("t", 0, 1)
    assert sticky.partition("t", 1) == 0
    big = StickyPartitioner(random.Random(3))
    big.partition("u", 1000)
    assert big.partition("u", 2) in (0, 1)  # a stale choice beyond the count is redrawn
    assert Partitioner(random.Random(3)).partition("v", None, 3) in range(3)


@given(key=st.binary(max_size=64), partitions=st.integers(1, 1000))
def test_murmur2_is_kafka_pythons_default_partitioner_hash(key: bytes, partitions: int) -> None:
    from kafka.partitioner.default import murmur2 as reference

    assert murmur2(key) == reference(key) & 0xFFFFFFFF
    assert key_partitioner("murmur2")(key, partitions) == \
        (reference(key) & 0x7FFFFFFF) % partitions


@given(key=st.binary(max_size=64), partitions=st.integers(1, 1000))
def test_crc32_is_the_ieee_crc_mod_count(key: bytes, partitions: int) -> None:
    assert key_partitioner("crc32")(key, partitions) == zlib.crc32(key) % partitions


def test_partitioner_uses_the_named_hash_for_keys_only() -> None:
    partitioner = Partitioner(random.Random(5), hash_name="crc32")
    assert partitioner.partition("t", b"alice", 13) == zlib.crc32(b"alice") % 13
    assert partitioner.partition("t", None, 13) == partitioner.sticky.partition("t", 13)
