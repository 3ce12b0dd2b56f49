"""The README's first command: `slog demo` on a real three-broker cluster.

One data dir for the module: the first run leaves its cluster up, the second
(in a pseudo-terminal, with --cleanup) must reuse it and then remove it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from slog.broker.daemon import stop_daemon
from tests.brokers import free_port_range

STEP_TITLES = [
    "bring up 3 brokers", "create a replicated topic", "produce records with keys",
    "consume with a group of two consumers", "kill a leader: failover and a shrunken ISR",
    "restart it: the ISR recovers", "the describe views"]
KEYS = ["alice", "bob", "carol", "dave", "erin", "frank"]


def demo_env(data_dir: Path) -> dict[str, str]:
    return {**os.environ, "SLOG_DATA_DIR": str(data_dir), "NO_COLOR": "1", "COLUMNS": "120"}


def run_slog(*args: str, data_dir: Path, timeout: float = 120
             ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "slog.cli", *args], capture_output=True,
                          text=True, timeout=timeout, env=demo_env(data_dir))


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int]]:
    data_dir = tmp_path_factory.mktemp("demo") / "data"
    yield data_dir, free_port_range(3)
    for broker_id in (1, 2, 3):  # whatever a failed test left running
        if data_dir.exists():
            stop_daemon(broker_id, data_dir, timeout_s=30)


def table_rows(text: str, header: str) -> list[list[str]]:
    """The rows of the plain table whose header line starts with ``header``: the lines
    after it that keep its column alignment."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    starts = [m.start() for m in re.finditer(r"(?<=  )\S", lines[start])]
    rows = []
    for line in lines[start + 1:]:
        if len(line) <= starts[-1] or any(line[p - 2:p] != "  " for p in starts):
            break
        rows.append(line.split())
    return rows


def section(text: str, number: int) -> str:
    """The output of step ``number``."""
    begin = text.index(f"Step {number}/7")
    end = text.index(f"Step {number + 1}/7") if number < 7 else text.index("Summary")
    return text[begin:end]


def test_demo_shows_every_step(demo_dir: tuple[Path, int]) -> None:
    data_dir, base_port = demo_dir
    started = time.monotonic()
    result = run_slog("demo", "--base-port", str(base_port), data_dir=data_dir)
    wall = time.monotonic() - started
    out = result.stdout
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert "Traceback" not in result.stderr
    assert "\x1b[" not in out  # plain when piped
    for number, title in enumerate(STEP_TITLES, 1):
        assert f"Step {number}/7 {title}" in out
        assert f"step {number} took" in out

    # 1: three brokers started, one of them the controller.
    brokers = table_rows(section(out, 1), "ID  ADDRESS")
    assert [row[0] for row in brokers] == ["1", "2", "3"]
    assert all(row[3] == "alive" and row[-1] == "started" for row in brokers)
    assert [row[1] for row in brokers] == [f"127.0.0.1:{base_port + n}" for n in range(3)]

    # 2: 3 partitions, each replicated on all 3 brokers and fully in sync.
    partitions = table_rows(section(out, 2), "PARTITION  LEADER")
    assert [row[0] for row in partitions] == ["0", "1", "2"]
    assert all(sorted(row[2].split(",")) == ["1", "2", "3"] == sorted(row[3].split(","))
               for row in partitions)

    # 3: every key on one partition, 18 records in all.
    placed = table_rows(section(out, 3), "KEY ")
    assert sorted(row[0] for row in placed) == KEYS
    assert sum(len(row[2].split(",")) for row in placed) == 18
    partition_of = {row[0]: row[1] for row in placed}

    # 4: two members share the partitions; each key read by exactly one of them.
    members = table_rows(section(out, 4), "CONSUMER")
    assert [row[0] for row in members] == ["consumer-a", "consumer-b"]
    assert sorted(p for row in members for p in row[1].split(",")) == ["0", "1", "2"]
    assert sum(int(row[2]) for row in members) == 18
    for row in members:
        owned = set(row[1].split(","))
        assert all(partition_of[key] in owned for key in row[3].split(","))

    # 5: the killed leader is gone from every ISR and leads nothing.
    step5 = section(out, 5)
    victim = re.search(r"kill -9 \d+ +# broker (\d)", step5)
    assert victim, step5
    dead = victim.group(1)
    after_kill = table_rows(step5, "PARTITION  LEADER  ISR")
    assert len(after_kill) == 3
    for row in after_kill:
        leader_now = row[1:row.index("->") + 2][-1] if "->" in row[1:3] else row[1]
        assert leader_now != dead
    assert "->" in " ".join(" ".join(r) for r in after_kill)
    isr_after = [re.findall(r"[\d,]+", " ".join(row))[-2] for row in after_kill]
    assert all(dead not in isr.split(",") for isr in isr_after), after_kill
    assert "Still writable" in step5

    # 6: it restarted and is back in every ISR.
    step6 = section(out, 6)
    assert re.search(rf"^{dead} +127\.0\.0\.1:\d+ +\d+ +alive .*started$", step6, re.M), step6
    recovered = table_rows(step6, "PARTITION  LEADER  ISR")
    assert all(dead in re.findall(r"[\d,]+", " ".join(row))[-2].split(",")
               for row in recovered), recovered

    # 7: the describe views of the topic and the group.
    step7 = section(out, 7)
    described = table_rows(step7, "TOPIC ")
    assert [row[:2] for row in described] == [["slog-demo", str(p)] for p in range(3)]
    assert sum(int(row[-1]) for row in described) == 19  # 18 + the one written on failover
    group = table_rows(step7, "GROUP ")
    assert [row[0] for row in group] == ["slog-demo-group"] * 3
    assert re.search(r"demo finished in (\d+\.\d+)s", out)
    assert "keeps running" in out
    assert wall < 60, f"the demo took {wall:.1f}s"
    # It left the cluster running: the next test's run reuses it.
    status = run_slog("cluster", "status", "-o", "json", data_dir=data_dir)
    assert status.returncode == 0, status.stdout + status.stderr


def test_demo_again_in_a_terminal_with_cleanup(demo_dir: tuple[Path, int]) -> None:
    data_dir, base_port = demo_dir
    assert (data_dir / "cluster.json").exists(), "the first run must leave its cluster"
    child = pexpect.spawn(sys.executable, ["-m", "slog.cli", "demo", "--base-port",
                                           str(base_port), "--cleanup"],
                          env={**demo_env(data_dir), "TERM": "xterm-256color"},
                          encoding="utf-8", timeout=120, dimensions=(50, 140))
    try:
        child.expect("already running")  # the first run's brokers are reused
        child.expect("replaced the slog-demo topic")
        child.expect(r"demo finished in \d+\.\d+s")
        child.expect("removed the demo's data dir")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0, child.before
    assert not data_dir.exists()


def test_bad_listen_address_is_a_usage_error(tmp_path: Path) -> None:
    result = run_slog("broker", "start", "--id", "1", "--listen", "nowhere", data_dir=tmp_path)
    assert result.returncode == 2
    assert "host:port" in result.stderr
    assert "Traceback" not in result.stderr


def test_stopping_a_broker_that_is_not_running(tmp_path: Path) -> None:
    result = run_slog("broker", "stop", "--id", "7", data_dir=tmp_path)
    assert result.returncode == 4
    assert "not running" in result.stderr
