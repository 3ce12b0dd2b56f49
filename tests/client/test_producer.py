"""Producer against a real broker: acks, compression, record fields, delivery reports."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable

import pytest

from slog.client import Admin, KafkaError, ProduceError, Producer, RecordMetadata, TopicPartition
from slog.client.errors import KafkaTimeoutError
from tests.client.conftest import read_all


@pytest.mark.parametrize("acks", ["all", 1, 0])
def test_acks_levels_deliver_in_order(bootstrap: str, make_topic: Callable[..., str],
                                      acks: str | int) -> None:
    topic = make_topic()
    with Producer(bootstrap, acks=acks) as producer:
        futures = [producer.send(topic, f"v{i}".encode(), key=b"k") for i in range(50)]
        producer.flush(10)
        results = [f.result(0) for f in futures]
    assert producer.idempotent == (acks == "all")
    if acks == 0:
        assert {r.offset for r in results} == {-1}  # nobody told us
        # ... so nothing says when they are readable: the broker may still be appending
        # (or, with write.caching=false, syncing) them when read_all asks for the end.
        with Admin(bootstrap) as admin:
            tp = TopicPartition(topic, 0)
            deadline = time.monotonic() + 10
            while admin.list_offsets({tp: "latest"})[tp].offset < 50:
                assert time.monotonic() < deadline, "the acks=0 records never became readable"
                time.sleep(0.05)
    else:
        assert [r.offset for r in results] == list(range(50))
    assert all(isinstance(r, RecordMetadata) and r.topic == topic for r in results)
    assert [r.value for r in read_all(bootstrap, topic)] == [f"v{i}".encode() for i in range(50)]


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_compression_round_trips(bootstrap: str, make_topic: Callable[..., str],
                                       compression: str) -> None:
    topic = make_topic()
    values = [(b"record %d " % i) * (i % 7 + 1) for i in range(500)]
    with Producer(bootstrap, compression=compression, linger_ms=50) as producer:
        for value in values:
            producer.send(topic, value)
    assert [r.value for r in read_all(bootstrap, topic)] == values


def test_record_fields_survive(bootstrap: str, make_topic: Callable[..., str]) -> None:
    topic = make_topic()
    headers = [("trace", b"abc"), ("empty", b""), ("null", None), ("utf8-\u00e9", b"\xff")]
    with Producer(bootstrap) as producer:
        sent = [
            producer.send(topic, b"v", key=b"k", headers=headers, timestamp_ms=1_600_000_000_000),
            producer.send(topic, None, key=b"tombstone"),
            producer.send(topic, b"no key"),
            producer.send(topic, None),
            producer.send(topic, "text value", key="text key"),
            producer.send(topic, b"x" * 100_000),  # above the table-driven fast path
        ]
        metas = [f.result(10) for f in sent]
    got = read_all(bootstrap, topic)
    assert [(r.key, r.value) for r in got] == [
        (b"k", b"v"), (b"tombstone", None), (None, b"no key"), (None, None),
        (b"text key", b"text value"), (None, b"x" * 100_000)]
    assert got[0].headers == tuple(headers)
    assert got[0].timestamp == 1_600_000_000_000 == metas[0].timestamp
    assert all(r.timestamp_type == 0 for r in got)
    now = time.time() * 1000
    assert all(abs(m.timestamp - now) < 60_000 for m in metas[1:])
    assert [m.timestamp for m in metas] == [r.timestamp for r in got]


def test_keys_pick_partitions_by_murmur3(bootstrap: str, make_topic: Callable[..., str]) -> None:
    from slog.client.partitioner import key_partition

    topic = make_topic(partitions=4)
    keys = [f"user-{i}".encode() for i in range(40)]
    with Producer(bootstrap) as producer:
        metas = [producer.send(topic, b"v", key=k).result(10) for k in keys]
        assert producer.partitions_for(topic) == [0, 1, 2, 3]
    assert [m.partition for m in metas] == [key_partition(k, 4) for k in keys]
    by_partition = {(r.partition, r.key) for r in read_all(bootstrap, topic, partitions=4)}
    assert by_partition == {(key_partition(k, 4), k) for k in keys}


def test_null_keys_stick_to_a_partition_per_batch(bootstrap: str,
                                                  make_topic: Callable[..., str]) -> None:
    topic = make_topic(partitions=3)
    with Producer(bootstrap, batch_size=2_000, linger_ms=1000) as producer:
        metas = [producer.send(topic, b"x" * 100) for _ in range(300)]
        producer.flush(10)
        partitions = [f.result(0).partition for f in metas]
    runs = 1 + sum(a != b for a, b in itertools.pairwise(partitions))
    assert runs <= 300 // 15  # whole batches of ~18 records go to one partition
    assert len(set(partitions)) > 1


def test_explicit_partition_and_bad_partition(bootstrap: str,
                                              make_topic: Callable[..., str]) -> None:
    topic = make_topic(partitions=2)
    with Producer(bootstrap) as producer:
        assert producer.send(topic, b"a", partition=1).result(10).partition == 1
        with pytest.raises(ValueError, match="partition 5"):
            producer.send(topic, b"a", partition=5)
        with pytest.raises(TypeError):
            producer.send(topic, 12345)  # type: ignore[arg-type]
        assert producer.send(topic, b"after", partition=1).result(10).offset == 1


def test_delivery_callbacks(bootstrap: str, make_topic: Callable[..., str]) -> None:
    topic = make_topic()
    reports: list[tuple[RecordMetadata | None, KafkaError | None]] = []
    done = threading.Event()

    def on_delivery(meta: RecordMetadata | None, error: KafkaError | None) -> None:
        reports.append((meta, error))
        if len(reports) == 10:
            done.set()

    with Producer(bootstrap, acks=1) as producer:
        for i in range(10):
            producer.send(topic, b"%d" % i, on_delivery=on_delivery)
        producer.send(topic, b"bad callback", on_delivery=lambda m, e: 1 / 0)
    assert done.wait(10)
    assert [m.offset for m, e in reports if m] == list(range(10))
    assert all(e is None for _, e in reports)


def test_auto_created_topic_and_flush_close(bootstrap: str) -> None:
    producer = Producer(bootstrap, linger_ms=10_000)
    future = producer.send("client-auto-created", b"hello")
    assert not future.done()  # lingering
    producer.flush(10)
    assert future.result(0).offset == 0
    producer.close()
    producer.close()  # idempotent
    with pytest.raises(RuntimeError):
        producer.send("client-auto-created", b"late")


def test_too_large_record_fails_with_kafka_error(bootstrap: str,
                                                 make_topic: Callable[..., str]) -> None:
    topic = make_topic(**{"max.message.bytes": "2000"})
    with Producer(bootstrap) as producer:
        future = producer.send(topic, b"x" * 5000)
        with pytest.raises(ProduceError) as info:
            future.result(10)
        assert info.value.name == "MESSAGE_TOO_LARGE" and not info.value.retriable
        assert info.value.topic == topic and info.value.partition == 0
        assert producer.send(topic, b"small").result(10).offset == 0


def test_unreachable_cluster_times_out_clearly() -> None:
    from tests.brokers import free_port

    port = free_port()
    with Producer(f"127.0.0.1:{port}", max_block_ms=300) as producer, \
            pytest.raises(KafkaTimeoutError, match=f"no broker at 127.0.0.1:{port}"):
        producer.send("t", b"v")


def test_bad_settings_are_refused(bootstrap: str) -> None:
    with pytest.raises(ValueError, match="acks"):
        Producer(bootstrap, acks=2)
    with pytest.raises(ValueError, match="idempotence requires acks"):
        Producer(bootstrap, acks=1, enable_idempotence=True)
    with pytest.raises(ValueError, match="compression"):
        Producer(bootstrap, compression="brotli")
