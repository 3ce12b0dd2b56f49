"""Fit version-independent data into kio's version-specific message classes.

Every Kafka API version has its own generated dataclass in kio, and fields come
and go between versions. Handlers describe a response once, as plain dicts with
Kafka's field names; :func:`shape` drops the keys a version lacks, fills the
defaults it has, and converts plain values to kio's types (timedeltas, error
codes, UUIDs). Nested arrays are shaped recursively.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import TZAware, i32Timedelta, i64Timedelta

Converter = Callable[[Any], Any]


def _identity(value: Any) -> Any:
    return value


def _to_timedelta(value: Any) -> Any:
    if isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    return value


def _to_datetime(value: Any) -> Any:
    """Kafka encodes "no timestamp" as -1; kio models it as None."""
    if isinstance(value, int):
        if value < 0:
            return None
        return datetime.datetime.fromtimestamp(value / 1000, tz=datetime.UTC)
    return value


def _to_error_code(value: Any) -> Any:
    return value if isinstance(value, ErrorCode) else ErrorCode(int(value))


def _to_uuid(value: Any) -> Any:
    if value is None or isinstance(value, uuid.UUID):
        return value
    if isinstance(value, bytes):
        return uuid.UUID(bytes=value)
    return uuid.UUID(str(value))


def _converter_for(annotation: Any) -> Converter:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        inner = _converter_for(members[0]) if len(members) == 1 else _identity
        return lambda value: None if value is None else inner(value)
    if origin is tuple:
        item = _converter_for(typing.get_args(annotation)[0])
        if item is _identity:
            return lambda value: tuple(value)
        return lambda value: tuple(item(v) for v in value)
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return lambda value: shape(annotation, value)
    if isinstance(annotation, type):
        if issubclass(annotation, (i32Timedelta, i64Timedelta)):
            return _to_timedelta
        if issubclass(annotation, ErrorCode):
            return _to_error_code
        if issubclass(annotation, TZAware):
            return _to_datetime
        if issubclass(annotation, uuid.UUID):
            return _to_uuid
    return _identity


_MISSING = dataclasses.MISSING


def _zero_value(annotation: Any) -> Any:
    """What a required field gets when the handler did not mention it."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return None
    if origin is tuple:
        return ()
    if isinstance(annotation, type):
        if issubclass(annotation, uuid.UUID):
            return uuid.UUID(int=0)  # Kafka's "zero UUID": no topic id
        if issubclass(annotation, ErrorCode):
            return ErrorCode.none
        if issubclass(annotation, (i32Timedelta, i64Timedelta)):
            return datetime.timedelta(0)
        if issubclass(annotation, bool):
            return False
        if issubclass(annotation, str):
            return ""
        if issubclass(annotation, bytes):
            return b""
        if issubclass(annotation, int):
            return 0
    return _MISSING


@cache
def _field_plan(cls: type) -> tuple[tuple[str, Converter, Any], ...]:
    hints = typing.get_type_hints(cls)
    plan = []
    for f in dataclasses.fields(cls):
        required = f.default is _MISSING and f.default_factory is _MISSING
        zero = _zero_value(hints[f.name]) if required else _MISSING
        plan.append((f.name, _converter_for(hints[f.name]), zero))
    return tuple(plan)


def shape(cls: type, data: Mapping[str, Any] | Any) -> Any:
    """Build an instance of the kio class ``cls`` from a mapping (or pass one through)."""
    if isinstance(data, cls):
        return data
    if not isinstance(data, Mapping):
        raise TypeError(f"cannot shape {type(data).__name__} into {cls.__name__}")
    kwargs = {}
    for name, convert, zero in _field_plan(cls):
        if name in data:
            kwargs[name] = convert(data[name])
        elif zero is not _MISSING:
            kwargs[name] = zero
    return cls(**kwargs)


def nested_class(cls: type, field: str) -> type:
    """The element class of an array field, e.g. the Topic class of a response."""
    annotation = typing.get_type_hints(cls)[field]
    args = typing.get_args(annotation)
    element: type = args[0] if args else annotation
    return element


def millis(value: datetime.timedelta | int | None, default: int = 0) -> int:
    """A kio timedelta field (or a plain int) as integer milliseconds."""
    if value is None:
        return default
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return int(value)
