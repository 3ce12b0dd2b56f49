"""`slog chaos run` refuses bad settings before it starts anything."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from slog.cli.app import app

runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--faults", "kill,flood"], "unknown fault flood"),
        (["--rf", "2", "--min-insync", "3"], "more than --rf"),
        (["--retries", "0"], "must retry"),
        (["--retries", "-1"], "retries"),
        (["--duration", "soon"], "duration"),
    ],
)
def test_bad_settings_are_usage_errors_and_start_nothing(tmp_path: Path, args: list[str],
                                                         message: str) -> None:
    data_dir = tmp_path / "cluster"
    result = runner.invoke(app, ["chaos", "run", "--data-dir", str(data_dir), *args])
    assert result.exit_code == 2, result.output
    assert message in result.output.lower().replace("\n", " ") or message in result.output
    assert "Traceback" not in result.output
    assert not data_dir.exists()  # no cluster was started


def test_idempotence_and_retries_reach_the_run_config(monkeypatch: pytest.MonkeyPatch) -> None:
    import slog.chaos.runner as runner_module

    seen = []

    def fake_run(config: runner_module.RunConfig, log: object) -> object:
        seen.append(config)
        raise SystemExit(0)

    monkeypatch.setattr(runner_module, "run", fake_run)
    result = runner.invoke(app, ["chaos", "run", "--retries", "0", "--no-idempotence"])
    assert result.exit_code == 0, result.output
    assert seen[0].retries == 0 and seen[0].idempotent is False
