"""The metadata delta, and the replica manager and log manager acting on it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from slog.core.config import BrokerConfig
from slog.core.errors import StorageError
from slog.core.leader_epoch import LEADER_EPOCH_CHECKPOINT
from slog.core.log_config import LogConfig
from slog.core.log_manager import LogManager, NewLog
from slog.core.metadata import NO_LEADER, MetadataDelta, MetadataImage, PartitionState
from slog.core.metadata_records import (
    BrokerConfigRecord,
    BrokerRegistration,
    FenceBrokerRecord,
    MetadataRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicConfigRecord,
    TopicRecord,
)
from slog.replication.replica_manager import (
    INLINE_CREATE_MAX,
    PARTITION_METADATA,
    ReplicaManager,
    read_topic_id,
    write_topic_id,
)
from tests.unit.batchgen import make_sized_batch

ME = 1


def _brokers(*ids: int) -> list[MetadataRecord]:
    return [RegisterBrokerRecord(BrokerRegistration(b, "127.0.0.1", 1)) for b in ids]


def _topic(name: str, partitions: int, leader: int = ME, replicas: tuple[int, ...] = (1, 2),
           topic_id: str | None = None) -> list[MetadataRecord]:
    return [TopicRecord(name, topic_id or f"id-{name}"),
            *(PartitionState(name, p, replicas, replicas, leader).to_record()
              for p in range(partitions))]


def _image(*records: MetadataRecord) -> MetadataImage:
    image = MetadataImage()
    image.apply_all(enumerate(records))
    return image


# -- the delta -------------------------------------------------------------------------------

def test_delta_names_what_records_touched() -> None:
    image = _image(*_brokers(1, 2), *_topic("a", 3))
    first = image.take_delta()
    assert first.brokers == {1, 2} and first.topics == {"a"}
    assert first.partitions == {("a", 0), ("a", 1), ("a", 2)}
    assert not image.take_delta()  # taken: a new, empty delta
    image.apply(PartitionState("a", 1, (1, 2), (1,), 1, 0, 1).to_record())
    image.apply(TopicConfigRecord("a", {"retention.ms": "5"}))
    image.apply(FenceBrokerRecord(2, True))
    delta = image.take_delta()
    assert delta == MetadataDelta(partitions={("a", 1)}, topics={"a"}, brokers={2})
    image.apply(BrokerConfigRecord(None, {"log.retention.ms": "1"}))
    assert image.take_delta().broker_configs


def test_offline_and_reassigning_indexes_follow_the_records() -> None:
    image = _image(*_brokers(1, 2), *_topic("a", 2))
    assert not image.offline and not image.reassigning
    image.apply(PartitionState("a", 0, (1, 2), (1,), NO_LEADER, 1, 1).to_record())
    image.apply(PartitionState("a", 1, (1, 2, 3), (1, 2), 1, 0, 1, adding=(3,)).to_record())
    assert image.offline == {("a", 0)} and image.reassigning == {("a", 1)}
    image.apply(PartitionState("a", 0, (1, 2), (1,), 1, 2, 2).to_record())
    assert not image.offline
    image.apply(RemoveTopicRecord("a"))
    assert not image.reassigning and image.take_delta().topics == {"a"}
    assert image.partitions_in([("a", 0), ("b", 0)]) == []


# -- the log manager's bulk creation ----------------------------------------------------------

def test_create_logs_in_bulk_and_reopen(tmp_path: Path) -> None:
    logs_dir = tmp_path / "logs"
    manager = LogManager(logs_dir, LogConfig())
    manager.load()
    existing = manager.get_or_create("t", 0)
    written = []
    created = manager.create_logs({
        ("t", 0): NewLog(LogConfig()),  # already open: left alone
        ("t", 1): NewLog(LogConfig(), leader_epoch=4, prepare=written.append),
        ("t", 2): NewLog(LogConfig()),
    })
    assert set(created) == {("t", 1), ("t", 2)} and manager.get("t", 0) is existing
    assert written == [logs_dir / "t-1"]
    led = created[("t", 1)]
    assert led.leader_epoch_cache.latest_epoch == 4
    # An empty log writes no epoch checkpoint; its first flushed data does.
    led.flush()
    assert not (led.directory / LEADER_EPOCH_CHECKPOINT).exists()
    led.append(make_sized_batch(0, 100), leader_epoch=4)
    manager.shutdown()
    assert (led.directory / LEADER_EPOCH_CHECKPOINT).exists()
    for clean in (True, False):
        reopened = LogManager(logs_dir, LogConfig())
        if not clean:
            (tmp_path / "clean-shutdown").unlink(missing_ok=True)
        reopened.load()
        assert set(reopened.all_logs()) == {("t", 0), ("t", 1), ("t", 2)}
        assert reopened.get("t", 1).log_end_offset == 1
        assert reopened.get("t", 1).leader_epoch_cache.latest_epoch == 4
        assert reopened.get("t", 2).log_end_offset == 0
        reopened.shutdown()


def test_create_logs_leaves_a_directory_found_on_disk(tmp_path: Path) -> None:
    manager = LogManager(tmp_path / "logs", LogConfig())
    manager.load()
    (tmp_path / "logs" / "t-0").mkdir()  # a crash mid-creation left it
    assert manager.create_logs({("t", 0): NewLog(LogConfig())}) == {}
    assert manager.get_or_create("t", 0).log_end_offset == 0


def test_create_logs_fails_whole_when_one_log_cannot_be_made(tmp_path: Path) -> None:
    """One failure fails the call (its directory fsyncs, on other threads, finished
    or not) and registers none of its logs."""
    logs_dir = tmp_path / "logs"
    manager = LogManager(logs_dir, LogConfig())
    manager.load()

    def full_disk(directory: Path) -> None:
        raise OSError(28, "No space left on device")

    wanted = {("t", n): NewLog(LogConfig()) for n in range(40)}
    wanted[("t", 17)] = NewLog(LogConfig(), prepare=full_disk)
    with pytest.raises(StorageError, match="No space left on device"):
        manager.create_logs(wanted)
    assert manager.all_logs() == {}
    left = {entry.name for entry in logs_dir.iterdir()}
    assert left == {f"t-{n}" for n in range(18)}
    # What a failed call left on disk is opened the ordinary way later; the rest is made.
    wanted[("t", 17)] = NewLog(LogConfig())
    assert set(manager.create_logs(wanted)) == {("t", n) for n in range(18, 40)}
    assert manager.get_or_create("t", 3).log_end_offset == 0


# -- the replica manager applies deltas -------------------------------------------------------

def _replicas(tmp_path: Path) -> ReplicaManager:
    logs = LogManager(tmp_path / "logs", LogConfig())
    logs.load()
    return ReplicaManager(BrokerConfig(ME, tmp_path), logs)


async def _settle(replicas: ReplicaManager, timeout_s: float = 30) -> None:
    async with asyncio.timeout(timeout_s):
        while replicas._creating:
            await asyncio.sleep(0.01)


def test_many_new_replicas_are_created_off_the_event_loop(tmp_path: Path) -> None:
    count = INLINE_CREATE_MAX * 4

    async def scenario() -> None:
        replicas = _replicas(tmp_path)
        image = _image(*_brokers(1, 2), *_topic("few", 2))
        replicas.apply_image(image, image.take_delta())
        # Few: created inline, served at once. Many: a worker thread creates them.
        assert replicas.get("few", 0) is not None and replicas.get("few", 0).is_leader
        image.apply_all(enumerate(_topic("many", count, leader=2)))
        replicas.apply_image(image, image.take_delta())
        assert replicas.get("many", 0) is None
        await _settle(replicas)
        for number in range(count):
            partition = replicas.get("many", number)
            assert partition is not None and not partition.is_leader
            assert read_topic_id(partition.log.directory) == "id-many"
        assert set(replicas.fetchers.fetchers) == {2}
        assert len(replicas.fetchers.fetchers[2].partitions) == count
        await replicas.shutdown()

    asyncio.run(scenario())


def test_a_topic_deleted_while_its_logs_are_created(tmp_path: Path) -> None:
    count = INLINE_CREATE_MAX * 2

    async def scenario() -> None:
        replicas = _replicas(tmp_path)
        image = _image(*_brokers(1, 2), *_topic("gone", count), *_topic("again", count))
        replicas.apply_image(image, image.take_delta())
        image.apply(RemoveTopicRecord("gone"))
        image.apply(RemoveTopicRecord("again"))
        image.apply_all(enumerate(_topic("again", count, topic_id="id-again-2")))
        replicas.apply_image(image, image.take_delta())
        await _settle(replicas)
        await _settle(replicas)  # the re-created topic's logs, started when the first ended
        assert not any(key[0] == "gone" for key in replicas.log_manager.all_logs())
        assert not list((tmp_path / "logs").glob("gone-*"))
        for number in range(count):
            partition = replicas.get("again", number)
            assert partition is not None and partition.topic_id == "id-again-2"
            assert read_topic_id(partition.log.directory) == "id-again-2"
        await replicas.shutdown()

    asyncio.run(scenario())


def test_a_delta_visits_only_what_it_names(tmp_path: Path) -> None:
    async def scenario() -> None:
        replicas = _replicas(tmp_path)
        image = _image(*_brokers(1, 2, 3), *_topic("a", 4), *_topic("b", 4, leader=2))
        replicas.apply_image(image, image.take_delta())
        await _settle(replicas)
        # A record the delta does not name (forged here by editing the image in place)
        # is not applied: only a-1 is looked at.
        topic = image.topics["a"]
        topic.partitions[2] = PartitionState("a", 2, (1, 2), (1, 2), 2, 5, 5)
        image.apply(PartitionState("a", 1, (1, 2), (1, 2), 2, 1, 1).to_record())
        replicas.apply_image(image, image.take_delta())
        assert not replicas.get("a", 1).is_leader and replicas.get("a", 2).is_leader
        # A fenced leader: its followers here stop fetching from it.
        image.apply(FenceBrokerRecord(2, True))
        replicas.apply_image(image, image.take_delta())
        assert 2 not in replicas.fetchers.fetchers
        # A dynamic broker config reaches every log.
        image.apply(BrokerConfigRecord(None, {"log.retention.ms": "1234"}))
        replicas.config.set_dynamic(image.dynamic_broker_configs(None), {})
        replicas.apply_image(image, image.take_delta())
        assert {p.log.config.retention_ms for p in replicas.partitions.values()} == {1234}
        await replicas.shutdown()

    asyncio.run(scenario())


def test_partition_metadata_written_for_inline_creation(tmp_path: Path) -> None:
    async def scenario() -> None:
        replicas = _replicas(tmp_path)
        image = _image(*_brokers(1, 2), *_topic("t", 1))
        replicas.apply_image(image, image.take_delta())
        directory = replicas.get("t", 0).log.directory
        assert (directory / PARTITION_METADATA).read_text().endswith("topic_id: id-t\n")
        await replicas.shutdown()

    asyncio.run(scenario())


def test_a_partition_metadata_cut_short_says_nothing(tmp_path: Path) -> None:
    # Bulk creation writes it without an fsync: after a power loss it may be empty or
    # cut short. A shorter id would get the log deleted as a deleted topic's.
    write_topic_id(tmp_path, topic_id="id-whole", durable=False)
    assert read_topic_id(tmp_path) == "id-whole"
    whole = (tmp_path / PARTITION_METADATA).read_text()
    for cut in (0, len("version: 0\n"), len(whole) - 3, len(whole) - 1):
        (tmp_path / PARTITION_METADATA).write_text(whole[:cut])
        assert read_topic_id(tmp_path) is None, cut
    write_topic_id(tmp_path, topic_id="id-durable")
    assert read_topic_id(tmp_path) == "id-durable"
    assert [p.name for p in tmp_path.iterdir()] == [PARTITION_METADATA]
