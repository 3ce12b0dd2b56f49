"""What a power cut keeps: the durable state of a directory tree, kept as undo steps.

The backing tree always holds the *current* state (what a process reads back).
Beside it this module remembers how to get back to the *durable* state, the
state a machine would find after losing power:

* file data: before a write, truncate or size-changing fallocate, the bytes it
  replaces and the size the file had at its last fsync/fdatasync; an fsync of
  the file forgets them (everything up to now is durable);
* directory entries: before a create, mkdir, rename, link, unlink, rmdir or
  symlink, what the entry was at its directory's last fsync (a file, by inode,
  a directory, by inode, a symlink, or nothing); an fsync of the directory
  forgets them.

:meth:`Durability.cut` applies the undo steps: every unsynced write and every
unsynced entry change is gone, for every file at once, as after a power cut.
A file whose old entry has to come back after an unlink or a rename keeps a
hard link in ``objects`` (named by inode number, which that link keeps from
being reused) until nothing needs it any more.

Not modelled: a cut that keeps part of the unsynced data (this one drops all of
it, the harshest outcome), and metadata other than names and sizes (mode,
owner, timestamps pass through and always survive).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

# a directory entry as it was at the directory's last fsync
#   ("file", inode) | ("dir", inode) | ("symlink", target) | None (no entry)
Entry = tuple[str, int | str] | None


@dataclass
class _FileUndo:
    durable_size: int
    steps: list[tuple[int, bytes | int]] = field(default_factory=list)  # (offset, old bytes
    # or the length of a zero run: preallocated space is zeros, no need to keep them)
    unsynced_bytes: int = 0


@dataclass
class CutStats:
    files_reverted: int = 0
    bytes_dropped: int = 0
    entries_restored: int = 0

    def to_json(self) -> dict[str, int]:
        return {"files_reverted": self.files_reverted, "bytes_dropped": self.bytes_dropped,
                "entries_restored": self.entries_restored}


class Durability:
    def __init__(self, tree: Path, objects: Path):
        self.tree = tree
        self.objects = objects
        objects.mkdir(parents=True, exist_ok=True)
        self._files: dict[int, _FileUndo] = {}  # inode -> how to get its durable data back
        self._entries: dict[tuple[int, str], Entry] = {}  # (dir inode, name) -> durable entry

    # -- file data ---------------------------------------------------------------------
    def _undo_of(self, fd: int, path: Path) -> _FileUndo:
        st = os.fstat(fd)
        undo = self._files.get(st.st_ino)
        if undo is None:
            self._keep_object(st.st_ino, path)
            undo = self._files[st.st_ino] = _FileUndo(st.st_size)
        return undo

    def before_write(self, fd: int, path: Path, offset: int, length: int) -> None:
        undo = self._undo_of(fd, path)
        size = os.fstat(fd).st_size
        undo.unsynced_bytes += length
        if offset < size:
            _remember(undo, fd, offset, min(length, size - offset))

    def before_resize(self, fd: int, path: Path, length: int | None = None) -> None:
        """Before a truncate to ``length``, or an fallocate that may grow the file (None)."""
        undo = self._undo_of(fd, path)
        size = os.fstat(fd).st_size
        if length is not None and length < size:
            _remember(undo, fd, length, size - length)

    def file_synced(self, fd: int) -> None:
        inode = os.fstat(fd).st_ino
        if self._files.pop(inode, None) is not None:
            self._release_object(inode)

    # -- directory entries -------------------------------------------------------------
    def before_entry_change(self, path: Path) -> None:
        key = (os.lstat(path.parent).st_ino, path.name)
        if key in self._entries:
            return  # the first change since the directory's fsync holds the durable entry
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            self._entries[key] = None
            return
        if stat.S_ISDIR(st.st_mode):
            self._entries[key] = ("dir", st.st_ino)
        elif stat.S_ISLNK(st.st_mode):
            self._entries[key] = ("symlink", os.readlink(path))
        else:
            self._keep_object(st.st_ino, path)
            self._entries[key] = ("file", st.st_ino)

    def dir_synced(self, path: Path) -> None:
        self._forget_entries(os.lstat(path).st_ino)

    def _forget_entries(self, dir_inode: int) -> None:
        """The entries of this directory are durable as they are now."""
        dropped = [key for key in self._entries if key[0] == dir_inode]
        for key in dropped:
            entry = self._entries.pop(key)
            if entry is None:
                continue
            kind, inode = entry
            if kind == "file":
                self._release_object(int(inode))
            elif kind == "dir" and os.path.isdir(self._dir_object(int(inode))):
                # its removal is durable: nothing under it can come back either
                self._forget_entries(int(inode))
                os.rmdir(self._dir_object(int(inode)))

    def removed_dir(self, path: Path) -> Path:
        """Where rmdir moves ``path`` (empty) instead of removing it: it keeps its inode
        number from being reused while its entry may still have to come back."""
        return self._dir_object(os.lstat(path).st_ino)

    # -- objects: hard links that keep an entry's old file alive -------------------------
    def _object(self, inode: int) -> Path:
        return self.objects / str(inode)

    def _dir_object(self, inode: int) -> Path:
        return self.objects / f"dir-{inode}"

    def _keep_object(self, inode: int, path: Path) -> None:
        with contextlib.suppress(FileExistsError):
            os.link(path, self._object(inode), follow_symlinks=False)

    def _release_object(self, inode: int) -> None:
        if inode in self._files or ("file", inode) in self._entries.values():
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._object(inode))

    def unsynced_entries(self) -> list[str]:
        """The names whose directory entry a cut would change, relative to the tree."""
        restorer = _Restorer(self.tree, self.objects, self._entries)
        names = []
        for (parent_inode, name), entry in self._entries.items():
            parent = restorer.dir_path(parent_inode)
            where = str((parent / name).relative_to(self.tree)) if parent else f"?/{name}"
            names.append(f"{where} (was {entry[0] if entry else 'absent'})")
        return sorted(names)

    # -- the cut -----------------------------------------------------------------------
    def pending(self) -> CutStats:
        """What a cut now would drop."""
        return CutStats(len(self._files), sum(u.unsynced_bytes for u in self._files.values()),
                        len(self._entries))

    def cut(self) -> CutStats:
        """Forget everything not synced: file data first (through the objects, whatever
        names the files have now), then directory entries."""
        stats = self.pending()
        for inode, undo in self._files.items():
            with open(self._object(inode), "r+b") as handle:
                for offset, old in reversed(undo.steps):
                    os.pwrite(handle.fileno(), bytes(old) if isinstance(old, int) else old,
                              offset)
                handle.truncate(undo.durable_size)
        _Restorer(self.tree, self.objects, self._entries).run()
        self._files.clear()
        self._entries.clear()
        for name in os.listdir(self.objects):
            _remove(self.objects / name)
        return stats


def _remember(undo: _FileUndo, fd: int, offset: int, length: int) -> None:
    old = os.pread(fd, length, offset)
    zeros = old.count(0) == len(old)
    undo.steps.append((offset, len(old) if zeros else old))


class _Restorer:
    """Puts directory entries back as they were at their directories' last fsync.

    Entries that must exist come first (directories before files, so that a renamed
    directory is moved back rather than deleted), then entries that must not."""

    def __init__(self, tree: Path, objects: Path, entries: dict[tuple[int, str], Entry]):
        self.tree = tree
        self.objects = objects
        self.entries = entries
        self.aliases: dict[int, int] = {}  # a directory made anew: old inode -> new inode
        self.made: set[int] = set()  # their new inodes (maybe a reused number)
        self._dirs: dict[int, Path] | None = None

    def dirs(self) -> dict[int, Path]:
        if self._dirs is None:
            self._dirs = {os.lstat(self.tree).st_ino: self.tree}
            for top, names, _ in os.walk(self.tree):
                for name in names:
                    path = Path(top) / name
                    self._dirs[os.lstat(path).st_ino] = path
            for name in os.listdir(self.objects):  # removed directories, kept by rmdir
                if name.startswith("dir-"):
                    self._dirs[int(name[4:])] = self.objects / name
        return self._dirs

    def dir_path(self, inode: int) -> Path | None:
        if inode in self.aliases:
            return self.dirs().get(self.aliases[inode])
        return None if inode in self.made else self.dirs().get(inode)

    def run(self) -> None:
        for kinds in (("dir",), ("file", "symlink")):
            todo = [(key, entry) for key, entry in self.entries.items()
                    if entry is not None and entry[0] in kinds]
            progress = True
            while todo and progress:  # a parent may only come back in a later round
                progress = False
                for item in list(todo):
                    (parent_inode, name), entry = item
                    parent = self.dir_path(parent_inode)
                    if parent is None:
                        continue
                    assert entry is not None
                    self.restore(parent / name, entry)
                    todo.remove(item)
                    progress = True
        for (parent_inode, name), entry in self.entries.items():
            parent = self.dir_path(parent_inode)
            if entry is None and parent is not None:
                self.remove(parent / name)

    def remove(self, path: Path) -> None:
        if _remove(path):
            self._dirs = None  # paths under it are gone

    def restore(self, path: Path, entry: tuple[str, int | str]) -> None:
        kind, what = entry
        current = _lstat(path)
        if kind == "dir":
            assert isinstance(what, int)
            if current and stat.S_ISDIR(current.st_mode) and \
                    self.aliases.get(what, what) == current.st_ino:
                return
            source = self.dir_path(what)
            self.remove(path)
            if source is not None:
                os.rename(source, path)
            else:
                path.mkdir()  # not seen by rmdir: never happens through the mount
                self.aliases[what] = os.lstat(path).st_ino
                self.made.add(self.aliases[what])
            self._dirs = None
        elif kind == "file":
            if current and current.st_ino == what and not stat.S_ISDIR(current.st_mode):
                return
            self.remove(path)
            os.link(self.objects / str(what), path)
        else:
            if current and stat.S_ISLNK(current.st_mode) and os.readlink(path) == what:
                return
            self.remove(path)
            os.symlink(str(what), path)


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _remove(path: Path) -> bool:
    """Remove whatever ``path`` is; True if it was a directory."""
    st = _lstat(path)
    if st is None:
        return False
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)
        return True
    os.unlink(path)
    return False
