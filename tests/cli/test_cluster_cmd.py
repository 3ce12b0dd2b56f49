"""``slog cluster up|down|status`` as a user runs them: real broker processes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from slog.broker.daemon import is_running, stop_daemon
from slog.core.datadir import known_broker_ids, read_broker_info
from slog.core.names import DataDirLayout
from tests.brokers import free_port, free_port_range, run_cli

BROKERS = 3


def cluster(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("cluster", *args, "--data-dir", str(data_dir))


def status_json(data_dir: Path) -> tuple[int, dict[str, Any]]:
    result = cluster(data_dir, "status", "-o", "json")
    return result.returncode, json.loads(result.stdout)


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "data"
    yield root
    layout = DataDirLayout(root)
    for broker_id in known_broker_ids(layout):  # whatever a failed test left running
        try:
            stop_daemon(broker_id, root, timeout_s=10)
        except Exception:
            info = read_broker_info(layout, broker_id)
            if info is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(info.pid, signal.SIGKILL)


def test_cluster_lifecycle(data_dir: Path) -> None:
    layout = DataDirLayout(data_dir)
    base = free_port_range(BROKERS)

    # up: three brokers, one controller, in well under the 3 s target on a quiet machine
    started = time.monotonic()
    up = cluster(data_dir, "up", "--brokers", str(BROKERS), "--base-port", str(base))
    elapsed = time.monotonic() - started
    print(f"slog cluster up ({BROKERS} brokers): {elapsed:.2f}s")
    assert up.returncode == 0, up.stderr
    lines = up.stdout.splitlines()
    assert lines[0].split() == ["ID", "ADDRESS", "PID", "STATUS", "CONTROLLER", "ACTION"]
    rows = [line.split() for line in lines[1:1 + BROKERS]]
    assert [r[1] for r in rows] == [f"127.0.0.1:{base + i}" for i in range(BROKERS)]
    assert all(r[3] == "alive" and r[5] == "started" for r in rows), up.stdout
    assert [r[4] for r in rows].count("yes") == 1
    assert elapsed < 10, f"cluster up took {elapsed:.2f}s"

    # up again: nothing restarted
    pids = {b: info.pid for b in range(1, BROKERS + 1)
            if (info := read_broker_info(layout, b)) is not None}
    again = cluster(data_dir, "up", "--brokers", str(BROKERS), "--base-port", str(base),
                    "-o", "json")
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert [b["action"] for b in report["brokers"]] == ["already running"] * BROKERS
    assert {b["id"]: b["pid"] for b in report["brokers"]} == pids

    # status: healthy, from the data dir and over the protocol
    code, view = status_json(data_dir)
    assert code == 0, view
    assert view["healthy"] is True and view["problems"] == []
    assert [(b["id"], b["port"], b["alive"], b["fenced"]) for b in view["brokers"]] == [
        (i + 1, base + i, True, False) for i in range(BROKERS)]
    controller = view["controller"]["id"]
    assert controller in pids and view["controller"]["epoch"] >= 1
    assert [b["id"] for b in view["brokers"] if b["controller"]] == [controller]
    remote = run_cli("cluster", "status", "--data-dir", str(data_dir / "none"),
                     "--bootstrap", f"127.0.0.1:{base}", "-o", "json")
    assert remote.returncode == 0, remote.stderr
    remote_view = json.loads(remote.stdout)
    assert remote_view["source"] == "protocol"
    assert remote_view["controller"]["id"] == controller
    assert len(remote_view["brokers"]) == BROKERS

    # a topic on every broker, then kill -9 a broker that is not the controller
    created = run_cli("topic", "create", "spread", "-p", "3", "-r", str(BROKERS),
                      "-b", f"127.0.0.1:{base + controller - 1}")
    assert created.returncode == 0, created.stdout + created.stderr
    victim = next(b for b in pids if b != controller)
    os.kill(pids[victim], signal.SIGKILL)
    wait_for(lambda: not is_running(layout, victim), 5, f"broker {victim} to die")
    code, view = status_json(data_dir)
    assert code == 1
    assert not view["healthy"]
    dead = next(b for b in view["brokers"] if b["id"] == victim)
    assert dead["alive"] is False and dead["pid"] is None
    assert any(f"broker {victim}" in p for p in view["problems"]), view["problems"]
    assert {(p["topic"], p["partition"]) for p in view["under_replicated_partitions"]} == {
        ("spread", 0), ("spread", 1), ("spread", 2)}
    # the controller's lock probe sees the kill at once: it fences the broker, moves leaders
    wait_for(lambda: status_json(data_dir)[1]["brokers"][victim - 1]["fenced"], 8,
             f"broker {victim} to be fenced")
    code, view = status_json(data_dir)
    assert code == 1 and view["offline_partitions"] == []
    table = cluster(data_dir, "status")
    assert table.returncode == 1
    assert f"broker {victim} is fenced" in table.stdout
    assert "under-replicated partitions:" in table.stdout

    # down: every running broker stops cleanly, the locks are free
    down = cluster(data_dir, "down", "-o", "json")
    assert down.returncode == 0, down.stderr
    stopped = json.loads(down.stdout)
    assert sorted(r["id"] for r in stopped) == sorted(b for b in pids if b != victim)
    assert all(r["result"] == "stopped" for r in stopped)
    assert not any(is_running(layout, b) for b in pids)
    after = cluster(data_dir, "status")
    assert after.returncode in (1, 3)
    assert "no broker is running" in after.stdout
    nothing = cluster(data_dir, "down")
    assert nothing.returncode == 0 and "no broker is running" in nothing.stdout
    for broker_id in pids:
        log_text = (layout.broker_dir(broker_id) / "broker.log").read_text()
        assert "Traceback" not in log_text, log_text[-4000:]


def test_up_reports_a_broker_that_cannot_start(data_dir: Path) -> None:
    base = free_port_range(2)
    layout = DataDirLayout(data_dir)
    layout.broker_dir(2).mkdir(parents=True)
    layout.logs_dir(2).write_text("a file where broker 2's log directory belongs")
    result = cluster(data_dir, "up", "--brokers", "2", "--base-port", str(base), "--timeout", "10")
    assert result.returncode == 1
    assert "broker 2 failed to start" in result.stderr
    assert "exited with code" in result.stderr  # followed by the tail of its broker.log
    assert "1 of 2 broker(s) failed to start" in result.stderr
    assert is_running(layout, 1)  # the other one is left running for `cluster down`
    assert cluster(data_dir, "down").returncode == 0


def test_up_refuses_ports_in_use(data_dir: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", free_port()))
        taken.listen()
        port = taken.getsockname()[1]
        result = cluster(data_dir, "up", "--brokers", "1", "--base-port", str(port))
    assert result.returncode == 1
    assert f"port {port} on 127.0.0.1 already in use" in result.stderr
    assert "--base-port" in result.stderr
    too_high = cluster(data_dir, "up", "--brokers", "3", "--base-port", "65535")
    assert too_high.returncode == 2 and "65535" in too_high.stderr


def test_status_without_a_cluster_exits_3(tmp_path: Path) -> None:
    result = cluster(tmp_path / "empty", "status")
    assert result.returncode == 3
    assert "no slog cluster in" in result.stderr and "slog cluster up" in result.stderr
    port = free_port()
    nobody = run_cli("cluster", "status", "--data-dir", str(tmp_path / "empty"),
                     "--bootstrap", f"127.0.0.1:{port}")
    assert nobody.returncode == 3, nobody.stderr


def test_up_gives_brokers_racks_round_robin(data_dir: Path) -> None:
    base = free_port_range(4)
    up = cluster(data_dir, "up", "--brokers", "4", "--base-port", str(base), "--racks", "a,b,c")
    assert up.returncode == 0, up.stderr
    assert up.stdout.splitlines()[0].split() == \
        ["ID", "ADDRESS", "PID", "STATUS", "CONTROLLER", "RACK", "ACTION"]
    code, status = status_json(data_dir)
    assert code == 0
    assert {b["id"]: b["rack"] for b in status["brokers"]} == {1: "a", 2: "b", 3: "c", 4: "a"}
    protocol = run_cli("cluster", "status", "--bootstrap", f"127.0.0.1:{base}", "-o", "json")
    assert [b["rack"] for b in json.loads(protocol.stdout)["brokers"]] == ["a", "b", "c", "a"]
    assert cluster(data_dir, "down").returncode == 0
    empty = cluster(data_dir, "up", "--brokers", "1", "--racks", "a,,b")
    assert empty.returncode == 2 and "empty rack name" in empty.stderr


def test_up_waits_past_its_timeout_for_brokers_still_recovering_their_logs(data_dir: Path
                                                                            ) -> None:
    # Thousands of replicas take a broker seconds to open: that is progress, and a
    # --timeout meant for a hung start must not fail it (10,000 partitions did).
    base = free_port()
    assert cluster(data_dir, "up", "-n", "1", "--base-port", str(base),
                   "-c", "log.preallocate=false").returncode == 0
    created = run_cli("topic", "create", "wide", "-p", "3000", "-r", "1",
                      "-b", f"127.0.0.1:{base}")
    assert created.returncode == 0, created.stderr
    assert cluster(data_dir, "down").returncode == 0
    started = time.monotonic()
    up = cluster(data_dir, "up", "-n", "1", "--base-port", str(base), "--timeout", "0.2",
                 "-c", "log.preallocate=false")
    took = time.monotonic() - started
    assert up.returncode == 0, up.stderr
    assert took > 0.2  # it did wait past the timeout, for a broker that was starting
    assert cluster(data_dir, "down").returncode == 0
