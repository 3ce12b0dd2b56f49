"""Bad arguments and bad JSON plans: a usage error (exit 2) with a clear message, nothing changed.

One two-broker cluster for the module, with a topic whose partitions live on
broker 1, records in it, and a group with committed offsets. Every case runs
the real `slog` command (with --execute where it has one) and must exit 2,
say what was wrong in one line without a traceback, and leave the cluster
exactly as it was: topics, partition counts, replicas, configs, reassignments
in progress and committed offsets are compared after each case.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.brokers import run_cli
from tests.cluster.conftest import FAST, Cluster, wait_until

TOPIC = "cli-victim"
GROUP = "cli-group"


class Target:
    def __init__(self, cluster: Cluster, plans: Path):
        self.cluster = cluster
        self.plans = plans
        self.bootstrap = cluster.bootstrap
        self.before = cluster_state(self.bootstrap)


def cluster_state(bootstrap: str) -> dict[str, Any]:
    """Everything a bad command could change, in a comparable form."""
    from slog.client import Admin, GroupAdmin

    with Admin(bootstrap.split(",")) as admin:
        names = sorted(t.name for t in admin.list_topics())
        described = admin.describe_topics(names)
        return {
            "topics": [(t.name, t.topic_id, [(p.partition, p.replicas, p.high_watermark,
                                              p.log_start_offset)
                                             for p in t.partitions]) for t in described],
            "configs": {name: {k: (e.value, e.source) for k, e in entries.items()}
                        for name, entries in admin.describe_topic_configs(names).items()},
            "reassignments": admin.list_partition_reassignments(),
            "offsets": GroupAdmin(admin.cluster).list_offsets([GROUP]),
        }


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    root = tmp_path_factory.mktemp("cli-bad-input")
    cluster = Cluster(root / "data", 2, dict(FAST)).start()
    try:
        bootstrap = cluster.bootstrap
        # Both partitions on broker 1, so a plan can move them to broker 2.
        created = run_cli("topic", "create", TOPIC, "--replica-assignment", "1,1",
                          "-b", bootstrap)
        assert created.returncode == 0, created.stdout + created.stderr
        for partition in (0, 1):
            produced = run_cli("produce", TOPIC, "-p", str(partition), "-b", bootstrap,
                               input_text="".join(f"v{i}\n" for i in range(4)))
            assert produced.returncode == 0, produced.stderr

        def reset_offsets() -> Any:
            reset = run_cli("group", "reset-offsets", GROUP, "--topic", TOPIC, "--to-offset",
                            "2", "--execute", "-b", bootstrap)
            # Right after the cluster starts the coordinator may still be loading: the CLI
            # reports that (COORDINATOR_LOAD_IN_PROGRESS) instead of waiting; try again.
            if "COORDINATOR_LOAD_IN_PROGRESS" in reset.stderr:
                return None
            assert reset.returncode == 0, reset.stderr
            return reset

        wait_until(reset_offsets, 30, "the group coordinator to load")
        plans = root / "plans"
        plans.mkdir()
        yield Target(cluster, plans)
    finally:
        cluster.close()


def _plan(*partitions: dict[str, Any], version: int = 1) -> str:
    return json.dumps({"version": version, "partitions": list(partitions)})


def _move(partition: int, replicas: Any, topic: Any = TOPIC) -> dict[str, Any]:
    return {"topic": topic, "partition": partition, "replicas": replicas}


# (plan file contents, words the error must contain). Each would change the
# cluster if it were (partly) applied: most move a partition to broker 2.
BAD_PLANS: dict[str, tuple[str | bytes, str]] = {
    "not json": ("reassign everything to broker 2", "not valid JSON"),
    "truncated": (_plan(_move(0, [2]))[:-3], "not valid JSON"),
    "not utf-8": (b"\xff\xfe{\x00", "not UTF-8"),
    "empty file": ("", "not valid JSON"),
    "top-level list": (json.dumps([_move(0, [2])]), "partitions"),
    "partitions not a list": (json.dumps({"version": 1, "partitions": _move(0, [2])}),
                              "partitions"),
    "no partitions": (_plan(), "no partitions"),
    "unknown version": (_plan(_move(0, [2]), version=7), "version"),
    "same partition twice, different targets": (_plan(_move(0, [2]), _move(0, [1])),
                                                "more than once"),
    "unknown broker": (_plan(_move(0, [2]), _move(1, [9])), "unknown broker"),
    "broker id beyond int32": (_plan(_move(0, [2**31])), "unknown broker"),
    "broker listed twice": (_plan(_move(0, [2, 2])), "more than once"),
    "empty replica list": (_plan(_move(0, [2]), _move(1, [])), "empty"),
    "replicas not a list": (_plan(_move(0, 2)), "replicas"),
    "replica not an integer": (_plan(_move(0, ["2"])), "broker ids"),
    "replica is a boolean": (_plan(_move(0, [True])), "broker ids"),
    "partition as a string": (_plan({"topic": TOPIC, "partition": "0", "replicas": [2]}),
                              "integer"),
    "partition as a float": (_plan({"topic": TOPIC, "partition": 0.5, "replicas": [2]}),
                             "integer"),
    "negative partition": (_plan(_move(-1, [2])), "no partition -1"),
    "partition out of range": (_plan(_move(0, [2]), _move(2, [2])), "no partition 2"),
    "unknown topic": (_plan(_move(0, [2]), _move(0, [2], "no-such-topic")), "unknown topic"),
    "topic missing": (_plan({"partition": 0, "replicas": [2]}), "topic"),
    "changed replica count": (_plan(_move(0, [1, 2])), "replica"),
}

BAD_ARGUMENTS: dict[str, tuple[list[str], str]] = {
    # topic create / alter
    "config value not a number": (["topic", "create", "t-new", "-c", "retention.ms=abc"],
                                  "retention.ms"),
    "unknown config": (["topic", "create", "t-new", "-c", "retention.msec=1"], "unknown"),
    "config without a value": (["topic", "create", "t-new", "-c", "retention.ms"], "key=value"),
    "config without a key": (["topic", "create", "t-new", "-c", "=1"], "key=value"),
    "config beyond int32": (["topic", "create", "t-new", "-c",
                             "max.message.bytes=99999999999999999999"], "maximum"),
    "config below its minimum": (["topic", "create", "t-new", "-c", "segment.bytes=1"],
                                 "minimum"),
    "bad cleanup policy": (["topic", "create", "t-new", "-c", "cleanup.policy=shred"],
                           "cleanup.policy"),
    "zero partitions": (["topic", "create", "t-new", "-p", "0"], "--partitions"),
    "negative partitions": (["topic", "create", "t-new", "-p", "-4"], "--partitions"),
    "partitions not a number": (["topic", "create", "t-new", "-p", "six"], "--partitions"),
    "zero replication factor": (["topic", "create", "t-new", "-r", "0"],
                                "--replication-factor"),
    "bad replica assignment": (["topic", "create", "t-new", "--replica-assignment", "1:x"],
                               "replica"),
    "assignment and partitions": (["topic", "create", "t-new", "--replica-assignment", "1,2",
                                   "-p", "2"], "--replica-assignment"),
    "alter with a bad config": (["topic", "alter", TOPIC, "-c", "retention.ms=-7"], "minimum"),
    "alter with nothing": (["topic", "alter", TOPIC], "nothing to change"),
    # --partition values
    "consume a negative partition": (["consume", TOPIC, "-p", "-1", "-e"], "--partition"),
    "consume partition not a number": (["consume", TOPIC, "-p", "one", "-e"], "--partition"),
    "offsets of a negative partition": (["get-offsets", TOPIC, "-p", "-3"], "--partition"),
    "produce to a missing partition": (["produce", TOPIC, "-p", "9"], "partition 9"),
    "produce to a negative partition": (["produce", TOPIC, "-p", "-1"], "partition -1"),
    "bad offset spec": (["consume", TOPIC, "-o", "yesterday", "-e"], "--offset"),
    "bad timestamp spec": (["consume", TOPIC, "-o", "@noon", "-e"], "--offset"),
    # group reset-offsets
    "no reset strategy": (["group", "reset-offsets", GROUP, "--topic", TOPIC, "--execute"],
                          "exactly one"),
    "two reset strategies": (["group", "reset-offsets", GROUP, "--topic", TOPIC,
                              "--to-earliest", "--to-latest", "--execute"], "exactly one"),
    "no scope": (["group", "reset-offsets", GROUP, "--to-earliest", "--execute"], "scope"),
    "topic and all topics": (["group", "reset-offsets", GROUP, "--topic", TOPIC,
                              "--all-topics", "--to-earliest", "--execute"], "scope"),
    "partition list not numbers": (["group", "reset-offsets", GROUP, "--topic", f"{TOPIC}:a",
                                    "--to-earliest", "--execute"], "numbers"),
    "negative partition in scope": (["group", "reset-offsets", GROUP, "--topic",
                                     f"{TOPIC}:0,-1", "--to-earliest", "--execute"],
                                    "negative"),
    "shift not a number": (["group", "reset-offsets", GROUP, "--topic", TOPIC,
                            "--shift-by", "back", "--execute"], "--shift-by"),
    "bad datetime": (["group", "reset-offsets", GROUP, "--topic", TOPIC,
                      "--to-datetime", "2024-13-45T99:00:00", "--execute"], "--to-datetime"),
    "bad duration": (["group", "reset-offsets", GROUP, "--topic", TOPIC,
                      "--by-duration", "30 minutes", "--execute"], "--by-duration"),
    "duration beyond timedelta": (["group", "reset-offsets", GROUP, "--topic", TOPIC,
                                   "--by-duration", "P99999999999D", "--execute"],
                                  "out of range"),
    "duration before year 1": (["group", "reset-offsets", GROUP, "--topic", TOPIC,
                                "--by-duration", "P999999D", "--execute"], "year 1"),
    "empty group id": (["group", "reset-offsets", "", "--topic", TOPIC, "--to-earliest",
                        "--execute"], "group id"),
    # topic delete-records (the records must all stay)
    "delete-records below -1": (["topic", "delete-records", TOPIC, "-p", "0", "--before", "-5"],
                                "--before"),
    "delete-records offset not a number": (["topic", "delete-records", TOPIC, "-p", "0",
                                            "--before", "ten"], "--before"),
    "delete-records without --before": (["topic", "delete-records", TOPIC, "-p", "0"],
                                        "--before"),
    "delete-records without a partition": (["topic", "delete-records", TOPIC, "--before", "1"],
                                           "--partition"),
    "delete-records negative partition": (["topic", "delete-records", TOPIC, "-p", "-1",
                                           "--before", "1"], "--partition"),
    "delete-records file and topic": (["topic", "delete-records", TOPIC, "--offsets-json",
                                       "{valid}"], "--offsets-json"),
    "delete-records a reassignment plan": (["topic", "delete-records", "--offsets-json",
                                            "{valid}"], "'offset'"),
    "delete-records missing file": (["topic", "delete-records", "--offsets-json", "{missing}"],
                                    "cannot read"),
    "delete-records file is a directory": (["topic", "delete-records", "--offsets-json",
                                            "{dir}"], "cannot read"),
    # reassign arguments around a valid plan
    "zero throttle": (["reassign", "execute", "--plan", "{valid}", "--throttle", "0"],
                      "--throttle"),
    "missing plan file": (["reassign", "execute", "--plan", "{missing}"], "cannot read"),
    "plan is a directory": (["reassign", "execute", "--plan", "{dir}"], "cannot read"),
    "bad broker list": (["reassign", "generate", "--topics", TOPIC, "--brokers", "1,x"],
                        "--brokers"),
}


def _assert_usage_error(target: Target, args: list[str], words: str) -> None:
    result = run_cli(*args, "-b", target.bootstrap, input_text="a record\n")
    output = result.stdout + result.stderr
    assert result.returncode == 2, (result.returncode, output)
    assert words.lower() in output.lower(), output
    assert "Traceback" not in output
    assert cluster_state(target.bootstrap) == target.before, "a rejected command changed state"


@pytest.mark.parametrize("case", list(BAD_PLANS), ids=list(BAD_PLANS))
def test_bad_reassignment_plans(target: Target, case: str) -> None:
    contents, words = BAD_PLANS[case]
    plan = target.plans / f"{case.replace(' ', '-')}.json"
    if isinstance(contents, bytes):
        plan.write_bytes(contents)
    else:
        plan.write_text(contents)
    # A changed replica count is a plan Kafka's tool carries out, unless told not to.
    refuse_count = ["--disallow-replication-factor-change"] \
        if case == "changed replica count" else []
    _assert_usage_error(target, ["reassign", "execute", "--plan", str(plan), "--no-wait",
                                 *refuse_count], words)
    # Nothing saved either: a rollback plan is only written for a plan that starts.
    assert not plan.with_suffix(".rollback.json").exists()


@pytest.mark.parametrize("case", list(BAD_ARGUMENTS), ids=list(BAD_ARGUMENTS))
def test_bad_arguments(target: Target, case: str) -> None:
    args, words = BAD_ARGUMENTS[case]
    valid = target.plans / "valid.json"
    valid.write_text(_plan(_move(0, [2])))
    paths = {"{valid}": str(valid), "{missing}": str(target.plans / "absent.json"),
             "{dir}": str(target.plans)}
    _assert_usage_error(target, [paths.get(a, a) for a in args], words)


def test_the_valid_plan_would_have_changed_something(target: Target) -> None:
    """Control: the state check can fail. A valid plan does move the partition."""
    plan = target.plans / "control.json"
    plan.write_text(_plan(_move(0, [2])))
    result = run_cli("reassign", "execute", "--plan", str(plan), "--wait", "--timeout", "60",
                     "-b", target.bootstrap)
    assert result.returncode == 0, result.stdout + result.stderr
    assert cluster_state(target.bootstrap) != target.before
