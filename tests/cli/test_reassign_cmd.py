"""``slog reassign generate|execute|verify|cancel|list`` against a real three-broker
cluster (in-process CLI, real broker processes)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from slog.cli.app import app
from slog.core.metadata import PartitionState
from slog.replication.throttle import THROTTLE_CONFIG
from tests.cluster.conftest import FAST, Cluster, wait_until

runner = CliRunner()
NOWHERE = "127.0.0.1:1"
VALUE = b"v" * 900
PlanEntries = list[tuple[str, int, list[int]]]  # (topic, partition, replicas)


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path_factory.mktemp("reassign") / "data", 3, dict(FAST))
    try:
        cluster.start()
        cluster.create_topic("fixed", assignment={0: [1, 2], 1: [2, 3], 2: [3, 1]})
        yield cluster
    finally:
        cluster.close()
    assert "Traceback" not in cluster.all_logs()


def slog(cluster: Cluster | None, *args: str) -> Any:
    return runner.invoke(app, [*args, "-b", cluster.bootstrap if cluster else NOWHERE])


def write_plan(path: Path, entries: PlanEntries) -> Path:
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r} for t, p, r in entries]}))
    return path


def fill(cluster: Cluster, topic: str, partition: int, records: int) -> None:
    """Many small batches, so that a throttle has something to hold back."""
    producer = cluster.producer(batch_size=1024, linger_ms=0)
    for _ in range(records):
        producer.send(topic, VALUE, partition=partition)
    producer.flush(30)


def snapshot(cluster: Cluster, topic: str) -> dict[int, PartitionState]:
    return dict(cluster.image().topics[topic].partitions)


def moving(cluster: Cluster) -> list[dict[str, Any]]:
    result = slog(cluster, "reassign", "list", "-o", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("args", [
    ["reassign", "cancel"],
    ["reassign", "cancel", "--all", "--plan", "p.json"],
    ["reassign", "execute", "--plan", "/nonexistent/plan.json"],
    ["reassign", "execute", "--plan", "p.json", "--throttle", "0"],
    ["reassign", "generate", "--topics", "t", "--brokers", "one,two"],
    ["reassign", "generate", "--topics", ",", "--brokers", "1"],
    ["reassign", "verify"],
])
def test_usage_errors_exit_2(args: list[str]) -> None:
    result = slog(None, *args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


BAD_PLANS: dict[str, tuple[str | PlanEntries, str]] = {
    "malformed": ("{not json", "not valid JSON"),
    "not a plan": ('{"version": 1}', '"partitions" list'),
    "unknown topic": ([("nope", 0, [1, 2])], "unknown topic 'nope'"),
    "unknown partition": ([("fixed", 7, [1, 2])], "topic 'fixed' has no partition 7"),
    "duplicate partitions": ([("fixed", 0, [2, 3]), ("fixed", 0, [3, 1])],
                             "fixed-0 appears more than once"),
    "unknown broker": ([("fixed", 0, [2, 9])], r"unknown broker(s) [9]"),
    "repeated broker": ([("fixed", 0, [2, 2])], "more than once"),
    "replica count": ([("fixed", 0, [1, 2, 3])],
                      "lists 3 replica(s) but the partition has 2, and the replication factor"),
    "empty replicas": ([("fixed", 0, [])], "empty"),
}


@pytest.mark.parametrize("case", sorted(BAD_PLANS))
def test_bad_plans_are_refused_and_change_nothing(nodes: Cluster, tmp_path: Path,
                                                  case: str) -> None:
    content, message = BAD_PLANS[case]
    plan = tmp_path / "plan.json"
    if isinstance(content, str):
        plan.write_text(content)
    else:
        # A valid first partition, so a half-applied plan would show.
        write_plan(plan, [("fixed", 2, [1, 2]), *content])
    before = snapshot(nodes, "fixed")
    result = slog(nodes, "reassign", "execute", "--plan", str(plan), "--throttle", "1000",
                  "--disallow-replication-factor-change")
    assert result.exit_code == 2, result.output
    assert message in result.stderr and "Traceback" not in result.output
    assert not (tmp_path / "plan.rollback.json").exists()
    assert snapshot(nodes, "fixed") == before
    assert THROTTLE_CONFIG not in nodes.image().topics["fixed"].configs
    assert moving(nodes) == []
    described = slog(nodes, "topic", "describe", "fixed", "-o", "json")
    assert [r["replicas"] for r in json.loads(described.stdout)] == [[1, 2], [2, 3], [3, 1]]


def test_generate_proposes_a_plan_over_the_given_brokers(nodes: Cluster, tmp_path: Path) -> None:
    saved = tmp_path / "proposed.json"
    result = slog(nodes, "reassign", "generate", "--topics", "fixed", "--brokers", "1,3",
                  "--save", str(saved), "-o", "json")
    assert result.exit_code == 0, result.output
    plans = json.loads(result.stdout)
    assert plans["current"] == {"version": 1, "partitions": [
        {"topic": "fixed", "partition": 0, "replicas": [1, 2]},
        {"topic": "fixed", "partition": 1, "replicas": [2, 3]},
        {"topic": "fixed", "partition": 2, "replicas": [3, 1]}]}
    proposed = plans["proposed"]["partitions"]
    assert [(p["topic"], p["partition"]) for p in proposed] == [("fixed", i) for i in range(3)]
    assert all(sorted(p["replicas"]) == [1, 3] for p in proposed)
    assert json.loads(saved.read_text()) == plans["proposed"]
    unknown = slog(nodes, "reassign", "generate", "--topics", "fixed,nope", "--brokers", "1,2")
    assert unknown.exit_code == 4 and "nope" in unknown.stderr
    bad_broker = slog(nodes, "reassign", "generate", "--topics", "fixed", "--brokers", "1,7")
    assert bad_broker.exit_code == 2 and "[7]" in bad_broker.stderr
    too_few = slog(nodes, "reassign", "generate", "--topics", "fixed", "--brokers", "2")
    assert too_few.exit_code == 2 and "larger than the 1 available broker" in too_few.stderr


def test_execute_verify_and_roll_back_with_a_throttle(nodes: Cluster, tmp_path: Path) -> None:
    nodes.create_topic("move", assignment={0: [1, 2], 1: [2, 1]})
    fill(nodes, "move", 0, 300)  # ~300 KB: six seconds at 50 KB/s, still moving below
    plan = write_plan(tmp_path / "plan.json", [("move", 0, [2, 3]), ("move", 1, [3, 2])])
    started = slog(nodes, "reassign", "execute", "--plan", str(plan), "--throttle", "50000",
                   "-o", "json")
    assert started.exit_code == 0, started.output
    report = json.loads(started.stdout)
    assert [r["status"] for r in report["partitions"]] == ["started", "started"]
    rollback = tmp_path / "plan.rollback.json"
    assert report["rollback_file"] == str(rollback)
    assert json.loads(rollback.read_text())["partitions"] == [
        {"topic": "move", "partition": 0, "replicas": [1, 2]},
        {"topic": "move", "partition": 1, "replicas": [2, 1]}]
    assert nodes.image().topics["move"].configs[THROTTLE_CONFIG] == "50000"

    checking = slog(nodes, "reassign", "verify", "--plan", str(plan), "-o", "json")
    assert checking.exit_code == 1, checking.output
    status = json.loads(checking.stdout)
    assert status["complete"] is False and status["throttle_removed"] is False
    first = status["partitions"][0]
    assert (first["status"], first["adding"], first["removing"]) == ("in progress", [3], [1])
    assert {"topic": "move", "partition": 0, "replicas": [2, 3, 1], "adding": [3],
            "removing": [1]} in moving(nodes)
    busy = slog(nodes, "reassign", "execute", "--plan", str(plan))
    assert busy.exit_code == 1 and "already being reassigned: move-0" in busy.stderr

    wait_until(lambda: not moving(nodes), 30, "the reassignment to finish")
    done = slog(nodes, "reassign", "verify", "--plan", str(plan))
    assert done.exit_code == 0, done.output
    assert "throttle removed" in done.stderr
    assert THROTTLE_CONFIG not in nodes.image().topics["move"].configs
    assert [s.replicas for s in snapshot(nodes, "move").values()] == [(2, 3), (3, 2)]
    wait_until(lambda: not nodes.layout.partition_dir(1, "move", 0).exists(), 10,
               "broker 1 to delete its copy of move-0")
    assert len(nodes.read_all("move", 0, 300)) == 300

    back = slog(nodes, "reassign", "execute", "--plan", str(rollback), "--wait",
                "--timeout", "30")
    assert back.exit_code == 0, back.output
    assert "reassignment complete" in back.stderr
    assert [s.replicas for s in snapshot(nodes, "move").values()] == [(1, 2), (2, 1)]
    assert slog(nodes, "reassign", "verify", "--plan", str(rollback)).exit_code == 0


def test_a_plan_raises_and_lowers_the_replication_factor(nodes: Cluster, tmp_path: Path
                                                        ) -> None:
    nodes.create_topic("grow", assignment={0: [1, 2]})
    fill(nodes, "grow", 0, 50)
    plan = write_plan(tmp_path / "plan.json", [("grow", 0, [1, 2, 3])])
    grown = slog(nodes, "reassign", "execute", "--plan", str(plan), "--wait", "--timeout", "30",
                 "-o", "json")
    assert grown.exit_code == 0, grown.output
    assert [r["status"] for r in json.loads(grown.stdout)["partitions"]] == ["started"]
    wait_until(lambda: set(nodes.state("grow").isr) == {1, 2, 3}, 10, "all three in the ISR")
    assert nodes.state("grow").replicas == (1, 2, 3)
    assert slog(nodes, "reassign", "verify", "--plan", str(plan)).exit_code == 0
    assert len(nodes.read_all("grow", 0, 50)) == 50

    rollback = tmp_path / "plan.rollback.json"
    shrunk = slog(nodes, "reassign", "execute", "--plan", str(rollback), "--wait",
                  "--timeout", "30")
    assert shrunk.exit_code == 0, shrunk.output
    assert (nodes.state("grow").replicas, set(nodes.state("grow").isr)) == ((1, 2), {1, 2})
    wait_until(lambda: not nodes.layout.partition_dir(3, "grow", 0).exists(), 10,
               "broker 3 to delete its copy of grow-0")
    assert len(nodes.read_all("grow", 0, 50)) == 50


def test_cancel_keeps_the_original_replicas(nodes: Cluster, tmp_path: Path) -> None:
    nodes.create_topic("stuck", assignment={0: [1, 2]})
    fill(nodes, "stuck", 0, 100)
    plan = write_plan(tmp_path / "plan.json", [("stuck", 0, [3, 2])])
    started = slog(nodes, "reassign", "execute", "--plan", str(plan), "--throttle", "2000")
    assert started.exit_code == 0, started.output
    wait_until(lambda: nodes.layout.partition_dir(3, "stuck", 0).exists(), 10,
               "broker 3 to start copying stuck-0")
    cancelled = slog(nodes, "reassign", "cancel", "--plan", str(plan), "-o", "json")
    assert cancelled.exit_code == 0, cancelled.output
    assert json.loads(cancelled.stdout) == [{"topic": "stuck", "partition": 0,
                                             "status": "cancelled", "replicas": [2, 1],
                                             "error": None}]
    state = nodes.state("stuck")
    assert (set(state.replicas), state.adding, state.removing) == ({1, 2}, (), ())
    assert THROTTLE_CONFIG not in nodes.image().topics["stuck"].configs
    wait_until(lambda: not nodes.layout.partition_dir(3, "stuck", 0).exists(), 10,
               "broker 3 to drop its partial copy")
    assert moving(nodes) == []
    verify = slog(nodes, "reassign", "verify", "--plan", str(plan))
    assert verify.exit_code == 1 and "failed" in verify.stdout
    nothing = slog(nodes, "reassign", "cancel", "--all")
    assert nothing.exit_code == 0 and "no reassignment is in progress" in nothing.stderr


def test_verify_wait_reports_once_the_move_is_done(nodes: Cluster, tmp_path: Path) -> None:
    nodes.create_topic("waited", assignment={0: [1, 2]})
    fill(nodes, "waited", 0, 100)
    plan = write_plan(tmp_path / "plan.json", [("waited", 0, [3, 1])])
    started = slog(nodes, "reassign", "execute", "--plan", str(plan), "--throttle", "200000",
                   "--no-wait", "-o", "json")
    assert started.exit_code == 0, started.output
    waited = slog(nodes, "reassign", "verify", "--plan", str(plan), "--wait", "--timeout", "120",
                  "-o", "yaml")
    assert waited.exit_code == 0, waited.output
    status = yaml.safe_load(waited.stdout)
    assert status["complete"] is True and status["throttle_removed"] is True
    assert status["partitions"][0]["replicas"] == [3, 1]
