"""The verifiable producer and consumer, on slog's own client (Kafka's VerifiableProducer /
VerifiableConsumer idea): unique values, every acknowledgement and every record read logged."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from slog.chaos.history import Ack, Assignment, HistoryLog, Read
from slog.chaos.worker import PollingReader, Worker, record_text
from slog.client import Admin, Consumer, KafkaError, Producer, RecordMetadata, TopicPartition
from slog.client.types import ConsumerRecord

MAX_OUTSTANDING = 20_000  # records sent but not yet acknowledged or failed


class VerifiableProducer(Worker):
    """Sends ``<run>-<producer>-<seq>`` round-robin over the partitions, acks=all with
    idempotence, at up to ``rate`` records/s (0: as fast as acknowledgements allow)."""

    def __init__(self, name: str, bootstrap: str, topic: str, partitions: int, log: HistoryLog,
                 *, rate: float = 0, retries: int = 2_147_483_647,
                 delivery_timeout_ms: int = 120_000, idempotent: bool = True,
                 on_error: Callable[[str], None] = lambda line: None):
        super().__init__("producer", name, bootstrap, topic, log, on_error)
        self.prefix = name
        self.partitions = partitions
        self.rate = rate
        self.options: dict[str, Any] = dict(
            acks="all", enable_idempotence=idempotent, retries=retries,
            delivery_timeout_ms=delivery_timeout_ms, request_timeout_ms=5_000,
            retry_backoff_ms=50, linger_ms=5)
        self.sent = 0
        self.failed = 0
        self.restarts = 0  # new producers after a fatal error (a new producer id)
        self._outstanding = threading.Semaphore(MAX_OUTSTANDING)

    def _callback(self, value: str) -> Callable[[RecordMetadata | None, Exception | None], None]:
        def done(metadata: RecordMetadata | None, error: Exception | None) -> None:
            self._outstanding.release()
            if metadata is not None:
                self.log.add(Ack(value, metadata.partition, metadata.offset, time.time()))
            else:
                self.failed += 1
                self.log.failed_send()
                if self.failed <= 5 or self.failed % 1000 == 0:
                    self.on_error(f"{self.prefix}: send of {value} failed: {error}")
        return done

    def run(self) -> None:
        started = time.monotonic()
        while not self.stopping:
            producer = Producer(self.bootstrap, client_id=f"chaos-{self.prefix}", **self.options)
            try:
                self._send_until_stopped(producer, started)
                producer.flush()
            except KafkaError as exc:  # a fatal producer error: start over with a new id
                self.on_error(f"{self.prefix}: producer failed ({exc}); starting a new one")
                self.restarts += 1
            finally:
                producer.close()

    def _send_until_stopped(self, producer: Producer, started: float) -> None:
        while not self.stopping:
            if self.rate and self.sent > self.rate * (time.monotonic() - started):
                time.sleep(0.005)
                continue
            if not self._outstanding.acquire(timeout=0.1):
                continue
            value = f"{self.prefix}-{self.sent}"
            try:
                producer.send(self.topic, value.encode(), partition=self.sent % self.partitions,
                              on_delivery=self._callback(value))
            except BaseException:
                self._outstanding.release()
                raise
            self.sent += 1


class _Tracker:
    """Logs a consumer's assignment whenever its generation or partitions change."""

    def __init__(self, name: str, log: HistoryLog):
        self.name = name
        self.log = log
        self.last: tuple[int, tuple[int, ...]] | None = None

    def update(self, consumer: Consumer) -> int:
        generation = consumer.group_metadata().generation_id
        partitions = tuple(sorted(tp.partition for tp in consumer.assignment()))
        if (generation, partitions) != self.last and generation >= 0:
            self.last = (generation, partitions)
            self.log.add(Assignment(self.name, generation, partitions))
        return generation


class VerifiableConsumer(PollingReader):
    """A group member that logs each record it polls and its assignment per generation."""

    def __init__(self, name: str, bootstrap: str, topic: str, group: str, log: HistoryLog,
                 on_error: Callable[[str], None] = lambda line: None):
        super().__init__("consumer", name, bootstrap, topic, log, on_error)
        self.group = group
        self._tracker = _Tracker(name, log)

    def open_consumer(self) -> Consumer:
        return Consumer(self.bootstrap, group_id=self.group, auto_offset_reset="earliest",
                        session_timeout_ms=10_000, heartbeat_interval_ms=1_000,
                        auto_commit_interval_ms=1_000, retry_backoff_ms=50,
                        request_timeout_ms=10_000, client_id=f"chaos-{self.reader}")

    def start_reading(self, consumer: Consumer) -> None:
        consumer.subscribe([self.topic])

    def handle(self, consumer: Consumer, records: list[ConsumerRecord]) -> None:
        generation = self._tracker.update(consumer)
        for record in records:
            self.log.add(Read(self.reader, record.partition, record.offset,
                              record_text(record.value), generation))


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    with Admin(bootstrap, request_timeout_ms=10_000) as admin:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        found = admin.list_offsets(dict.fromkeys(tps, "latest"))
        return {tp.partition: found[tp].offset for tp in tps}


def committed_offsets(bootstrap: str, topic: str, group: str) -> dict[int, int]:
    """The group's committed offset of each partition of ``topic`` that has one."""
    from slog.client.cluster import ClusterClient
    from slog.client.group_admin import GroupAdmin

    with ClusterClient(bootstrap, client_id="chaos-offsets") as cluster:
        found = GroupAdmin(cluster).list_offsets([group]).get(group, {})
    return {tp.partition: value.offset for tp, value in found.items()
            if tp.topic == topic and value is not None}


def final_read(bootstrap: str, topic: str, partitions: int, log: HistoryLog,
               timeout_s: float = 120.0,
               isolation_level: str = "read_uncommitted") -> dict[int, int]:
    """Read every partition from offset 0 to its high watermark; returns the watermarks.
    (read_committed gets there only once no transaction is open below the watermark.)"""
    ends = end_offsets(bootstrap, topic, partitions)
    consumer = Consumer(bootstrap, auto_offset_reset="earliest", client_id="chaos-final",
                        retry_backoff_ms=50, isolation_level=isolation_level)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < ends[tp.partition] for tp in tps):
            if time.monotonic() > deadline:
                raise TimeoutError("the final read did not reach the high watermarks")
            for record in consumer.poll(200):
                if record.offset < ends[record.partition]:
                    log.add(Read("final", record.partition, record.offset,
                                 record_text(record.value)))
    finally:
        consumer.close()
    return ends
