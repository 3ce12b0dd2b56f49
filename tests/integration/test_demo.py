"""The README's first command: `slog demo` round-trips through a real broker daemon."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.brokers import free_port


def run_slog(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SLOG_DATA_DIR": str(data_dir), "NO_COLOR": "1", "COLUMNS": "120"}
    return subprocess.run([sys.executable, "-m", "slog.cli", *args], capture_output=True,
                          text=True, timeout=60, env=env)


def test_demo_round_trip_and_cleanup(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    result = run_slog("demo", "--port", str(free_port()), "--cleanup", data_dir=data_dir)
    assert result.returncode == 0, result.stderr
    assert "produced 5 records" in result.stdout
    for offset, key in enumerate(["alice", "bob", "carol", "alice", "bob"]):
        assert f"order #{offset + 1} from {key}" in result.stdout
    assert "broker 1 stopped" in result.stdout
    assert (data_dir / "brokers" / "1" / "clean-shutdown").exists()


def test_bad_listen_address_is_a_usage_error(tmp_path: Path) -> None:
    result = run_slog("broker", "start", "--id", "1", "--listen", "nowhere", data_dir=tmp_path)
    assert result.returncode == 2
    assert "host:port" in result.stderr
    assert "Traceback" not in result.stderr


def test_stopping_a_broker_that_is_not_running(tmp_path: Path) -> None:
    result = run_slog("broker", "stop", "--id", "7", data_dir=tmp_path)
    assert result.returncode == 4
    assert "not running" in result.stderr
