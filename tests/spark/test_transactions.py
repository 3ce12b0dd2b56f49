"""read_committed in both source modes: a topic with committed, aborted and still-open
transactions (two producers' transactions interleaved, small segments) exported from the
data dir and over the protocol, at both isolation levels; exact record sets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from slog.client import Admin, Producer, TopicPartition
from tests.brokers import BrokerProcess
from tests.cluster.conftest import wait_until
from tests.spark.support import create_topic, export_ok, read_back, unique

TIMEOUT_S = 30.0


def _send(producer: Producer, topic: str, prefix: str, count: int) -> list[tuple[int, str]]:
    sent = [(i % 2, f"{prefix}{i}") for i in range(count)]
    for partition, value in sent:
        producer.send(topic, value.encode(), partition=partition)
    producer.flush()
    return sent


def _stable(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    """Each partition's (LSO, HW)."""
    tps = {TopicPartition(topic, p): "latest" for p in (0, 1)}
    with Admin(bootstrap) as admin:
        committed = admin.list_offsets(tps, isolation_level=1)
        latest = admin.list_offsets(tps)
    return {tp.partition: (committed[tp].offset, latest[tp].offset) for tp in tps}


def _rows(out: Path) -> list[tuple[int, str]]:
    rows = read_back(out)
    offsets = [(r["partition"], r["offset"]) for r in rows]
    assert len(set(offsets)) == len(offsets)  # every record once
    return sorted((r["partition"], r["value"].decode()) for r in rows)


def test_read_committed_in_both_modes(spark: Any, spark_broker: BrokerProcess,
                                      tmp_path: Path) -> None:
    bootstrap = spark_broker.bootstrap
    topic = unique("txns")
    create_topic(bootstrap, topic, partitions=2, segment_bytes="1024")
    plain = Producer(bootstrap, acks="all")
    committing = Producer(bootstrap, transactional_id=f"{topic}-c")
    aborting = Producer(bootstrap, transactional_id=f"{topic}-a")
    # Open for the whole test: Spark is slow to start, the default timeout is a minute.
    staying_open = Producer(bootstrap, transactional_id=f"{topic}-o",
                            transaction_timeout_ms=900_000)
    try:
        for producer in (committing, aborting, staying_open):
            producer.init_transactions()
        before = _send(plain, topic, "plain", 10)
        committing.begin_transaction()
        aborting.begin_transaction()
        committed = _send(committing, topic, "commit", 30)  # interleaved batches
        aborted = _send(aborting, topic, "abort", 30)
        committed += _send(committing, topic, "commit-more", 30)
        aborted += _send(aborting, topic, "abort-more", 10)
        aborting.abort_transaction(TIMEOUT_S)
        committing.commit_transaction(TIMEOUT_S)
        between = _send(plain, topic, "between", 10)
        staying_open.begin_transaction()
        still_open = [(0, f"open{i}") for i in range(5)]
        for _, value in still_open:
            staying_open.send(topic, value.encode(), partition=0)
        staying_open.flush()
        late = [(0, f"late{i}") for i in range(5)]
        for _, value in late:
            plain.send(topic, value.encode(), partition=0)
        plain.flush()
        # The markers are written after EndTxn answers: wait for them (partition 1's LSO
        # reaches its HW), and for partition 0's LSO to stop at the open transaction.
        wait_until(lambda: (s := _stable(bootstrap, topic))[1][0] == s[1][1]
                   and s[0][0] < s[0][1] - len(late), TIMEOUT_S, "the markers")

        everything = sorted(before + committed + aborted + between + still_open + late)
        only_committed = sorted(before + committed + between)
        for mode, source in (("data-dir", ("--data-dir", str(spark_broker.data_dir))),
                             ("bootstrap", ("--bootstrap", bootstrap))):
            for level, expected in (("read_uncommitted", everything),
                                    ("read_committed", only_committed)):
                out = tmp_path / f"{mode}-{level}"
                summary = export_ok(topic, "--out", str(out), "--isolation-level", level,
                                    "--min-partitions", "3", *source)
                assert _rows(out) == expected, (mode, level)
                assert summary["records"] == len(expected)

        # The source itself, with Spark's Kafka source's option name.
        frame = (spark.read.format("slog").option("topic", topic)
                 .option("bootstrap", bootstrap)
                 .option("kafka.isolation.level", "read_committed").load())
        assert sorted((r["partition"], bytes(r["value"]).decode())
                      for r in frame.collect()) == only_committed
    finally:
        staying_open.close(1)
        for producer in (plain, committing, aborting):
            producer.close()
