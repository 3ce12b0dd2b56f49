"""Names that become paths: topic and group validation and the data-dir layout.

Every path under the data dir is built here, after validation, so no client-
supplied string can point outside it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from slog.core.errors import DataDirError, InvalidNameError, InvalidTopicError

MAX_TOPIC_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
DATA_DIR_MODE = 0o700

OFFSETS_TOPIC = "__consumer_offsets"  # committed offsets and group metadata
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, "__cluster_metadata"})

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def default_data_dir() -> Path:
    """``$SLOG_DATA_DIR``, else ``$XDG_DATA_HOME/slog`` (``~/.local/share/slog``)."""
    configured = os.environ.get("SLOG_DATA_DIR")
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "slog"


def validate_topic_name(name: str) -> str:
    """Return ``name`` if Kafka would accept it as a topic, else raise InvalidTopicError."""
    if not isinstance(name, str) or not name:
        raise InvalidTopicError("topic name is empty")
    if name in (".", ".."):
        raise InvalidTopicError(f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_LENGTH:
        raise InvalidTopicError(
            f"topic name is {len(name)} characters long; the limit is {MAX_TOPIC_LENGTH}"
        )
    if not _LEGAL_TOPIC.fullmatch(name):
        bad = sorted({c for c in name if not _LEGAL_TOPIC.fullmatch(c)})
        raise InvalidTopicError(
            f"topic name {name!r} contains illegal characters {''.join(bad)!r}; "
            "only ASCII letters, digits, '.', '_' and '-' are allowed"
        )
    return name


def topic_collides(a: str, b: str) -> bool:
    """Kafka forbids two topics that differ only by '.' versus '_' (metric names clash)."""
    return a != b and a.replace(".", "_") == b.replace(".", "_")


def validate_partition(partition: int) -> int:
    if not isinstance(partition, int) or partition < 0 or partition > 0x7FFFFFFF:
        raise InvalidTopicError(f"partition {partition!r} is not a non-negative int32")
    return partition


def partition_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>``, Kafka's directory name for one partition's log."""
    return f"{validate_topic_name(topic)}-{validate_partition(partition)}"


def parse_partition_dir_name(name: str) -> tuple[str, int]:
    """Inverse of :func:`partition_dir_name`; raises InvalidTopicError if it is not one."""
    topic, sep, number = name.rpartition("-")
    if not sep or not number.isdigit():
        raise InvalidTopicError(f"{name!r} is not a <topic>-<partition> directory")
    return validate_topic_name(topic), int(number)


def ensure_inside(root: Path, candidate: Path) -> Path:
    """Resolve ``candidate`` and refuse it unless it lies under ``root``."""
    resolved_root = root.resolve()
    resolved = candidate.resolve()
    if resolved != resolved_root and resolved_root not in resolved.parents:
        raise InvalidTopicError(f"{candidate} would lie outside the data dir {root}")
    return resolved


def fsync_dir(directory: Path) -> None:
    """Make creations, renames and deletions inside ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_private_dir(path: Path) -> Path:
    """mkdir -p where every directory created is owner-only (0700), and durable.

    ``Path.mkdir(parents=True)`` gives the parents the umask's mode instead. Each new
    directory's parent is fsynced: until then a power loss may forget the directory
    with everything later written under it, fsynced or not (a broker's whole
    directory, or the metadata log's, vanished so under the power-loss test).
    """
    missing = []
    current = path
    while not current.exists():
        missing.append(current)
        current = current.parent
    for directory in reversed(missing):
        directory.mkdir(mode=DATA_DIR_MODE, exist_ok=True)
        fsync_dir(directory.parent)
    return path


def ensure_data_dir(path: str | os.PathLike[str]) -> Path:
    """Create the data dir (mode 0700) if needed and check that it is usable."""
    root = Path(path).expanduser()
    if root.exists() and not root.is_dir():
        raise DataDirError(f"data dir {root} exists and is not a directory")
    try:
        make_private_dir(root)
    except OSError as exc:
        raise DataDirError(f"cannot create data dir {root}: {exc.strerror}") from exc
    if not os.access(root, os.R_OK | os.W_OK | os.X_OK):
        raise DataDirError(f"data dir {root} is not readable and writable by this user")
    return root.resolve()


class DataDirLayout:
    """Where each file of a data dir lives (see docs/ARCHITECTURE.md, "Data directory").

    Every name of the tree is spelled here; the rest of slog asks the layout."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root).expanduser().resolve()
        self.cluster_file = self.root / "cluster.json"  # the cluster id, written once
        self.controller_lock = self.root / "controller.lock"  # held by the controller
        # Who the controller is, at which epoch; its mtime is the last renewal.
        self.controller_lease = self.root / "controller.lease"
        self.metadata_dir = self.root / "metadata"  # holds the metadata log's partition
        # Taken for every metadata append and every controller takeover.
        self.metadata_append_lock = self.metadata_dir / "append.lock"
        self.producer_id_block = self.root / "producer-id-block"  # the next free block
        # SCRAM users (unless sasl.credentials.file names another file), and the
        # password of User:__broker, made by the first broker to start.
        self.credentials_file = self.root / "credentials.json"
        self.inter_broker_secret = self.root / "inter-broker.secret"
        self.tls_dir = self.root / "tls"  # the local CA of `slog cluster up --tls`
        self.brokers_dir = self.root / "brokers"

    def broker_dir(self, broker_id: int) -> Path:
        if not isinstance(broker_id, int) or broker_id < 0:
            raise InvalidNameError(f"broker id {broker_id!r} must be a non-negative integer")
        return self.brokers_dir / str(broker_id)

    def broker(self, broker_id: int) -> BrokerFiles:
        return BrokerFiles(self.broker_dir(broker_id))

    def logs_dir(self, broker_id: int) -> Path:
        return self.broker_dir(broker_id) / "logs"

    def partition_dir(self, broker_id: int, topic: str, partition: int) -> Path:
        logs = self.logs_dir(broker_id)
        return ensure_inside(logs, logs / partition_dir_name(topic, partition))


class BrokerFiles:
    """The files of one broker's directory, ``brokers/<id>/``."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.info = directory / "broker.json"  # where it listens, its pid and incarnation
        self.alive_lock = directory / "alive.lock"  # held for as long as its process runs
        self.heartbeat = directory / "heartbeat"  # touched every beat: its mtime says not hung
        self.starting = directory / "starting"  # present until its first metadata apply
        self.shutting_down = directory / "shutting-down"  # during a controlled shutdown
        self.log = directory / "broker.log"  # the daemon's stdout and stderr
