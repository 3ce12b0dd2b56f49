"""powerfs: a test file system that loses unsynced data on command, as a power cut would.

A test tool, not part of slog. It mounts a FUSE file system (mfusepy over libfuse3)
whose files live in a backing directory, and keeps aside what a power cut would
undo: every write, truncate and preallocation not yet covered by an fsync or
fdatasync of its file (msync of a shared mapping is an fsync), and every create,
mkdir, rename, link, unlink and rmdir not yet covered by an fsync of its directory
(:mod:`tests.powerfs.durability`). A *cut* forgets all of that at once, for every
file, and leaves the durable state behind.

Use it as an object::

    with PowerFS(tmp_path / "state") as fs:      # mounted at fs.mount
        ...                                      # processes write under fs.mount
        fs.cut()                                 # stop the writers first, then cut

or from a shell, which is how ``slog chaos run --power-cut-command`` drives it::

    python -m tests.powerfs mount STATE_DIR &    # mounts STATE_DIR/mnt
    python -m tests.powerfs cut STATE_DIR        # prints what was dropped, as JSON

The processes that wrote must be dead before a cut (a power cut takes them down too):
a cut first flushes the kernel's dirty mmap pages into the file system (as unsynced
writes), then undoes everything unsynced. It needs /dev/fuse, libfuse3 and the right
to mount (root, or fusermount3).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any

MOUNT = "mnt"  # the mount point, inside the state dir
TREE = "tree"  # the backing tree
OBJECTS = "objects"  # hard links that keep replaced files until a cut or an fsync
CONTROL = "control.sock"


def available() -> str | None:
    """Why powerfs cannot run here, or None."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError) as exc:
        return f"mfusepy/libfuse3 missing: {exc}"
    return None


def request(state_dir: Path, command: str, timeout_s: float = 120.0) -> dict[str, Any]:
    """Send one command (``cut``, ``pending``) to the mounted file system."""
    with socket.socket(socket.AF_UNIX) as conn:
        conn.settimeout(timeout_s)
        conn.connect(str(state_dir / CONTROL))
        conn.sendall(command.encode() + b"\n")
        answer = conn.makefile("rb").readline()
    result: dict[str, Any] = json.loads(answer)
    if "error" in result:
        raise RuntimeError(f"powerfs {command}: {result['error']}")
    return result


def _die_with_parent() -> None:
    """In the child: SIGTERM (libfuse unmounts on it) when the test process dies, even
    of a crash that skips every teardown."""
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGTERM)


class PowerFS:
    """A mounted powerfs in a child process, for tests."""

    def __init__(self, state_dir: Path):
        self.state_dir = Path(state_dir)
        self.mount = self.state_dir / MOUNT
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def cut_command(self) -> str:
        return f"{sys.executable} -m tests.powerfs cut {self.state_dir}"

    def start(self, timeout_s: float = 30.0) -> PowerFS:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        root = Path(__file__).resolve().parents[2]  # so that `tests` imports in the child
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
        log = open(self.state_dir / "powerfs.log", "ab")  # noqa: SIM115 (the child keeps it)
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.powerfs", "mount", str(self.state_dir)],
            stdout=log, stderr=log, env=env, preexec_fn=_die_with_parent)
        log.close()
        deadline = time.monotonic() + timeout_s
        while not (os.path.ismount(self.mount) and (self.state_dir / CONTROL).exists()):
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("powerfs did not mount: "
                                   + (self.state_dir / "powerfs.log").read_text()[-2000:])
            time.sleep(0.05)
        return self

    def cut(self) -> dict[str, Any]:
        """Drop everything unsynced (stop the writing processes first)."""
        return request(self.state_dir, "cut")

    def pending(self) -> dict[str, Any]:
        return request(self.state_dir, "pending")

    def stop(self) -> None:
        if self._process is None:
            return
        if os.path.ismount(self.mount):
            subprocess.run(["fusermount3", "-u", "-z", str(self.mount)], capture_output=True)
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process = None

    def __enter__(self) -> PowerFS:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
