"""Broker lifecycle: CLI start/stop, broker.json, SIGTERM, double start, restarts, kill -9."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from slog.broker.broker import LOST_DATA_DIR_EXIT
from slog.broker.daemon import is_running
from slog.core.datadir import read_broker_info
from slog.core.names import DataDirLayout
from tests.brokers import free_port, run_cli, running_broker
from tests.compat.clients import (
    RECENT_MS,
    Rec,
    Wire,
    assert_serving,
    confluent_consume,
    confluent_deliver,
    create_topic,
    process_alive,
    slog_consume,
    slog_produce,
)

BROKER_ID = 1


def broker_dir(data_dir: Path) -> Path:
    return data_dir / "brokers" / str(BROKER_ID)


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 15) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "data"
    yield path
    # Whatever a test left running is stopped, never leaked.
    info = read_broker_info(DataDirLayout(path), BROKER_ID) if path.exists() else None
    if info is not None and is_running(DataDirLayout(path), BROKER_ID):
        os.kill(info.pid, signal.SIGKILL)


def test_cli_start_writes_broker_json_and_stop_shuts_down_cleanly(data_dir: Path) -> None:
    port = free_port()
    started = time.time()
    result = run_cli("broker", "start", "--id", str(BROKER_ID), "--data-dir", str(data_dir),
                     "--listen", f"127.0.0.1:{port}")
    assert result.returncode == 0, result.stderr
    info_path = broker_dir(data_dir) / "broker.json"
    info = json.loads(info_path.read_text())
    assert set(info) == {"broker_id", "host", "port", "pid", "started_at", "rack", "listeners"}
    assert info["rack"] is None
    assert info["listeners"] == [{"name": "PLAINTEXT", "host": "127.0.0.1", "port": port,
                                  "security_protocol": "PLAINTEXT"}]
    assert (info["broker_id"], info["host"], info["port"]) == (BROKER_ID, "127.0.0.1", port)
    assert started - 1 <= info["started_at"] <= time.time()
    assert f"broker {BROKER_ID} started on 127.0.0.1:{port} (pid {info['pid']})" in result.stdout
    assert stat.S_IMODE(info_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    assert process_alive(info["pid"])
    assert_serving(f"127.0.0.1:{port}")
    assert not (broker_dir(data_dir) / "clean-shutdown").exists()  # removed while running

    result = run_cli("broker", "stop", "--id", str(BROKER_ID), "--data-dir", str(data_dir))
    assert result.returncode == 0, result.stderr
    assert f"broker {BROKER_ID} stopped" in result.stdout
    wait_for(lambda: not process_alive(info["pid"]), "the broker process to exit")
    assert (broker_dir(data_dir) / "clean-shutdown").exists()
    log_text = (broker_dir(data_dir) / "broker.log").read_text()
    assert "stopped cleanly" in log_text and "Traceback" not in log_text

    again = run_cli("broker", "stop", "--id", str(BROKER_ID), "--data-dir", str(data_dir))
    assert again.returncode != 0
    assert "not running" in again.stderr


def start_broker_process(data_dir: Path) -> tuple[subprocess.Popen[str], str]:
    """The broker process itself (not the daemon), as a child whose exit status and
    output the test reads; returns once it is published and answers."""
    bootstrap = f"127.0.0.1:{free_port()}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "slog.broker", "--id", str(BROKER_ID), "--data-dir",
         str(data_dir), "--listen", bootstrap],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    layout = DataDirLayout(data_dir)

    def published() -> bool:
        info = read_broker_info(layout, BROKER_ID) if data_dir.exists() else None
        return info is not None and info.pid == proc.pid

    try:
        wait_for(published, "broker.json to name the new process")
        wait_for(lambda: _answers(bootstrap), "the listener")
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc, bootstrap


def test_sigterm_exits_zero_and_marks_clean_shutdown(data_dir: Path) -> None:
    proc, bootstrap = start_broker_process(data_dir)
    try:
        create_topic(bootstrap, "sigterm")
        slog_produce(bootstrap, "sigterm", [Rec(b"k", b"v%d" % i) for i in range(7)])
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr, stderr
    assert "stopped cleanly" in stderr
    assert (broker_dir(data_dir) / "clean-shutdown").exists()
    recovery = (broker_dir(data_dir) / "recovery-point-offset-checkpoint").read_text()
    assert "sigterm 0 7" in recovery.splitlines(), recovery
    assert not is_running(DataDirLayout(data_dir), BROKER_ID)


def _answers(bootstrap: str) -> bool:
    try:
        assert_serving(bootstrap)
    except OSError:
        return False
    return True


def test_a_broker_whose_data_dir_is_removed_and_made_again_exits_writing_nothing(
        data_dir: Path, tmp_path: Path) -> None:
    """`rm -rf` of a running cluster's data dir, then `slog cluster up` again: the old
    process must not live on as a ghost of the new cluster (its heartbeat would make it
    look alive, its clean stop would write checkpoints into the new broker's dir)."""
    proc, bootstrap = start_broker_process(data_dir)
    try:
        create_topic(bootstrap, "ghost")
        slog_produce(bootstrap, "ghost", [Rec(b"k", b"v")])
        removed = tmp_path / "removed"
        data_dir.rename(removed)  # to the broker, what rm -rf looks like: its paths are gone
        with running_broker(data_dir, BROKER_ID) as new:
            _, stderr = proc.communicate(timeout=15)
            assert proc.returncode == LOST_DATA_DIR_EXIT, stderr
            assert "was removed or replaced while it ran" in stderr, stderr
            assert "Traceback" not in stderr and "stopped cleanly" not in stderr, stderr
            assert not (removed / "brokers" / str(BROKER_ID) / "clean-shutdown").exists()
            assert not (broker_dir(data_dir) / "logs" / "ghost-0").exists()
            assert is_running(DataDirLayout(data_dir), BROKER_ID)
            assert_serving(new.bootstrap)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_second_broker_with_same_id_refuses_to_start(data_dir: Path) -> None:
    with running_broker(data_dir, BROKER_ID) as broker:
        assert broker.info is not None
        pid = broker.info.pid
        json_before = (broker_dir(data_dir) / "broker.json").read_text()

        via_cli = run_cli("broker", "start", "--id", str(BROKER_ID), "--data-dir",
                          str(data_dir), "--listen", f"127.0.0.1:{free_port()}")
        assert via_cli.returncode != 0
        assert "already running" in via_cli.stderr and str(pid) in via_cli.stderr, \
            via_cli.stderr

        # The process itself refuses too (what the daemon would exec), naming the owner.
        direct = subprocess.run(
            [sys.executable, "-m", "slog.broker", "--id", str(BROKER_ID), "--data-dir",
             str(data_dir), "--listen", f"127.0.0.1:{free_port()}"],
            capture_output=True, text=True, timeout=30)
        assert direct.returncode != 0
        assert "already running" in direct.stderr and f"pid {pid}" in direct.stderr, \
            direct.stderr

        # The running broker is untouched.
        assert (broker_dir(data_dir) / "broker.json").read_text() == json_before
        assert process_alive(pid)
        assert_serving(broker.bootstrap)


def test_data_survives_restart(data_dir: Path) -> None:
    topic = "durable"
    records = [Rec(b"key-%d" % i, b"value-%d" % i, (("n", b"%d" % i),), RECENT_MS + i)
               for i in range(300)]
    with running_broker(data_dir, BROKER_ID) as broker:
        create_topic(broker.bootstrap, topic, partitions=2)
        reports = confluent_deliver(broker.bootstrap, topic, records)
        written = {p: [r for (rp, _), r in zip(reports, records, strict=True) if rp == p]
                   for p in (0, 1)}
        broker.stop()
        assert (broker_dir(data_dir) / "clean-shutdown").exists()
        broker.start()  # same port, same data dir
        for partition in (0, 1):
            got = confluent_consume(broker.bootstrap, topic, partition)
            assert [c.as_rec() for c in got] == written[partition]
        # Appends continue at the old log end.
        [offset] = slog_produce(broker.bootstrap, topic, [Rec(b"after", b"restart")])
        assert offset == len(written[0])


def test_kill_9_then_restart_recovers_acknowledged_records(data_dir: Path) -> None:
    topic = "crashy"
    with running_broker(data_dir, BROKER_ID) as broker:
        create_topic(broker.bootstrap, topic, configs={"segment.bytes": "65536"})
        acknowledged: list[Rec] = []
        for round_ in range(40):  # several segments' worth, many batches
            batch = [Rec(b"r%d" % round_, b"%d-%d " % (round_, i) * 20, (), RECENT_MS + i)
                     for i in range(25)]
            offsets = slog_produce(broker.bootstrap, topic, batch)  # acks=all
            assert offsets[0] == len(acknowledged)
            acknowledged += batch
        reports = confluent_deliver(broker.bootstrap, topic,
                                    [Rec(None, b"idempotent %d" % i) for i in range(200)],
                                    partition=0)
        assert [o for _, o in reports] == list(range(1000, 1200))
        acknowledged += [Rec(None, b"idempotent %d" % i) for i in range(200)]

        broker.kill()  # SIGKILL: no flush, no checkpoint, no clean-shutdown marker
        assert not (broker_dir(data_dir) / "clean-shutdown").exists()
        broker.start()

        got = slog_consume(broker.bootstrap, topic)
        assert len(got) == len(acknowledged)
        for consumed, sent in zip(got, acknowledged, strict=True):
            assert (consumed.key, consumed.value) == (sent.key, sent.value)
            if sent.timestamp is not None:
                assert consumed.timestamp == sent.timestamp
        assert [c.offset for c in got] == list(range(len(acknowledged)))
        assert len(list((broker_dir(data_dir) / "logs" / f"{topic}-0").glob("*.log"))) > 1
        [offset] = slog_produce(broker.bootstrap, topic, [Rec(b"after", b"crash")])
        assert offset == len(acknowledged)
        assert "recovering" in broker.log_text


def test_restart_after_kill_while_clients_are_connected(data_dir: Path) -> None:
    """A broker killed under connected clients restarts on the same port at once."""
    with running_broker(data_dir, BROKER_ID) as broker:
        create_topic(broker.bootstrap, "busy")
        wires = [Wire(broker.bootstrap) for _ in range(10)]
        broker.kill()
        for wire in wires:
            assert wire.closed_by_peer(timeout_s=5)
            wire.close()
        broker.start()
        assert_serving(broker.bootstrap)
