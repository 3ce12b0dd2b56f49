"""__consumer_offsets records: Kafka's key and value schemas, byte for byte."""

from __future__ import annotations

import struct

import pytest

from slog.groups.offsets import OffsetAndMetadata
from slog.groups.records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    WireFormatError,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_value,
    encode_offset_value,
)


def _s(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def test_offset_commit_key_v1() -> None:
    key = OffsetKey("g1", "orders", 7).encode()
    assert key == b"\x00\x01" + _s("g1") + _s("orders") + b"\x00\x00\x00\x07"
    assert decode_key(key) == OffsetKey("g1", "orders", 7)
    # Version 0 has the same layout.
    assert decode_key(b"\x00\x00" + key[2:]) == OffsetKey("g1", "orders", 7)


def test_group_metadata_key_v2() -> None:
    assert GroupKey("g1").encode() == b"\x00\x02" + _s("g1")
    assert decode_key(GroupKey("g1").encode()) == GroupKey("g1")


def test_unknown_key_versions_are_skipped() -> None:
    assert decode_key(b"\x00\x05" + _s("whatever")) is None


def test_offset_commit_value_v3() -> None:
    value = OffsetAndMetadata(42, 3, "meta", 1_700_000_000_000)
    data = encode_offset_value(value)
    assert data == (b"\x00\x03" + struct.pack(">qi", 42, 3) + _s("meta")
                    + struct.pack(">q", 1_700_000_000_000))
    assert decode_offset_value(data) == value


def test_offset_commit_value_v1_carries_an_expire_timestamp() -> None:
    value = OffsetAndMetadata(42, -1, "", 1000, expire_timestamp_ms=5000)
    data = encode_offset_value(value)
    assert data == b"\x00\x01" + struct.pack(">q", 42) + _s("") + struct.pack(">qq", 1000, 5000)
    assert decode_offset_value(data) == value


@pytest.mark.parametrize("version", [0, 2])
def test_old_offset_commit_values(version: int) -> None:
    data = struct.pack(">hq", version, 9) + _s("m") + struct.pack(">q", 77)
    assert decode_offset_value(data) == OffsetAndMetadata(9, -1, "m", 77)


def _member(i: int) -> MemberValue:
    return MemberValue(f"c-{i}", f"instance-{i}" if i else None, f"client-{i}", "/127.0.0.1",
                       30000, 10000, b"\x00\x01sub", b"\x00\x01asg")


def test_group_metadata_value_v3_round_trip() -> None:
    value = GroupValue("consumer", 5, "range", "c-0", 1_700_000_000_000,
                       (_member(0), _member(1)))
    data = encode_group_value(value)
    assert data[:2] == b"\x00\x03"
    assert data.startswith(b"\x00\x03" + _s("consumer") + b"\x00\x00\x00\x05" + _s("range")
                           + _s("c-0") + struct.pack(">q", 1_700_000_000_000)
                           + b"\x00\x00\x00\x02" + _s("c-0") + b"\xff\xff")
    assert decode_group_value(data) == value


def test_group_metadata_value_v0_without_rebalance_timeout() -> None:
    data = (b"\x00\x00" + _s("consumer") + struct.pack(">i", 2) + _s("range") + _s("m")
            + struct.pack(">i", 1) + _s("m") + _s("cid") + _s("/h") + struct.pack(">i", 6000)
            + struct.pack(">i", 1) + b"s" + struct.pack(">i", 1) + b"a")
    value = decode_group_value(data)
    assert value.current_state_timestamp_ms == -1
    assert value.members == (MemberValue("m", None, "cid", "/h", 6000, 6000, b"s", b"a"),)


def test_empty_group_metadata() -> None:
    value = GroupValue("consumer", 3, None, None, 5, ())
    assert decode_group_value(encode_group_value(value)) == value


@pytest.mark.parametrize("data", [b"", b"\x00\x03\x00", b"\x00\x09" + b"\x00" * 30,
                                  b"\x00\x03" + struct.pack(">h", 50) + b"short"])
def test_garbage_values_raise(data: bytes) -> None:
    with pytest.raises(WireFormatError):
        decode_group_value(data)
    with pytest.raises(WireFormatError):
        decode_offset_value(data)


def test_keys_and_values_out_of_range_raise() -> None:
    with pytest.raises(WireFormatError):  # no partition is negative
        decode_key(b"\x00\x01" + _s("g") + _s("t") + struct.pack(">i", -1))
    with pytest.raises(WireFormatError):  # generations start at 0
        decode_group_value(b"\x00\x03" + _s("consumer") + struct.pack(">i", -1) + b"\xff\xff"
                           + b"\xff\xff" + struct.pack(">qi", 0, 0))
