"""Consumer against a real broker: assignment, positions, resets, prefetch, pause."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from slog.client import Consumer, ConsumerRecord, KafkaError, Producer, TopicPartition
from slog.client.errors import OffsetOutOfRangeError


def produce(bootstrap: str, topic: str, count: int, *, partition: int | None = 0,
            start: int = 0, **settings: object) -> None:
    with Producer(bootstrap, **settings) as producer:  # type: ignore[arg-type]
        for i in range(start, start + count):
            producer.send(topic, b"%d" % i, partition=partition)


def consume(consumer: Consumer, count: int, timeout_ms: float = 5000) -> list[bytes | None]:
    values: list[bytes | None] = []
    while len(values) < count:
        records = consumer.poll(timeout_ms)
        assert records, f"only {len(values)} of {count} records arrived"
        values += [r.value for r in records]
    return values


def test_assign_poll_and_position(bootstrap: str, make_topic: Callable[..., str]) -> None:
    topic = make_topic()
    produce(bootstrap, topic, 100)
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap, auto_offset_reset="earliest", max_poll_records=30) as consumer:
        consumer.assign([tp])
        assert consumer.assignment() == {tp}
        assert consumer.position(tp) == 0
        first = consumer.poll(5000)
        assert [r.offset for r in first] == list(range(30))  # max_poll_records
        assert consumer.position(tp) == 30
        assert first[0].topic == topic and first[0].partition == 0
        assert consume(consumer, 70) == [b"%d" % i for i in range(30, 100)]
        assert consumer.position(tp) == 100
        assert consumer.highwater(tp) == 100
        assert consumer.poll(50) == []


def test_seek_and_seek_to_beginning_and_end(bootstrap: str,
                                            make_topic: Callable[..., str]) -> None:
    topic = make_topic()
    produce(bootstrap, topic, 50, batch_size=200)  # many small batches
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 37)  # inside a batch: earlier records are skipped
        assert consumer.poll(5000, max_records=3)[0].offset == 37
        consumer.seek_to_end([tp])
        assert consumer.position(tp) == 50
        assert consumer.poll(100) == []
        produce(bootstrap, topic, 1, start=50)
        assert [r.value for r in consumer.poll(5000)] == [b"50"]
        consumer.seek_to_beginning()
        assert consume(consumer, 51) == [b"%d" % i for i in range(51)]
        with pytest.raises(ValueError, match="not assigned"):
            consumer.seek(TopicPartition(topic, 9), 0)


def test_auto_offset_reset_latest_earliest_none(bootstrap: str,
                                                make_topic: Callable[..., str]) -> None:
    topic = make_topic()
    produce(bootstrap, topic, 10)
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap) as latest:  # Kafka's default: latest
        latest.assign([tp])
        assert latest.position(tp) == 10
        assert latest.poll(100) == []
    with Consumer(bootstrap, auto_offset_reset="earliest") as earliest:
        earliest.assign([tp])
        earliest.seek(tp, 1_000)  # past the end: OFFSET_OUT_OF_RANGE resets to earliest
        assert consume(earliest, 10) == [b"%d" % i for i in range(10)]
    with Consumer(bootstrap, auto_offset_reset="none") as strict:
        strict.assign([tp])
        with pytest.raises(KafkaError):
            strict.poll(100)
        strict.seek(tp, 1_000)
        with pytest.raises(OffsetOutOfRangeError):
            for _ in range(50):
                strict.poll(100)


def test_committed_offsets_hook_gives_positions(bootstrap: str,
                                                make_topic: Callable[..., str]) -> None:
    topic = make_topic(partitions=2)
    produce(bootstrap, topic, 10, partition=0)
    produce(bootstrap, topic, 10, partition=1)
    asked: list[list[TopicPartition]] = []

    def committed(tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        asked.append(sorted(tps))
        return {TopicPartition(topic, 0): 7}  # partition 1 has no committed offset

    with Consumer(bootstrap, auto_offset_reset="earliest",
                  committed_offsets=committed) as consumer:
        consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        assert consumer.position(TopicPartition(topic, 0)) == 7
        assert consumer.position(TopicPartition(topic, 1)) == 0
    assert asked == [[TopicPartition(topic, 0), TopicPartition(topic, 1)]]


def test_multiple_partitions_and_large_volumes(bootstrap: str,
                                               make_topic: Callable[..., str]) -> None:
    topic = make_topic(partitions=3)
    with Producer(bootstrap, batch_size=16_384, compression="lz4") as producer:
        for i in range(30_000):
            producer.send(topic, b"%d" % i, key=b"%d" % (i % 97))
    tps = [TopicPartition(topic, p) for p in range(3)]
    with Consumer(bootstrap, auto_offset_reset="earliest",
                  max_partition_fetch_bytes=64 * 1024) as consumer:
        consumer.assign(tps)
        records: list[ConsumerRecord] = []
        while len(records) < 30_000:
            got = consumer.poll(5000)
            assert got
            records += got
    assert sorted(int(r.value) for r in records) == list(range(30_000))  # type: ignore[arg-type]
    for tp in tps:
        offsets = [r.offset for r in records if r.partition == tp.partition]
        assert offsets == list(range(len(offsets))) and offsets  # in order, none skipped
        values = [int(r.value) for r in records if r.partition == tp.partition]  # type: ignore[arg-type]
        assert values == sorted(values)


def test_fetch_smaller_than_a_batch_still_progresses(bootstrap: str,
                                                     make_topic: Callable[..., str]) -> None:
    topic = make_topic()
    with Producer(bootstrap, linger_ms=100) as producer:
        for i in range(2000):
            producer.send(topic, b"%05d" % i + b"." * 200)  # one ~400 KB batch
    with Consumer(bootstrap, auto_offset_reset="earliest",
                  max_partition_fetch_bytes=1024, fetch_max_bytes=1024) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        values = consume(consumer, 2000)
    assert [v[:5] for v in values] == [b"%05d" % i for i in range(2000)]  # type: ignore[index]


def test_pause_resume_and_iteration(bootstrap: str, make_topic: Callable[..., str]) -> None:
    topic = make_topic(partitions=2)
    produce(bootstrap, topic, 5, partition=0)
    produce(bootstrap, topic, 5, partition=1)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with Consumer(bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=300) as consumer:
        consumer.assign([tp0, tp1])
        consumer.pause([tp1])
        assert consumer.paused() == {tp1}
        assert {r.partition for r in consumer} == {0}  # iteration ends after 300 ms idle
        consumer.resume([tp1])
        assert [r.value for r in consumer] == [b"%d" % i for i in range(5)]
        assert consumer.position(tp1) == 5


def test_reassign_drops_old_partitions(bootstrap: str, make_topic: Callable[..., str]) -> None:
    topic = make_topic(partitions=2)
    produce(bootstrap, topic, 3, partition=0)
    produce(bootstrap, topic, 3, partition=1, start=100)
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        assert consume(consumer, 3) == [b"0", b"1", b"2"]
        consumer.assign([(topic, 1)])
        assert consume(consumer, 3) == [b"100", b"101", b"102"]
        assert consumer.poll(100) == []


def test_unknown_topic_and_closed_consumer(bootstrap: str) -> None:
    consumer = Consumer(bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=50)
    consumer.assign([TopicPartition("client-no-such-topic", 0)])
    assert consumer.poll(300) == []  # retriable: keeps waiting for the topic
    consumer.close()
    with pytest.raises(RuntimeError):
        consumer.poll(0)
