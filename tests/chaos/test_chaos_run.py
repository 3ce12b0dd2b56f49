"""A bounded chaos run (CI): real brokers, real faults, the checker's verdict.

RF=3, min.insync.replicas=2, acks=all, idempotence on. One run takes its ops from the
seeded random schedule, as the soak does, bounded by an op count; the seed is one whose
first ops are every fault kind once, so the one run covers them all. It must end with a
healthy cluster and a clean verdict whose counts show the check was not vacuous. Longer
runs are soaks, run by hand (docs/RELIABILITY.md).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from slog.chaos.checker import CLASSES
from slog.chaos.history import iter_file, read_history
from slog.chaos.runner import RunConfig, RunResult, run
from slog.chaos.schedule import op_kinds, schedule
from slog.cli.schema import SCHEMAS

FAULTS = ["kill", "pause", "restart", "torn", "disk"]
# The first eleven ops of seed 148623 are the eleven op kinds of FAULTS, each once:
# clean-stop, kill-controller, pause-controller, rolling-restart, pause-leader, pause,
# full-disk (tmpfs), kill, kill-leader, kill+pause, torn-tail. About two minutes.
SEED = 148623
OPS = len(op_kinds(FAULTS))
SESSION_TIMEOUT_S = 1.5


def chaos(tmp_path: Path, **options: object) -> RunResult:
    config = RunConfig(duration_s=900, warmup_s=5, rate=500, data_dir=tmp_path / "data",
                       history_path=tmp_path / "history.jsonl", recovery_timeout_s=90,
                       session_timeout_ms=int(SESSION_TIMEOUT_S * 1000),
                       **options)  # type: ignore[arg-type]
    result = run(config, log=print)
    print(result.to_json())
    return result


def assert_clean(result: RunResult) -> None:
    verdict = result.verdict
    assert result.healed and result.complete, result.problems
    assert result.ok, (verdict.line(), verdict.examples, result.problems)
    assert verdict.counts == dict.fromkeys(CLASSES, 0)
    assert verdict.acked > 5_000 and verdict.verified == verdict.acked
    assert result.rate_quiet > 0 and result.rate_faults > 0
    assert sum(result.high_watermarks.values()) >= verdict.acked


@pytest.mark.timeout(900)
def test_every_fault_kind_from_the_seeded_schedule(tmp_path: Path) -> None:
    # the same seed gives the same op kinds, so the faults in the history are exactly the
    # schedule's first ones; the seed was chosen so that they are every kind
    expected = [op.kind for op in itertools.islice(
        schedule(SEED, FAULTS, SESSION_TIMEOUT_S), OPS)]
    assert sorted(expected) == sorted(op_kinds(FAULTS))
    result = chaos(tmp_path, seed=SEED, faults=FAULTS, max_ops=OPS)
    assert_clean(result)
    assert result.ops == OPS
    # a kill, kill-leader, kill-controller, clean stop, torn tail and the three pauses one
    # broker each, the rolling restart three, kill+pause two, the full disk none
    assert result.fault_events == 13
    assert set(result.stalls_s) == set(expected)
    history = read_history(iter_file(tmp_path / "history.jsonl"))
    assert [f.kind for f in history.faults] == expected
    disk = next(f for f in history.faults if f.kind == "full-disk")
    assert "tmpfs filled" in disk.detail
    assert "; 0 write(s) refused" not in disk.detail  # the full disk did bite, at a roll
    torn = next(f for f in history.faults if f.kind == "torn-tail")
    assert "truncated" in torn.detail or "flipped" in torn.detail
    # every replica's files were read and compared, and the consumers saw every partition
    sources = {r.source for r in history.reads}
    assert {"final", "replica-1", "replica-2", "replica-3", "c0", "c1"} <= sources
    assert {p for a in history.assignments for p in a.partitions} == set(range(6))
    # what `slog chaos run -o json` prints has exactly the documented fields
    assert SCHEMAS["chaos run"].check(result.to_json()) == []
