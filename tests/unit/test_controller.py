"""The controller against a real metadata log on disk, read back by an independent tailer."""

from __future__ import annotations

from pathlib import Path

import pytest

from slog.core.config import BrokerConfig
from slog.core.metadata import MetadataImage
from slog.core.metadata_log import MetadataLogReader, MetadataLogWriter
from slog.replication.controller import Controller, ControllerError, NewTopic


class Cluster:
    """A controller plus a broker-side image fed only by tailing the log."""

    def __init__(self, root: Path, brokers: int = 3):
        self.image = MetadataImage()
        self.reader = MetadataLogReader(root)
        self.writer = MetadataLogWriter(root)
        config = BrokerConfig.build(1, root, "127.0.0.1", 9092, {})
        self.controller = Controller(config, self.writer, lambda: self.image, self.poll)
        self.poll()  # as the broker does: catch up before claiming the next epoch
        self.controller.activate()
        for broker_id in range(1, brokers + 1):
            self.controller.register_broker(broker_id, "127.0.0.1", 9091 + broker_id, "x")

    def poll(self) -> None:
        self.image.apply_all(self.reader.poll())


@pytest.fixture
def cluster(tmp_path: Path) -> Cluster:
    return Cluster(tmp_path / "metadata")


def test_create_topic_is_visible_to_a_fresh_reader(cluster: Cluster, tmp_path: Path) -> None:
    [created] = cluster.controller.create_topics(
        [NewTopic("orders", 6, 3, configs={"retention.ms": "1000"})])
    assert not isinstance(created, ControllerError)
    replay = MetadataImage()
    replay.apply_all(MetadataLogReader(tmp_path / "metadata").poll())
    topic = replay.topics["orders"]
    assert topic.configs == {"retention.ms": "1000"}
    assert len(topic.partitions) == 6
    assert all(len(p.replicas) == 3 and p.leader == p.replicas[0] for p in
               topic.partitions.values())
    assert replay.controller_epoch == 1


def test_rejections_change_nothing(cluster: Cluster) -> None:
    before = cluster.writer.end_offset
    bad = [NewTopic("../x"), NewTopic("t", 1, 4), NewTopic("u", 0),
           NewTopic("v", configs={"retention.ms": "x"})]
    results = cluster.controller.create_topics(bad)
    codes = [r.code for r in results if isinstance(r, ControllerError)]
    assert codes == ["invalid_topic_exception", "invalid_replication_factor",
                     "invalid_partitions", "invalid_config"]
    assert cluster.writer.end_offset == before


def test_duplicates_collisions_and_validate_only(cluster: Cluster) -> None:
    cluster.controller.create_topics([NewTopic("a.b")])
    results = cluster.controller.create_topics([NewTopic("a.b"), NewTopic("a_b")])
    assert [r.code for r in results] == ["topic_already_exists", "invalid_topic_exception"]
    cluster.controller.create_topics([NewTopic("dry")], validate_only=True)
    assert "dry" not in cluster.image.topics


def test_partitions_configs_and_delete(cluster: Cluster) -> None:
    cluster.controller.create_topics([NewTopic("t", 2, 2)])
    cluster.controller.create_partitions("t", 5, None)
    assert sorted(cluster.image.topics["t"].partitions) == [0, 1, 2, 3, 4]
    with pytest.raises(ControllerError, match="must be larger"):
        cluster.controller.create_partitions("t", 3, None)
    cluster.controller.alter_topic_configs("t", {"cleanup.policy": "compact"})
    assert cluster.image.topics["t"].configs["cleanup.policy"] == "compact"
    assert cluster.controller.delete_topics(["t", "nope"])["nope"] is not None
    assert "t" not in cluster.image.topics


def test_new_controller_takes_a_higher_epoch(cluster: Cluster, tmp_path: Path) -> None:
    cluster.writer.close()
    successor = Cluster(tmp_path / "metadata")
    assert successor.image.controller_epoch == 2
