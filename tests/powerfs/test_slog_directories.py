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
