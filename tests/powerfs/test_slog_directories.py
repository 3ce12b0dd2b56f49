"""slog's own directories on the power-cut file system: a directory slog creates must
survive a power cut, or everything fsynced beneath it goes with it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from slog.core.checkpoint import write_atomically
from slog.core.names import fsync_dir, make_private_dir
from tests.powerfs import PowerFS, available

pytestmark = pytest.mark.skipif(available() is not None, reason=str(available()))


def test_new_directories_and_what_is_fsynced_in_them_survive(tmp_path: Path) -> None:
    with PowerFS(tmp_path / "state") as fs:
        root = fs.mount / "data"
        root.mkdir()
        fsync_dir(fs.mount)
        # as a broker's first start makes brokers/1 and metadata/__cluster_metadata-0
        deep = make_private_dir(root / "metadata" / "__cluster_metadata-0")
        write_atomically(deep / "leader-epoch-checkpoint", b"0\n")
        fs.cut()
        assert (deep / "leader-epoch-checkpoint").read_bytes() == b"0\n"
        assert oct(os.stat(root / "metadata").st_mode & 0o777) == "0o700"


def test_sealed_segments_keep_their_indexes_through_a_power_cut(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A roll trims the sealed segment's index files; the trim must be durable, or every
    restart after a power loss finds each sealed index corrupt and rebuilds it."""
    from slog.core.log import PartitionLog
    from tests.unit.test_log import Clock, config, fill

    with PowerFS(tmp_path / "state") as fs:
        directory = make_private_dir(fs.mount / "data" / "t-0")
        log = PartitionLog.open(directory, config(), time=Clock())
        fill(log, 65)  # 20 batches per segment: three rolls
        assert log.recovery_point == 60  # the sealed segments' fsyncs are done
        sealed = [(s.offset_index.path, s.offset_index.path.stat().st_size)
                  for s in log.segments[:-1]]
        fs.cut()  # a power loss: the process dies with the machine, nothing is closed
        for path, size in sealed:
            assert path.stat().st_size == size, path
        caplog.clear()
        reopened = PartitionLog.open(directory, config(), time=Clock(), clean_shutdown=False)
        assert "rebuilding" not in caplog.text
        assert reopened.log_end_offset >= 60
        reopened.close()
        # the old log is left as a dead process leaves it (its maps now reach past the
        # ends of the files the cut shortened: closing it would touch them)


def test_a_recovered_segment_keeps_its_cut_indexes_through_a_power_cut(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Recovery cuts the indexes it rebuilt; the cut must be durable, or the segment is
    found corrupt, and recovered, at every start after every later power loss."""
    from slog.core.log import PartitionLog
    from tests.unit.test_log import Clock, config, fill

    with PowerFS(tmp_path / "state") as fs:
        directory = make_private_dir(fs.mount / "data" / "t-0")
        log = PartitionLog.open(directory, config(), time=Clock())
        fill(log, 45)  # two sealed segments
        first = log.segments[0].offset_index.path
        log.close()
        with open(first, "r+b") as index:  # a durable zero tail, as a lost cut leaves
            index.truncate(first.stat().st_size + 4096)
            os.fsync(index.fileno())
        PartitionLog.open(directory, config(), time=Clock(), clean_shutdown=False).close()
        fs.cut()
        caplog.clear()
        reopened = PartitionLog.open(directory, config(), time=Clock(), clean_shutdown=True)
        assert "corrupt" not in caplog.text
        assert reopened.log_end_offset == 45
        reopened.close()
