"""The ``slog`` data source used directly: streaming, a 3-broker cluster, committed-only reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.brokers import BrokerProcess
from tests.cluster.conftest import Cluster, wait_until
from tests.spark.support import as_produced, create_topic, produce_confluent, read_back, unique


def _rows(frame: Any) -> list[Any]:
    return sorted((as_produced(r.asDict(recursive=True)) for r in frame.collect()),
                  key=lambda p: (p.partition, p.offset))


def test_streaming_available_now_reads_each_record_once(spark: Any,
                                                        spark_broker: BrokerProcess,
                                                        tmp_path: Path) -> None:
    topic = unique("stream")
    create_topic(spark_broker.bootstrap, topic, partitions=2)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    produced: list[Any] = []
    for run in range(2):
        produced += produce_confluent(spark_broker.bootstrap, topic, 150, partitions=2,
                                      start=run * 150)
        stream = (spark.readStream.format("slog").option("subscribe", topic)
                  .option("dataDir", str(spark_broker.data_dir))
                  .option("includeHeaders", "true").load())
        query = (stream.writeStream.format("parquet").option("path", str(out))
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        assert query.awaitTermination(240), "the AvailableNow query did not finish"
        assert query.exception() is None
        rows = [as_produced(r) for r in read_back(out)]
        assert rows == sorted(produced, key=lambda p: (p.partition, p.offset))


@pytest.mark.broker_config({"broker.session.timeout.ms": "120000",
                            "replica.lag.time.max.ms": "120000"})
def test_cluster_reads_only_committed_records(spark: Any, cluster: Cluster) -> None:
    topic = unique("replicated")
    cluster.create_topic(topic, partitions=2, replication_factor=3)
    produced = produce_confluent(cluster.bootstrap, topic, 400, partitions=2, codec="zstd")
    wait_until(lambda: cluster.high_watermark(topic, 0) == 200 and
               cluster.high_watermark(topic, 1) == 200, 30, "HW to reach every record")

    def read(**options: str) -> list[Any]:
        reader = spark.read.format("slog").option("topic", topic) \
            .option("includeHeaders", "true").option("minPartitions", "3")
        return _rows(reader.options(**options).load())

    assert read(bootstrap=cluster.bootstrap) == produced
    assert read(dataDir=str(cluster.layout.root)) == produced
    # Followers stopped in the ISR: the leader's extra records are not committed yet.
    state = cluster.state(topic, 0)
    followers = [b for b in state.isr if b != state.leader]
    for broker_id in followers:
        cluster.pause(broker_id)
    try:
        cluster.append_to(state.leader, topic, 0, [b"uncommitted"] * 5, acks=1)
        leader_dir = cluster.layout.partition_dir(state.leader, topic, 0)
        from slog.spark.segments import log_bounds

        assert log_bounds(leader_dir).end == 205
        assert cluster.high_watermark(topic, 0) == 200
        on_disk = read(dataDir=str(cluster.layout.root))
        assert [r for r in on_disk if r.partition == 0] == \
            [p for p in produced if p.partition == 0]
    finally:
        for broker_id in followers:
            cluster.resume(broker_id)
    wait_until(lambda: cluster.high_watermark(topic, 0) == 205, 30, "HW after resuming")
    assert len(read(bootstrap=cluster.bootstrap)) == 405
    assert len(read(dataDir=str(cluster.layout.root))) == 405
