"""LogManager, checkpoint files and LogConfig parsing."""

from __future__ import annotations

import json
import os
import shutil
import stat
import threading
from pathlib import Path
from typing import Any

import pytest

from slog.core import checkpoint
from slog.core.checkpoint import OffsetCheckpointFile, create_exclusively, write_atomically
from slog.core.datadir import load_or_create_cluster
from slog.core.errors import InvalidTopicError, StorageError
from slog.core.log_config import TOPIC_CONFIG_NAMES, LogConfig
from slog.core.log_manager import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    LogManager,
)
from slog.core.names import DataDirLayout
from tests.unit.batchgen import make_sized_batch

CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=256)


@pytest.fixture
def logs_dir(tmp_path: Path) -> Path:
    return tmp_path / "brokers" / "1" / "logs"


def manager(logs_dir: Path, config: LogConfig = CONFIG) -> LogManager:
    result = LogManager(logs_dir, config)
    result.load()
    return result


def fill(manager_: LogManager, topic: str, partition: int, count: int) -> None:
    log = manager_.get_or_create(topic, partition)
    for _ in range(count):
        log.append(make_sized_batch(0, 200))


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# ==================================================================== LogManager


def test_create_get_and_permissions(logs_dir: Path) -> None:
    mgr = manager(logs_dir)
    assert mgr.get("orders", 0) is None
    log = mgr.get_or_create("orders", 0)
    assert mgr.get_or_create("orders", 0) is log
    assert mgr.get("orders", 0) is log
    assert log.directory == (logs_dir / "orders-0").resolve()
    assert mode(logs_dir) == 0o700
    assert mode(log.directory) == 0o700
    log.append(make_sized_batch(0, 200))
    for path in log.directory.iterdir():
        assert mode(path) == 0o600, path
    assert set(mgr.all_logs()) == {("orders", 0)}


def test_invalid_names_never_become_paths(logs_dir: Path) -> None:
    mgr = manager(logs_dir)
    for topic in ("..", "a/b", "", "x" * 250):
        with pytest.raises(InvalidTopicError):
            mgr.get_or_create(topic, 0)
    with pytest.raises(InvalidTopicError):
        mgr.get_or_create("ok", -1)


def test_per_topic_config(logs_dir: Path) -> None:
    mgr = manager(logs_dir)
    custom = LogConfig(segment_bytes=1000)
    assert mgr.get_or_create("a", 0, custom).config == custom
    assert mgr.get_or_create("b", 0).config == CONFIG


def test_clean_shutdown_and_reload(logs_dir: Path) -> None:
    mgr = manager(logs_dir)
    fill(mgr, "a", 0, 30)
    fill(mgr, "b", 3, 5)
    mgr.shutdown()
    broker_dir = logs_dir.parent
    assert (broker_dir / CLEAN_SHUTDOWN_FILE).exists()
    points = OffsetCheckpointFile(broker_dir / RECOVERY_POINT_CHECKPOINT).read()
    assert points == {("a", 0): 30, ("b", 3): 5}
    assert mode(broker_dir / RECOVERY_POINT_CHECKPOINT) == 0o600

    again = manager(logs_dir)
    assert not (broker_dir / CLEAN_SHUTDOWN_FILE).exists()  # a crash is detectable again
    assert again.get("a", 0).log_end_offset == 30
    assert again.get("b", 3).log_end_offset == 5
    assert again.get("a", 0).recovery_point == 30


def test_crash_recovers_from_checkpointed_recovery_point(logs_dir: Path) -> None:
    mgr = manager(logs_dir)
    fill(mgr, "a", 0, 30)
    mgr.flush_all()
    mgr.checkpoint_recovery_points()
    fill(mgr, "a", 0, 5)  # unflushed: recovered by scanning
    log = mgr.get("a", 0)
    path = log.segments[-1].log_path
    torn = path.read_bytes()[: log.segments[-1].size - 50]  # last batch torn in the crash
    crashed = logs_dir.parent.parent / "crashed"  # the disk image after a power cut
    shutil.copytree(log.directory, crashed / "logs" / "a-0")
    shutil.copy(logs_dir.parent / RECOVERY_POINT_CHECKPOINT, crashed)
    (crashed / "logs" / "a-0" / path.name).write_bytes(torn)
    recovered = manager(crashed / "logs")
    assert recovered.get("a", 0).log_end_offset == 34


def test_log_start_offset_survives_restart(logs_dir: Path) -> None:
    mgr = manager(logs_dir)
    fill(mgr, "a", 0, 30)
    mgr.get("a", 0).maybe_increment_log_start_offset(25)
    mgr.shutdown()
    assert OffsetCheckpointFile(logs_dir.parent / LOG_START_OFFSET_CHECKPOINT).read() == {
        ("a", 0): 25
    }
    assert manager(logs_dir).get("a", 0).log_start_offset == 25


def test_delete_records_is_checkpointed_at_once(logs_dir: Path) -> None:
    """No clean shutdown, no periodic checkpoint: the deletion itself is on disk."""
    mgr = manager(logs_dir)
    fill(mgr, "a", 0, 30)
    fill(mgr, "b", 0, 5)
    checkpoint = OffsetCheckpointFile(logs_dir.parent / LOG_START_OFFSET_CHECKPOINT)
    assert checkpoint.read() == {("a", 0): 0, ("b", 0): 0} or checkpoint.read() == {}
    assert mgr.get("a", 0).maybe_increment_log_start_offset(12)
    assert checkpoint.read() == {("a", 0): 12, ("b", 0): 0}
    assert not mgr.get("a", 0).maybe_increment_log_start_offset(5)  # never backwards
    assert checkpoint.read()[("a", 0)] == 12
    # Several logs moved, one write: the caller checkpoints once, for all of them.
    assert mgr.get("a", 0).maybe_increment_log_start_offset(20, checkpoint=False)
    assert mgr.get("b", 0).maybe_increment_log_start_offset(3, checkpoint=False)
    assert checkpoint.read() == {("a", 0): 12, ("b", 0): 0}
    mgr.get("b", 0).checkpoint_log_start()
    assert checkpoint.read() == {("a", 0): 20, ("b", 0): 3}


def test_delete(logs_dir: Path) -> None:
    mgr = manager(logs_dir)
    fill(mgr, "a", 0, 3)
    view = mgr.get("a", 0).read(0, 1000).views[0]
    snapshot = bytes(view)
    assert mgr.delete("a", 0)
    assert not mgr.delete("a", 0)
    assert mgr.get("a", 0) is None
    assert list(logs_dir.iterdir()) == []
    assert bytes(view) == snapshot
    assert mgr.get_or_create("a", 0).log_end_offset == 0


def test_load_removes_interrupted_deletes_and_ignores_strays(logs_dir: Path) -> None:
    mgr = manager(logs_dir)
    fill(mgr, "a", 0, 3)
    mgr.shutdown()
    doomed = logs_dir / "b-0.0123456789abcdef-delete"
    doomed.mkdir()
    (doomed / "00000000000000000000.log").write_bytes(b"x")
    (logs_dir / "not a partition").mkdir()
    (logs_dir / "stray-file").write_text("x")
    mgr = manager(logs_dir)
    assert not doomed.exists()
    assert set(mgr.all_logs()) == {("a", 0)}


def test_corrupt_recovery_checkpoint_means_full_recovery(logs_dir: Path) -> None:
    mgr = manager(logs_dir)
    fill(mgr, "a", 0, 3)
    mgr.shutdown()
    (logs_dir.parent / RECOVERY_POINT_CHECKPOINT).write_text("garbage")
    (logs_dir.parent / CLEAN_SHUTDOWN_FILE).unlink()
    assert manager(logs_dir).get("a", 0).log_end_offset == 3


def test_retention_and_flush_across_logs(logs_dir: Path) -> None:
    config = LogConfig(segment_bytes=4096, retention_bytes=4000, flush_messages=10)
    mgr = manager(logs_dir, config)
    fill(mgr, "a", 0, 60)
    fill(mgr, "b", 0, 60)
    assert mgr.get("a", 0).recovery_point == 60  # flush.messages
    assert mgr.enforce_retention() == 4
    assert mgr.get("a", 0).log_start_offset == 40
    mgr.enforce_retention(high_watermarks={("a", 0): 0})
    mgr.flush_dirty_logs()
    mgr.shutdown()


# ==================================================================== checkpoints


def test_offset_checkpoint_round_trip(tmp_path: Path) -> None:
    checkpoint = OffsetCheckpointFile(tmp_path / "replication-offset-checkpoint")
    assert checkpoint.read() == {}
    offsets = {("orders", 0): 42, ("orders", 1): 0, ("__consumer_offsets", 49): 10**12}
    checkpoint.write(offsets)
    assert checkpoint.read() == offsets
    lines = checkpoint.path.read_text().splitlines()
    assert lines[:2] == ["0", "3"]
    assert "orders 0 42" in lines
    checkpoint.write({})
    assert checkpoint.path.read_text() == "0\n0\n"


@pytest.mark.parametrize(
    "text",
    ["", "0\n", "1\n0\n", "0\n2\nt 0 1\n", "0\n1\nt 0\n", "0\n1\nt x 1\n", "0\n1\n.. 0 1\n"],
)
def test_offset_checkpoint_rejects_malformed(tmp_path: Path, text: str) -> None:
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(StorageError):
        OffsetCheckpointFile(path).read()


def test_write_atomically(tmp_path: Path) -> None:
    target = tmp_path / "file"
    write_atomically(target, b"one")
    write_atomically(target, b"two")
    assert target.read_bytes() == b"two"
    assert mode(target) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["file"]  # no temp file left


def test_write_atomically_failure_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.mkdir()  # the rename onto a directory fails
    (target / "keep").write_text("x")
    with pytest.raises(StorageError):
        write_atomically(target, b"new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
    assert (target / "keep").read_text() == "x"


def test_write_atomically_into_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(StorageError):
        write_atomically(tmp_path / "missing" / "file", b"x")


def test_write_atomically_syncs_file_then_rename_then_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The order a power cut needs: the data is on disk before the name points at it,
    # and the directory (the rename) is synced last. Each step is a real syscall.
    steps: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
        steps.append("fsync dir" if is_dir else "fsync file")
        real_fsync(fd)

    def replace(src: Any, dst: Any) -> None:
        steps.append("rename")
        real_replace(src, dst)

    monkeypatch.setattr(checkpoint.os, "fsync", fsync)
    monkeypatch.setattr(checkpoint.os, "replace", replace)
    write_atomically(tmp_path / "file", b"data", unique_temp=True)
    assert steps == ["fsync file", "rename", "fsync dir"]
    assert (tmp_path / "file").read_bytes() == b"data"
    assert [p.name for p in tmp_path.iterdir()] == ["file"]


def test_create_exclusively_creates_once_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "cluster.json"
    assert create_exclusively(target, b"first") is True
    assert create_exclusively(target, b"second") is False  # another creator won
    assert target.read_bytes() == b"first"
    assert mode(target) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["cluster.json"]


def test_cluster_file_is_durable_and_created_by_one_racer(tmp_path: Path) -> None:
    layout = DataDirLayout(tmp_path)
    tmp_path.mkdir(exist_ok=True)
    results: list[str] = []
    threads = [threading.Thread(target=lambda: results.append(
        load_or_create_cluster(layout).cluster_id)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(results)) == 1 and len(results) == 8
    assert json.loads(layout.cluster_file.read_text())["cluster_id"] == results[0]
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


# ==================================================================== LogConfig


def test_log_config_defaults_are_kafkas() -> None:
    config = LogConfig()
    assert config.segment_bytes == 64 * 1024 * 1024
    assert config.segment_ms == 7 * 24 * 3600 * 1000
    assert config.segment_index_bytes == 10 * 1024 * 1024
    assert config.index_interval_bytes == 4096
    assert config.retention_ms == 7 * 24 * 3600 * 1000
    assert config.retention_bytes == -1
    assert config.flush_messages is None and config.flush_ms is None
    assert config.preallocate is False  # Kafka's default
    assert config.write_caching is False  # not Kafka's: acknowledged only once fsynced
    assert config.cleanup_policy == "delete"
    assert config.max_message_bytes == 1048588
    assert config.message_timestamp_type == "CreateTime"


def test_log_config_from_and_to_topic_configs() -> None:
    config = LogConfig.from_topic_configs(
        {
            "segment.bytes": "1048576",
            "retention.ms": "-1",
            "retention.bytes": "5000",
            "flush.messages": "1",
            "preallocate": "FALSE",
            "cleanup.policy": "compact,delete",
            "message.timestamp.type": "LogAppendTime",
            "min.insync.replicas": "2",  # not a storage setting: ignored
        }
    )
    assert config.segment_bytes == 1 << 20
    assert config.retention_ms == -1
    assert config.flush_messages == 1
    assert config.preallocate is False
    assert config.delete_enabled
    assert config.log_append_time
    round_trip = LogConfig.from_topic_configs(config.to_topic_configs())
    assert round_trip == config
    assert set(config.to_topic_configs()) == TOPIC_CONFIG_NAMES
    assert LogConfig().to_topic_configs()["flush.ms"] == str((1 << 63) - 1)


def test_log_config_defaults_can_be_layered() -> None:
    broker_defaults = LogConfig(retention_ms=1000)
    config = LogConfig.from_topic_configs({"segment.ms": "5"}, defaults=broker_defaults)
    assert config.retention_ms == 1000 and config.segment_ms == 5


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("segment.bytes", "abc", "segment.bytes: not an integer"),
        ("segment.bytes", "10", "segment.bytes: must be between 14"),
        ("retention.ms", "-2", "retention.ms"),
        ("flush.messages", "0", "flush.messages"),
        ("preallocate", "yes", "expected true or false"),
        ("write.caching", "sometimes", "write.caching: expected true or false"),
        ("cleanup.policy", "shred", "cleanup.policy"),
        ("message.timestamp.type", "Now", "message.timestamp.type"),
        ("max.message.bytes", "-1", "max.message.bytes"),
        ("segment.index.bytes", "3", "segment.index.bytes"),
    ],
)
def test_log_config_validation(name: str, value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LogConfig.from_topic_configs({name: value})
