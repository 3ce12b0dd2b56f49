"""A bounded transactional chaos run (CI): the read-process-write pipeline under a kill and
a pause of the transaction coordinator's broker, a kill of the controller and a kill of a
partition leader, on RF=3; the transactional checker must find nothing, and not vacuously."""

from __future__ import annotations

from pathlib import Path

import pytest

from slog.chaos.history import iter_file
from slog.chaos.runner import RunConfig
from slog.chaos.txn_checker import CLASSES
from slog.chaos.txn_history import ABORTED, COMMITTED, read_txn_history
from slog.chaos.txn_runner import run_txn
from slog.cli.schema import SCHEMAS

# seed 4 aims both leader ops of this script at a transaction coordinator, the last at a
# partition leader (checked below, from the run's log)
SCRIPT = ["kill-leader", "pause-leader", "kill-controller", "kill-leader"]


@pytest.mark.timeout(420)
def test_txn_pipeline_under_coordinator_leader_and_controller_faults(tmp_path: Path) -> None:
    lines: list[str] = []

    def log(line: str) -> None:
        print(line)
        lines.append(line)

    config = RunConfig(duration_s=600, warmup_s=4, rate=200, seed=4, faults=["kill", "pause"],
                       script=SCRIPT, data_dir=tmp_path / "data",
                       history_path=tmp_path / "history.jsonl", recovery_timeout_s=90)
    result = run_txn(config, log=log)
    data = result.to_json()
    print(data)
    verdict = result.verdict
    assert result.healed and result.complete, result.problems
    assert result.ok, (verdict.line(), verdict.examples, result.problems)
    assert verdict.counts == dict.fromkeys(CLASSES, 0)
    assert result.ops == len(SCRIPT) and result.fault_events == len(SCRIPT)
    assert sum("the transaction coordinator of" in line for line in lines) == 2
    # not vacuous: many inputs, every one of them came out once, in many transactions
    assert verdict.input_acked > 1_000
    assert verdict.output_read >= verdict.input_acked
    assert verdict.outcomes[COMMITTED] > 20
    assert verdict.outcomes[ABORTED] > 0  # aborted records were there to be misread
    assert SCHEMAS["chaos run"].check(data) == []
    history = read_txn_history(iter_file(tmp_path / "history.jsonl"))
    assert [f.kind for f in history.base.faults] == SCRIPT
    assert len(history.outcomes) == sum(verdict.outcomes.values())


def test_cli_workload_choice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--workload txn reaches the transactional runner; an unknown workload starts nothing."""
    from typer.testing import CliRunner

    import slog.chaos.txn_runner as txn_runner
    from slog.cli.app import app

    data_dir = tmp_path / "cluster"
    bad = CliRunner().invoke(app, ["chaos", "run", "--workload", "stream",
                                   "--data-dir", str(data_dir)])
    assert bad.exit_code == 2 and "log or txn" in bad.output, bad.output
    assert not data_dir.exists()

    seen: list[RunConfig] = []

    def started(config: RunConfig, log: object) -> object:
        seen.append(config)
        raise SystemExit(0)

    monkeypatch.setattr(txn_runner, "run_txn", started)
    good = CliRunner().invoke(app, ["chaos", "run", "--workload", "txn", "--seed", "9",
                                    "--faults", "kill,pause"])
    assert good.exit_code == 0, good.output
    assert seen[0].seed == 9 and seen[0].faults == ["kill", "pause"]
