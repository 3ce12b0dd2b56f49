"""``slog get-offsets``: ListOffsets from the command line against a real broker."""

from __future__ import annotations

import json
import time

import pytest

from slog.client import Admin, NewTopic, Producer
from tests.brokers import BrokerProcess, run_cli


@pytest.fixture(scope="module")
def bootstrap(shared_broker: BrokerProcess) -> str:
    """A topic ``offs`` of 2 partitions: 5 records in p0 (timestamps 1000..5000), 3 in p1."""
    address = shared_broker.bootstrap
    with Admin(address) as admin:
        admin.create_topics([NewTopic("offs", 2, 1)])
    with Producer(address, linger_ms=0) as producer:
        for i in range(5):
            producer.send("offs", f"v{i}", partition=0, timestamp_ms=(i + 1) * 1000)
        now = int(time.time() * 1000)
        for i in range(3):
            producer.send("offs", f"w{i}", partition=1, timestamp_ms=now)
        producer.flush(30)
    return address


def offsets(bootstrap: str, *args: str) -> tuple[int, list[dict[str, object]], str]:
    result = run_cli("get-offsets", *args, "-b", bootstrap, "-o", "json")
    return result.returncode, json.loads(result.stdout or "[]"), result.stderr


def test_latest_and_earliest(bootstrap: str) -> None:
    code, rows, _ = offsets(bootstrap, "offs")
    assert code == 0
    assert [(r["topic"], r["partition"], r["offset"]) for r in rows] == [
        ("offs", 0, 5), ("offs", 1, 3)]
    code, rows, _ = offsets(bootstrap, "offs", "--time", "earliest")
    assert code == 0 and [r["offset"] for r in rows] == [0, 0]
    assert set(rows[0]) >= {"topic", "partition", "offset", "timestamp", "leader_epoch"}


def test_by_timestamp_and_partition(bootstrap: str) -> None:
    code, rows, _ = offsets(bootstrap, "offs", "--time", "2500", "--partition", "0")
    assert code == 0
    assert rows == [{"topic": "offs", "partition": 0, "offset": 2, "timestamp": 3000,
                     "leader_epoch": rows[0]["leader_epoch"]}]
    # Past every record: -1, as Kafka answers.
    code, rows, _ = offsets(bootstrap, "offs", "--time", "4102444800000", "-p", "0")
    assert code == 0 and rows[0]["offset"] == -1
    code, rows, _ = offsets(bootstrap, "offs", "--time", "max-timestamp", "-p", "0")
    assert code == 0 and rows[0]["offset"] == 4 and rows[0]["timestamp"] == 5000


def test_table_output(bootstrap: str) -> None:
    result = run_cli("get-offsets", "offs", "-b", bootstrap)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["TOPIC", "PARTITION", "OFFSET", "TIMESTAMP"]
    assert lines[1].split()[:3] == ["offs", "0", "5"]


def test_unknown_topic_is_not_found(bootstrap: str) -> None:
    code, rows, stderr = offsets(bootstrap, "no-such-topic")
    assert code == 4 and rows == []
    assert "no-such-topic" in stderr and "Traceback" not in stderr
    # One known and one unknown: the known one is printed, the exit is a partial failure.
    code, rows, stderr = offsets(bootstrap, "offs", "no-such-topic")
    assert code == 1 and {r["topic"] for r in rows} == {"offs"}
    code, rows, stderr = offsets(bootstrap, "offs", "--partition", "7")
    assert code == 1 and "partition 7" in stderr


def test_regex_and_all_topics(bootstrap: str) -> None:
    code, rows, _ = offsets(bootstrap, "-r", "of+s")
    assert code == 0 and [(r["topic"], r["offset"]) for r in rows] == [("offs", 5), ("offs", 3)]
    code, rows, _ = offsets(bootstrap)  # no names: every topic
    assert code == 0 and {("offs", 0), ("offs", 1)} <= {(r["topic"], r["partition"])
                                                         for r in rows}
    code, rows, stderr = offsets(bootstrap, "-r", "nothing-like-this")
    assert code == 4 and rows == [] and "no topic matches" in stderr


def test_usage_errors(bootstrap: str) -> None:
    result = run_cli("get-offsets", "offs", "--time", "yesterday", "-b", bootstrap)
    assert result.returncode == 2 and "--time" in result.stderr
    unreachable = run_cli("get-offsets", "offs", "-b", "127.0.0.1:1")
    assert unreachable.returncode == 3 and "Traceback" not in unreachable.stderr
