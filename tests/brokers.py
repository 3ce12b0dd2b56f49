"""Real broker processes for tests: started with the same daemon code users run."""

from __future__ import annotations

import contextlib
import random
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from slog.broker.daemon import start_daemon, stop_daemon
from slog.core.datadir import BrokerInfo


def free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def free_port_range(count: int, attempts: int = 50) -> int:
    """A base port such that ``count`` consecutive ports can all be bound right now."""
    for _ in range(attempts):
        base = random.randrange(20000, 60000 - count)
        with contextlib.ExitStack() as stack:
            try:
                for port in range(base, base + count):
                    sock = stack.enter_context(socket.socket())
                    sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return base
    raise RuntimeError(f"no {count} consecutive free ports found")


@dataclass
class BrokerProcess:
    broker_id: int
    data_dir: Path
    port: int
    overrides: dict[str, str] = field(default_factory=dict)
    info: BrokerInfo | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> BrokerProcess:
        self.info = start_daemon(self.broker_id, self.data_dir, self.bootstrap, self.overrides)
        return self

    def stop(self) -> None:
        stop_daemon(self.broker_id, self.data_dir)

    def kill(self) -> None:
        import os
        import signal

        if self.info is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.info.pid, signal.SIGKILL)
            self.wait_dead()

    def wait_dead(self, timeout_s: float = 10) -> None:
        import time

        from slog.broker.daemon import is_running
        from slog.core.names import DataDirLayout

        deadline = time.monotonic() + timeout_s
        while is_running(DataDirLayout(self.data_dir), self.broker_id):
            if time.monotonic() > deadline:
                raise TimeoutError(f"broker {self.broker_id} still running")
            time.sleep(0.02)

    @property
    def log_text(self) -> str:
        path = self.data_dir / "brokers" / str(self.broker_id) / "broker.log"
        return path.read_text(errors="replace") if path.exists() else ""


@contextlib.contextmanager
def running_broker(data_dir: Path, broker_id: int = 1, **overrides: str) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(broker_id, data_dir, free_port(), dict(overrides)).start()
    try:
        yield broker
    finally:
        try:
            broker.stop()
        except Exception:
            broker.kill()
        assert "Traceback" not in broker.log_text, broker.log_text[-4000:]


def run_cli(*args: str, input_text: str | None = None, timeout: float = 60
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "slog.cli", *args], input=input_text,
                          capture_output=True, text=True, timeout=timeout)
