"""Fault schedules are reproducible from their seed; torn tails are what recovery must cut."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from slog.chaos.nemesis import tear
from slog.chaos.replicas import replica_records, valid_batches
from slog.chaos.schedule import COMBINED, Op, op_kinds, parse_faults, schedule
from slog.core.records import build_batch


def take(seed: int, groups: list[str], n: int = 50) -> list[Op]:
    return list(itertools.islice(schedule(seed, groups, 1.5), n))


def test_same_seed_same_schedule_and_different_seeds_differ() -> None:
    groups = ["kill", "pause", "restart", "torn", "disk"]
    assert take(7, groups) == take(7, groups)
    assert take(7, groups) != take(8, groups)


def test_only_enabled_faults_are_scheduled_and_pauses_outlast_the_session() -> None:
    ops = take(3, ["pause"], 200)
    assert {op.kind for op in ops} == {"pause", "pause-leader", "pause-controller"}
    assert all(1.5 * 1.5 <= op.duration_s <= 3 * 1.5 for op in ops)
    assert COMBINED in op_kinds(["kill", "pause"]) and COMBINED not in op_kinds(["kill"])


def test_parse_faults() -> None:
    assert parse_faults("kill, pause,kill") == ["kill", "pause"]
    with pytest.raises(ValueError, match="unknown fault bogus"):
        parse_faults("kill,bogus")
    with pytest.raises(ValueError):
        parse_faults("")


def write_segment(directory: Path, batches: int) -> Path:
    directory.mkdir()
    path = directory / "00000000000000000000.log"
    data = b"".join(build_batch([(None, f"v{i}-{j}".encode(), (), None) for j in range(3)],
                                base_offset=3 * i)
                    for i in range(batches))
    path.write_bytes(data + bytes(4096))  # the preallocated, never-written tail
    return path


@pytest.mark.parametrize("mode", ["truncate", "corrupt"])
def test_tear_damages_only_the_last_batch(tmp_path: Path, mode: str) -> None:
    path = write_segment(tmp_path / "chaos-0", 4)
    assert len(list(valid_batches(path))) == 4
    for pick in range(20):
        op = Op("torn-tail", 0, pick, 0.0, mode, 0.0)
        write_segment(tmp_path / f"p{pick}", 4)
        tear(tmp_path / f"p{pick}", op)
        kept = [offset for offset, _ in replica_records(tmp_path / f"p{pick}")]
        assert kept == list(range(9)), f"{mode} with pick {pick} kept {kept}"


def test_a_script_runs_exactly_its_ops_in_order() -> None:
    ops = list(schedule(5, ["kill"], 1.5, ["torn-tail", "full-disk", COMBINED]))
    assert [op.kind for op in ops] == ["torn-tail", "full-disk", COMBINED]
    assert ops == list(schedule(5, ["kill"], 1.5, ["torn-tail", "full-disk", COMBINED]))
    with pytest.raises(ValueError, match="unknown fault op"):
        list(schedule(5, ["kill"], 1.5, ["explode"]))
