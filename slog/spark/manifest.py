"""Export manifests: which offsets of which partitions an export wrote.

Each run writes ``<out>/_slog_manifest/<run-id>.json`` after its files are
committed. Spark and pyarrow skip paths that start with ``_``, so the manifests
never show up as data. ``--resume`` starts every partition where the latest
manifest that covers it ended, so repeated exports add each record once.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

MANIFEST_DIR = "_slog_manifest"


@dataclass(frozen=True)
class PartitionEntry:
    topic: str
    partition: int
    from_offset: int  # first offset asked for
    to_offset: int  # exclusive: the next run starts here
    records: int


def new_run_id() -> str:
    """Sortable by time, unique across concurrent runs."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:8]


def manifest_dir(out: str) -> Path:
    return Path(out) / MANIFEST_DIR


def write_manifest(out: str, run_id: str, entries: list[PartitionEntry],
                   details: dict[str, Any]) -> Path:
    """Write the run's manifest atomically (temp file, then rename)."""
    directory = manifest_dir(out)
    directory.mkdir(parents=True, exist_ok=True)
    document = {"run": run_id, "created_ms": int(time.time() * 1000), **details,
                "partitions": [asdict(e) for e in entries]}
    path = directory / f"{run_id}.json"
    temp = directory / f".{run_id}.json.tmp"
    temp.write_text(json.dumps(document, indent=2) + "\n")
    os.replace(temp, path)
    return path


def read_manifests(out: str) -> list[dict[str, Any]]:
    """Every manifest under ``out``, oldest first; unreadable ones raise ValueError."""
    directory = manifest_dir(out)
    if not directory.is_dir():
        return []
    documents = []
    for path in sorted(directory.glob("*.json")):
        try:
            documents.append(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            raise ValueError(f"cannot read export manifest {path}: {exc}") from None
    return documents


def resume_offsets(out: str) -> dict[tuple[str, int], int]:
    """Where each partition's previous exports ended (the furthest ``to_offset``)."""
    offsets: dict[tuple[str, int], int] = {}
    for document in read_manifests(out):
        for entry in document.get("partitions", []):
            key = (str(entry["topic"]), int(entry["partition"]))
            offsets[key] = max(offsets.get(key, 0), int(entry["to_offset"]))
    return offsets
