"""``slog consume --group`` and ``slog group ...`` against a real broker (the CLI runs
in-process, except once as a real ``slog`` process)."""

from __future__ import annotations

import json
from typing import Any

from typer.testing import CliRunner

from slog.cli.app import app
from slog.client import GroupAdmin, TopicPartition
from slog.client.cluster import ClusterClient
from tests.brokers import BrokerProcess, run_cli
from tests.groups.helpers import (
    group_consumer,
    make_topic,
    produce,
    unique,
    wait_for,
)

runner = CliRunner()


def slog(broker: BrokerProcess, *args: str) -> Any:
    return runner.invoke(app, [*args, "-b", broker.bootstrap])


def cli_json(broker: BrokerProcess, *args: str) -> Any:
    result = slog(broker, *args, "-o", "json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def committed(broker: BrokerProcess, group: str) -> dict[TopicPartition, int]:
    with ClusterClient(broker.bootstrap) as cluster:
        found = GroupAdmin(cluster).list_offsets([group])[group]
    return {tp: v.offset for tp, v in found.items() if v is not None}


def test_consume_with_a_group_commits_what_it_printed(broker: BrokerProcess) -> None:
    topic = make_topic(broker.bootstrap, 2)
    produce(broker.bootstrap, topic, [(None, b"v%d" % i, i % 2) for i in range(6)])
    group = unique("cli-consume")
    first = run_cli("consume", topic, "--group", group, "-e", "-n", "4", "-f", "%v\\n",
                    "-b", broker.bootstrap)
    assert first.returncode == 0, first.stderr
    assert len(first.stdout.split()) == 4
    rest = slog(broker, "consume", topic, "--group", group, "-e", "-f", "%v\\n")
    assert rest.exit_code == 0, rest.stderr
    assert sorted(first.stdout.split() + rest.stdout.split()) == [f"v{i}" for i in range(6)]
    assert committed(broker, group) == {TopicPartition(topic, 0): 3, TopicPartition(topic, 1): 3}
    assert slog(broker, "consume", topic, "--group", group, "-p", "0").exit_code == 2


def test_list_and_describe(broker: BrokerProcess) -> None:
    topic = make_topic(broker.bootstrap, 3)
    produce(broker.bootstrap, topic, [(None, b"x", p) for p in (0, 0, 1)])
    group, idle = unique("cli-live"), unique("cli-idle")
    with group_consumer(broker.bootstrap, idle) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.commit({TopicPartition(topic, 0): 1})
    consumer = group_consumer(broker.bootstrap, group, client_id="described")
    try:
        consumer.subscribe([topic])
        wait_for(lambda: len(consumer.assignment()) == 3 and
                 consumer.position(TopicPartition(topic, 1)) == 1,
                 step=lambda: consumer.poll(20), what="the assignment")
        consumer.commit({TopicPartition(topic, 0): 2})
        listed = {g["group"]: g for g in cli_json(broker, "group", "list")}
        assert listed[group]["state"] == "Stable" and listed[idle]["state"] == "Empty"
        stable = cli_json(broker, "group", "list", "--state", "stable")
        assert group in {g["group"] for g in stable} and idle not in {g["group"] for g in stable}
        assert {listed[group]["type"], listed[idle]["type"]} == {"classic"}
        classic = {g["group"] for g in cli_json(broker, "group", "list", "--type", "Classic")}
        assert {group, idle} <= classic
        assert cli_json(broker, "group", "list", "--type", "consumer,share") == []

        rows = cli_json(broker, "group", "describe", group)
        by_partition = {r["partition"]: r for r in rows}
        assert by_partition[0]["current_offset"] == 2 and by_partition[0]["lag"] == 0
        assert by_partition[1]["current_offset"] is None and by_partition[1]["lag"] is None
        assert by_partition[1]["log_end_offset"] == 1
        assert {r["client_id"] for r in rows} == {"described"}
        assert {r["host"] for r in rows} == {"/127.0.0.1"}

        [member] = cli_json(broker, "group", "describe", group, "--members", "--verbose")
        assert member["partitions"] == 3 and member["assignment"] == f"{topic}(0,1,2)"
        [state] = cli_json(broker, "group", "describe", group, "--state")
        assert (state["state"], state["assignor"], state["members"]) == ("Stable", "range", 1)

        table = slog(broker, "group", "describe", group, idle)
        header = table.stdout.splitlines()[0].split()
        assert header == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET",
                          "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
        idle_row = next(line.split() for line in table.stdout.splitlines()
                        if line.startswith(idle))
        assert idle_row[3:] == ["1", "2", "1", "-", "-", "-"]

        missing = slog(broker, "group", "describe", "no-such-group")
        assert missing.exit_code == 4 and "does not exist" in missing.stderr
    finally:
        consumer.close()


def test_reset_offsets(broker: BrokerProcess) -> None:
    topic = make_topic(broker.bootstrap, 2)
    produce(broker.bootstrap, topic, [(None, b"x", i % 2) for i in range(20)])
    group = unique("cli-reset")
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    consumer = group_consumer(broker.bootstrap, group)
    consumer.subscribe([topic])
    wait_for(lambda: len(consumer.assignment()) == 2, step=lambda: consumer.poll(20),
             what="the assignment")
    consumer.commit({tp0: 4, tp1: 6})
    try:
        active = slog(broker, "group", "reset-offsets", group, "--all-topics",
                      "--to-earliest", "--execute")
        assert active.exit_code == 1 and "inactive" in active.stderr
    finally:
        consumer.close()
    consumer_positions = committed(broker, group)  # what close() committed
    dry = cli_json(broker, "group", "reset-offsets", group, "--all-topics", "--to-earliest")
    assert {(r["partition"], r["new_offset"]) for r in dry} == {(0, 0), (1, 0)}
    assert committed(broker, group) == consumer_positions  # a dry run changes nothing

    def reset(*args: str) -> dict[int, int]:
        rows = cli_json(broker, "group", "reset-offsets", group, *args, "--execute")
        return {r["partition"]: r["new_offset"] for r in rows}

    assert reset("--topic", topic, "--to-offset", "3") == {0: 3, 1: 3}
    assert reset("--topic", f"{topic}:1", "--shift-by", "-2") == {1: 1}
    assert reset("--topic", f"{topic}:0", "--shift-by", "100") == {0: 10}  # clamped to the end
    assert committed(broker, group) == {tp0: 10, tp1: 1}
    assert reset("--all-topics", "--by-duration", "PT1H") == {0: 0, 1: 0}
    assert reset("--topic", topic, "--to-datetime", "2999-01-01T00:00:00") == {0: 10, 1: 10}
    assert reset("--topic", topic, "--to-latest") == {0: 10, 1: 10}
    for bad in (["--to-earliest"], ["--all-topics"], ["--all-topics", "--to-earliest",
                                                       "--to-latest"],
                ["--all-topics", "--by-duration", "an hour"]):
        result = slog(broker, "group", "reset-offsets", group, *bad)
        assert result.exit_code == 2, (bad, result.stderr)


def test_delete(broker: BrokerProcess) -> None:
    topic = make_topic(broker.bootstrap, 1)
    group = unique("cli-delete")
    with group_consumer(broker.bootstrap, group) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.commit({TopicPartition(topic, 0): 0})
    rows = cli_json(broker, "group", "delete", group)
    assert rows == [{"group": group, "status": "deleted", "error": None}]
    assert committed(broker, group) == {}
    again = slog(broker, "group", "delete", group)
    assert again.exit_code == 4 and "GROUP_ID_NOT_FOUND" in again.stdout


def test_delete_offsets(broker: BrokerProcess) -> None:
    kept, old = make_topic(broker.bootstrap, 2), make_topic(broker.bootstrap, 1)
    group = unique("cli-delete-offsets")
    with group_consumer(broker.bootstrap, group) as consumer:  # no subscription: no member
        consumer.assign([TopicPartition(old, 0)])
        consumer.commit({TopicPartition(old, 0): 0})
    consumer = group_consumer(broker.bootstrap, group)
    consumer.subscribe([kept])
    wait_for(lambda: len(consumer.assignment()) == 2, step=lambda: consumer.poll(20),
             what="the assignment")
    consumer.commit({TopicPartition(kept, 0): 0, TopicPartition(kept, 1): 0})
    try:
        # Active: the topic it consumes keeps its offsets, the one it left loses them.
        partly = slog(broker, "group", "delete-offsets", group, "-t", old, "-t", f"{kept}:1",
                      "-o", "json")
        assert partly.exit_code == 1, partly.stderr
        rows = {(r["topic"], r["partition"]): r for r in json.loads(partly.stdout)}
        assert rows[old, 0]["status"] == "deleted"
        assert rows[kept, 1]["status"] == "failed"
        assert "GROUP_SUBSCRIBED_TO_TOPIC" in rows[kept, 1]["error"]
        assert set(committed(broker, group)) == {TopicPartition(kept, 0),
                                                 TopicPartition(kept, 1)}
    finally:
        consumer.close()
    rows = cli_json(broker, "group", "delete-offsets", group, "--topic", kept, "-t", f"{kept}:0")
    assert [(r["partition"], r["status"]) for r in rows] == [(0, "deleted"), (1, "deleted")]
    assert committed(broker, group) == {}

    missing = slog(broker, "group", "delete-offsets", unique("nobody"), "-t", kept)
    assert missing.exit_code == 4 and "GROUP_ID_NOT_FOUND" in missing.stderr
    assert slog(broker, "group", "delete-offsets", group, "-t", "no-such-topic").exit_code == 4
    assert slog(broker, "group", "delete-offsets", group).exit_code == 2
