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
        (["--faults", "power"], "needs --power-cut-command"),
        (["--faults", "power,disk", "--power-cut-command", "true"], "exclude each other"),
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


def test_power_cut_command_and_write_caching_reach_the_run_config(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import slog.chaos.runner as runner_module

    seen = []

    def fake_run(config: runner_module.RunConfig, log: object) -> object:
        seen.append(config)
        raise SystemExit(0)

    monkeypatch.setattr(runner_module, "run", fake_run)
    result = runner.invoke(app, ["chaos", "run", "--faults", "power", "--data-dir",
                                 str(tmp_path), "--power-cut-command", "cut now",
                                 "--write-caching", "--base-port", "19650"])
    assert result.exit_code == 0, result.output
    config = seen[0]
    assert config.power_cut_command == "cut now" and config.write_caching
    assert config.broker_overrides["write.caching.default"] == "true"
    assert config.base_port == 19650 and config.wants("power-loss")
