"""Shell completion as a user gets it: the checked-in bash script in a real bash
(pexpect), completing a subcommand and a topic name from a live broker; and the
completion protocol staying quick and silent when no broker answers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pexpect
import pytest

from slog.cli.docgen import COMPLETIONS_DIR
from tests.brokers import BrokerProcess, run_cli

# Names come from the cluster within SLOG_COMPLETE_TIMEOUT (1 s by default); a loaded test
# machine gets longer, except where the time limit itself is tested.
PATIENT = {"SLOG_COMPLETE_TIMEOUT": "10"}


def complete(words: str, env: dict[str, str]) -> list[str]:
    """What `slog` answers to bash's completion request for ``words`` (cursor at the end)."""
    parts = words.split(" ")
    result = subprocess.run(
        [sys.executable, "-m", "slog.cli"], capture_output=True, text=True, timeout=60,
        env={**os.environ, **PATIENT, **env, "_SLOG_COMPLETE": "complete_bash",
             "COMP_WORDS": words, "COMP_CWORD": str(len(parts) - 1)})
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return result.stdout.split()


@pytest.fixture(scope="module")
def topics(shared_broker: BrokerProcess) -> str:
    made = run_cli("topic", "create", "completion-orders", "completion-payments",
                   "-b", shared_broker.bootstrap)
    assert made.returncode == 0, made.stderr
    made = run_cli("consume", "completion-orders", "-e", "-g", "completion-group",
                   "-b", shared_broker.bootstrap)
    assert made.returncode == 0, made.stderr
    return shared_broker.bootstrap


def test_subcommands_options_and_choices_complete() -> None:
    assert complete("slog top", {}) == ["topic"]
    assert "describe" in complete("slog topic ", {})
    assert complete("slog topic list --out", {}) == ["--output"]
    assert complete("slog topic list -o y", {}) == ["yaml"]
    assert complete("slog completion generate f", {}) == ["fish"]


def test_topic_and_group_names_come_from_the_cluster(topics: str) -> None:
    env = {"SLOG_BOOTSTRAP": topics}
    assert complete("slog topic describe completion-", env) == \
        ["completion-orders", "completion-payments"]
    assert complete("slog topic describe completion-orders completion-", env) == \
        ["completion-payments"]
    assert complete(f"slog consume -b {topics} completion-p", {}) == ["completion-payments"]
    assert complete("slog group describe completion-", env) == ["completion-group"]


def test_profile_bootstrap_is_used_for_names(topics: str, tmp_path: Path) -> None:
    config = tmp_path / "slog.toml"
    config.write_text(f'[profiles.dev]\nbootstrap = "{topics}"\n')
    env = {"SLOG_CONFIG": str(config), "SLOG_BOOTSTRAP": ""}
    assert complete("slog --profile dev topic describe completion-o", env) == \
        ["completion-orders"]


def test_no_broker_means_no_names_quickly_and_silently() -> None:
    default = {"SLOG_COMPLETE_TIMEOUT": ""}
    assert complete("slog topic describe x", {**default, "SLOG_BOOTSTRAP": "127.0.0.1:1"}) == []
    # an address that drops packets: the lookup gives up after about a second
    started = time.monotonic()
    assert complete("slog topic describe x",
                    {**default, "SLOG_BOOTSTRAP": "10.255.255.1:9092"}) == []
    no_lookup = time.monotonic()
    assert complete("slog top", default) == ["topic"]
    lookup_s = (no_lookup - started) - (time.monotonic() - no_lookup)
    assert lookup_s < 3, f"the lookup took {lookup_s:.1f}s beyond start-up"


def test_bash_completes_a_subcommand_and_a_topic_name(topics: str, tmp_path: Path) -> None:
    bash = shutil.which("bash")
    assert bash is not None
    # `slog` as a user has it: a command on PATH running this checkout's CLI.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "slog"
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m slog.cli "$@"\n')
    launcher.chmod(0o755)
    env = {**os.environ, **PATIENT, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "SLOG_BOOTSTRAP": topics,
           "PS1": "$ ", "TERM": "dumb", "HOME": str(tmp_path)}
    shell = pexpect.spawn(bash, ["--norc", "--noprofile", "-i"], env=env, encoding="utf-8",
                          timeout=30, cwd=str(Path(__file__).resolve().parents[2]))
    try:
        shell.expect_exact("$ ")
        shell.sendline(f"source {COMPLETIONS_DIR / 'slog.bash'}")
        shell.expect_exact("$ ")
        shell.send("slog topi\t")
        shell.expect_exact("slog topic ")
        shell.send("descr\t")  # readline echoes what it inserts: "descr" + "ibe "
        shell.expect_exact("describe ")
        shell.send("completion-or\t")
        shell.expect_exact("completion-orders")
        shell.sendline(" -o json")
        shell.expect_exact('"topic": "completion-orders"')
        shell.expect_exact("$ ")
    finally:
        shell.sendline("exit")
        shell.close(force=True)


def test_progress_bar_only_on_a_terminal(topics: str, tmp_path: Path) -> None:
    """Producing a file shows a bar on a terminal (stderr a pty) and nothing when piped."""
    data = tmp_path / "records.txt"
    data.write_text("".join(f"key{i}:value{i}\n" for i in range(20_000)))
    args = ["-m", "slog.cli", "produce", "completion-orders", "-f", str(data), "-K:",
            "-b", topics]
    on_tty = pexpect.spawn(sys.executable, args, encoding="utf-8", timeout=60,
                           env={**os.environ, "TERM": "xterm", "COLUMNS": "100"})
    on_tty.expect_exact(f"producing {data}")
    on_tty.expect_exact("produced 20000 of 20000 records")
    on_tty.expect(pexpect.EOF)
    on_tty.close()
    assert on_tty.exitstatus == 0
    piped = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=60)
    assert piped.returncode == 0, piped.stderr
    assert "producing" not in piped.stderr and "\x1b[" not in piped.stderr
    assert piped.stderr.startswith("produced 20000 of 20000 records")
