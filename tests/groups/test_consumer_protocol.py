"""The consumer protocol's subscription and assignment, checked byte for byte against
kio's classes (generated from Kafka's own ConsumerProtocol*.json)."""

from __future__ import annotations

import importlib
import io
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.serial import entity_writer
from kio.static.primitive import i32

from slog.core.consumer_protocol import (
    Assignment,
    StickyUserData,
    Subscription,
    WireFormatError,
    decode_assignment,
    decode_sticky_user_data,
    decode_subscription,
    encode_assignment,
    encode_sticky_user_data,
    encode_subscription,
)

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
# Grouped by topic, as the wire format stores them.
partitions = st.lists(st.tuples(st.sampled_from(["a", "b", "topic-c"]),
                                st.integers(0, 2**31 - 1)), max_size=6, unique=True
                      ).map(lambda ps: sorted(ps, key=lambda tp: tp[0]))


def _grouped(parts: Any) -> list[tuple[str, list[int]]]:
    out: dict[str, list[int]] = {}
    for topic, p in parts:
        out.setdefault(topic, []).append(p)
    return list(out.items())


def _kio_bytes(schema: str, version: int, **fields: Any) -> bytes:
    module = importlib.import_module(f"kio.schema.{schema}.v{version}.data")
    cls = next(getattr(module, n) for n in dir(module)
               if n.startswith("ConsumerProtocol") and isinstance(getattr(module, n), type))
    if "owned_partitions" in fields or "assigned_partitions" in fields:
        key = "owned_partitions" if "owned_partitions" in fields else "assigned_partitions"
        fields[key] = tuple(module.TopicPartition(topic=t, partitions=tuple(i32(p) for p in ps))
                            for t, ps in _grouped(fields[key]))
    buf = io.BytesIO()
    entity_writer(cls)(buf, cls(**fields))
    return version.to_bytes(2, "big") + buf.getvalue()


@settings(max_examples=60, deadline=None)
@given(version=st.integers(0, 3), topics=st.lists(names, max_size=4),
       user_data=st.none() | st.binary(max_size=20), owned=partitions,
       generation=st.integers(-1, 2**31 - 1), rack=st.none() | names)
def test_subscription_matches_kio(version: int, topics: list[str], user_data: bytes | None,
                                  owned: list[tuple[str, int]], generation: int,
                                  rack: str | None) -> None:
    fields: dict[str, Any] = {"topics": tuple(topics), "user_data": user_data}
    if version >= 1:
        fields["owned_partitions"] = owned
    if version >= 2:
        fields["generation_id"] = i32(generation)
    if version >= 3:
        fields["rack_id"] = rack
    ours = Subscription(tuple(topics), user_data, tuple(owned) if version >= 1 else (),
                        generation if version >= 2 else -1, rack if version >= 3 else None,
                        version)
    encoded = encode_subscription(ours)
    assert encoded == _kio_bytes("consumer_protocol_subscription", version, **fields)
    assert decode_subscription(encoded) == ours


@settings(max_examples=60, deadline=None)
@given(version=st.integers(0, 3), assigned=partitions,
       user_data=st.none() | st.binary(max_size=20))
def test_assignment_matches_kio(version: int, assigned: list[tuple[str, int]],
                                user_data: bytes | None) -> None:
    ours = Assignment(tuple(assigned), user_data, version)
    encoded = encode_assignment(ours)
    assert encoded == _kio_bytes("consumer_protocol_assignment", version,
                                 assigned_partitions=assigned, user_data=user_data)
    assert decode_assignment(encoded) == ours


def test_newer_versions_parse_as_the_newest_known() -> None:
    sub = Subscription(("t",), None, (("t", 1),), 4, "rack-a", version=3)
    newer = b"\x00\x07" + encode_subscription(sub)[2:] + b"future fields"
    assert decode_subscription(newer) == Subscription(("t",), None, (("t", 1),), 4, "rack-a", 7)


def test_empty_assignment_bytes_mean_no_partitions() -> None:
    assert decode_assignment(b"") == Assignment(())


@pytest.mark.parametrize("data", [b"\x00", b"\xff\xff", b"\x00\x00\x7f\xff\xff\xff",
                                  b"\x00\x01\x00\x00\x00\x01\x00\x05ab"])
def test_garbage_raises_wire_format_error(data: bytes) -> None:
    with pytest.raises(WireFormatError):
        decode_subscription(data)


def test_sticky_user_data_is_javas_v1_layout() -> None:
    data = encode_sticky_user_data([("t", 0), ("t", 2), ("u", 1)], 7)
    assert data == (b"\x00\x00\x00\x02" b"\x00\x01t\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x02"
                    b"\x00\x01u\x00\x00\x00\x01\x00\x00\x00\x01" b"\x00\x00\x00\x07")
    assert decode_sticky_user_data(data) == StickyUserData((("t", 0), ("t", 2), ("u", 1)), 7)
    # Version 0 has no generation.
    assert decode_sticky_user_data(data[:-4]).generation is None
