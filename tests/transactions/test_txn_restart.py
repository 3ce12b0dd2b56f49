"""A broker holding transactions restarts (kill -9, then a clean stop): the last stable
offset and the aborted transactions come back from its producer-state snapshots and
.txnindex files, and a read_committed librdkafka consumer sees only committed records
(one real broker process, real clients); ``slog dump-log`` reads both files."""

from __future__ import annotations

import json
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from slog.cli.schema import SCHEMAS
from tests.brokers import BrokerProcess, run_cli, running_broker
from tests.cluster.conftest import wait_until
from tests.transactions.conftest import TXN_BROKER_CONFIG
from tests.transactions.test_clients import TIMEOUT_S, _hanging, _producer, _read, _transaction

TOPIC = "tx-restart"


def _stable_offset(bootstrap: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "lso",
                         "isolation.level": "read_committed"})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), TIMEOUT_S)[1])
    finally:
        consumer.close()


def _files(data_dir: Path, suffix: str) -> list[Path]:
    return sorted(data_dir.rglob(f"{TOPIC}-0/*{suffix}"))


def _check(broker: BrokerProcess, stable: int, committed: list[str], everything: list[str]
           ) -> None:
    bootstrap = broker.bootstrap
    wait_until(lambda: _stable_offset(bootstrap) == stable, TIMEOUT_S,
               "the last stable offset stays at the open transaction")
    assert _read(bootstrap, TOPIC, "read_committed", len(committed)) == committed
    assert _read(bootstrap, TOPIC, "read_uncommitted", len(everything)) == everything


def _dump_txn_state(data_dir: Path, stable: int) -> None:
    """``slog dump-log`` shows the .txnindex entries and the newest snapshot."""
    files = [str(_files(data_dir, ".txnindex")[0]), str(_files(data_dir, ".snapshot")[-1])]
    result = run_cli("dump-log", *files, "-o", "json")
    assert result.returncode == 0, result.stderr
    txnindex, snapshot = json.loads(result.stdout)
    for report in (txnindex, snapshot):
        assert SCHEMAS["dump-log"].check(report) == []
    assert txnindex["type"] == "txnindex" and txnindex["entries"]
    aborted = txnindex["entries"][0]
    assert aborted["first_offset"] < aborted["last_offset"] < aborted["last_stable_offset"]
    assert snapshot["type"] == "snapshot"
    assert stable in [p["current_txn_first_offset"] for p in snapshot["entries"]]
    table = run_cli("dump-log", *files)
    assert "lastStableOffset:" in table.stdout and "currentTxnFirstOffset:" in table.stdout


def test_transaction_state_survives_kill_and_clean_restart(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with running_broker(data_dir, 1, **TXN_BROKER_CONFIG) as broker:
        bootstrap = broker.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topic = NewTopic(TOPIC, 1, 1, config={"segment.bytes": "1024"})
        admin.create_topics([topic])[TOPIC].result(TIMEOUT_S)
        producer = _producer(bootstrap, "tx-restart-1")
        committed, aborted = [], []
        for i in range(9):
            values = [f"t{i}-{j}-" + "x" * 80 for j in range(4)]
            commit = i % 3 != 1
            _transaction(producer, TOPIC, values, 1, commit=commit)
            (committed if commit else aborted).extend(values)
        # A transaction left open across both restarts (its timeout outlasts the test).
        hanging = _hanging(bootstrap, "tx-restart-open", TOPIC, b"open",
                           **{"transaction.timeout.ms": 300_000})
        stable = _stable_offset(bootstrap)
        everything = sorted([*committed, *aborted, "open"])
        committed.sort()
        assert stable > 0 and len(_files(data_dir, ".log")) > 3
        assert _files(data_dir, ".snapshot") and _files(data_dir, ".txnindex")

        broker.kill()
        broker.start()
        _check(broker, stable, committed, everything)

        broker.stop()  # clean: a snapshot at the log end
        end = max(int(p.stem) for p in _files(data_dir, ".log"))
        snapshots = [int(p.stem) for p in _files(data_dir, ".snapshot")]
        assert max(snapshots) > end
        _dump_txn_state(data_dir, stable)
        broker.start()
        _check(broker, stable, committed, everything)
        hanging.abort_transaction(TIMEOUT_S)
        wait_until(lambda: _stable_offset(bootstrap) > stable, TIMEOUT_S, "the abort")
        assert _read(bootstrap, TOPIC, "read_committed", len(committed)) == committed
