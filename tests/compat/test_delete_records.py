"""DeleteRecords (API 21) on a real three-broker cluster, from every admin client.

confluent-kafka, kafka-python and aiokafka each delete the start of a topic;
then every replica (followers too) has the new log start in its checkpoint
and no segment wholly below it, each client's consumer starts at it, and it
survives SIGKILL of every broker and a failover. Errors carry Kafka's codes,
and the answer waits for the followers (the low watermark) as Kafka's does.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from slog.client import TopicPartition
from slog.client.errors import KafkaError
from slog.core import batch
from slog.core.checkpoint import OffsetCheckpointFile
from slog.core.log_manager import LOG_START_OFFSET_CHECKPOINT
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from tests.brokers import run_cli
from tests.cluster.conftest import Cluster, wait_until
from tests.compat.clients import (
    Rec,
    aiokafka_consume,
    confluent_consume,
    kafka_python_consume,
    slog_produce,
)

BATCHES, PER_BATCH = 10, 10
# A segment per batch (the smallest legal size): deletions show on disk segment by segment.
TINY_SEGMENTS = {"segment.bytes": "14"}


def fill(cluster: Cluster, topic: str, partition: int = 0) -> None:
    """BATCHES batches of PER_BATCH records, acks=all: every replica has them all."""
    leader = cluster.leader(topic, partition)
    for b in range(BATCHES):
        cluster.append_to(leader, topic, partition,
                          [f"{topic}-{b}-{i}".encode() for i in range(PER_BATCH)], acks=-1)


def log_start_on(cluster: Cluster, broker_id: int, topic: str, partition: int = 0) -> int | None:
    """The log start offset broker ``broker_id`` has checkpointed (None: none yet)."""
    path = cluster.layout.broker_dir(broker_id) / LOG_START_OFFSET_CHECKPOINT
    return OffsetCheckpointFile(path).read().get((topic, partition))


def batch_bases(cluster: Cluster, broker_id: int, topic: str, partition: int = 0) -> list[int]:
    return [batch.parse_header(raw, 0).base_offset
            for raw in cluster.replica_batches(broker_id, topic, partition)]


def check_every_replica(cluster: Cluster, topic: str, start: int) -> None:
    """Each replica has checkpointed ``start`` and kept no segment wholly below it (one
    batch per segment; the active, last, segment always stays)."""
    for broker_id in cluster.state(topic).replicas:
        wait_until(lambda b=broker_id: log_start_on(cluster, b, topic) == start, what=(
            f"broker {broker_id} to checkpoint log start {start} of {topic}"))
        bases = batch_bases(cluster, broker_id, topic)
        assert bases[0] == min(start // PER_BATCH * PER_BATCH, bases[-1]), (broker_id, bases)


def earliest(cluster: Cluster, topic: str, partition: int = 0) -> int:
    tp = TopicPartition(topic, partition)
    return cluster.admin().list_offsets({tp: "earliest"})[tp].offset


def test_every_client_deletes_records_on_every_replica(cluster: Cluster) -> None:
    topics = {"purge-confluent": 35, "purge-kafka-python": 42, "purge-aiokafka": -1}
    for topic in topics:
        cluster.create_topic(topic, configs=TINY_SEGMENTS)
        fill(cluster, topic)
    end = BATCHES * PER_BATCH

    # confluent-kafka: AdminClient.delete_records -> DeletedRecords(low_watermark).
    from confluent_kafka import TopicPartition as CkTopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    [future] = admin.delete_records([CkTopicPartition("purge-confluent", 0, 35)],
                                    request_timeout=30).values()
    assert future.result(timeout=30).low_watermark == 35

    # kafka-python: KafkaAdminClient.delete_records -> the partition results.
    from kafka import KafkaAdminClient
    from kafka.structs import TopicPartition as KpTopicPartition

    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        deleted = kp.delete_records({KpTopicPartition("purge-kafka-python", 0): 42},
                                    timeout_ms=10_000)
    finally:
        kp.close()
    [result] = deleted.values()
    assert (result["error_code"], result["low_watermark"]) == (0, 42)

    # aiokafka: AIOKafkaAdminClient.delete_records, -1 = up to the high watermark.
    from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
    from aiokafka.structs import TopicPartition as AioTopicPartition

    async def aiokafka_delete() -> dict[AioTopicPartition, int]:
        client = AIOKafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        await client.start()
        try:
            return await client.delete_records(
                {AioTopicPartition("purge-aiokafka", 0): RecordsToDelete(-1)}, timeout_ms=10_000)
        finally:
            await client.close()

    assert list(asyncio.run(aiokafka_delete()).values()) == [end]

    expected = {t: end if o == -1 else o for t, o in topics.items()}
    for topic, start in expected.items():
        check_every_replica(cluster, topic, start)
        assert earliest(cluster, topic) == start
    # Each client's consumer, reading from the beginning, starts at the new log start.
    assert confluent_consume(cluster.bootstrap, "purge-confluent")[0].offset == 35
    assert kafka_python_consume(cluster.bootstrap, "purge-kafka-python")[0].offset == 42
    # slog's consumer, told to read from 0, is reset (OFFSET_OUT_OF_RANGE) to the log start.
    consumer = cluster.consumer()
    tp = TopicPartition("purge-confluent", 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    records = wait_until(lambda: consumer.poll(200), what="slog's consumer to read")
    assert records[0].offset == 35
    # New records land after the old ones; deleting below the log start changes nothing.
    fill(cluster, "purge-aiokafka")
    assert cluster.admin().delete_records({TopicPartition("purge-aiokafka", 0): 10}) == \
        {TopicPartition("purge-aiokafka", 0): end}
    assert earliest(cluster, "purge-aiokafka") == end
    assert aiokafka_consume(cluster.bootstrap, "purge-aiokafka")[0].offset == end


def test_deleted_records_stay_deleted_after_failover_and_sigkill(cluster: Cluster) -> None:
    topic = "purge-durable"
    cluster.create_topic(topic, configs=TINY_SEGMENTS)
    fill(cluster, topic)
    tp = TopicPartition(topic, 0)
    assert cluster.admin().delete_records({tp: 57}) == {tp: 57}
    old_leader = cluster.leader(topic)
    # A follower that takes over already has the new log start (no clean shutdown).
    cluster.kill(old_leader)
    new_leader = cluster.wait_leader(topic, not_in={old_leader})
    cluster.step(f"broker {new_leader} leads")
    assert earliest(cluster, topic) == 57
    # Every broker killed and started again: the checkpoints written at deletion time hold.
    cluster.restart(old_leader)
    cluster.wait_in_sync(topic)
    for broker_id in sorted(cluster.brokers):
        cluster.kill(broker_id)
    for broker_id in sorted(cluster.brokers):
        cluster.restart(broker_id)
    cluster.wait_registered()
    cluster.wait_in_sync(topic)
    assert wait_until(lambda: _earliest_or_none(cluster, topic), what="the log start") == 57
    check_every_replica(cluster, topic, 57)
    records = cluster.read_all(topic, 0, BATCHES * PER_BATCH)
    assert [r.offset for r in records] == list(range(57, BATCHES * PER_BATCH))


def _earliest_or_none(cluster: Cluster, topic: str) -> int | None:
    try:
        return earliest(cluster, topic)
    except (KafkaError, ConnectionError):
        return None


def _delete_raw(cluster: Cluster, broker_id: int, topic: str, offset: int,
                timeout_ms: int = 10_000, partition: int = 0) -> tuple[int, int]:
    with cluster.connect(broker_id) as conn:
        response = conn.request(ApiKey.DELETE_RECORDS, {
            "topics": [{"name": topic, "partitions": [
                {"partition_index": partition, "offset": offset}]}],
            "timeout": timeout_ms})
    [result] = response.topics[0].partitions
    return int(result.error_code), int(result.low_watermark)


@pytest.mark.broker_config({"replica.lag.time.max.ms": "30000"})
def test_errors_and_waiting_for_the_followers(cluster: Cluster) -> None:
    topic = "purge-errors"
    cluster.create_topic(topic, configs=TINY_SEGMENTS)
    fill(cluster, topic)
    leader = cluster.leader(topic)
    # Not the controller: a paused controller would not get fenced.
    follower = next(b for b in cluster.state(topic).replicas
                    if b not in (leader, cluster.controller()))
    end = BATCHES * PER_BATCH
    assert _delete_raw(cluster, leader, topic, end + 1) == (ErrorCode.offset_out_of_range, -1)
    assert _delete_raw(cluster, leader, topic, -2)[0] == ErrorCode.offset_out_of_range
    assert _delete_raw(cluster, follower, topic, 5)[0] == ErrorCode.not_leader_or_follower
    assert _delete_raw(cluster, leader, topic, 5, partition=7)[0] == \
        ErrorCode.unknown_topic_or_partition
    assert earliest(cluster, topic) == 0  # nothing moved

    cluster.create_topic("purge-compacted", configs={"cleanup.policy": "compact"})
    compacted_leader = cluster.leader("purge-compacted")
    # keyed: a compacted topic refuses keyless records
    slog_produce(cluster.brokers[compacted_leader].bootstrap, "purge-compacted",
                 [Rec(b"k", b"v")])
    assert _delete_raw(cluster, compacted_leader, "purge-compacted", 1)[0] == \
        ErrorCode.policy_violation

    # A stopped follower (not fenced yet) holds the low watermark back: the leader deletes
    # and checkpoints at once, but answers REQUEST_TIMED_OUT with the offset asked for.
    cluster.pause(follower)
    assert _delete_raw(cluster, leader, topic, 20, timeout_ms=300) == \
        (ErrorCode.request_timed_out, 20)
    assert log_start_on(cluster, leader, topic) == 20
    assert log_start_on(cluster, follower, topic) in (None, 0)
    cluster.resume(follower)
    check_every_replica(cluster, topic, 20)
    assert _delete_raw(cluster, leader, topic, 30) == (ErrorCode.none, 30)

    # A fenced follower (its broker declared dead) does not hold deletions back.
    cluster.pause(follower)
    cluster.wait_fenced(follower)
    assert _delete_raw(cluster, leader, topic, 40, timeout_ms=5_000) == (ErrorCode.none, 40)
    cluster.resume(follower)
    check_every_replica(cluster, topic, 40)


def test_cli_delete_records(cluster: Cluster, tmp_path: Path) -> None:
    cluster.create_topic("purge-cli", partitions=2, configs=TINY_SEGMENTS)
    for partition in (0, 1):
        fill(cluster, "purge-cli", partition)
    bootstrap = ("-b", cluster.bootstrap)

    done = run_cli("topic", "delete-records", "purge-cli", "-p", "0", "--before", "15",
                   *bootstrap, "-o", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [{"topic": "purge-cli", "partition": 0, "before": 15,
                                        "status": "deleted", "low_watermark": 15,
                                        "error": None}]
    plan = tmp_path / "offsets.json"
    plan.write_text(json.dumps({"partitions": [
        {"topic": "purge-cli", "partition": 0, "offset": 25},
        {"topic": "purge-cli", "partition": 1, "offset": -1}], "version": 1}))
    done = run_cli("topic", "delete-records", "--offsets-json", str(plan), *bootstrap,
                   "-o", "json")
    assert done.returncode == 0, done.stderr
    assert [(r["partition"], r["low_watermark"]) for r in json.loads(done.stdout)] == \
        [(0, 25), (1, 100)]
    assert earliest(cluster, "purge-cli", 1) == 100

    # Past the high watermark: a failed row and status 1; unknown partitions only: 4.
    beyond = run_cli("topic", "delete-records", "purge-cli", "-p", "0", "--before", "1000",
                     *bootstrap)
    assert beyond.returncode == 1 and "OFFSET_OUT_OF_RANGE" in beyond.stdout
    missing = run_cli("topic", "delete-records", "purge-cli", "-p", "9", "--before", "1",
                      *bootstrap)
    assert missing.returncode == 4 and "UNKNOWN_TOPIC_OR_PARTITION" in missing.stdout
    # Usage errors (status 2) before anything is sent.
    plan.write_text(json.dumps({"partitions": [
        {"topic": "purge-cli", "partition": 0, "offset": 30},
        {"topic": "purge-cli", "partition": 0, "offset": 31}]}))
    for args in (("--offsets-json", str(plan)), ("purge-cli", "--before", "3"),
                 ("purge-cli", "-p", "0"), ("purge-cli", "-p", "0", "--before", "-5"),
                 ("purge-cli", "--offsets-json", str(plan))):
        refused = run_cli("topic", "delete-records", *args, *bootstrap)
        assert refused.returncode == 2, (args, refused.stdout, refused.stderr)
    assert earliest(cluster, "purge-cli", 0) == 25
