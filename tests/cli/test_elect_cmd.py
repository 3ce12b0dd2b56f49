"""``slog elect-leaders``, ``slog preferred-leader-election`` and the ``topic describe``
filters, against a real three-broker cluster (in-process CLI, real broker processes)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from slog.cli import elect_cmd
from slog.cli.app import app
from tests.cluster.conftest import FAST, Cluster

runner = CliRunner()
NOWHERE = "127.0.0.1:1"


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path_factory.mktemp("elect") / "data", 3, dict(FAST))
    try:
        yield cluster.start()
    finally:
        cluster.close()
    assert "Traceback" not in cluster.all_logs()


def slog(cluster: Cluster | None, *args: str) -> Any:
    bootstrap = cluster.bootstrap if cluster is not None else NOWHERE
    return runner.invoke(app, [*args, "-b", bootstrap])


def rows(result: Any) -> list[dict[str, Any]]:
    return json.loads(result.stdout)


@pytest.mark.parametrize("args", [
    ["elect-leaders", "--type", "preferred"],
    ["elect-leaders", "--type", "preferred", "--all", "--topic", "t"],
    ["elect-leaders", "--type", "preferred", "--all", "--partition", "0"],
    ["elect-leaders", "--type", "sideways", "--all"],
    ["elect-leaders", "--all"],
    ["preferred-leader-election"],
    ["preferred-leader-election", "--topic", "t", "--partition", "-1"],
    ["elect-leaders", "--type", "preferred", "--all", "t"],
    ["elect-leaders", "--type", "preferred", "--all", "-r", "t.*"],
    ["elect-leaders", "--type", "preferred", "t", "--plan", "plan.json"],
    ["elect-leaders", "--type", "preferred", "-r", "("],
    ["preferred-leader-election", "--all", "t", "u"],
    ["topic", "describe", "--unavailable", "--at-min-isr"],
])
def test_usage_errors_exit_2(args: list[str]) -> None:
    result = slog(None, *args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(("args", "topics", "regex", "partition"), [
    (["elect-leaders", "--type", "unclean", "a", "b"], ["a", "b"], None, None),
    (["elect-leaders", "--type", "preferred", "a", "-t", "b", "--topic", "c", "-p", "2"],
     ["a", "b", "c"], None, 2),
    (["elect-leaders", "--type", "preferred", "-r", "orders-.*"], [], "orders-.*", None),
    (["elect-leaders", "--type", "preferred", "a", "--regex", "b.*", "-p", "0"], ["a"], "b.*", 0),
    (["preferred-leader-election", "a", "b", "-r", "c.*"], ["a", "b"], "c.*", None),
    (["preferred-leader-election", "--topic", "a"], ["a"], None, None),
])
def test_topics_are_positional_plus_topic_and_regex(monkeypatch: pytest.MonkeyPatch,
                                                    args: list[str], topics: list[str],
                                                    regex: str | None, partition: int | None
                                                    ) -> None:
    """TOPIC arguments and the (repeatable) --topic are one list; --regex and --partition
    are passed on as given."""
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(elect_cmd, "run_election", lambda *a: calls.append(a))
    result = runner.invoke(app, [*args, "-b", NOWHERE, "-o", "json"])
    assert result.exit_code == 0, result.output
    [(election, all_partitions, got_topics, got_regex, got_partition, plan, bootstrap,
      output)] = calls
    assert election.value == ("unclean" if "unclean" in args else "preferred")
    assert (all_partitions, got_topics, got_regex, got_partition, plan) == \
        (False, topics, regex, partition, None)
    assert (bootstrap, output.value) == (NOWHERE, "json")


def test_a_bad_regex_is_a_usage_error_before_connecting() -> None:
    result = slog(None, "elect-leaders", "--type", "preferred", "-r", "(")
    assert result.exit_code == 2, result.output
    assert "regular expression" in result.stderr and "Traceback" not in result.output


@pytest.mark.parametrize("content", ["{", '{"partitions": []}', '{"partitions": [{"topic": 1}]}',
                                     '{"partitions": [{"topic": "t", "partition": 0}, '
                                     '{"topic": "t", "partition": 0}]}'])
def test_bad_election_files_exit_2(tmp_path: Path, content: str) -> None:
    path = tmp_path / "elect.json"
    path.write_text(content)
    result = slog(None, "elect-leaders", "--type", "preferred", "--plan", str(path))
    assert result.exit_code == 2, result.output
    assert str(path) in result.stderr


def test_the_alias_is_listed_in_help() -> None:
    result = runner.invoke(app, ["--help"])
    assert "preferred-leader-election" in result.stdout
    assert "elect-leaders --type preferred" in result.stdout


def describe(cluster: Cluster, flag: str) -> set[tuple[str, int]]:
    result = slog(cluster, "topic", "describe", flag, "-o", "json")
    assert result.exit_code == 0, result.output
    return {(r["topic"], r["partition"]) for r in rows(result)}


def test_elections_and_describe_filters_around_a_broker_restart(nodes: Cluster, tmp_path: Path
                                                                ) -> None:
    nodes.create_topic("elect", assignment={0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]},
                       configs={"min.insync.replicas": "3"})
    nodes.create_topic("solo", assignment={0: [1]})
    nodes.create_topic("spare", assignment={0: [2]})
    everything = {("elect", 0), ("elect", 1), ("elect", 2), ("solo", 0), ("spare", 0)}
    assert describe(nodes, "--under-replicated") == set()
    assert describe(nodes, "--unavailable") == set()
    assert describe(nodes, "--under-min-isr") == set()
    assert describe(nodes, "--at-min-isr") == everything  # ISR 3 of min 3; ISR 1 of min 1

    nodes.stop(1)  # controlled shutdown: elect-0 moves to broker 2, solo-0 goes offline
    nodes.wait_leader("elect", 0, not_in={1})
    nodes.wait_isr("elect", 0, {2, 3})
    elect = {("elect", 0), ("elect", 1), ("elect", 2)}
    assert describe(nodes, "--under-replicated") == elect
    assert describe(nodes, "--under-min-isr") == elect | {("solo", 0)}  # leaderless counts
    assert describe(nodes, "--unavailable") == {("solo", 0)}
    assert describe(nodes, "--at-min-isr") == {("solo", 0), ("spare", 0)}  # as in Kafka
    refused = slog(nodes, "elect-leaders", "--type", "preferred", "--topic", "elect",
                   "--partition", "0", "-o", "json")
    assert refused.exit_code == 1, refused.output
    assert rows(refused)[0]["result"] == "PREFERRED_LEADER_NOT_AVAILABLE"

    nodes.restart(1)
    nodes.wait_registered([1])
    nodes.wait_in_sync("elect")
    assert nodes.leader("elect", 0) != 1
    plan = tmp_path / "elect.json"
    plan.write_text(json.dumps({"partitions": [{"topic": "elect", "partition": 0}]}))
    elected = slog(nodes, "elect-leaders", "--type", "preferred", "--plan", str(plan),
                   "-o", "json")
    assert elected.exit_code == 0, elected.output
    assert rows(elected) == [{"topic": "elect", "partition": 0, "result": "ELECTED",
                              "error": None}]
    assert nodes.wait_leader("elect", 0) == 1

    again = slog(nodes, "preferred-leader-election", "--topic", "elect", "-o", "json")
    assert again.exit_code == 0, again.output
    assert [r["result"] for r in rows(again)] == ["NOT NEEDED"] * 3
    named = slog(nodes, "elect-leaders", "--type", "preferred", "elect", "spare", "-o", "json")
    assert named.exit_code == 0, named.output
    assert [(r["topic"], r["partition"], r["result"]) for r in rows(named)] == \
        [("elect", 0, "NOT NEEDED"), ("elect", 1, "NOT NEEDED"), ("elect", 2, "NOT NEEDED"),
         ("spare", 0, "NOT NEEDED")]
    matched = slog(nodes, "preferred-leader-election", "spare", "-r", "el.*", "-p", "0",
                   "-o", "json")
    assert matched.exit_code == 0, matched.output
    assert [(r["topic"], r["partition"]) for r in rows(matched)] == [("elect", 0), ("spare", 0)]
    unmatched = slog(nodes, "elect-leaders", "--type", "preferred", "-r", "nothing-.*")
    assert unmatched.exit_code == 4 and "no topic matches" in unmatched.stderr
    missing_one = slog(nodes, "elect-leaders", "--type", "preferred", "elect", "nope")
    assert missing_one.exit_code == 4 and "nope" in missing_one.stderr
    everywhere = slog(nodes, "elect-leaders", "--type", "preferred", "--all")
    assert everywhere.exit_code == 0 and "no partition needed" in everywhere.stderr
    unclean = slog(nodes, "elect-leaders", "--type", "unclean", "--topic", "elect",
                   "--partition", "1")
    assert unclean.exit_code == 0 and "NOT NEEDED" in unclean.stdout

    missing = slog(nodes, "elect-leaders", "--type", "preferred", "--topic", "elect",
                   "--partition", "9")
    assert missing.exit_code == 4 and "UNKNOWN_TOPIC_OR_PARTITION" in missing.stdout
    nope = slog(nodes, "preferred-leader-election", "--topic", "nope")
    assert nope.exit_code == 4 and "nope" in nope.stderr
