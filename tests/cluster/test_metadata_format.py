"""A real cluster restarts on a metadata log holding records in the untyped days' format.

The brokers are stopped, records are appended the way the controller wrote them
before records were typed (JSON through ``build_batch``, fields older versions
lacked left out), together with records of a type from a newer slog and one
that fails validation; the restarted cluster must load all it can use, skip the
rest with a warning, and serve both the topic it had and the one appended.
"""

from __future__ import annotations

import json

import pytest

from slog.core.log import PartitionLog
from slog.core.metadata_log import METADATA_LOG_CONFIG, metadata_log_dir
from slog.core.records import build_batch
from tests.cluster.conftest import Cluster, wait_until

VALUES = [b"v%d" % i for i in range(20)]


def _append_untyped(cluster: Cluster, records: list[dict[str, object]]) -> None:
    """What the untyped controller's MetadataLogWriter.append did, byte for byte."""
    log = PartitionLog.open(metadata_log_dir(cluster.layout.metadata_dir), METADATA_LOG_CONFIG,
                            clean_shutdown=False)
    payload = build_batch((None, json.dumps(r, separators=(",", ":")).encode(), (), 1)
                          for r in records)
    log.append(payload)
    log.flush()
    log.close()


def _produce(cluster: Cluster, topic: str) -> None:
    producer = cluster.producer(acks="all")
    for value in VALUES:
        producer.send(topic, value, partition=0)
    producer.flush(20)


@pytest.mark.brokers(2)
def test_a_cluster_restarts_on_untyped_records_and_skips_newer_ones(cluster: Cluster) -> None:
    cluster.create_topic("orders", 1, 2)
    _produce(cluster, "orders")
    for broker_id in sorted(cluster.brokers, reverse=True):
        cluster.stop(broker_id)
    # After the stops: had broker 2 been the controller, broker 1 took over with a new
    # epoch when it stopped, and records stamped with the old one would be ignored.
    epoch = cluster.image().controller_epoch

    _append_untyped(cluster, [
        # A topic as the first versions wrote it: no configs, no epochs, no reassignment.
        {"type": "topic", "name": "legacy", "topic_id": "5d2c9f1e-0b7a-4c59-9a41-6f3c1de2b7a0",
         "controller_epoch": epoch, "ts": 1},
        {"type": "partition", "topic": "legacy", "partition": 0, "replicas": [1, 2],
         "isr": [1, 2], "leader": 1, "controller_epoch": epoch, "ts": 1},
        {"type": "from_a_newer_slog", "anything": [1, 2], "controller_epoch": epoch, "ts": 1},
        {"type": "partition", "topic": "legacy", "partition": "zero", "replicas": [1],
         "isr": [1], "leader": 1, "controller_epoch": epoch, "ts": 1},  # invalid: skipped
    ])
    cluster.start()
    image = cluster.image()
    assert set(image.topics) >= {"orders", "legacy"}
    legacy = image.partition("legacy", 0)
    assert legacy is not None and legacy.replicas == (1, 2)  # (its epochs moved on since)
    assert [r.value for r in cluster.read_all("orders", 0, len(VALUES))] == VALUES
    wait_until(lambda: cluster.image().partition("legacy", 0).leader in (1, 2), 20,
               "a leader for the legacy topic")
    _produce(cluster, "legacy")
    assert [r.value for r in cluster.read_all("legacy", 0, len(VALUES))] == VALUES
    for broker_id in cluster.brokers:
        text = cluster.log_text(broker_id)
        assert "skipping metadata records of type 'from_a_newer_slog'" in text
        assert "skipping invalid metadata record" in text
