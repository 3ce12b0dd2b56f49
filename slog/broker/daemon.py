"""Start and stop broker processes: daemonize, wait until serving, SIGTERM to stop.

Used by ``slog cluster`` and by the chaos harness, which start and stop several
brokers at once with :func:`in_parallel`.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from slog.core.datadir import BrokerInfo, read_broker_info
from slog.core.errors import DataDirError, SlogError
from slog.core.locks import held_steadily
from slog.core.names import DataDirLayout, ensure_data_dir, make_private_dir

T = TypeVar("T")
R = TypeVar("R")


class BrokerStartError(SlogError, RuntimeError):
    pass


def is_running(layout: DataDirLayout, broker_id: int) -> bool:
    return held_steadily(layout.broker(broker_id).alive_lock)


def broker_command(broker_id: int, data_dir: Path, listen: str,
                   overrides: Mapping[str, str]) -> list[str]:
    cmd = [sys.executable, "-m", "slog.broker", "--id", str(broker_id), "--data-dir",
           str(data_dir), "--listen", listen]
    for key, value in overrides.items():
        cmd += ["--config", f"{key}={value}"]
    return cmd


def _port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def start_daemon(broker_id: int, data_dir: Path, listen: str,
                 overrides: Mapping[str, str] | None = None, timeout_s: float = 15.0) -> BrokerInfo:
    """Launch a detached broker and return once it accepts connections."""
    root = ensure_data_dir(data_dir)
    layout = DataDirLayout(root)
    if is_running(layout, broker_id):
        info = read_broker_info(layout, broker_id)
        where = f" on port {info.port} (pid {info.pid})" if info else ""
        raise DataDirError(f"broker {broker_id} is already running{where}")
    make_private_dir(layout.broker_dir(broker_id))
    log_path = layout.broker(broker_id).log
    with open(log_path, "ab") as log_file:
        os.chmod(log_path, 0o600)
        proc = subprocess.Popen(
            broker_command(broker_id, root, listen, overrides or {}),
            stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file,
            start_new_session=True, close_fds=True,
        )
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BrokerStartError(
                f"broker {broker_id} exited with code {proc.returncode}:\n"
                f"{tail_log(log_path)}"
            )
        info = read_broker_info(layout, broker_id)
        if info is not None and info.pid == proc.pid and _port_open(info.host, info.port):
            _warn_if_exposed(info.host, overrides or {})
            return info
        time.sleep(0.02)
    proc.terminate()
    raise BrokerStartError(f"broker {broker_id} did not start within {timeout_s:.0f}s:\n"
                           f"{tail_log(log_path)}")


def _warn_if_exposed(host: str, overrides: Mapping[str, str]) -> None:
    from slog.broker.security import exposure_warning

    sasl = overrides.get("security.protocol", "PLAINTEXT").strip() in ("SASL_PLAINTEXT",
                                                                          "SASL_SSL")
    client_auth = overrides.get("ssl.client.auth", "none").strip() == "required" and \
        overrides.get("security.protocol", "PLAINTEXT").strip() == "SSL"
    warning = exposure_warning(host, sasl, client_auth)
    if warning:
        print(warning, file=sys.stderr)


def stop_daemon(broker_id: int, data_dir: Path, timeout_s: float = 30.0,
                sig: signal.Signals = signal.SIGTERM) -> bool:
    """Stop a running broker; returns False if it was not running."""
    layout = DataDirLayout(data_dir)
    info = read_broker_info(layout, broker_id)
    if info is None or not is_running(layout, broker_id):
        return False
    try:
        os.kill(info.pid, sig)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not is_running(layout, broker_id):
            return True
        time.sleep(0.02)
    raise BrokerStartError(f"broker {broker_id} (pid {info.pid}) did not stop in {timeout_s}s")


def tail_log(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def in_parallel(fn: Callable[[T], R], items: Iterable[T]) -> dict[T, R | Exception]:
    """``fn`` over ``items`` on one thread each; an item's exception becomes its result.

    A broker spends most of a start or stop waiting (for its port, for its
    process to exit), so a cluster starts and stops in the time of its slowest
    broker."""
    items = list(items)
    if not items:
        return {}

    def call(item: T) -> R | Exception:
        try:
            return fn(item)
        except Exception as exc:
            return exc

    with ThreadPoolExecutor(max_workers=len(items)) as pool:
        return dict(zip(items, pool.map(call, items), strict=True))
