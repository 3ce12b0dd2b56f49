"""``python -m tests.powerfs mount STATE_DIR`` (foreground) | ``cut STATE_DIR`` |
``pending STATE_DIR``: see :mod:`tests.powerfs`."""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import socketserver
import sys
import threading
from pathlib import Path
from typing import Any

from tests.powerfs import CONTROL, MOUNT, OBJECTS, TREE, request


def _syncfs(path: Path) -> None:
    """Make the kernel hand its dirty pages of this file system (shared mappings of
    killed processes) to us as writes, so that the cut drops them too."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    libc.syncfs(fd)  # a C call: it sets errno, it does not raise
    os.close(fd)


def mount(state_dir: Path) -> None:
    import mfusepy

    from tests.powerfs.durability import Durability
    from tests.powerfs.fs import PowerFS

    for name in (MOUNT, TREE):
        (state_dir / name).mkdir(parents=True, exist_ok=True)
    operations = PowerFS(state_dir / TREE, Durability(state_dir / TREE, state_dir / OBJECTS))

    class Control(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            command = self.rfile.readline().decode().strip()
            answer: dict[str, Any]
            try:
                if command == "cut":
                    _syncfs(state_dir / MOUNT)
                    with operations.state_lock:
                        answer = operations.durability.cut().to_json()
                elif command == "pending":
                    with operations.state_lock:
                        answer = {**operations.durability.pending().to_json(),
                                  "entries": operations.durability.unsynced_entries()}
                else:
                    answer = {"error": f"unknown command {command!r}; use cut or pending"}
            except Exception as exc:  # reported to the caller, the mount stays up
                answer = {"error": f"{type(exc).__name__}: {exc}"}
            self.wfile.write(json.dumps(answer).encode() + b"\n")

    control = state_dir / CONTROL
    control.unlink(missing_ok=True)
    server = socketserver.ThreadingUnixStreamServer(str(control), Control)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        mfusepy.FUSE(operations, str(state_dir / MOUNT), foreground=True,
                     fsname="powerfs", default_permissions=True)
    finally:
        server.shutdown()
        control.unlink(missing_ok=True)


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("mount", "cut", "pending"):
        print(__doc__, file=sys.stderr)
        return 2
    command, state_dir = argv[0], Path(argv[1])
    if command == "mount":
        mount(state_dir)
    else:
        print(json.dumps(request(state_dir, command)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
