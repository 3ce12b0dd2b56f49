"""Names never escape the data dir; the data dir and its files are owner-only;
a listener exposed without authentication is called out."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slog.core.credentials import by_mechanism, load_credentials, save_credentials
from slog.core.errors import InvalidTopicError
from slog.core.names import DataDirLayout
from slog.core.scram import derive_credential
from slog.groups.placement import OFFSETS_TOPIC, partition_for
from tests.brokers import BrokerProcess, free_port, run_cli
from tests.security.conftest import SASL, add_users, sasl_conf

# Pieces that path tricks are made of, mixed with arbitrary text.
_TRICKS = st.sampled_from(["..", ".", "/", "\\", "\0", "%2e", "~", "-", "_", "a", "\n", " "])
HOSTILE = st.one_of(st.text(max_size=300), st.lists(_TRICKS, max_size=40).map("".join))


@settings(max_examples=500, deadline=None)
@given(HOSTILE, st.integers(min_value=-3, max_value=2**31 + 3))
def test_topic_names_stay_in_the_logs_dir(tmp_path_factory: Any, name: str,
                                          partition: int) -> None:
    layout = DataDirLayout(tmp_path_factory.getbasetemp() / "names")
    try:
        path = layout.partition_dir(1, name, partition)
    except InvalidTopicError:
        return
    assert path.parent == layout.logs_dir(1).resolve()
    assert "/" not in path.name and path.name not in (".", "..")


@settings(max_examples=500, deadline=None)
@given(HOSTILE.filter(bool))
def test_group_ids_only_pick_an_offsets_partition(tmp_path_factory: Any, group: str) -> None:
    """A group id is never part of a path: it only chooses a __consumer_offsets partition."""
    layout = DataDirLayout(tmp_path_factory.getbasetemp() / "groups")
    partition = partition_for(group, 50)
    assert 0 <= partition < 50
    assert layout.partition_dir(1, OFFSETS_TOPIC, partition).parent == \
        layout.logs_dir(1).resolve()


@settings(max_examples=100, deadline=None)
@given(HOSTILE.filter(bool))
def test_user_names_are_keys_not_paths(tmp_path_factory: Any, name: str) -> None:
    root = tmp_path_factory.mktemp("users")
    path = root / "credentials.json"
    save_credentials(path, {name: by_mechanism(derive_credential("pw"))})
    assert sorted(p.name for p in root.iterdir()) == ["credentials.json"]
    assert list(load_credentials(path)) == [name]


def _loose_modes(root: Path) -> list[str]:
    """Every file or directory under ``root`` that its group or others may access."""
    loose = []
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(directory, name)
            mode = stat.S_IMODE(path.lstat().st_mode)
            if mode & 0o077:
                loose.append(f"{oct(mode)} {path.relative_to(root)}")
    return loose


def test_data_dir_and_files_are_owner_only(acl_broker: BrokerProcess) -> None:
    from confluent_kafka import Producer

    producer = Producer(sasl_conf(acl_broker, "admin"))
    producer.produce("modes", b"x")
    assert producer.flush(30) == 0
    root = acl_broker.data_dir
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    for name in ("credentials.json", "inter-broker.secret", "cluster.json",
                 "brokers/1/broker.json", "brokers/1/broker.log"):
        assert stat.S_IMODE((root / name).stat().st_mode) == 0o600, name
    assert _loose_modes(root) == []


def test_user_add_creates_a_private_data_dir(tmp_path: Path) -> None:
    data = tmp_path / "new" / "data"
    result = run_cli("user", "add", "carol", "--password-stdin", "--data-dir", str(data),
                     input_text="pw\n")
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert stat.S_IMODE((data / "credentials.json").stat().st_mode) == 0o600


@pytest.mark.parametrize("secured", [False, True])
def test_warning_when_exposed_without_authentication(tmp_path: Path, secured: bool) -> None:
    data = tmp_path / "data"
    add_users(data)
    config = [arg for key, value in SASL.items() for arg in ("--config", f"{key}={value}")]
    started = run_cli("broker", "start", "--id", "1", "--data-dir", str(data),
                      "--listen", f"0.0.0.0:{free_port()}", *(config if secured else []))
    try:
        assert started.returncode == 0, started.stderr
        log = (data / "brokers" / "1" / "broker.log").read_text()
        if secured:
            assert "without authentication" not in started.stderr + log
        else:
            assert "bound to all interfaces without authentication" in started.stderr
            assert "bound to all interfaces without authentication" in log
    finally:
        BrokerProcess(1, data, 0).stop()


def test_loopback_gets_no_warning(sasl_broker: BrokerProcess, tmp_path: Path) -> None:
    from slog.broker.security import exposure_warning

    assert exposure_warning("127.0.0.1", False) is None
    assert exposure_warning("::1", False) is None
    assert exposure_warning("localhost", False) is None
    assert exposure_warning("192.168.1.5", False) is not None
    assert exposure_warning("0.0.0.0", True) is None
    assert "without authentication" not in sasl_broker.log_text
