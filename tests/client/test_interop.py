"""slog's client against independent implementations: kcat and confluent-kafka (librdkafka)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from slog.client import Consumer, ConsumerRecord, Producer, TopicPartition
from tests.compat.clients import Rec, confluent_consume, confluent_produce, kcat_consume, now_ms

RECORDS = [
    Rec(b"k1", b"plain"),
    Rec(None, b"no key"),
    Rec(b"tomb", None),
    Rec(b"k2", b"with headers", (("h1", b"v1"), ("h2", b""))),
    Rec(b"k3", b"stamped", (), 1_650_000_000_000),
    Rec(b"big", b"x" * 50_000),
]


def slog_send(bootstrap: str, topic: str, records: list[Rec], compression: str) -> None:
    with Producer(bootstrap, compression=compression) as producer:
        futures = [producer.send(topic, r.value, key=r.key, headers=r.headers,
                                 timestamp_ms=r.timestamp, partition=0) for r in records]
    assert [f.result(0).offset for f in futures] == list(range(len(records)))


def expected(records: list[Rec], got_timestamps: list[int]) -> list[Rec]:
    return [Rec(r.key, r.value, r.headers, r.timestamp if r.timestamp is not None else ts)
            for r, ts in zip(records, got_timestamps, strict=True)]


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_slog_producer_read_by_confluent_and_kcat(bootstrap: str, make_topic: Callable[..., str],
                                                  compression: str) -> None:
    topic = make_topic()
    before = now_ms()
    slog_send(bootstrap, topic, RECORDS, compression)
    for reader in (confluent_consume, kcat_consume):
        got = reader(bootstrap, topic)
        assert [c.offset for c in got] == list(range(len(RECORDS)))
        assert all(c.create_time for c in got)
        assert all(before - 1000 <= c.timestamp <= now_ms() or c.timestamp == r.timestamp
                   for c, r in zip(got, RECORDS, strict=True))
        if reader is kcat_consume:  # kcat's JSON shows null and empty the same way
            assert [c.value for c in got] == [r.value for r in RECORDS]
            continue
        assert [c.as_rec() for c in got] == expected(RECORDS, [c.timestamp for c in got])


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_producer_read_by_slog_consumer(bootstrap: str,
                                                  make_topic: Callable[..., str],
                                                  compression: str) -> None:
    topic = make_topic()
    records = [*RECORDS, *(Rec(b"%d" % i, b"bulk %d" % i) for i in range(1000))]
    offsets = confluent_produce(bootstrap, topic, records, compression=compression)
    assert offsets == list(range(len(records)))
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        got: list[ConsumerRecord] = []
        while len(got) < len(records):
            batch = consumer.poll(5000)
            assert batch, f"only {len(got)} records"
            got += batch
    assert [r.offset for r in got] == list(range(len(records)))
    assert [Rec(r.key, r.value, r.headers, r.timestamp) for r in got] == \
        expected(records, [r.timestamp for r in got])
    assert all(r.timestamp_type == 0 for r in got)
