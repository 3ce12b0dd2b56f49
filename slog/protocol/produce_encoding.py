"""Hand-written ProduceResponse encoder (v3..v9), straight from the handler's dicts.

librdkafka sends one Produce request per partition batch, so a producer writing
to a thousand partitions gets a thousand small answers where six partitions
need about a hundred. Fitting each answer into kio's version-specific
dataclasses (``shapes.shape``) and walking them with kio's generic writer cost
more than the append it reports. Here the bytes are written directly from the
plain result ``handlers/data.py`` builds (and the quota code may have given a
throttle time): a list of topics, each with its partition dicts, times and
offsets as ints of milliseconds (-1: none).

The output is byte for byte what ``encode_response(header, shape(cls, result))``
produces (tested for every version). Keys a partition dict leaves out get kio's
defaults, as ``shape`` would give them.

Version differences (Kafka's ProduceResponse.json):
  v3-v4  partition: index, error_code, base_offset, log_append_time_ms
  v5     + log_start_offset
  v8     + record_errors [batch_index, batch_index_error_message], error_message
  v9     flexible: compact arrays and strings, tagged fields, response header v1
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

from slog.protocol.headers import RequestHeader, encode_response_header, write_uvarint

MIN_PRODUCE_VERSION = 3
MAX_PRODUCE_VERSION = 9
# v10-v12 only add KIP-951's tagged leader hints (and transaction semantics): with no
# hint to give, their bytes are v9's. v13 names topics by id.
MAX_UNHINTED_VERSION = 12
FIRST_FLEXIBLE_VERSION = 9
FIRST_LOG_START_VERSION = 5
FIRST_RECORD_ERRORS_VERSION = 8

_SIZE = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_PARTITION = struct.Struct(">ihqq")  # index, error_code, base_offset, log_append_time_ms
_PARTITION_V5 = struct.Struct(">ihqqq")  # ... + log_start_offset
_NO_TAGS = b"\x00"


def can_encode(version: int, result: Mapping[str, Any]) -> bool:
    """Whether this encoder writes the answer (else kio does): v3-v9, and v10-v12
    when no partition carries a leader hint."""
    if MIN_PRODUCE_VERSION <= version <= MAX_PRODUCE_VERSION:
        return True
    return MIN_PRODUCE_VERSION <= version <= MAX_UNHINTED_VERSION \
        and not result.get("node_endpoints")


def encode_produce_response(header: RequestHeader, result: Mapping[str, Any]) -> bytes:
    """The framed response (size prefix and response header included)."""
    version = header.api_version
    if not can_encode(version, result):
        raise ValueError(f"no hand-written ProduceResponse v{version} for this answer")
    flexible = version >= FIRST_FLEXIBLE_VERSION
    fixed = _PARTITION_V5 if version >= FIRST_LOG_START_VERSION else _PARTITION
    record_errors = version >= FIRST_RECORD_ERRORS_VERSION
    out = bytearray(4)  # the size, known at the end
    out += encode_response_header(header.correlation_id, 1 if flexible else 0)
    topics: Sequence[Mapping[str, Any]] = result["responses"]
    _array_length(out, len(topics), flexible)
    for topic in topics:
        _string(out, topic["name"], flexible)
        partitions: Sequence[Mapping[str, Any]] = topic["partition_responses"]
        _array_length(out, len(partitions), flexible)
        for partition in partitions:
            log_append_time = partition.get("log_append_time", -1)
            if log_append_time < 0:
                log_append_time = -1  # as kio writes "no append time" (None)
            head = (partition["index"], partition["error_code"], partition["base_offset"],
                    log_append_time)
            out += fixed.pack(*head, partition.get("log_start_offset", -1)) \
                if fixed is _PARTITION_V5 else fixed.pack(*head)
            if record_errors:
                _record_errors(out, partition.get("record_errors", ()), flexible)
                _nullable_string(out, partition.get("error_message"), flexible)
            if flexible:
                out += _NO_TAGS
        if flexible:
            out += _NO_TAGS
    out += _INT32.pack(result.get("throttle_time", 0))
    if flexible:
        out += _NO_TAGS
    _SIZE.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def _record_errors(out: bytearray, errors: Sequence[Mapping[str, Any]], flexible: bool) -> None:
    _array_length(out, len(errors), flexible)
    for error in errors:
        out += _INT32.pack(error["batch_index"])
        _nullable_string(out, error.get("batch_index_error_message"), flexible)
        if flexible:
            out += _NO_TAGS


def _array_length(out: bytearray, n: int, flexible: bool) -> None:
    if flexible:
        out += write_uvarint(n + 1)
    else:
        out += _INT32.pack(n)


def _string(out: bytearray, value: str, flexible: bool) -> None:
    data = value.encode()
    if flexible:
        out += write_uvarint(len(data) + 1)
    else:
        out += _INT16.pack(len(data))
    out += data


def _nullable_string(out: bytearray, value: str | None, flexible: bool) -> None:
    if value is not None:
        _string(out, value, flexible)
    elif flexible:
        out += b"\x00"
    else:
        out += _INT16.pack(-1)

