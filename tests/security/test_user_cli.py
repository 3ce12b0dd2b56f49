"""`slog user add|list|delete`: the credentials file, and brokers picking changes up live."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pexpect
import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from slog.core.credentials import load_credentials
from slog.core.scram import check_password
from tests.brokers import BrokerProcess, run_cli
from tests.security.conftest import sasl_conf


def user(data: Path, *args: str, password: str | None = None) -> object:
    return run_cli("user", *args, "--data-dir", str(data), input_text=password)


def test_add_list_delete(tmp_path: Path) -> None:
    data = tmp_path / "data"
    added = user(data, "add", "alice", "--password-stdin", "-o", "json", password="s3cret\n")
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)[0]["status"] == "added"
    again = user(data, "add", "alice", "--password-stdin", "-o", "json", password="other\n")
    assert json.loads(again.stdout)[0]["status"] == "updated"
    credentials = load_credentials(data / "credentials.json")["alice"]
    assert set(credentials) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
    assert all(check_password(c, "other") for c in credentials.values())
    user(data, "add", "bob", "--password-stdin", "--iterations", "8192", password="pw\n")
    listed = json.loads(user(data, "list", "-o", "json").stdout)
    assert listed == [{"user": "alice", "mechanism": "SCRAM-SHA-256", "iterations": 4096},
                      {"user": "alice", "mechanism": "SCRAM-SHA-512", "iterations": 4096},
                      {"user": "bob", "mechanism": "SCRAM-SHA-256", "iterations": 8192},
                      {"user": "bob", "mechanism": "SCRAM-SHA-512", "iterations": 8192}]
    assert "other" not in (data / "credentials.json").read_text()
    assert user(data, "delete", "alice").returncode == 0
    assert {u["user"] for u in json.loads(user(data, "list", "-o", "json").stdout)} == {"bob"}
    missing = user(data, "delete", "alice")
    assert missing.returncode == 4 and "no user 'alice'" in missing.stderr


@pytest.mark.parametrize("args, password, message", [
    (["add", "alice", "--password-stdin"], "\n", "password is empty"),
    (["add", "__broker", "--password-stdin"], "x\n", "reserved"),
    (["add", "alice"], None, "--password-stdin"),  # no terminal to prompt on
    (["add", "alice", "--password-stdin", "--iterations", "10"], "x\n", "iterations"),
])
def test_usage_errors_change_nothing(tmp_path: Path, args: list[str], password: str | None,
                                     message: str) -> None:
    data = tmp_path / "data"
    result = user(data, *args, password=password)
    assert result.returncode == 2 and message in result.stderr
    assert not (data / "credentials.json").exists()


def test_prompts_for_the_password(tmp_path: Path) -> None:
    data = tmp_path / "data"
    child = pexpect.spawn(sys.executable, ["-m", "slog.cli", "user", "add", "erin",
                                           "--data-dir", str(data)], timeout=30,
                          encoding="utf-8")
    child.expect("Password")
    child.sendline("typed-secret")
    child.expect("Repeat")
    child.sendline("typed-secret")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    [credential, *_] = load_credentials(data / "credentials.json")["erin"].values()
    assert check_password(credential, "typed-secret")


def _can_log_in(broker: BrokerProcess, name: str, password: str) -> bool:
    errors: list[KafkaError] = []
    admin = AdminClient({**sasl_conf(broker, name, password=password),
                         "error_cb": errors.append})
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            admin.list_topics(timeout=2)
            return True
        except KafkaException as exc:
            errors.append(exc.args[0])
        admin.poll(0.2)  # serves error_cb
        if any(e.code() == KafkaError._AUTHENTICATION for e in errors):
            return False
    raise AssertionError(f"neither logged in nor refused: {errors}")


def test_broker_sees_new_and_deleted_users_without_restart(sasl_broker: BrokerProcess) -> None:
    data = sasl_broker.data_dir
    assert not _can_log_in(sasl_broker, "dave", "dave-pw")
    assert user(data, "add", "dave", "--password-stdin", password="dave-pw\n").returncode == 0
    assert _can_log_in(sasl_broker, "dave", "dave-pw")
    assert user(data, "delete", "dave").returncode == 0
    assert not _can_log_in(sasl_broker, "dave", "dave-pw")
