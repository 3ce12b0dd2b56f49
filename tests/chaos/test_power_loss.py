"""The power-loss fault in CI: every broker killed at once on tests/powerfs, whatever was
not fsynced dropped, every broker restarted; with write.caching=false (slog's default)
nothing acknowledged may be lost and no committed offset may go back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from slog.chaos.checker import CLASSES
from slog.chaos.history import iter_file, read_history
from slog.chaos.runner import RunConfig, run
from slog.core.names import fsync_dir
from tests.powerfs import PowerFS, available

pytestmark = pytest.mark.skipif(available() is not None, reason=str(available()))

LOSSES = 2  # the second shows the committed offsets kept across a loss


@pytest.fixture
def powerfs(tmp_path: Path) -> Iterator[PowerFS]:
    with PowerFS(tmp_path / "powerfs") as fs:
        yield fs


@pytest.mark.timeout(600)
def test_power_losses_lose_nothing_acknowledged(powerfs: PowerFS, tmp_path: Path) -> None:
    data = powerfs.mount / "data"
    data.mkdir()
    fsync_dir(powerfs.mount)  # the data dir itself is the test's to make durable
    history_path = tmp_path / "history.jsonl"
    result = run(RunConfig(
        duration_s=600, warmup_s=6, rate=300, seed=2, faults=["power"],
        script=["power-loss"] * LOSSES, data_dir=data, history_path=history_path,
        power_cut_command=powerfs.cut_command, recovery_timeout_s=90), log=print)
    print(result.to_json())
    verdict = result.verdict
    assert result.ok, (verdict.line(), verdict.examples, result.problems)
    assert verdict.counts == dict.fromkeys(CLASSES, 0)
    assert verdict.acked > 1_000 and verdict.verified == verdict.acked
    assert result.fault_events == 3 * LOSSES and not result.offsets_went_back
    history = read_history(iter_file(history_path))
    losses = [f for f in history.faults if f.kind == "power-loss"]
    assert len(losses) == LOSSES
    # each cut really dropped data (the fault is not a plain restart), and the group's
    # committed offsets were compared across it (from the second on: the group may still
    # be joining at the first)
    for fault in losses:
        assert '"bytes_dropped": 0,' not in fault.detail, fault.detail
    for fault in losses[1:]:
        assert "committed offsets of" in fault.detail and "kept" in fault.detail, fault.detail
    assert {"final", "replica-1", "replica-2", "replica-3"} <= {r.source for r in history.reads}
