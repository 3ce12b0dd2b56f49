"""A broker holding transactions restarts (kill -9, then a clean stop): the last stable
offset and the aborted transactions come back from its producer-state snapshots and
.txnindex files, and a read_committed librdkafka consumer sees only committed records
(one real broker process, real clients); ``slog dump-log`` reads both files. A
compacted topic beside it has its markers removed by the cleaner first (issue 15)."""

from __future__ import annotations

import json
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from slog.cli.schema import SCHEMAS
from tests.brokers import BrokerProcess, run_cli, running_broker
from tests.cluster.conftest import wait_until
from tests.transactions.conftest import TXN_BROKER_CONFIG
from tests.transactions.test_clients import TIMEOUT_S, _hanging, _producer, _read, _transaction

TOPIC = "tx-restart"
COMPACTED = "tx-compacted"
# Markers of the compacted topic's first transactions (one producer, fresh topic: each
# transaction's records, then its marker): T1 commits a1 (superseded by T4), T2 b1,
# T3 aborts two records, T4 commits a2.
T1_MARKER, T2_MARKER, T3_MARKER, T4_MARKER = 1, 3, 6, 8


def _stable_offset(bootstrap: str, topic: str = TOPIC,
                   isolation: str = "read_committed") -> int:
    """The last stable offset (read_committed) or the high watermark (read_uncommitted)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "lso",
                         "isolation.level": isolation})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), TIMEOUT_S)[1])
    finally:
        consumer.close()


def _files(data_dir: Path, suffix: str, topic: str = TOPIC) -> list[Path]:
    return sorted(data_dir.rglob(f"{topic}-0/*{suffix}"))


def _keyed_transaction(producer: Producer, records: dict[str, str], commit: bool) -> None:
    producer.begin_transaction()
    for key, value in records.items():
        producer.produce(COMPACTED, value.encode(), key.encode(), partition=0)
    producer.flush(TIMEOUT_S)
    if commit:
        producer.commit_transaction(TIMEOUT_S)
    else:
        producer.abort_transaction(TIMEOUT_S)


def _compacted_topic(bootstrap: str, admin: AdminClient) -> list[str]:
    """Transactions on a compacted topic; the values that outlive its cleaning."""
    topic = NewTopic(COMPACTED, 1, 1, config={
        "cleanup.policy": "compact", "segment.bytes": "1024", "delete.retention.ms": "1000"})
    admin.create_topics([topic])[COMPACTED].result(TIMEOUT_S)
    producer = _producer(bootstrap, "tx-compacted-1")
    _keyed_transaction(producer, {"a": "a1"}, commit=True)
    _keyed_transaction(producer, {"b": "b1"}, commit=True)
    _keyed_transaction(producer, {"a": "x1", "c": "x2"}, commit=False)
    _keyed_transaction(producer, {"a": "a2"}, commit=True)
    fillers = {f"f{i}": f"f{i}-" + "y" * 300 for i in range(12)}  # closes the segments
    for key, value in fillers.items():
        _keyed_transaction(producer, {key: value}, commit=True)
    return sorted(["a2", "b1", *fillers.values()])


def _control_offsets(data_dir: Path) -> list[int] | None:
    """The control batches ``slog dump-log`` finds in the compacted topic's segments
    (None while the cleaner swaps a file under it)."""
    files = [str(p) for p in _files(data_dir, ".log", COMPACTED)]
    result = run_cli("dump-log", *files, "-o", "json")
    if result.returncode != 0:
        return None
    reports = json.loads(result.stdout)
    return [b["base_offset"] for r in reports for b in r["batches"] if b["is_control"]]


def _markers_removed(data_dir: Path) -> bool:
    found = _control_offsets(data_dir)
    return found is not None and T1_MARKER not in found and T3_MARKER not in found


def _check_compacted(broker: BrokerProcess, data_dir: Path, kept: list[str], *,
                     files: bool = True) -> None:
    """The last stable offset is the high watermark and read_committed reads the latest
    committed value per key; with ``files``, also: markers of T1 and T3 are gone, the
    others stay, and read_uncommitted reads the same (after a restart the files are
    those already checked, so only what the load rebuilt is)."""
    bootstrap = broker.bootstrap
    high_watermark = _stable_offset(bootstrap, COMPACTED, "read_uncommitted")
    wait_until(lambda: _stable_offset(bootstrap, COMPACTED) == high_watermark, TIMEOUT_S,
               "the last stable offset reaches the high watermark")
    assert _read(bootstrap, COMPACTED, "read_committed", len(kept)) == kept
    if not files:
        return
    found = wait_until(lambda: _control_offsets(data_dir), TIMEOUT_S, "a dump of the segments")
    assert found is not None and T2_MARKER in found and T4_MARKER in found
    assert T1_MARKER not in found and T3_MARKER not in found
    assert _read(bootstrap, COMPACTED, "read_uncommitted", len(kept)) == kept


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
    with running_broker(data_dir, 1, **TXN_BROKER_CONFIG,
                        **{"log.cleaner.backoff.ms": "200"}) as broker:
        bootstrap = broker.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        kept = _compacted_topic(bootstrap, admin)
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

        # A first pass stamps the emptied transactions' markers, one a second later removes them.
        wait_until(lambda: _markers_removed(data_dir), TIMEOUT_S, "markers removed")
        _check_compacted(broker, data_dir, kept)

        broker.kill()
        broker.start()
        _check(broker, stable, committed, everything)
        _check_compacted(broker, data_dir, kept, files=False)

        broker.stop()  # clean: a snapshot at the log end
        end = max(int(p.stem) for p in _files(data_dir, ".log"))
        snapshots = [int(p.stem) for p in _files(data_dir, ".snapshot")]
        assert max(snapshots) > end
        _dump_txn_state(data_dir, stable)
        broker.start()
        _check(broker, stable, committed, everything)
        _check_compacted(broker, data_dir, kept, files=False)
        hanging.abort_transaction(TIMEOUT_S)
        wait_until(lambda: _stable_offset(bootstrap) > stable, TIMEOUT_S, "the abort")
        assert _read(bootstrap, TOPIC, "read_committed", len(committed)) == committed
