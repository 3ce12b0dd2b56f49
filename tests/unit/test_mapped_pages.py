"""Segment pages that reads map into the process are registered and can be let go."""

from __future__ import annotations

import mmap
from pathlib import Path

import pytest

from slog.core.mapped_pages import TOUCHED, TouchedMaps
from tests.unit.test_segment import filled_segment


def resident_kb(path: Path) -> int:
    """Resident KiB of this process's mappings of ``path`` (/proc/self/smaps)."""
    total, current = 0, None
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and not fields[0].endswith(":"):
                current = fields[5] if len(fields) > 5 else None
            elif fields[0] == "Rss:" and current == str(path):
                total += int(fields[1])
    return total


def test_a_read_at_the_end_maps_pages_and_a_release_unmaps_them(tmp_path: Path) -> None:
    # A consumer polling at the log end: headers are read, no record is returned.
    segment, batches = filled_segment(tmp_path, count=200, size=1000)
    TOUCHED.release()
    assert resident_kb(segment.log_path) == 0  # appends write, they do not map
    assert segment.read(100 + len(batches), 1 << 20, None, True) is None
    assert resident_kb(segment.log_path) > 0
    assert TOUCHED
    TOUCHED.release()
    assert resident_kb(segment.log_path) == 0
    result = segment.read(100, 1 << 20, None, True)  # the bytes are still there
    assert result is not None and bytes(result.view) == b"".join(batches)


def test_a_map_is_registered_once_per_release(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    segment, _ = filled_segment(tmp_path)
    TOUCHED.release()
    registered = []
    real = TOUCHED.touched
    monkeypatch.setattr(TOUCHED, "touched", lambda mapped: (registered.append(mapped),
                                                            real(mapped)))
    for _ in range(3):
        segment.read(105, 10_000, None, True)
    assert len(registered) == 1
    TOUCHED.release()
    segment.read(105, 10_000, None, True)
    assert len(registered) == 2


def test_a_closed_map_is_skipped(tmp_path: Path) -> None:
    maps = TouchedMaps()
    path = tmp_path / "f"
    path.write_bytes(b"x" * 4096)
    with open(path, "rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    maps.touched(mapped)
    mapped.close()
    assert maps.release() == 1  # no error for the closed one
    assert not maps and maps.generation == 1
