"""Small JSON files of a data dir: ``cluster.json`` and ``brokers/<id>/broker.json``."""

from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from slog.core.checkpoint import create_exclusively, write_atomically
from slog.core.errors import DataDirError
from slog.core.names import DataDirLayout

FORMAT_VERSION = 1


@dataclass(frozen=True)
class ClusterInfo:
    cluster_id: str
    created_at: float
    format_version: int = FORMAT_VERSION


def load_or_create_cluster(layout: DataDirLayout) -> ClusterInfo:
    """Read cluster.json, creating it exactly once even if brokers race to start."""
    path = layout.cluster_file
    if not path.exists():
        info = ClusterInfo(cluster_id=_new_cluster_id(), created_at=time.time())
        # Durable before its name appears: a power cut must not leave an empty file
        # that no broker can start with. Another broker may win the race: fine.
        create_exclusively(path, json.dumps(asdict(info), indent=2).encode())
    try:
        data = json.loads(path.read_text())
        info = ClusterInfo(**data)
    except (ValueError, TypeError) as exc:
        raise DataDirError(f"{path} is not a valid slog cluster file: {exc}") from exc
    if info.format_version > FORMAT_VERSION:
        raise DataDirError(
            f"{path} has format version {info.format_version}; this slog understands "
            f"{FORMAT_VERSION}. Upgrade slog to open this data dir."
        )
    return info


def read_cluster_id(layout: DataDirLayout) -> str | None:
    """The data dir's cluster id for a reader; None when there is no (valid) cluster.json."""
    try:
        return str(json.loads(layout.cluster_file.read_text())["cluster_id"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _new_cluster_id() -> str:
    # Kafka's cluster ids are 22-character URL-safe base64 UUIDs.
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass(frozen=True)
class BrokerInfo:
    broker_id: int
    host: str
    port: int
    pid: int
    started_at: float
    rack: str | None = None  # broker.rack; absent from older broker.json files
    # Every listener's advertised endpoint (Endpoint.to_record); host/port above are the
    # inter-broker listener's. Empty in broker.json files of older versions.
    listeners: list[dict[str, Any]] = field(default_factory=list, hash=False, compare=False)

    @property
    def incarnation(self) -> str:
        return f"{self.pid}@{self.started_at:.6f}"


def write_broker_info(layout: DataDirLayout, info: BrokerInfo) -> None:
    path = layout.broker(info.broker_id).info
    write_atomically(path, json.dumps(asdict(info), indent=2).encode())  # mode 0600


def read_broker_info(layout: DataDirLayout, broker_id: int) -> BrokerInfo | None:
    path = layout.broker(broker_id).info
    try:
        return BrokerInfo(**json.loads(path.read_text()))
    except (FileNotFoundError, ValueError, TypeError):
        return None


def known_broker_ids(layout: DataDirLayout) -> list[int]:
    brokers = layout.brokers_dir
    if not brokers.is_dir():
        return []
    return sorted(int(p.name) for p in brokers.iterdir() if p.name.isdigit())

