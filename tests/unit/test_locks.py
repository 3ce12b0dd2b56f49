"""Lock probes: a dead broker's lock, probed by other processes, must not look held.
Real lock files, real processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from slog.core.locks import FileLock, held_steadily, is_locked
from tests.unit.test_data_dir_watch import hold_locks

# What every other broker does to a dead broker's alive.lock: take it and let go, often.
PROBER = """
import sys, time
from pathlib import Path
from slog.core.locks import is_locked
print("probing", flush=True)
while True:
    is_locked(Path(sys.argv[1]))
    time.sleep(0.001)
"""


def test_a_held_lock_is_held_steadily(tmp_path: Path) -> None:
    path = tmp_path / "alive.lock"
    holder = hold_locks(path)
    try:
        assert is_locked(path) and held_steadily(path)
    finally:
        holder.kill()
        holder.wait()
    assert not held_steadily(path)


def test_another_processs_probes_do_not_make_a_free_lock_look_held(tmp_path: Path) -> None:
    path = tmp_path / "alive.lock"
    path.touch()
    prober = subprocess.Popen([sys.executable, "-c", PROBER, str(path)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert prober.stdout is not None and prober.stdout.readline().strip() == "probing"
        assert not any(held_steadily(path) for _ in range(5000))
    finally:
        prober.kill()
        prober.wait()


def test_a_held_lock_is_lost_when_its_file_leaves_the_path(tmp_path: Path) -> None:
    path = tmp_path / "brokers" / "1" / "alive.lock"
    lock = FileLock(path)
    assert not lock.lost()  # not held: nothing to lose
    assert lock.try_acquire() and not lock.lost()
    (tmp_path / "brokers").rename(tmp_path / "removed")
    assert lock.lost()  # the path is gone
    path.parent.mkdir(parents=True)
    path.touch()
    assert lock.lost()  # the path names another file: a new holder could take it
    assert not is_locked(path)
    lock.release()
