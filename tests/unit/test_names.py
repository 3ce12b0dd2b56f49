from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slog.core.errors import DataDirError, InvalidTopicError
from slog.core.names import (
    DataDirLayout,
    ensure_data_dir,
    parse_partition_dir_name,
    partition_dir_name,
    topic_collides,
    validate_topic_name,
)


@pytest.mark.parametrize("name", ["orders", "a.b_c-d", "__consumer_offsets", "x" * 249, "..."])
def test_legal_topic_names(name: str) -> None:
    assert validate_topic_name(name) == name


@pytest.mark.parametrize(
    "name", ["", ".", "..", "x" * 250, "a/b", "../etc", "a b", "caf\u00e9", "a\x00b", "a\\b"]
)
def test_illegal_topic_names(name: str) -> None:
    with pytest.raises(InvalidTopicError):
        validate_topic_name(name)


def test_partition_dir_round_trip() -> None:
    assert partition_dir_name("my-topic", 12) == "my-topic-12"
    assert parse_partition_dir_name("my-topic-12") == ("my-topic", 12)
    with pytest.raises(InvalidTopicError):
        parse_partition_dir_name("nopartition")


def test_collision_rule() -> None:
    assert topic_collides("a.b", "a_b")
    assert not topic_collides("a.b", "a.b")


@given(st.text(max_size=300), st.integers(min_value=-5, max_value=2**31))
def test_no_name_escapes_the_data_dir(tmp_path_factory, name: str, partition: int) -> None:
    root = tmp_path_factory.getbasetemp() / "dd"
    layout = DataDirLayout(root)
    try:
        path = layout.partition_dir(1, name, partition)
    except InvalidTopicError:
        return
    assert layout.logs_dir(1).resolve() in path.parents


def test_data_dir_created_owner_only(tmp_path: Path) -> None:
    root = ensure_data_dir(tmp_path / "data")
    assert stat.S_IMODE(os.stat(root).st_mode) == 0o700


def test_data_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(DataDirError, match="not a directory"):
        ensure_data_dir(tmp_path / "f")


def test_private_dirs_are_owner_only_all_the_way_down(tmp_path: Path) -> None:
    from slog.core.names import make_private_dir

    deep = make_private_dir(tmp_path / "a" / "b" / "c")
    for path in (tmp_path / "a", tmp_path / "a" / "b", deep):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o700
