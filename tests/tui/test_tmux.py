"""The real ``slog dashboard`` command in a real terminal (tmux): it renders, and q quits."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from slog.client import Admin, NewTopic
from tests.brokers import BrokerProcess, free_port

WAIT_S = 30.0


@contextmanager
def tmux_session(command: str, width: int, height: int) -> Iterator[str]:
    name = f"slog-dash-{uuid.uuid4().hex[:8]}"
    # The echo marks a clean exit; the sleep keeps the pane readable after it.
    script = f"{command}; echo EXITED:$?; sleep 60"
    subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", str(width), "-y",
                    str(height), script], check=True)
    try:
        yield name
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], check=False,
                       capture_output=True)


def screen(session: str) -> str:
    return subprocess.run(["tmux", "capture-pane", "-t", session, "-p"], check=True,
                          capture_output=True, text=True).stdout


def wait_for(session: str, check: Callable[[str], bool], what: str) -> str:
    deadline = time.monotonic() + WAIT_S
    while True:
        text = screen(session)
        if check(text):
            return text
        assert time.monotonic() < deadline, f"timed out waiting for {what}:\n{text}"
        time.sleep(0.2)


def dashboard_command(bootstrap: str, data_dir: Path) -> str:
    return " ".join(shlex.quote(a) for a in (
        sys.executable, "-m", "slog.cli", "dashboard", "--bootstrap", bootstrap,
        "--refresh", "500ms", "--data-dir", str(data_dir)))


def test_renders_in_100x30_and_quits_on_q(broker: BrokerProcess) -> None:
    with Admin(broker.bootstrap) as admin:
        admin.create_topics([NewTopic("tmux-orders", 2, 1)])
    with tmux_session(dashboard_command(broker.bootstrap, broker.data_dir), 100, 30) as name:
        text = wait_for(name, lambda t: "tmux-orders" in t and "brokers 1/1" in t,
                        "the topics view")
        lines = text.splitlines()
        assert len(lines) <= 30 and all(len(line) <= 100 for line in lines)
        assert "controller 1" in text and "under-replicated 0" in text
        assert "q Quit" in text  # the footer made it onto the screen
        subprocess.run(["tmux", "send-keys", "-t", name, "q"], check=True)
        wait_for(name, lambda t: "EXITED:0" in t, "the dashboard to exit")


def test_unreachable_cluster_keeps_running(tmp_path: Path) -> None:
    bootstrap = f"127.0.0.1:{free_port()}"  # nothing listens there
    with tmux_session(dashboard_command(bootstrap, tmp_path / "none"), 80, 24) as name:
        wait_for(name, lambda t: "cannot reach" in t or "UNREACHABLE" in t,
                 "the unreachable notice")
        time.sleep(1.5)  # a few more failed refreshes change nothing
        assert "EXITED" not in screen(name)
        subprocess.run(["tmux", "send-keys", "-t", name, "q"], check=True)
        wait_for(name, lambda t: "EXITED:0" in t, "the dashboard to exit")
