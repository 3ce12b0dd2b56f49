"""Durable acknowledgements (``write.caching``, issue 18) on real brokers.

The brokers count their group commits (``fsyncs``, ``fsynced_records``: offsets
the fsyncs made durable) and log them on SIGUSR1. A counter is raised before the
acknowledgement it allows is released, so at the moment a produce is answered
the counter already shows the fsync that answer waited for:

* acks=1 is answered only once the leader fsynced the records;
* acks=all only once every ISR replica fsynced them (a follower reports a fetch
  offset only after syncing what it appended);
* concurrent producers share fsyncs (group commit);
* ``write.caching=true`` (per topic, or as the broker default) gives back
  Kafka's behaviour: no fsync at all;
* the config is validated, described with its source and alterable.
"""

from __future__ import annotations

import json
import threading

import pytest

from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from tests.brokers import run_cli
from tests.cluster.conftest import Cluster, broker_stats, produce_body, produce_error


def _fsynced(cluster: Cluster, broker_id: int) -> tuple[int, int]:
    stats = broker_stats(cluster, broker_id)
    return stats["fsyncs"], stats["fsynced_records"]


@pytest.mark.brokers(1)
def test_acks_1_is_answered_only_after_the_leader_fsynced(cluster: Cluster) -> None:
    cluster.create_topic("cached", replication_factor=1, configs={"write.caching": "true"})
    cluster.create_topic("durable", replication_factor=1)
    fsyncs, records = _fsynced(cluster, 1)
    assert cluster.produce_to(1, "cached", 0, [b"x"] * 10, acks=1) == ErrorCode.none
    assert _fsynced(cluster, 1) == (fsyncs, records)  # Kafka's behaviour: page cache only
    assert cluster.produce_to(1, "durable", 0, [b"x"] * 10, acks=1) == ErrorCode.none
    after_fsyncs, after_records = _fsynced(cluster, 1)
    assert after_fsyncs > fsyncs and after_records - records == 10
    assert cluster.high_watermark("durable") == 10


@pytest.mark.brokers(3)
def test_acks_all_is_answered_only_after_every_isr_replica_fsynced(cluster: Cluster) -> None:
    cluster.create_topic("cached", replication_factor=3,
                         configs={"write.caching": "true", "min.insync.replicas": "3"})
    cluster.create_topic("durable", replication_factor=3, configs={"min.insync.replicas": "3"})
    before = {b: _fsynced(cluster, b) for b in (1, 2, 3)}
    assert cluster.append_to(cluster.leader("cached"), "cached", 0, [b"c"] * 7, acks=-1) == 0
    assert {b: _fsynced(cluster, b) for b in (1, 2, 3)} == before  # no replica fsynced
    assert cluster.append_to(cluster.leader("durable"), "durable", 0, [b"d"] * 20,
                             acks=-1) == 0
    for broker in (1, 2, 3):  # the leader and both followers had the 20 on disk
        fsyncs, records = _fsynced(cluster, broker)
        assert fsyncs > before[broker][0], broker
        assert records - before[broker][1] == 20, broker


@pytest.mark.brokers(1)
def test_concurrent_producers_share_fsyncs(cluster: Cluster) -> None:
    cluster.create_topic("busy", replication_factor=1)
    fsyncs, records = _fsynced(cluster, 1)
    producers, each = 16, 25
    errors: list[int] = []

    def produce_one_at_a_time() -> None:
        with cluster.connect(1, timeout_s=30) as conn:
            for _ in range(each):  # one record per request, each waiting for its answer
                response = conn.request(ApiKey.PRODUCE, produce_body("busy", 0, [b"r"], 1))
                errors.append(produce_error(response))

    threads = [threading.Thread(target=produce_one_at_a_time) for _ in range(producers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == [ErrorCode.none] * (producers * each)
    after_fsyncs, after_records = _fsynced(cluster, 1)
    appends = after_records - records
    assert appends == producers * each
    # Sixteen producers, each waiting for its fsync: the appends that arrive while
    # one fsync runs share the next. One fsync per append would be 400 here.
    assert after_fsyncs - fsyncs <= appends // 2, (after_fsyncs - fsyncs, appends)


@pytest.mark.brokers(1)
@pytest.mark.broker_config({"write.caching.default": "true"})
def test_the_broker_default_and_the_topic_config(cluster: Cluster) -> None:
    cluster.create_topic("t", replication_factor=1)
    bootstrap = cluster.bootstrap

    def described() -> dict[str, str]:
        result = run_cli("config", "describe", "--topic", "t", "-b", bootstrap, "-o", "json")
        assert result.returncode == 0, result.stderr
        row = next(r for r in json.loads(result.stdout) if r["name"] == "write.caching")
        return {"value": row["value"], "source": row["source"]}

    assert described() == {"value": "true", "source": "STATIC_BROKER_CONFIG"}
    fsyncs, _ = _fsynced(cluster, 1)
    assert cluster.produce_to(1, "t", 0, [b"x"] * 5, acks=1) == ErrorCode.none
    assert _fsynced(cluster, 1)[0] == fsyncs

    altered = run_cli("topic", "alter", "t", "--config", "write.caching=false", "-b", bootstrap)
    assert altered.returncode == 0, altered.stderr
    assert described() == {"value": "false", "source": "DYNAMIC_TOPIC_CONFIG"}
    with cluster.admin() as admin:  # the brokers apply it from the metadata log
        assert admin.describe_configs("t")["write.caching"].value == "false"
    cluster.append_to(1, "t", 0, [b"y"] * 5, acks=1)
    assert _fsynced(cluster, 1)[0] > fsyncs

    refused = run_cli("topic", "alter", "t", "--config", "write.caching=sometimes",
                      "-b", bootstrap)
    assert refused.returncode != 0
    assert "write.caching" in refused.stderr and "true or false" in refused.stderr
