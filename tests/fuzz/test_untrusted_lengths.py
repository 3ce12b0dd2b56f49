"""No allocation is sized by an untrusted length before it is checked against the frame.

tests/fuzz/length_sweep.py plants int32 and varint lengths from 2**20 to
2**32 at every byte offset of valid requests of every API and version the
codec decodes (and of a record batch), under an address-space cap of 256 MiB
above what the process already maps. Any array, string or buffer allocated
from such a length would fail under the cap (kio's native reader aborts the
process when an allocation fails), so a clean exit proves each length was
checked first. The control run skips slog's guard in front of kio: it must die.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

SWEEP = Path(__file__).with_name("length_sweep.py")


def _sweep(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SWEEP), *args], capture_output=True, text=True,
                          timeout=300)


def test_huge_declared_lengths_in_tiny_frames_allocate_nothing() -> None:
    result = _sweep()
    assert result.returncode == 0, result.stderr[-3000:]
    counts = json.loads(result.stdout)
    assert counts["cases"] > 50_000
    assert counts["refused"] > counts["cases"] // 3  # most planted lengths cannot fit
    assert counts["batch refused"] > 100


def test_the_cap_catches_an_unguarded_reader() -> None:
    """Control: kio's reader alone allocates from the planted lengths and dies under the cap."""
    result = _sweep("--raw", "--bodies", "1")
    assert result.returncode == -signal.SIGABRT, (result.returncode, result.stderr[-2000:])
    assert "memory allocation" in result.stderr
