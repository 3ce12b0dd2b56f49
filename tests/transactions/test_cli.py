"""``slog transactions`` and ``slog consume --isolation-level`` against a real broker,
with a real (librdkafka) transactional producer; JSON output checked against the schema."""

from __future__ import annotations

import json
from typing import Any

from confluent_kafka import Producer

from slog.cli.schema import SCHEMAS
from tests.brokers import BrokerProcess, run_cli
from tests.transactions.test_clients import TIMEOUT_S, _create, _hanging, _producer


def _json(bootstrap: str, *args: str) -> Any:
    done = run_cli(*args, "-b", bootstrap, "--output", "json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    key = f"{args[0]} {args[1]}"  # "transactions list", ...
    for item in data:
        assert SCHEMAS[key].check(item) == [], (key, item)
    return data


def _consume(bootstrap: str, topic: str, isolation: str) -> list[str]:
    done = run_cli("consume", topic, "-e", "--isolation-level", isolation, "-b", bootstrap)
    assert done.returncode == 0, done.stderr
    return sorted(done.stdout.split())


def test_find_and_abort_a_hanging_transaction(txn_broker: BrokerProcess) -> None:
    bootstrap = txn_broker.bootstrap
    _create(bootstrap, "tx-cli", 1)
    done = _producer(bootstrap, "tx-cli-done")
    done.begin_transaction()
    done.produce("tx-cli", b"committed")
    done.commit_transaction(TIMEOUT_S)
    hanging = _hanging(bootstrap, "tx-cli-hanging", "tx-cli", b"hanging")
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce("tx-cli", b"plain")
    plain.flush(TIMEOUT_S)

    listed = {t["transactional_id"]: t for t in _json(bootstrap, "transactions", "list")}
    assert listed["tx-cli-hanging"]["state"] == "Ongoing"
    assert listed["tx-cli-done"]["state"] == "CompleteCommit"
    ongoing = _json(bootstrap, "transactions", "list", "--state", "Ongoing")
    assert "tx-cli-done" not in {t["transactional_id"] for t in ongoing}
    [described] = _json(bootstrap, "transactions", "describe", "tx-cli-hanging")
    assert described["partitions"] == ["tx-cli-0"] and described["start_ms"] > 0
    [held] = _json(bootstrap, "topic", "describe", "tx-cli")
    assert held["last_stable_offset"] == 2 < held["high_watermark"] == 4  # records+marker
    # The open transaction holds read_committed readers back (the plain record too).
    assert _consume(bootstrap, "tx-cli", "read_committed") == ["committed"]
    assert _consume(bootstrap, "tx-cli", "read_uncommitted") == \
        ["committed", "hanging", "plain"]
    producers = _json(bootstrap, "transactions", "describe-producers", "tx-cli", "-p", "0")
    [open_one] = [p for p in producers if p["current_txn_start_offset"] >= 0]
    assert open_one["producer_id"] == described["producer_id"]

    bad = run_cli("transactions", "abort", "tx-cli", "-p", "0", "--start-offset", "999",
                  "-b", bootstrap)
    assert bad.returncode != 0 and "no open transaction" in bad.stderr
    usage = run_cli("transactions", "abort", "tx-cli", "-p", "0", "-b", bootstrap)
    assert usage.returncode != 0 and "--start-offset" in usage.stderr
    [aborted] = _json(bootstrap, "transactions", "abort", "tx-cli", "-p", "0",
                      "--start-offset", str(open_one["current_txn_start_offset"]))
    assert aborted["status"] == "aborted"
    assert _consume(bootstrap, "tx-cli", "read_committed") == ["committed", "plain"]
    [stable] = _json(bootstrap, "topic", "describe", "tx-cli")
    assert stable["last_stable_offset"] == stable["high_watermark"] == 5
    del hanging  # open until the admin aborted its transaction


def test_produce_in_transactions(txn_broker: BrokerProcess) -> None:
    bootstrap = txn_broker.bootstrap
    _create(bootstrap, "tx-cli-produce", 1)
    lines = "".join(f"r{i}\n" for i in range(7))
    done = run_cli("produce", "tx-cli-produce", "--transactional-id", "tx-cli-loader",
                   "--transaction-size", "3", "-b", bootstrap, "--output", "json",
                   input_text=lines)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert SCHEMAS["produce"].check(summary) == []
    assert (summary["records"], summary["transactions"]) == (7, 3)  # 3 + 3 + 1
    assert _consume(bootstrap, "tx-cli-produce", "read_committed") == \
        sorted(f"r{i}" for i in range(7))
    [described] = _json(bootstrap, "transactions", "describe", "tx-cli-loader")
    assert described["state"] == "CompleteCommit"
    usage = run_cli("produce", "tx-cli-produce", "--transactional-id", "x", "--acks", "1",
                    "-b", bootstrap, input_text="a\n")
    assert usage.returncode != 0 and "--acks all" in usage.stderr
