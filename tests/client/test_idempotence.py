"""Idempotent producer: sequence numbers, and retries that neither lose nor duplicate."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

from slog.client import Admin, Producer, TopicPartition
from slog.client.connection import BrokerConnection
from slog.core.records import iter_decoded_batches
from slog.protocol.apis import ApiKey
from tests.brokers import running_broker
from tests.client.conftest import read_all


def raw_batches(bootstrap: str, topic: str) -> list:
    host, port = bootstrap.rsplit(":", 1)
    with BrokerConnection(host, int(port)) as conn:
        response = conn.request(ApiKey.FETCH, {
            "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 50 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 50 << 20,
                 "current_leader_epoch": -1, "log_start_offset": -1}]}]})
    return [header for _, header, _ in iter_decoded_batches(response.responses[0]
                                                               .partitions[0].records)]


def assert_exactly_once(bootstrap: str, topic: str, count: int) -> None:
    values = [r.value for r in read_all(bootstrap, topic, timeout_s=30)]
    assert len(values) == len(set(values)), "duplicates in the log"
    assert values == [b"%d" % i for i in range(count)], "lost or reordered records"


def test_batches_carry_producer_id_and_contiguous_sequences(
        bootstrap: str, make_topic: Callable[..., str]) -> None:
    topic = make_topic()
    with Producer(bootstrap, batch_size=300, linger_ms=0) as producer:
        for i in range(200):
            producer.send(topic, b"%d" % i)
        producer.flush(10)
        producer_id, epoch = producer.producer_id
    assert producer_id >= 0 and epoch >= 0
    headers = raw_batches(bootstrap, topic)
    assert len(headers) > 5
    expected_sequence = 0
    for header in headers:
        assert (header.producer_id, header.producer_epoch) == (producer_id, epoch)
        assert header.base_sequence == expected_sequence
        expected_sequence += header.record_count
    assert expected_sequence == 200
    assert_exactly_once(bootstrap, topic, 200)


def test_connections_cut_mid_flight_neither_lose_nor_duplicate(
        bootstrap: str, make_topic: Callable[..., str]) -> None:
    topic = make_topic()
    count = 20_000
    stop = threading.Event()
    cuts = 0

    def cutter(producer: Producer) -> None:
        nonlocal cuts
        while not stop.wait(0.01):
            for conn in producer.cluster.pooled().values():
                sock = conn._sock
                if sock is not None and conn.in_flight:
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
                        cuts += 1

    with Producer(bootstrap, batch_size=4_096, linger_ms=1, retry_backoff_ms=10) as producer:
        thread = threading.Thread(target=cutter, args=(producer,))
        thread.start()
        try:
            futures = [producer.send(topic, b"%d" % i) for i in range(count)]
            producer.flush(60)
        finally:
            stop.set()
            thread.join()
        offsets = [f.result(0).offset for f in futures]
    assert cuts > 0
    # Retried batches that had landed come back as duplicates with their first offset.
    assert offsets == list(range(count)) or offsets.count(-1) + len(set(offsets)) >= count
    assert_exactly_once(bootstrap, topic, count)


def test_broker_killed_and_restarted_mid_stream_acks_all(tmp_path: Path) -> None:
    count = 6_000
    with running_broker(tmp_path / "data") as broker:
        topic = "restart-me"
        with Producer(broker.bootstrap, batch_size=4_096, linger_ms=1, retry_backoff_ms=20,
                      request_timeout_ms=5_000) as producer:
            futures = [producer.send(topic, b"%d" % i) for i in range(count // 2)]
            time.sleep(0.05)  # some batches in flight, some acknowledged
            broker.kill()
            futures += [producer.send(topic, b"%d" % i) for i in range(count // 2, count)]
            time.sleep(0.3)
            broker.start()
            producer.flush(60)
            assert all(f.exception(0) is None for f in futures)
        assert_exactly_once(broker.bootstrap, topic, count)
        with Admin(broker.bootstrap) as admin:
            tp = TopicPartition(topic, 0)
            assert admin.list_offsets({tp: "latest"})[tp].offset == count


def test_backlog_of_an_outage_goes_out_in_full_batches(tmp_path: Path) -> None:
    """Records sent while the leader is down keep filling one open batch (Kafka's
    accumulator does the same): without that, each linger sealed a batch of a record or
    two, and after the outage thousands of them went out one round trip each, so a
    backlog outgrew what the partition could take and expired at delivery_timeout_ms."""
    count = 2_000
    with running_broker(tmp_path / "data") as broker:
        topic = "backlog"
        with Producer(broker.bootstrap, linger_ms=1, retry_backoff_ms=20,
                      request_timeout_ms=5_000) as producer:
            producer.send(topic, b"0").result(30)
            broker.kill()
            futures = []
            for i in range(1, count):
                futures.append(producer.send(topic, b"%d" % i))
                time.sleep(0.0005)  # a few records per linger: tiny batches if sealed
            broker.start()
            producer.flush(60)
            assert all(f.exception(0) is None for f in futures)
        assert_exactly_once(broker.bootstrap, topic, count)
        assert len(raw_batches(broker.bootstrap, topic)) < 20


def test_batches_that_expired_unsent_leave_no_sequence_gap(tmp_path: Path) -> None:
    """Batches that expired while the leader was down took sequence numbers; the ones
    after them take those numbers over, instead of arriving after a gap and failing with
    OUT_OF_ORDER_SEQUENCE_NUMBER (or, while the partition retried, being retried until
    they expired as well)."""
    with running_broker(tmp_path / "data") as broker:
        topic = "expire-me"
        with Producer(broker.bootstrap, linger_ms=1, retry_backoff_ms=20,
                      request_timeout_ms=1_000, delivery_timeout_ms=2_000) as producer:
            producer.send(topic, b"before").result(30)
            broker.kill()
            lost = [producer.send(topic, b"expired-%d" % i) for i in range(50)]
            time.sleep(3)  # past delivery_timeout_ms: they fail, never sent
            assert all(f.exception(0) is not None for f in lost)
            broker.start()
            after = [producer.send(topic, b"after-%d" % i) for i in range(50)]
            producer.flush(30)
            assert [f.exception(0) for f in after] == [None] * 50
        values = [r.value for r in read_all(broker.bootstrap, topic, timeout_s=30)]
        assert values == [b"before"] + [b"after-%d" % i for i in range(50)]
