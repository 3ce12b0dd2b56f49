"""__consumer_offsets: groups and offsets survive restarts and crashes; compaction."""

from __future__ import annotations

import time
from pathlib import Path

from slog.client import Consumer, ConsumerRecord, GroupAdmin, TopicPartition
from slog.client.cluster import ClusterClient
from slog.groups.placement import partition_for
from tests.brokers import running_broker
from tests.groups.helpers import (
    GROUP_BROKER,
    group_consumer,
    make_topic,
    poll_all,
    produce,
    unique,
    wait_for,
)

STORAGE = {**GROUP_BROKER, "offsets.topic.num.partitions": "3",
           "offsets.topic.segment.bytes": "2048", "log.cleaner.backoff.ms": "100"}


def read_partition(bootstrap: str, topic: str, partition: int) -> list[ConsumerRecord]:
    tp = TopicPartition(topic, partition)
    with Consumer(bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=50) as consumer:
        consumer.assign([tp])
        end = consumer.cluster.refresh_metadata([topic]) and _end(consumer, tp)
        out: list[ConsumerRecord] = []
        wait_for(lambda: consumer.position(tp) >= end,
                 step=lambda: out.extend(consumer.poll(50)), what=f"the end of {tp}")
        return out


def _end(consumer: Consumer, tp: TopicPartition) -> int:
    from slog.client.offsets import list_offsets

    return list_offsets(consumer.cluster, {tp: "latest"})[tp].offset  # type: ignore[union-attr]


def committed(bootstrap: str, group: str) -> dict[TopicPartition, int]:
    with ClusterClient(bootstrap) as cluster:
        found = GroupAdmin(cluster).list_offsets([group])[group]
    return {tp: v.offset for tp, v in found.items() if v is not None}


def test_groups_and_offsets_survive_a_restart_and_a_crash(tmp_path: Path) -> None:
    with running_broker(tmp_path / "data", **STORAGE) as broker:
        topic = make_topic(broker.bootstrap, 2)
        produce(broker.bootstrap, topic, [(None, b"v%d" % i, i % 2) for i in range(20)])
        group = unique("restart")
        # A session long enough to outlive the restarts: the member must be kept.
        consumer = group_consumer(broker.bootstrap, group, session_timeout_ms=20_000)
        got: dict[int, list[ConsumerRecord]] = {}
        try:
            consumer.subscribe([topic])
            wait_for(lambda: len(got.get(0, [])) == 20, step=lambda: poll_all([consumer], got),
                     what="the first 20 records")
            consumer.commit()
            expected = {TopicPartition(topic, 0): 10, TopicPartition(topic, 1): 10}
            assert committed(broker.bootstrap, group) == expected
            member = consumer.group_metadata()
            for restart in (broker.stop, broker.kill):
                restart()
                broker.start()
                # The new coordinator loaded the group and its offsets from the log...
                assert committed(broker.bootstrap, group) == expected
                with ClusterClient(broker.bootstrap) as cluster:
                    described = GroupAdmin(cluster).describe_groups([group])[group]
                assert described.state == "Stable"
                assert [m.member_id for m in described.members] == [member.member_id]
                # ...and the member carries on in its generation, without a rebalance.
                produce(broker.bootstrap, topic, [(None, b"more", 0)])
                wanted = len(got[0]) + 1
                wait_for(lambda n=wanted: len(got[0]) == n,  # type: ignore[misc]
                         step=lambda: poll_all([consumer], got), what="a record after restart")
                assert consumer.group_metadata() == member
                consumer.commit()
                expected[TopicPartition(topic, 0)] += 1
        finally:
            consumer.close()


def test_the_offsets_topic_is_compacted(tmp_path: Path) -> None:
    with running_broker(tmp_path / "data", **STORAGE) as broker:
        topic = make_topic(broker.bootstrap, 2)
        group = unique("compact")
        home = partition_for(group, 3)
        tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        with group_consumer(broker.bootstrap, group) as consumer:
            consumer.assign(tps)
            for i in range(150):
                consumer.commit({tps[0]: i, tps[1]: 1000 + i})
        written = 150
        wait_for(lambda: len(read_partition(broker.bootstrap, "__consumer_offsets", home))
                 < written // 2, timeout_s=20, what="the cleaner")
        assert committed(broker.bootstrap, group) == {tps[0]: 149, tps[1]: 1149}
        broker.stop()
        broker.start()
        assert committed(broker.bootstrap, group) == {tps[0]: 149, tps[1]: 1149}


def test_compacted_topics_keep_the_latest_value_of_each_key(tmp_path: Path) -> None:
    with running_broker(tmp_path / "data", **STORAGE) as broker:
        topic = make_topic(broker.bootstrap, 1, **{"cleanup.policy": "compact",
                                                   "segment.bytes": "1024"})
        for round_ in range(20):
            produce(broker.bootstrap, topic, [(b"key%d" % k, b"%d-%d" % (k, round_), 0)
                                              for k in range(10)])
        produce(broker.bootstrap, topic, [(b"key0", None, 0)])  # a tombstone
        deadline = time.monotonic() + 20
        while True:
            records = read_partition(broker.bootstrap, topic, 0)
            if len(records) < 100 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert len(records) < 100, "nothing was compacted"
        latest = {}
        for record in records:
            latest[record.key] = record.value
        assert latest == {b"key0": None, **{b"key%d" % k: b"%d-19" % k for k in range(1, 10)}}
        offsets = [r.offset for r in records]
        assert offsets == sorted(offsets) and offsets[-1] == 200  # offsets are kept
