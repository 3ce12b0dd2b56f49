"""The transactional workload: a read-process-write pipeline between two topics (Kafka's
exactly-once pattern) and a read_committed verifier on its output.

Each pipeline member is a consumer in a group (read_committed, no auto-commit) paired with a
transactional producer. Per polled batch: begin, send one result per input record, send the
consumed offsets to the transaction, commit. On any error: abort and rewind to the group's
committed offsets; when even the abort fails, start over with a new consumer and producer
(init_transactions fences the old epoch and aborts what it left open). A share of the
transactions is aborted on purpose after its records were sent, so that there are aborted
records for readers to wrongly see even when faults abort nothing.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable
from typing import Any

from slog.chaos.history import Read
from slog.chaos.txn_history import ABORTED, COMMITTED, UNKNOWN, TxnLog, output_value
from slog.chaos.worker import PollingReader, Worker, record_text
from slog.chaos.workload import end_offsets
from slog.client import Consumer, Producer, TopicPartition
from slog.client.types import ConsumerRecord
from slog.core.errors import SlogError

MAX_BATCH = 200  # input records per transaction
ABORT_SHARE = 0.1  # transactions aborted on purpose, so aborted records are there to misread
TRANSACTION_TIMEOUT_MS = 15_000  # the coordinator aborts what a dead member left open


class _AbortOnPurpose(SlogError):
    """The workload's own reason to abort a transaction."""


class TxnPipeline(Worker):
    """One member of the pipeline group, with transactional id ``txn-<name>``."""

    def __init__(self, name: str, bootstrap: str, input_topic: str, output_topic: str,
                 group: str, log: TxnLog, on_error: Callable[[str], None] = lambda line: None):
        super().__init__("pipeline", name, bootstrap, input_topic, log.base, on_error)
        self.prefix = name
        self.output_topic = output_topic
        self.group = group
        self.txn_log = log
        self.transactions = 0
        self.restarts = 0
        self._dice = random.Random(name)

    @property
    def transactional_id(self) -> str:
        return f"txn-{self.prefix}"

    def run(self) -> None:
        while not self.stopping:
            consumer = Consumer(
                self.bootstrap, group_id=self.group, isolation_level="read_committed",
                enable_auto_commit=False, auto_offset_reset="earliest",
                session_timeout_ms=10_000, heartbeat_interval_ms=1_000, retry_backoff_ms=50,
                request_timeout_ms=10_000, client_id=f"chaos-{self.prefix}")
            producer = Producer(
                self.bootstrap, transactional_id=self.transactional_id, acks="all",
                transaction_timeout_ms=TRANSACTION_TIMEOUT_MS, request_timeout_ms=5_000,
                retry_backoff_ms=50, linger_ms=5, client_id=f"chaos-{self.prefix}")
            try:
                producer.init_transactions()
                consumer.subscribe([self.topic])
                while not self.stopping:
                    records = consumer.poll(200, max_records=MAX_BATCH)
                    if records:
                        self._transaction(consumer, producer, records)
            except Exception as exc:  # start over: new member, new epoch
                self.restarts += 1
                self.on_error(f"{self.prefix}: pipeline failed ({type(exc).__name__}: {exc}); "
                              "starting over")
                time.sleep(0.5)
            finally:
                for client in (producer, consumer):
                    with contextlib.suppress(Exception):
                        client.close()

    def _transaction(self, consumer: Consumer, producer: Producer,
                     records: list[ConsumerRecord]) -> None:
        name = f"{self.prefix}-{self.transactions}"
        self.transactions += 1
        values = [output_value(record_text(r.value), name) for r in records]
        self.txn_log.wrote(name, values)  # before sending: whatever lands is accounted for
        producer.begin_transaction()
        try:
            offsets: dict[TopicPartition, int] = {}
            for record, value in zip(records, values, strict=True):
                producer.send(self.output_topic, value.encode(), partition=record.partition)
                offsets[TopicPartition(record.topic, record.partition)] = record.offset + 1
            producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
            if self._dice.random() < ABORT_SHARE:
                raise _AbortOnPurpose(f"{name} aborted on purpose")
            producer.commit_transaction()
        except Exception as exc:
            self._abort(consumer, producer, name, exc)
            return
        self.txn_log.ended(name, COMMITTED)

    def _abort(self, consumer: Consumer, producer: Producer, name: str,
               cause: Exception) -> None:
        """Abort the transaction and rewind to the committed offsets; raises (after logging
        the outcome as unknown) when the abort itself fails."""
        try:
            producer.abort_transaction()
        except Exception as exc:
            self.txn_log.ended(name, UNKNOWN, f"{cause}; abort: {exc}")
            raise
        self.txn_log.ended(name, ABORTED, str(cause))
        if not isinstance(cause, _AbortOnPurpose):
            self.on_error(f"{self.prefix}: {name} aborted ({type(cause).__name__}: {cause})")
        assigned = list(consumer.assignment())
        committed = consumer.committed(assigned)
        for tp in assigned:
            found = committed.get(tp)
            if found is None:
                consumer.seek_to_beginning([tp])
            else:
                consumer.seek(tp, found.offset)


class CommittedVerifier(PollingReader):
    """A read_committed reader of every output partition (no group), logging each record."""

    def __init__(self, name: str, bootstrap: str, topic: str, partitions: int, log: TxnLog,
                 on_error: Callable[[str], None] = lambda line: None):
        super().__init__("verifier", name, bootstrap, topic, log.base, on_error)
        self.partitions = partitions

    def open_consumer(self) -> Consumer:
        return _committed_reader(self.bootstrap, f"chaos-{self.reader}")

    def start_reading(self, consumer: Consumer) -> None:
        consumer.assign([TopicPartition(self.topic, p) for p in range(self.partitions)])

    def handle(self, consumer: Consumer, records: list[ConsumerRecord]) -> None:
        self.log.add_all(Read(self.reader, r.partition, r.offset, record_text(r.value))
                         for r in records)


def _committed_reader(bootstrap: str, client_id: str, **options: Any) -> Consumer:
    return Consumer(bootstrap, isolation_level="read_committed", auto_offset_reset="earliest",
                    retry_backoff_ms=50, request_timeout_ms=10_000, client_id=client_id,
                    **options)


def wait_processed(bootstrap: str, topic: str, partitions: int, group: str,
                   timeout_s: float) -> tuple[dict[int, int], dict[int, int]]:
    """Wait until the group's committed offsets reach the input's high watermarks; returns
    (watermarks, committed) as last seen."""
    ends = end_offsets(bootstrap, topic, partitions)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    done: dict[int, int] = {}
    deadline = time.monotonic() + timeout_s
    with Consumer(bootstrap, group_id=group, enable_auto_commit=False,
                  request_timeout_ms=10_000, client_id="chaos-progress") as watcher:
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):  # the coordinator may be moving
                found = watcher.committed(tps)
                done = {tp.partition: (o.offset if o else 0) for tp, o in found.items()}
                if all(done.get(p, 0) >= ends[p] for p in range(partitions)):
                    break
            time.sleep(0.5)
    return ends, done

