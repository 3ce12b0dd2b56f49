"""``slog config describe|alter`` against a real broker: broker, cluster-default and topic
targets, the documented JSON, and the exit codes of bad input."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slog.cli.schema import SCHEMAS
from tests.brokers import BrokerProcess, run_cli, running_broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("config-cmd") / "data"
    with running_broker(data, **{"log.segment.bytes": "5000000"}) as process:
        yield process


def cli(broker: BrokerProcess, *args: str) -> Any:
    return run_cli(*args, "-b", broker.bootstrap)


def as_json(broker: BrokerProcess, *args: str) -> Any:
    result = cli(broker, *args, "-o", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    key = " ".join(args[:2])
    for item in data:
        assert SCHEMAS[key].check(item) == [], item
    return data


def by_name(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {row["name"]: row for row in rows}


def test_broker_default_and_per_broker_layers(broker: BrokerProcess) -> None:
    described = by_name(as_json(broker, "config", "describe", "--broker", "1"))
    assert described["log.segment.bytes"]["source"] == "STATIC_BROKER_CONFIG"
    assert described["num.partitions"] == {"name": "num.partitions", "value": "1",
                                           "source": "DEFAULT_CONFIG", "read_only": True}
    assert as_json(broker, "config", "alter", "--broker-default",
                   "--set", "log.segment.bytes=6000000", "--set", "log.retention.ms=7200000") \
        == [{"name": "log.segment.bytes", "value": "6000000", "action": "set"},
            {"name": "log.retention.ms", "value": "7200000", "action": "set"}]
    assert as_json(broker, "config", "alter", "--broker", "1",
                   "--set", "log.retention.ms=3600000")[0]["action"] == "set"
    default = by_name(as_json(broker, "config", "describe", "--broker-default"))
    assert {k: v["value"] for k, v in default.items()} == {"log.segment.bytes": "6000000",
                                                           "log.retention.ms": "7200000"}
    described = by_name(as_json(broker, "config", "describe", "--broker", "1"))
    assert (described["log.retention.ms"]["value"], described["log.retention.ms"]["source"]) \
        == ("3600000", "DYNAMIC_BROKER_CONFIG")
    assert described["log.segment.bytes"]["source"] == "DYNAMIC_DEFAULT_BROKER_CONFIG"

    table = cli(broker, "config", "alter", "--broker", "1", "--delete", "log.retention.ms")
    assert table.returncode == 0, table.stderr
    assert table.stdout.split() == ["NAME", "VALUE", "ACTION", "log.retention.ms", "-", "deleted"]
    assert cli(broker, "config", "alter", "--broker-default", "--delete", "log.segment.bytes",
               "--delete", "log.retention.ms").returncode == 0
    described = by_name(as_json(broker, "config", "describe", "--broker", "1"))
    assert described["log.retention.ms"]["source"] == "DEFAULT_CONFIG"
    assert described["log.segment.bytes"]["source"] == "STATIC_BROKER_CONFIG"


def test_topic_target_and_validate_only(broker: BrokerProcess) -> None:
    assert cli(broker, "topic", "create", "cfg-topic").returncode == 0
    assert as_json(broker, "config", "alter", "--topic", "cfg-topic", "--validate-only",
                   "--set", "retention.ms=1000")[0]["action"] == "valid"
    described = by_name(as_json(broker, "config", "describe", "--topic", "cfg-topic"))
    assert described["retention.ms"]["source"] == "DEFAULT_CONFIG"
    assert described["segment.bytes"] == {"name": "segment.bytes", "value": "5000000",
                                          "source": "STATIC_BROKER_CONFIG", "read_only": False}
    assert cli(broker, "config", "alter", "--topic", "cfg-topic",
               "--set", "retention.ms=1000").returncode == 0
    described = by_name(as_json(broker, "config", "describe", "--topic", "cfg-topic"))
    assert (described["retention.ms"]["value"], described["retention.ms"]["source"]) == \
        ("1000", "DYNAMIC_TOPIC_CONFIG")


def test_group_target(broker: BrokerProcess) -> None:
    """Kafka 4's GROUP resource: a group's overrides over the brokers' values."""
    before = by_name(as_json(broker, "config", "describe", "--group", "cfg-g"))
    assert before["consumer.session.timeout.ms"] == {
        "name": "consumer.session.timeout.ms", "value": "45000", "source": "DEFAULT_CONFIG",
        "read_only": False}
    changed = as_json(broker, "config", "alter", "--group", "cfg-g",
                      "--set", "consumer.session.timeout.ms=50000")
    assert changed == [{"name": "consumer.session.timeout.ms", "value": "50000",
                        "action": "set"}]
    after = by_name(as_json(broker, "config", "describe", "--group", "cfg-g"))
    assert (after["consumer.session.timeout.ms"]["value"],
            after["consumer.session.timeout.ms"]["source"]) == ("50000", "GROUP_CONFIG")
    as_json(broker, "config", "alter", "--group", "cfg-g",
            "--delete", "consumer.session.timeout.ms")
    assert by_name(as_json(broker, "config", "describe", "--group", "cfg-g")) == before


@pytest.mark.parametrize(("args", "code", "message"), [
    (["describe"], 2, "name one target"),
    (["describe", "--broker", "1", "--topic", "x"], 2, "name one target"),
    (["alter", "--broker-default"], 2, "nothing to change"),
    (["alter", "--broker-default", "--set", "num.partitions=3"], 2,
     "cannot be updated dynamically"),
    (["alter", "--broker", "1", "--set", "log.retention.ms=soon"], 2, "not an integer"),
    (["alter", "--broker", "1", "--set", "novalue"], 2, "expected key=value"),
    (["alter", "--topic", "cfg-x", "--set", "bogus=1"], 2, "unknown topic config"),
    (["alter", "--broker", "1", "--set", "max.connections=9", "--delete", "max.connections"],
     2, "both set and deleted"),
    (["describe", "--broker", "9"], 4, "broker 9 is not in the cluster"),
    (["alter", "--broker", "9", "--set", "max.connections=9"], 4, "not in the cluster"),
    (["describe", "--topic", "no-such-topic"], 4, "UNKNOWN_TOPIC_OR_PARTITION"),
    (["describe", "--group", "g", "--topic", "x"], 2, "name one target"),
    (["alter", "--group", "g", "--set", "share.session.timeout.ms=1"], 2,
     "unknown group config"),
    (["alter", "--group", "g", "--set", "consumer.session.timeout.ms=99999"], 1,
     "must be between 45000 (group.consumer.min.session.timeout.ms) and 60000"),
])
def test_bad_input_exit_codes(broker: BrokerProcess, args: list[str], code: int,
                              message: str) -> None:
    result = cli(broker, "config", *args)
    assert result.returncode == code, (result.stdout, result.stderr)
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_changes_survive_a_broker_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running_broker(data) as first:
        assert cli(first, "config", "alter", "--broker-default",
                   "--set", "log.cleanup.policy=compact").returncode == 0
    with running_broker(data) as second:
        described = by_name(as_json(second, "config", "describe", "--broker", "1"))
    assert (described["log.cleanup.policy"]["value"],
            described["log.cleanup.policy"]["source"]) == ("compact",
                                                           "DYNAMIC_DEFAULT_BROKER_CONFIG")
