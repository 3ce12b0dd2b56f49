"""The power-cut file system itself: what survives a cut and what does not."""

from __future__ import annotations

import mmap
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from slog.core.names import fsync_dir
from tests.powerfs import PowerFS, available

pytestmark = pytest.mark.skipif(available() is not None, reason=str(available()))


@pytest.fixture(scope="module")
def powerfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PowerFS]:
    with PowerFS(tmp_path_factory.mktemp("powerfs")) as fs:
        yield fs


@pytest.fixture
def root(powerfs: PowerFS, request: pytest.FixtureRequest) -> Path:
    """A directory of its own for each test, durable in the mount's root."""
    powerfs.cut()  # nothing left over from the test before
    path = powerfs.mount / request.node.name
    path.mkdir()
    fsync_dir(powerfs.mount)
    return path


def write_synced(path: Path, data: bytes) -> None:
    with open(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    fsync_dir(path.parent)


def test_synced_data_survives_and_unsynced_data_does_not(powerfs: PowerFS, root: Path) -> None:
    path = root / "segment"
    write_synced(path, b"durable")
    with open(path, "ab") as handle:
        handle.write(b"+lost")
    with open(path, "r+b") as handle:
        handle.write(b"D")  # an overwrite inside the durable part
    assert path.read_bytes() == b"Durable+lost"
    dropped = powerfs.cut()
    assert dropped["bytes_dropped"] == 6
    assert path.read_bytes() == b"durable"


def test_fdatasync_makes_data_durable(powerfs: PowerFS, root: Path) -> None:
    path = root / "log"
    write_synced(path, b"")
    with open(path, "ab") as handle:
        handle.write(b"abc")
        handle.flush()
        os.fdatasync(handle.fileno())
        handle.write(b"def")
    powerfs.cut()
    assert path.read_bytes() == b"abc"


def test_unsynced_creates_and_renames_are_undone(powerfs: PowerFS, root: Path) -> None:
    write_synced(root / "old", b"old")
    write_synced(root / "replaced", b"replaced")
    # a new file, fsynced itself, but its directory is not
    with open(root / "new", "wb") as handle:
        handle.write(b"new")
        os.fsync(handle.fileno())
    os.rename(root / "old", root / "renamed")
    os.replace(root / "new", root / "replaced")
    os.link(root / "renamed", root / "linked")
    (root / "sub").mkdir()
    write_synced(root / "sub" / "inner", b"inner")  # its directory's entry is not durable
    assert sorted(os.listdir(root)) == ["linked", "renamed", "replaced", "sub"]
    powerfs.cut()
    assert sorted(os.listdir(root)) == ["old", "replaced"]
    assert (root / "old").read_bytes() == b"old"
    assert (root / "replaced").read_bytes() == b"replaced"


def test_fsync_of_the_directory_makes_entries_durable(powerfs: PowerFS, root: Path) -> None:
    write_synced(root / "a", b"a")
    os.rename(root / "a", root / "b")
    (root / "c").write_bytes(b"")
    fsync_dir(root)
    os.unlink(root / "c")  # not durable: comes back, with its durable content
    powerfs.cut()
    assert sorted(os.listdir(root)) == ["b", "c"]
    assert (root / "b").read_bytes() == b"a"


def test_an_unlinked_file_comes_back_with_its_synced_data(powerfs: PowerFS,
                                                          root: Path) -> None:
    write_synced(root / "f", b"synced")
    with open(root / "f", "ab") as handle:
        handle.write(b" and more")
    os.unlink(root / "f")
    powerfs.cut()
    assert (root / "f").read_bytes() == b"synced"


def test_removed_and_renamed_directories_come_back(powerfs: PowerFS, root: Path) -> None:
    (root / "topic-0").mkdir()
    write_synced(root / "topic-0" / "0.log", b"records")
    fsync_dir(root)
    os.rename(root / "topic-0", root / "topic-0.delete")  # as a topic deletion does
    (root / "gone").mkdir()
    fsync_dir(root)
    os.unlink(root / "topic-0.delete" / "0.log")
    os.rmdir(root / "topic-0.delete")
    os.rmdir(root / "gone")
    powerfs.cut()
    assert sorted(os.listdir(root)) == ["gone", "topic-0.delete"]
    assert (root / "topic-0.delete" / "0.log").read_bytes() == b"records"


def test_truncate_is_undone(powerfs: PowerFS, root: Path) -> None:
    path = root / "t"
    write_synced(path, b"0123456789")
    os.truncate(path, 3)
    with open(path, "r+b") as handle:
        handle.seek(5)
        handle.write(b"xy")
    assert path.read_bytes() == b"012\0\0xy"
    with open(path, "wb"):
        pass  # O_TRUNC
    powerfs.cut()
    assert path.read_bytes() == b"0123456789"


def test_mmap_writes_are_durable_only_after_msync(powerfs: PowerFS, root: Path) -> None:
    path = root / "index"
    write_synced(path, b"")
    with open(path, "r+b") as handle:
        os.posix_fallocate(handle.fileno(), 0, 8192)
        view = mmap.mmap(handle.fileno(), 8192)
        view[0:4] = b"kept"
        view.flush()  # msync: an fsync of the file
        view[4096:4100] = b"lost"
        view.close()
    assert path.read_bytes()[4096:4100] == b"lost"
    powerfs.cut()
    data = path.read_bytes()
    assert len(data) == 8192
    assert data[:4] == b"kept"
    assert data[4096:4100] == b"\0\0\0\0"


def test_mmap_writes_of_a_killed_process_are_dropped(powerfs: PowerFS, root: Path) -> None:
    path = root / "mapped"
    write_synced(path, b"\0" * 4096)
    script = (f"import mmap, os, signal\n"
              f"h = open({str(path)!r}, 'r+b'); m = mmap.mmap(h.fileno(), 4096)\n"
              f"m[0:5] = b'dirty'; os.kill(os.getpid(), signal.SIGKILL)\n")
    done = subprocess.run([sys.executable, "-c", script])
    assert done.returncode == -9
    powerfs.cut()
    assert path.read_bytes() == b"\0" * 4096


def test_fallocate_grows_the_file_and_is_undone_unless_synced(powerfs: PowerFS,
                                                               root: Path) -> None:
    path = root / "preallocated"
    write_synced(path, b"head")
    with open(path, "r+b") as handle:
        os.posix_fallocate(handle.fileno(), 0, 64 << 20)  # one call, not 16k writes
        assert os.fstat(handle.fileno()).st_size == 64 << 20
    powerfs.cut()
    assert path.read_bytes() == b"head"
    with open(path, "r+b") as handle:
        os.posix_fallocate(handle.fileno(), 0, 1 << 20)
        os.fsync(handle.fileno())
    powerfs.cut()
    assert path.stat().st_size == 1 << 20


def test_utime_reaches_stat(root: Path) -> None:
    path = root / "heartbeat"
    path.write_bytes(b"")
    os.utime(path, (1_000_000, 2_000_000))
    assert path.stat().st_mtime == 2_000_000
    os.utime(path)
    assert abs(path.stat().st_mtime - os.stat(root).st_mtime) < 60


def _refused_elsewhere(path: Path, call: str) -> bool:
    """Whether another process's ``fcntl.<call>(LOCK_EX | LOCK_NB)`` on ``path`` is
    refused as held (EAGAIN/EACCES; any other error, such as EINVAL, is not that)."""
    other = subprocess.run([sys.executable, "-c", (
        "import fcntl, sys\n"
        f"h = open({str(path)!r}, 'a')\n"
        f"try:\n    fcntl.{call}(h, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "except OSError as e:\n    sys.exit(3 if e.errno in (11, 13) else 4)\n")])
    return other.returncode == 3


def test_o_excl_and_locks_work_across_processes(root: Path) -> None:
    path = root / "controller.lock"
    os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    with pytest.raises(FileExistsError):
        os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    import portalocker

    with open(path, "a") as handle:
        portalocker.lock(handle, portalocker.LOCK_EX | portalocker.LOCK_NB)
        assert _refused_elsewhere(path, "flock")  # the lock held here is seen elsewhere


def test_posix_locks_work_across_processes(root: Path) -> None:
    """fcntl (POSIX) record locks as well as flock: the kernel applies them."""
    import fcntl

    path = root / "posix.lock"
    with open(path, "a") as handle:
        fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert _refused_elsewhere(path, "lockf")
