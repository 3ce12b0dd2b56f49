"""Group placement must match Kafka's: abs(groupId.hashCode()) % partitions."""

from __future__ import annotations

import pytest

from slog.groups.placement import java_abs, java_string_hash, partition_for


@pytest.mark.parametrize(("text", "expected"), [
    ("", 0),
    ("hello", 99162322),
    ("Aa", 2112),  # the classic collision with "BB"
    ("BB", 2112),
    ("日本", 835047),  # BMP characters are one UTF-16 unit each
    ("\N{GRINNING FACE}", 1772899),  # outside the BMP: a surrogate pair, as in Java
    ("polygenelubricants", -(2**31)),  # hashes to Integer.MIN_VALUE
])
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_utils_abs_maps_min_value_to_zero() -> None:
    assert java_abs(-(2**31)) == 0
    assert java_abs(-5) == 5


def test_partition_for() -> None:
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("polygenelubricants", 50) == 0
    assert java_string_hash("zzzzzzzzzz") == -1580979136
    assert partition_for("zzzzzzzzzz", 7) == 1580979136 % 7  # not Python's -x % 7
    with pytest.raises(ValueError):
        partition_for("g", 0)
