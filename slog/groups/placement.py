"""Which ``__consumer_offsets`` partition holds a group: Kafka's rule, bit for bit.

Kafka computes ``Utils.abs(groupId.hashCode()) % partitionCount``, where
``hashCode`` is Java's ``String.hashCode`` (31-polynomial over UTF-16 code
units, wrapping at 32 bits) and ``Utils.abs`` maps ``Integer.MIN_VALUE`` to 0.
Matching it means a group lands on the same partition as it would in Kafka,
so tools that read ``__consumer_offsets`` find it where they expect.
"""

from __future__ import annotations

from slog.core.names import OFFSETS_TOPIC as OFFSETS_TOPIC

_INT_MIN = -(1 << 31)


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def java_abs(value: int) -> int:
    """Kafka's ``Utils.abs``: like Math.abs, but MIN_VALUE gives 0, not itself."""
    return 0 if value == _INT_MIN else abs(value)


def partition_for(group_id: str, partitions: int) -> int:
    if partitions <= 0:
        raise ValueError(f"{OFFSETS_TOPIC} needs at least one partition, not {partitions}")
    return java_abs(java_string_hash(group_id)) % partitions
