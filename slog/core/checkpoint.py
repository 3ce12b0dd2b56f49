"""Crash-safe rewrites of small files, and Kafka's offset checkpoint file format.

A rewritten file is either the old version or the new one after a crash, never
a mix: the data goes to a temp file in the same directory, is fsynced, renamed
over the target, and the directory is fsynced so the rename itself is durable.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path

from slog.core.errors import SlogError, StorageError
from slog.core.names import fsync_dir, validate_partition, validate_topic_name

__all__ = ["fsync_dir"]  # kept importable from here, where the other durable writes live

FILE_MODE = 0o600
TEMP_SUFFIX = ".tmp"
CHECKPOINT_VERSION = 0


def write_atomically(path: Path, data: bytes, *, unique_temp: bool = False,
                     durable: bool = True) -> None:
    """Replace ``path`` with ``data`` so that a crash (power loss included) leaves
    the old or the new file, never an empty or torn one.

    ``unique_temp``: the temp file gets a name of its own, for files that several
    processes may rewrite at once (the default ``<name>.tmp`` is for one writer).
    Not ``durable``: neither the file nor the rename is fsynced (a process crash
    still sees old or new; a power loss may leave a torn file, for files whose
    readers check a CRC and can do without them).
    """
    path = Path(path)
    temp = _write_temp(path, data, unique_temp, durable)
    try:
        os.replace(temp, path)
        if durable:
            fsync_dir(path.parent)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from exc


def create_exclusively(path: Path, data: bytes) -> bool:
    """Create ``path`` holding ``data`` unless it exists; False if it did.

    For files several processes race to create once (``cluster.json``): the
    content is on disk before the name appears (a hard link never replaces an
    existing file), and the name is made durable too.
    """
    path = Path(path)
    temp = _write_temp(path, data, unique=True)
    try:
        os.link(temp, path)
        created = True
    except FileExistsError:
        created = False
    except OSError as exc:
        raise StorageError(f"cannot create {path}: {exc.strerror or exc}") from exc
    finally:
        temp.unlink(missing_ok=True)
    try:
        fsync_dir(path.parent)
    except OSError as exc:
        raise StorageError(f"cannot sync {path.parent}: {exc.strerror or exc}") from exc
    return created


def _write_temp(path: Path, data: bytes, unique: bool, durable: bool = True) -> Path:
    """``data`` in a temp file (mode 0600, fsynced if ``durable``) next to ``path``."""
    try:
        if unique:
            fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX,
                                        dir=path.parent)
            temp = Path(name)
        else:
            temp = path.with_name(path.name + TEMP_SUFFIX)
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    except OSError as exc:
        raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from exc
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if durable:
            os.fsync(fd)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    return temp


def parse_versioned_lines(path: Path, text: str, fields: int) -> list[list[str]]:
    """Split Kafka's checkpoint layout: version line, count line, then entry lines."""
    lines = text.splitlines()
    if len(lines) < 2:
        raise StorageError(f"malformed checkpoint file {path}: missing version or count line")
    if lines[0].strip() != str(CHECKPOINT_VERSION):
        raise StorageError(f"unsupported checkpoint version {lines[0].strip()!r} in {path}")
    try:
        count = int(lines[1])
    except ValueError:
        raise StorageError(f"malformed entry count {lines[1]!r} in {path}") from None
    entries = [line.split() for line in lines[2:] if line.strip()]
    if count != len(entries):
        raise StorageError(f"{path} declares {count} entries but holds {len(entries)}")
    for entry in entries:
        if len(entry) != fields:
            raise StorageError(f"malformed line {' '.join(entry)!r} in {path}")
    return entries


def format_versioned_lines(rows: list[str]) -> bytes:
    lines = [str(CHECKPOINT_VERSION), str(len(rows)), *rows]
    return "".join(f"{line}\n" for line in lines).encode()


class OffsetCheckpointFile:
    """``topic partition offset`` lines, as Kafka's recovery-point and HW checkpoints."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        rows = [f"{topic} {partition} {offset}" for (topic, partition), offset in offsets.items()]
        with self._lock:
            write_atomically(self.path, format_versioned_lines(rows))

    def read(self) -> dict[tuple[str, int], int]:
        """The stored offsets; empty if the file does not exist yet.

        Raises StorageError if the file is malformed.
        """
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as exc:
            raise StorageError(f"cannot read {self.path}: {exc}") from exc
        result: dict[tuple[str, int], int] = {}
        for topic, partition, offset in parse_versioned_lines(self.path, text, 3):
            try:
                key = (validate_topic_name(topic), validate_partition(int(partition)))
                result[key] = int(offset)
            except (ValueError, SlogError) as exc:
                raise StorageError(
                    f"malformed line {topic} {partition} {offset!r} in {self.path}: {exc}"
                ) from exc
        return result
