"""Shared helpers for the protocol tests: random valid kio entities.

Hypothesis' ``from_type`` can build kio entities but takes ~0.3 s per class to
set up, and we have ~430 (api, version, kind) classes. This schema-driven
generator is orders of magnitude faster and produces only values that survive
an encode/decode round trip (millisecond timedeltas, non-zero UUIDs, ...).

The module also checks the generator itself, so it earns its test_ prefix.
"""

from __future__ import annotations

import datetime
import io
import random
import uuid
from dataclasses import MISSING, Field, fields
from typing import Any

from kio.serial import entity_writer

from slog.protocol import ALL_APIS, ErrorCode, request_class, response_class
from slog.protocol.guard import FieldSchema, field_schema

ALL_CASES: list[tuple[int, int]] = [
    (spec.api_key, version)
    for spec in ALL_APIS
    for version in range(spec.min_version, spec.max_version + 1)
]

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}
_ERROR_CODES = list(ErrorCode)
_TEXT = "abcxyz-._0123456789é€😀"


def _scalar(schema: FieldSchema, rng: random.Random, depth: int, full: bool) -> Any:
    if schema.entity is not None:
        return random_entity(schema.entity, rng, depth + 1, full=full)
    kafka_type = schema.kafka_type
    if kafka_type in _INT_RANGES:
        lo, hi = _INT_RANGES[kafka_type]
        return rng.choice([lo, hi, 0, -1 if lo < 0 else 1, rng.randint(lo, hi)])
    if kafka_type == "string":
        return "".join(rng.choice(_TEXT) for _ in range(rng.randint(0, 12)))
    if kafka_type in ("bytes", "records"):
        return rng.randbytes(rng.randint(0, 40))
    if kafka_type == "bool":
        return rng.random() < 0.5
    if kafka_type == "uuid":
        return uuid.UUID(int=rng.getrandbits(128) | 1)
    if kafka_type == "error_code":
        return rng.choice(_ERROR_CODES)
    if kafka_type == "timedelta_i32":
        return datetime.timedelta(milliseconds=rng.randint(-(2**31), 2**31 - 1))
    if kafka_type == "timedelta_i64":
        return datetime.timedelta(milliseconds=rng.randint(-(2**40), 2**40))
    if kafka_type == "datetime_i64":
        return datetime.datetime.fromtimestamp(rng.randint(0, 2**41) / 1000, datetime.UTC)
    if kafka_type == "float64":
        return rng.uniform(-1e9, 1e9)
    raise AssertionError(f"unhandled kafka_type {kafka_type}")


def _value(f: Field[Any], rng: random.Random, depth: int, full: bool) -> Any:
    schema = field_schema(f)
    tagged = schema.tag is not None
    if tagged and rng.random() < 0.3 and f.default is not MISSING:
        return f.default
    if schema.optional and not tagged and not full and rng.random() < 0.2:
        return None
    if schema.is_array:
        n = rng.choice([1, 2]) if full else 0 if depth > 3 else rng.choice([0, 1, 2, 3])
        return tuple(_scalar(schema, rng, depth, full) for _ in range(n))
    return _scalar(schema, rng, depth, full)


def random_entity(cls: type, rng: random.Random, depth: int = 0, *, full: bool = False) -> Any:
    """A random, round-trippable instance of kio entity class `cls`.

    With `full`, every array has one or two items and nothing optional is
    null (so error responses have something to mirror).
    """
    return cls(**{f.name: _value(f, rng, depth, full) for f in fields(cls)})


def encode_body(entity: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


def classes(api_key: int, version: int) -> tuple[type, type]:
    return request_class(api_key, version), response_class(api_key, version)


def test_generator_builds_encodable_entities_for_every_class() -> None:
    rng = random.Random(0)
    for key, version in ALL_CASES:
        for cls in classes(key, version):
            assert encode_body(random_entity(cls, rng)) is not None
