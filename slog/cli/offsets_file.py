"""The offsets file of ``slog topic delete-records --offsets-json``: kafka-delete-records'
format, ``{"partitions": [{"topic": T, "partition": N, "offset": O}], "version": 1}``.

Pure: text in, ``{(topic, partition): offset}`` out, or a ValueError saying what is
wrong (the CLI reports it as a usage error). A partition named twice is refused, as
kafka-delete-records refuses it: which offset was meant cannot be guessed.
"""

from __future__ import annotations

import json
from typing import Any

SUPPORTED_VERSION = 1


def _field(entry: dict[str, Any], name: str, kind: type, where: str) -> Any:
    value = entry.get(name)
    # bool is an int to Python, never a partition or an offset to us.
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(f"{where}: {name!r} must be a{'n' if kind is int else ''} "
                         f"{'integer' if kind is int else 'string'}, not {value!r}")
    return value


def parse_offsets_json(text: str) -> dict[tuple[str, int], int]:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise ValueError('expected an object {"partitions": [...], "version": 1}')
    version = document.get("version", SUPPORTED_VERSION)
    if version != SUPPORTED_VERSION:
        raise ValueError(f"unsupported version {version!r} (only {SUPPORTED_VERSION})")
    entries = document.get("partitions")
    if not isinstance(entries, list) or not entries:
        raise ValueError('"partitions" must be a non-empty list')
    offsets: dict[tuple[str, int], int] = {}
    for index, entry in enumerate(entries):
        where = f"partitions[{index}]"
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: expected an object {{topic, partition, offset}}")
        topic = _field(entry, "topic", str, where)
        partition = _field(entry, "partition", int, where)
        offset = _field(entry, "offset", int, where)
        if partition < 0:
            raise ValueError(f"{where}: partition must be 0 or more, not {partition}")
        if offset < -1:
            raise ValueError(f"{where}: offset must be -1 (the high watermark) or more, "
                             f"not {offset}")
        if (topic, partition) in offsets:
            raise ValueError(f"{where}: {topic}-{partition} is named more than once")
        offsets[(topic, partition)] = offset
    return offsets
