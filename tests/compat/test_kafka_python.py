"""kafka-python 3.x, with its default (idempotent, acks=all) producer, against slog."""

from __future__ import annotations

import pytest
from kafka import KafkaProducer

from tests.brokers import BrokerProcess
from tests.compat.clients import (
    RECENT_MS,
    Rec,
    create_topic,
    kafka_python_consume,
    kafka_python_consume_partitions,
    kafka_python_produce,
)


def test_defaults_are_idempotent_acks_all(shared_broker: BrokerProcess) -> None:
    producer = KafkaProducer(bootstrap_servers=shared_broker.bootstrap)
    try:
        assert producer.config["enable_idempotence"] is True
        assert producer.config["acks"] in (-1, "all")
        future = producer.send("kp-defaults", key=b"k", value=b"v")
        producer.flush(10)
        metadata = future.get(10)
        assert (metadata.topic, metadata.partition, metadata.offset) == ("kp-defaults", 0, 0)
    finally:
        producer.close(10)


def test_send_flush_then_assign_and_read_back(shared_broker: BrokerProcess) -> None:
    topic = "kp-roundtrip"
    create_topic(shared_broker.bootstrap, topic, partitions=3)
    producer = KafkaProducer(bootstrap_servers=shared_broker.bootstrap, linger_ms=5)
    try:
        futures = {i: producer.send(topic, key=b"key-%d" % (i % 9), value=b"value %d" % i,
                                    headers=[("n", b"%d" % i)]) for i in range(300)}
        producer.flush(10)
        placed = {i: f.get(10) for i, f in futures.items()}
    finally:
        producer.close(10)
    assert {m.partition for m in placed.values()} == {0, 1, 2}

    consumed = kafka_python_consume_partitions(shared_broker.bootstrap, topic, [0, 1, 2])
    got = {(c.partition, c.offset): (c.key, c.value, list(c.headers)) for c in consumed}
    assert len(consumed) == len(got) == 300
    assert got == {(m.partition, m.offset): (b"key-%d" % (i % 9), b"value %d" % i,
                                             [("n", b"%d" % i)])
                   for i, m in placed.items()}
    for partition in range(3):  # offsets are dense per partition
        offsets = sorted(o for p, o in got if p == partition)
        assert offsets == list(range(len(offsets)))


@pytest.mark.parametrize("compression", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_round_trip(shared_broker: BrokerProcess, compression: str) -> None:
    topic = f"kp-{compression}"
    records = [Rec(b"k%d" % i, b"compressible " * 50 + b"%d" % i, (), RECENT_MS + i)
               for i in range(50)]
    offsets = kafka_python_produce(shared_broker.bootstrap, topic, records,
                                   compression=compression)
    assert offsets == list(range(50))
    got = kafka_python_consume(shared_broker.bootstrap, topic)
    assert [c.as_rec() for c in got] == records

