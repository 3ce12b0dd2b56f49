"""``slog bench produce|consume|e2e``: built-in load tests, like kafka-*-perf-test and rpk.

Each runs slog's own client against the cluster and prints one result row:
records/s, MB/s (MiB, as Kafka's tools count) and latency percentiles.
Without ``--topic`` a temporary topic is created and deleted afterwards.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any

import typer

from slog.cli.common import (
    DEFAULT_BOOTSTRAP,
    EXIT_FAILURE,
    EXIT_USAGE,
    BootstrapOption,
    client_errors,
    fail,
)
from slog.cli.output import OutputFormat, OutputOption, emit

app = typer.Typer(help="Benchmark producing, consuming and end-to-end latency.",
                  no_args_is_help=True)

ACKS = {"0": 0, "1": 1, "all": -1, "-1": -1}
COLUMNS = ["mode", "topic", "records", "errors", "elapsed_s", "records_per_s", "mb_per_s",
           "latency_p50_ms", "latency_p95_ms", "latency_p99_ms", "latency_max_ms"]
PROGRESS_EVERY_S = 5.0
TIMESTAMP_BYTES = 8  # e2e values start with the send time in ns

TopicOption = Annotated[str | None, typer.Option(
    "--topic", "-t", help="Topic to use (created if missing); default: a temporary topic, "
                          "deleted afterwards.")]
RecordsOption = Annotated[int, typer.Option("--records", "-n", min=1,
                                            help="Records to send or read.")]
RecordSizeOption = Annotated[int, typer.Option("--record-size", "-s", min=0,
                                               help="Value size in bytes.")]
PartitionsOption = Annotated[int, typer.Option(
    "--partitions", "-p", min=1, help="Partitions of a topic the benchmark creates.")]
ReplicationOption = Annotated[int, typer.Option(
    "--replication-factor", "-r", help="Replicas of a topic the benchmark creates "
                                       "(default: min(3, brokers)).")]
AcksOption = Annotated[str, typer.Option(help="0, 1 or all.")]
CompressionOption = Annotated[str, typer.Option(help="none, gzip, snappy, lz4 or zstd.")]
BatchSizeOption = Annotated[int | None, typer.Option(
    "--batch-size", min=1, help="Producer batch size in bytes [default: the client's, 256 KiB].")]
LingerOption = Annotated[float, typer.Option("--linger-ms", min=0,
                                             help="Wait this long to fill batches.")]
TimeoutOption = Annotated[float, typer.Option(
    "--timeout", min=0.1, help="Give up after this many seconds without progress.")]


@dataclass
class ProducerSettings:
    acks: str
    compression: str
    batch_size: int | None
    linger_ms: float

    def check(self) -> None:
        from slog.core.compression import codec_from_name

        if self.acks not in ACKS:
            fail(f"--acks must be 0, 1 or all, not {self.acks!r}", code=EXIT_USAGE)
        try:
            codec_from_name(self.compression)
        except ValueError as exc:
            fail(str(exc), code=EXIT_USAGE)

    def producer(self, bootstrap: str) -> Any:
        from slog.client import Producer
        from slog.client.producer import DEFAULT_BATCH_SIZE

        batch_size = DEFAULT_BATCH_SIZE if self.batch_size is None else self.batch_size
        return Producer(bootstrap, acks=ACKS[self.acks], compression=self.compression,
                        linger_ms=self.linger_ms, client_id="slog-bench", batch_size=batch_size)


@dataclass
class Tally:
    """What a run did; latencies in seconds."""

    records: int = 0
    data_bytes: int = 0
    errors: int = 0
    first_error: str | None = None

    def __post_init__(self) -> None:
        self.latencies: list[float] = []
        self._lock = threading.Lock()

    def failed(self, error: Exception) -> None:
        with self._lock:
            self.errors += 1
            self.first_error = self.first_error or str(error)


# -- topic ---------------------------------------------------------------------------------

@contextmanager
def bench_topic(bootstrap: str, topic: str | None, partitions: int, replication: int
                ) -> Iterator[tuple[str, int]]:
    """(name, partition count) of ``topic``, created if missing; a temporary one if None."""
    from slog.client import Admin, NewTopic

    name = topic or f"slog-bench-{uuid.uuid4().hex[:8]}"
    with Admin(bootstrap, client_id="slog-bench") as admin:
        meta = admin.cluster.refresh_metadata([name])
        existing = meta.topics.get(name)
        if existing is not None and not existing.error_code:
            count = len(existing.partitions)
        else:
            admin.create_topics([NewTopic(name, partitions, replication)])
            count = partitions
            _wait_for_leaders(admin, name, count)
        try:
            yield name, count
        finally:
            if topic is None:
                admin.delete_topics([name])


def _wait_for_leaders(admin: Any, topic: str, partitions: int, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        entry = admin.cluster.refresh_metadata([topic]).topics.get(topic)
        if entry is not None and not entry.error_code and len(entry.partitions) == partitions \
                and all(p.leader >= 0 for p in entry.partitions.values()):
            return
        time.sleep(0.05)


# -- the three loads -----------------------------------------------------------------------

class _Progress:
    """A line on stderr every few seconds, only when stderr is a terminal."""

    def __init__(self, verb: str):
        self.verb = verb
        self.enabled = sys.stderr.isatty()
        self.started = self.last = time.monotonic()

    def tick(self, done: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.last >= PROGRESS_EVERY_S:
            self.last = now
            rate = done / max(now - self.started, 1e-9)
            print(f"{done:,} records {self.verb}, {rate:,.0f} records/s", file=sys.stderr)


def run_produce(producer: Any, topic: str, records: int, record_size: int, throughput: float,
                timestamped: bool = False) -> tuple[Tally, float]:
    """Send ``records`` values and wait for every acknowledgement; returns the tally and
    the seconds from the first send to the last acknowledgement."""
    from functools import partial

    from slog.cli.latency import Throttle

    tally = Tally()
    payload = os.urandom(record_size)
    clock = time.perf_counter

    def acked(sent_at: float, _metadata: object, error: Exception | None) -> None:
        if error is not None:
            tally.failed(error)
        else:
            tally.latencies.append(clock() - sent_at)

    throttle = Throttle(throughput, clock, time.sleep)
    progress = _Progress("sent")
    started = clock()
    send = producer.send
    for i in range(records):
        value = time.time_ns().to_bytes(TIMESTAMP_BYTES, "big") + payload[TIMESTAMP_BYTES:] \
            if timestamped else payload
        send(topic, value, on_delivery=partial(acked, clock()))
        throttle.wait(i + 1)
        if i & 1023 == 0:
            progress.tick(i)
    producer.flush()
    tally.records = records - tally.errors  # acknowledged
    tally.data_bytes = tally.records * record_size
    return tally, clock() - started


def run_consume(consumer: Any, records: int, idle_timeout_s: float,
                on_record: Any = None) -> tuple[Tally, float]:
    """Poll until ``records`` records arrived or nothing came for ``idle_timeout_s``."""
    tally = Tally()
    progress = _Progress("consumed")
    clock = time.perf_counter
    started = last_seen = clock()
    while tally.records < records:
        batch = consumer.poll(timeout_ms=200)
        now = clock()
        if not batch:
            if now - last_seen > idle_timeout_s:
                break
            continue
        last_seen = now
        for record in batch:
            tally.data_bytes += len(record.value or b"") + len(record.key or b"")
            if on_record is not None:
                on_record(record)
        tally.records += len(batch)
        progress.tick(tally.records)
    return tally, (last_seen if tally.records else clock()) - started


def _assigned_consumer(bootstrap: str, topic: str, partitions: int, reset: str) -> Any:
    from slog.client import Consumer, TopicPartition

    consumer = Consumer(bootstrap, auto_offset_reset=reset, client_id="slog-bench")
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    for tp in tps:
        consumer.position(tp)  # resolve the start now, not during the timed part
    return consumer


# -- reporting -----------------------------------------------------------------------------

def result_row(mode: str, topic: str, tally: Tally, elapsed_s: float,
               latencies: bool, **extra: Any) -> dict[str, Any]:
    from slog.cli.latency import latency_summary, rates

    per_s, mb_per_s = rates(tally.records, tally.data_bytes, elapsed_s)
    row: dict[str, Any] = {"mode": mode, "topic": topic, "records": tally.records,
                           "errors": tally.errors, "bytes": tally.data_bytes,
                           "elapsed_s": round(elapsed_s, 3), "records_per_s": per_s,
                           "mb_per_s": mb_per_s}
    summary = latency_summary(tally.latencies) if latencies else {}
    for name in ("min", "avg", "p50", "p95", "p99", "p999", "max"):
        row[f"latency_{name}_ms"] = summary.get(name)
    row.update(extra)
    return row


def _finish(row: dict[str, Any], tally: Tally, output: OutputFormat, wanted: int) -> None:
    emit([row], COLUMNS, output)
    if tally.errors:
        print(f"error: {tally.errors} records failed; the first: {tally.first_error}",
              file=sys.stderr)
    if row["records"] < wanted:
        print(f"error: only {row['records']} of {wanted} records made it", file=sys.stderr)
        raise typer.Exit(EXIT_FAILURE)


# -- commands ------------------------------------------------------------------------------

@app.command()
def produce(
    topic: TopicOption = None,
    records: RecordsOption = 50_000,
    record_size: RecordSizeOption = 100,
    partitions: PartitionsOption = 3,
    replication_factor: ReplicationOption = -1,
    acks: AcksOption = "all",
    compression: CompressionOption = "none",
    batch_size: BatchSizeOption = None,
    linger_ms: LingerOption = 5,
    throughput: Annotated[float, typer.Option(
        help="Records/s to aim at; -1 for as fast as possible.")] = -1,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Produce records as fast as allowed; latency is send to acknowledgement.

    Examples:
      slog bench produce --records 100000 --record-size 1000
      slog bench produce -t orders --acks 1 --compression lz4 --throughput 20000 -o json
    """
    settings = ProducerSettings(acks, compression, batch_size, linger_ms)
    settings.check()
    with client_errors(bootstrap), bench_topic(bootstrap, topic, partitions,
                                               replication_factor) as (name, count):
        producer = settings.producer(bootstrap)
        try:
            tally, elapsed = run_produce(producer, name, records, record_size, throughput)
        finally:
            producer.close()
    _finish(result_row("produce", name, tally, elapsed, True, partitions=count,
                       record_size=record_size, acks=acks, compression=compression),
            tally, output, records)


@app.command()
def consume(
    topic: TopicOption = None,
    records: RecordsOption = 50_000,
    record_size: Annotated[int, typer.Option(
        "--record-size", "-s", min=0,
        help="Value size of the records written first into a temporary topic.")] = 100,
    partitions: PartitionsOption = 3,
    replication_factor: ReplicationOption = -1,
    timeout: TimeoutOption = 10,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Read records from the start of a topic and time it.

    With --topic the topic's existing records are read; without, a temporary
    topic is filled with --records first (not timed).

    Examples:
      slog bench consume -t orders --records 100000
      slog bench consume --records 20000 --record-size 500 -o json
    """
    with client_errors(bootstrap), bench_topic(bootstrap, topic, partitions,
                                               replication_factor) as (name, count):
        if topic is None:
            filler = ProducerSettings("1", "none", None, 5).producer(bootstrap)
            try:
                filled, _ = run_produce(filler, name, records, record_size, -1)
            finally:
                filler.close()
            if filled.errors:
                fail(f"could not fill {name}: {filled.first_error}")
        consumer = _assigned_consumer(bootstrap, name, count, "earliest")
        try:
            tally, elapsed = run_consume(consumer, records, timeout)
        finally:
            consumer.close()
    _finish(result_row("consume", name, tally, elapsed, False, partitions=count),
            tally, output, records)


@app.command()
def e2e(
    topic: TopicOption = None,
    records: RecordsOption = 10_000,
    record_size: Annotated[int, typer.Option(
        "--record-size", "-s", min=TIMESTAMP_BYTES,
        help="Value size in bytes (the first 8 carry the send time).")] = 100,
    partitions: PartitionsOption = 3,
    replication_factor: ReplicationOption = -1,
    acks: AcksOption = "all",
    compression: CompressionOption = "none",
    batch_size: BatchSizeOption = None,
    linger_ms: LingerOption = 0,
    throughput: Annotated[float, typer.Option(
        help="Records/s to produce at; -1 for as fast as possible.")] = 2_000,
    timeout: TimeoutOption = 10,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Produce and consume at once; latency is produce call to consumed record.

    A consumer in this process reads from the end of the topic while a
    producer thread writes at --throughput; each value carries its send time.

    Examples:
      slog bench e2e --records 20000 --throughput 5000
      slog bench e2e -t latency-test --acks 1 -o json
    """
    settings = ProducerSettings(acks, compression, batch_size, linger_ms)
    settings.check()
    with client_errors(bootstrap), bench_topic(bootstrap, topic, partitions,
                                               replication_factor) as (name, count):
        consumer = _assigned_consumer(bootstrap, name, count, "latest")
        producer = settings.producer(bootstrap)
        produced: list[Tally] = []
        sender = threading.Thread(target=lambda: produced.append(run_produce(
            producer, name, records, record_size, throughput, timestamped=True)[0]),
            name="bench-producer", daemon=True)
        latencies: list[float] = []

        def measure(record: Any) -> None:
            sent_ns = int.from_bytes(record.value[:TIMESTAMP_BYTES], "big")
            latencies.append((time.time_ns() - sent_ns) / 1e9)

        try:
            sender.start()
            tally, elapsed = run_consume(consumer, records, timeout, measure)
            sender.join(timeout)
        finally:
            consumer.close()
            producer.close()
    tally.latencies = latencies
    if produced:
        tally.errors, tally.first_error = produced[0].errors, produced[0].first_error
    _finish(result_row("e2e", name, tally, elapsed, True, partitions=count,
                       record_size=record_size, acks=acks, throughput=throughput),
            tally, output, records)
