"""A local cluster of broker processes to hurt, on one data dir.

Brokers start and stop through ``slog.broker.daemon`` (what ``slog cluster up``
uses); state is read from the data dir through ``slog.core.cluster_view.DataDirWatcher``
(what ``slog cluster status`` uses). With ``tmpfs_mb`` each broker's directory
is a tmpfs of its own, so a full disk can be made real without touching the
machine's disks; without mount rights, a full disk is simulated with
RLIMIT_FSIZE on the broker process.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from slog.broker.daemon import (
    BrokerStartError,
    in_parallel,
    is_running,
    start_daemon,
    stop_daemon,
)
from slog.core.cluster_view import ClusterView, DataDirWatcher
from slog.core.datadir import read_broker_info
from slog.core.errors import SlogError
from slog.core.names import DataDirLayout, ensure_data_dir, make_private_dir

FILLER = "chaos-disk-filler"
FSIZE_LIMIT = 1 << 20  # the simulated full disk: no file may grow past 1 MiB


class RecoveryTimeout(SlogError, RuntimeError):
    """The cluster did not get healthy again in time: a hang worth reporting."""


def wait_for(condition: Callable[[], object], timeout_s: float, what: str,
             interval_s: float = 0.05) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise RecoveryTimeout(f"timed out after {timeout_s:g}s waiting for {what}")
        time.sleep(interval_s)


def _fill(path: Path) -> int:
    """Reserve all the free space of ``path``'s file system (to within a page) in one file.

    Halving steps: the broker keeps writing meanwhile, and a failed fallocate reserves
    nothing, so one attempt at the whole free size could leave the disk empty."""
    size = 0
    with open(path, "ab") as filler:
        step = shutil.disk_usage(path.parent).free
        while step >= 4096:
            try:
                os.posix_fallocate(filler.fileno(), size, step)
                size += step
            except OSError:
                step //= 2
    return size


LOG_RESERVE = 1 << 20  # room kept for broker.log while its disk is full


def _reserve_log_space(log: Path, size: int = LOG_RESERVE) -> None:
    """Give ``log`` blocks past its end without growing it (fallocate KEEP_SIZE), so the
    broker can still log the writes it refuses while the rest of its tmpfs is full: its
    log lives on that tmpfs, and an append that needs a new page would fail silently."""
    import ctypes
    import ctypes.util

    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    keep_size = 1  # FALLOC_FL_KEEP_SIZE
    with contextlib.suppress(OSError), open(log, "ab") as handle:
        libc.fallocate(handle.fileno(), keep_size, ctypes.c_int64(handle.tell()),
                       ctypes.c_int64(size))


class ChaosCluster:
    def __init__(self, root: Path, brokers: int, base_port: int, overrides: dict[str, str],
                 tmpfs_mb: int | None = None):
        self.root = ensure_data_dir(root)
        self.layout = DataDirLayout(self.root)
        self.ids = list(range(1, brokers + 1))
        self.ports = {b: base_port + b - 1 for b in self.ids}
        self.overrides = overrides
        self.paused: set[int] = set()
        self.down: set[int] = set(self.ids)
        self.watcher = DataDirWatcher(self.root)
        self.tmpfs: list[Path] = []
        self.fsize_limited: set[int] = set()
        if tmpfs_mb:
            self._mount(tmpfs_mb)

    # -- disks ---------------------------------------------------------------------------
    def _mount(self, size_mb: int) -> None:
        for broker_id in self.ids:
            path = make_private_dir(self.layout.broker_dir(broker_id))
            done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0700",
                                   "tmpfs", str(path)], capture_output=True, text=True)
            if done.returncode != 0:
                self.unmount()
                return  # no mount rights: full disk falls back to RLIMIT_FSIZE
            self.tmpfs.append(path)

    def unmount(self) -> None:
        """Unmount the tmpfs dirs, keeping each broker's log next to them."""
        for path in self.tmpfs:
            with contextlib.suppress(OSError):
                shutil.copyfile(self.layout.broker(int(path.name)).log,
                                path.parent / f"broker-{path.name}.log")
            subprocess.run(["umount", "-l", str(path)], capture_output=True)
        self.tmpfs.clear()

    @property
    def disk_mode(self) -> str:
        return "tmpfs" if self.tmpfs else "rlimit-fsize"

    def fill_disk(self, broker_id: int) -> str:
        """Leave the broker no room to grow: fill its tmpfs, or cap its file size."""
        if self.tmpfs:
            _reserve_log_space(self.broker_log(broker_id))
            filled = _fill(self.layout.broker_dir(broker_id) / FILLER)
            return f"tmpfs filled ({filled >> 20} MiB)"
        resource.prlimit(self.pid(broker_id), resource.RLIMIT_FSIZE,
                         (FSIZE_LIMIT, FSIZE_LIMIT))
        self.fsize_limited.add(broker_id)
        return "RLIMIT_FSIZE 1 MiB"

    def free_disk(self, broker_id: int) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.layout.broker_dir(broker_id) / FILLER).unlink()
        if broker_id in self.fsize_limited:
            self.fsize_limited.discard(broker_id)
            if broker_id not in self.down:
                unlimited = (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
                with contextlib.suppress(ProcessLookupError):
                    resource.prlimit(self.pid(broker_id), resource.RLIMIT_FSIZE, unlimited)

    # -- processes -----------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.ports[b]}" for b in self.ids)

    def start(self, timeout_s: float = 60.0) -> None:
        failures = {b: r for b, r in in_parallel(self.restart, self.ids).items()
                    if isinstance(r, Exception)}
        if failures:
            raise next(iter(failures.values()))
        self.wait_healthy(timeout_s)

    def restart(self, broker_id: int, attempts: int = 3) -> None:
        """Start a stopped broker on its old port (a few tries: the port may linger)."""
        for attempt in range(1, attempts + 1):
            try:
                start_daemon(broker_id, self.root, f"127.0.0.1:{self.ports[broker_id]}",
                             self.overrides, timeout_s=30)
                break
            except BrokerStartError:
                if attempt == attempts:
                    raise
                time.sleep(1)
        self.down.discard(broker_id)

    def pid(self, broker_id: int) -> int:
        info = read_broker_info(self.layout, broker_id)
        if info is None:
            raise RuntimeError(f"broker {broker_id} has no broker.json")
        return info.pid

    def kill(self, broker_id: int) -> None:
        """kill -9, then wait until the OS released its alive.lock."""
        pid = self.pid(broker_id)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        self.paused.discard(broker_id)
        wait_for(lambda: not is_running(self.layout, broker_id), 15, f"broker {broker_id} dead")
        self.down.add(broker_id)

    def kill_every(self) -> None:
        """kill -9 of every broker in one go (a power cut), then wait until all are dead."""
        for broker_id in self.ids:
            with contextlib.suppress(ProcessLookupError, RuntimeError):
                os.kill(self.pid(broker_id), signal.SIGKILL)
        for broker_id in self.ids:
            self.kill(broker_id)  # already dead: waits for the OS to release its locks

    def stop(self, broker_id: int) -> None:
        """SIGTERM: a controlled shutdown."""
        self.resume(broker_id)
        stop_daemon(broker_id, self.root, timeout_s=60)
        self.down.add(broker_id)

    def pause(self, broker_id: int) -> None:
        os.kill(self.pid(broker_id), signal.SIGSTOP)
        self.paused.add(broker_id)

    def resume(self, broker_id: int) -> None:
        if broker_id in self.paused:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid(broker_id), signal.SIGCONT)
            self.paused.discard(broker_id)

    def heal(self, timeout_s: float) -> None:
        """Undo every fault still in place, then wait for a healthy cluster."""
        for broker_id in list(self.paused):
            self.resume(broker_id)
        for broker_id in self.ids:
            self.free_disk(broker_id)
        for broker_id in sorted(self.down):
            if not is_running(self.layout, broker_id):
                self.restart(broker_id)
            self.down.discard(broker_id)
        self.wait_healthy(timeout_s)

    def shutdown(self) -> None:
        """Stop every broker cleanly, the controller last; kill what does not stop."""
        for broker_id in list(self.paused):
            self.resume(broker_id)
        controller = self.view().controller_id
        running = [b for b in self.ids if is_running(self.layout, b)]
        for group in ([b for b in running if b != controller],
                      [b for b in running if b == controller]):
            for broker_id, result in in_parallel(self.stop, group).items():
                if isinstance(result, Exception):
                    self.kill(broker_id)

    def kill_all(self) -> None:
        for broker_id in self.ids:
            if is_running(self.layout, broker_id):
                with contextlib.suppress(Exception):
                    self.kill(broker_id)

    # -- state ---------------------------------------------------------------------------
    def view(self) -> ClusterView:
        return self.watcher.view()

    def controller(self) -> int | None:
        return self.view().controller_id

    def leader(self, topic: str, partition: int) -> int | None:
        state = self.watcher.poll().partition(topic, partition)
        return state.leader if state is not None and state.leader > 0 else None

    def serving(self, broker_id: int) -> bool:
        state = self.view().broker(broker_id)
        return state is not None and state.serving

    def wait_serving(self, broker_id: int, timeout_s: float) -> None:
        wait_for(lambda: self.serving(broker_id), timeout_s, f"broker {broker_id} to serve")

    def wait_healthy(self, timeout_s: float, settle_s: float = 0.0) -> None:
        """Every broker serving, a controller, every partition with its full ISR, and so for
        ``settle_s`` on end (a resumed broker looks healthy until the controller, or its
        own queued work, catches up with the pause)."""
        last: list[str] = []
        since: list[float] = []

        def healthy() -> bool:
            last[:] = self.view().problems()
            if last:
                since.clear()
                return False
            since[:] = since or [time.monotonic()]
            return time.monotonic() - since[0] >= settle_s

        try:
            wait_for(healthy, timeout_s, "a healthy cluster", interval_s=0.1)
        except RecoveryTimeout as exc:
            raise RecoveryTimeout(f"{exc}: {'; '.join(last)}") from None

    def broker_log(self, broker_id: int) -> Path:
        return self.layout.broker(broker_id).log

    def partition_dir(self, broker_id: int, topic: str, partition: int) -> Path:
        return self.layout.partition_dir(broker_id, topic, partition)
