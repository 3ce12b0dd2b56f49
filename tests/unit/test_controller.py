"""The controller against a real metadata log on disk, read back by an independent tailer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from slog.core.config import BrokerConfig
from slog.core.controller_lease import ControllerLease
from slog.core.kafka_errors import ErrorCode
from slog.core.metadata import MetadataImage
from slog.core.metadata_log import MetadataLogReader, MetadataLogWriter
from slog.replication.controller import (
    BrokerStatus,
    Controller,
    ControllerDeposedError,
    ControllerError,
    NewTopic,
)


class Cluster:
    """A controller plus a broker-side image fed only by tailing the log."""

    def __init__(self, root: Path, brokers: int = 3):
        self.image = MetadataImage()
        self.reader = MetadataLogReader(root)
        self.lease = ControllerLease(root.parent / "controller.lease", root / "append.lock", 9.0)
        self.poll()  # as the broker does: catch up before claiming the next epoch
        with self.lease.exclusive(1.0):
            self.writer = MetadataLogWriter.take_over(root, self.lease, 1, "test",
                                                      self.image.controller_epoch)
        config = BrokerConfig.build(1, root, "127.0.0.1", 9092, {})
        self.controller = Controller(config, self.writer, lambda: self.image, self.poll)
        self.controller.activate()
        for broker_id in range(1, brokers + 1):
            self.controller.register_broker(broker_id, "127.0.0.1", 9091 + broker_id, "x")

    def poll(self) -> None:
        self.image.apply_all(self.reader.poll())


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path / "metadata")
    yield cluster
    cluster.lease.close()


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
    assert codes == [ErrorCode.invalid_topic_exception, ErrorCode.invalid_replication_factor,
                     ErrorCode.invalid_partitions, ErrorCode.invalid_config]
    assert cluster.writer.end_offset == before


def test_duplicates_collisions_and_validate_only(cluster: Cluster) -> None:
    cluster.controller.create_topics([NewTopic("a.b")])
    results = cluster.controller.create_topics([NewTopic("a.b"), NewTopic("a_b")])
    assert [r.code for r in results] == [ErrorCode.topic_already_exists,
                                         ErrorCode.invalid_topic_exception]
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
    successor.lease.close()


def _status(broker_id: int, incarnation: str = "x", *, problem: str | None = None,
            starting: bool = False) -> BrokerStatus:
    return BrokerStatus(broker_id, "127.0.0.1", 9091 + broker_id, incarnation, problem,
                        shutting_down=False, starting=starting)


def test_a_starting_broker_is_neither_registered_nor_a_leader_until_caught_up(
        cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    cluster.controller.create_topics([NewTopic("t", 3, 3)])
    # broker 2 restarts: its old registration is fenced, its new run is not registered
    with caplog.at_level("WARNING", logger="slog.controller"):
        cluster.controller.sync_liveness([_status(1), _status(2, "y", starting=True),
                                          _status(3)])
    assert cluster.image.brokers[2].fenced
    assert "fencing broker 2: restarting, not caught up yet;" in caplog.text
    partitions = cluster.image.topics["t"].partitions.values()
    assert all(p.leader != 2 and 2 not in p.isr for p in partitions)
    # still starting on later ticks: no new record at all
    before = cluster.writer.end_offset
    cluster.controller.sync_liveness([_status(1), _status(2, "y", starting=True), _status(3)])
    assert cluster.writer.end_offset == before
    # caught up: registered under its new incarnation
    cluster.controller.sync_liveness([_status(1), _status(2, "y"), _status(3)])
    assert not cluster.image.brokers[2].fenced
    assert cluster.image.brokers[2].incarnation == "y"


def test_each_fencing_is_one_line_with_its_reason(cluster: Cluster,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="slog.controller"):
        cluster.controller.sync_liveness([_status(1), _status(2, problem="heartbeat 9.4 s old"),
                                          _status(3, problem="alive.lock is free: the process "
                                                  "is gone")])
        cluster.controller.sync_liveness([_status(1), _status(2, problem="heartbeat 9.6 s old"),
                                          _status(3, problem="alive.lock is free")])
    fencings = [r.getMessage() for r in caplog.records if "fencing broker" in r.getMessage()]
    assert fencings == [
        "fencing broker 2: heartbeat 9.4 s old; 0 partition(s) change",
        "fencing broker 3: alive.lock is free: the process is gone; 0 partition(s) change"]


def test_a_deposed_controller_writes_nothing_and_says_so(cluster: Cluster, tmp_path: Path
                                                         ) -> None:
    root = tmp_path / "metadata"
    successor = ControllerLease(root.parent / "controller.lease", root / "append.lock", 9.0)
    with successor.exclusive(1.0):  # another broker took over while this one was paused
        MetadataLogWriter.take_over(root, successor, 2, "other", cluster.image.controller_epoch)
    end = cluster.writer.end_offset
    for _ in range(2):  # refused by the log, then without asking it again
        with pytest.raises(ControllerDeposedError) as refused:
            cluster.controller.create_topics([NewTopic("late", 1, 1)])
        assert refused.value.code == ErrorCode.not_controller
        assert cluster.controller.deposed
    cluster.poll()
    assert "late" not in cluster.image.topics and cluster.writer.end_offset == end
    successor.close()
