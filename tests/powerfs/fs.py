"""The FUSE side of powerfs: every operation passes through to the backing tree, and
whatever a power cut would undo is first told to :class:`Durability`.

fsync and fdatasync only mark data durable (the backing tree's own durability does
not matter to a test, and skipping its fsyncs keeps the file system fast). Locks
(flock, fcntl) are left to the kernel, which applies them across the processes of
this machine as on a local file system. Attribute and entry caching is off, so that
``stat`` shows mtimes and sizes at once and a cut is seen by the next lookup.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import threading
import time
from pathlib import Path
from typing import Any

import mfusepy

from tests.powerfs.durability import Durability

FALLOC_FL_KEEP_SIZE = 1
UTIME_NOW = (1 << 30) - 1
UTIME_OMIT = (1 << 30) - 2
_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


class PowerFS(mfusepy.Operations):  # type: ignore[misc]
    use_ns = True  # utimens gets nanoseconds

    def __init__(self, tree: Path, durability: Durability):
        self.tree = tree
        self.durability = durability
        # Operations that change what a cut undoes, and the cut itself, take turns. Not
        # named `lock`: mfusepy would take it for the FUSE POSIX-lock operation, and every
        # fcntl lock (and every close) would call it and fail with EINVAL.
        self.state_lock = threading.Lock()

    def _real(self, path: str) -> Path:
        return self.tree / path.lstrip("/")

    def init_with_config(self, conn: Any, config: Any) -> None:
        if config is not None:
            config.entry_timeout = 0.0
            config.negative_timeout = 0.0
            config.attr_timeout = 0.0
            config.use_ino = 1

    # -- reading -----------------------------------------------------------------------
    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        st = os.fstat(fh) if fh is not None else os.lstat(self._real(path))
        attrs = {key: getattr(st, key) for key in (
            "st_mode", "st_ino", "st_nlink", "st_uid", "st_gid", "st_size", "st_blocks",
            "st_blksize")}
        attrs.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
        return attrs

    def access(self, path: str, amode: int) -> int:
        if not os.access(self._real(path), amode):
            raise mfusepy.FuseOSError(errno.EACCES)
        return 0

    def readdir(self, path: str, fh: int) -> list[tuple[str, dict[str, int], int]]:
        # with use_ino the kernel needs each entry's inode (glibc skips inode 0)
        real = self._real(path)
        here = os.lstat(real)
        entries = [(".", {"st_mode": here.st_mode, "st_ino": here.st_ino}, 0),
                   ("..", {"st_mode": here.st_mode, "st_ino": here.st_ino}, 0)]
        with os.scandir(real) as found:
            for entry in found:
                st = entry.stat(follow_symlinks=False)
                entries.append((entry.name, {"st_mode": st.st_mode, "st_ino": st.st_ino}, 0))
        return entries

    def readlink(self, path: str) -> str:
        return os.readlink(self._real(path))

    def statfs(self, path: str) -> dict[str, int]:
        st = os.statvfs(self._real(path))
        return {key: getattr(st, key) for key in (
            "f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files",
            "f_flag", "f_frsize", "f_namemax")}

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        return os.pread(fh, size, offset)

    # -- metadata that always survives ---------------------------------------------------
    def chmod(self, path: str, mode: int) -> int:
        os.chmod(self._real(path), mode)
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        os.chown(self._real(path), uid, gid, follow_symlinks=False)
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        real = self._real(path)
        if times is None:
            os.utime(real, follow_symlinks=False)
            return 0
        # os.utime() without times reaches us as UTIME_NOW (mfusepy passes the raw
        # timespec, seconds 0): resolve it here, and UTIME_OMIT to the time as it is.
        st = os.lstat(real)
        now = time.time_ns()
        atime, mtime = (now if t == UTIME_NOW else old if t == UTIME_OMIT else t
                        for t, old in zip(times, (st.st_atime_ns, st.st_mtime_ns), strict=True))
        os.utime(real, ns=(atime, mtime), follow_symlinks=False)
        return 0

    # -- directory entries: durable at the directory's fsync -----------------------------
    def _entry_change(self, *paths: str) -> None:
        for path in paths:
            self.durability.before_entry_change(self._real(path))

    def mkdir(self, path: str, mode: int) -> int:
        with self.state_lock:
            self._entry_change(path)
            os.mkdir(self._real(path), mode)
        return 0

    def rmdir(self, path: str) -> int:
        with self.state_lock:
            self._entry_change(path)
            real = self._real(path)
            if any(os.scandir(real)):
                raise mfusepy.FuseOSError(errno.ENOTEMPTY)
            os.rename(real, self.durability.removed_dir(real))
        return 0

    def unlink(self, path: str) -> int:
        with self.state_lock:
            self._entry_change(path)
            os.unlink(self._real(path))
        return 0

    def rename(self, old: str, new: str) -> int:
        with self.state_lock:
            self._entry_change(old, new)
            os.rename(self._real(old), self._real(new))
        return 0

    def link(self, target: str, source: str) -> int:  # target: the new name
        with self.state_lock:
            self._entry_change(target)
            os.link(self._real(source), self._real(target))
        return 0

    def symlink(self, target: str, source: str) -> int:  # target: the link, source: its text
        with self.state_lock:
            self._entry_change(target)
            os.symlink(source, self._real(target))
        return 0

    def create(self, path: str, mode: int, flags: int = os.O_WRONLY) -> int:
        with self.state_lock:
            self._entry_change(path)
            return os.open(self._real(path), _backing_flags(flags) | os.O_CREAT, mode)

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        with self.state_lock:
            self.durability.dir_synced(self._real(path))
        return 0

    # -- file data: durable at the file's fsync ------------------------------------------
    def open(self, path: str, flags: int) -> int:
        fd = os.open(self._real(path), _backing_flags(flags) & ~os.O_TRUNC)
        if flags & os.O_TRUNC:
            self.truncate(path, 0, fd)
        return fd

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        with self.state_lock:
            self.durability.before_write(fh, self._real(path), offset, len(data))
            return os.pwrite(fh, data, offset)

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        with self.state_lock:
            fd = fh if fh is not None else os.open(self._real(path), os.O_RDWR)
            try:
                self.durability.before_resize(fd, self._real(path), length)
                os.ftruncate(fd, length)
            finally:
                if fh is None:
                    os.close(fd)
        return 0

    def fallocate(self, path: str, mode: int, offset: int, size: int, fh: int) -> int:
        if mode not in (0, FALLOC_FL_KEEP_SIZE):  # hole punching etc.: slog uses none
            raise mfusepy.FuseOSError(errno.EOPNOTSUPP)
        with self.state_lock:
            if mode == 0:
                self.durability.before_resize(fh, self._real(path))
            if _libc.fallocate(fh, mode, ctypes.c_int64(offset), ctypes.c_int64(size)) != 0:
                raise mfusepy.FuseOSError(ctypes.get_errno())
        return 0

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        with self.state_lock:
            self.durability.file_synced(fh)
        return 0

    def flush(self, path: str, fh: int) -> int:
        return 0

    def release(self, path: str, fh: int) -> int:
        os.close(fh)
        return 0


def _backing_flags(flags: int) -> int:
    """The kernel gives each write its offset (also under O_APPEND), so the backing file
    is opened without O_APPEND: a pwrite must land where the undo step says. A file open
    for writing is opened for reading too: undo steps read what a write replaces."""
    flags &= ~os.O_APPEND
    if flags & os.O_ACCMODE != os.O_RDONLY:
        flags = (flags & ~os.O_ACCMODE) | os.O_RDWR
    return flags
