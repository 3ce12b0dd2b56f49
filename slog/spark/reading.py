"""Read one offset range on a Spark executor and hand it to Spark as Arrow batches.

The range comes from the planner with a location: a replica's log directory
(dataDir mode, read through :mod:`slog.spark.segments`) or a bootstrap list
(read with slog's consumer from any Kafka-protocol cluster). With
read_committed, the consumer reads at isolation level read_committed, and a
data dir's batches of aborted transactions are dropped
(:mod:`slog.spark.transactions`); control records are never emitted. Both produce the
client's ``ConsumerRecord`` tuples, which become columns of Spark's Kafka
source schema. Arrow batches cross into the JVM without per-row Python
objects on Spark's side, which is most of the speed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

from slog.core.errors import CorruptRecordError
from slog.spark.catalog import DATA_DIR
from slog.spark.plan import DataLossError, OffsetRange, data_loss_message

logger = logging.getLogger(__name__)

KAFKA_SCHEMA_DDL = ("key binary, value binary, topic string, partition int, offset long, "
                    "timestamp timestamp, timestampType int")
HEADERS_DDL = "headers array<struct<key:string,value:binary>>"
READ_TIMEOUT_S = 120.0
_MILLIS: Any = None
_MICROS: Any = None


def schema_ddl(include_headers: bool) -> str:
    return KAFKA_SCHEMA_DDL + (", " + HEADERS_DDL if include_headers else "")


def _lost(r: OffsetRange, available: int, fail_on_data_loss: bool) -> int:
    """Where to resume after finding ``[r.start, available)`` deleted."""
    message = data_loss_message((r.topic, r.partition), r.start, available)
    if fail_on_data_loss:
        raise DataLossError(message + "; set failOnDataLoss=false to skip them")
    logger.warning("%s; skipping them", message)
    return available


def _readable_start(r: OffsetRange, directory: Path, fail_on_data_loss: bool) -> int:
    from slog.spark.segments import log_start

    first = log_start(directory)
    if first is not None and first > r.start:  # retention ran between planning and this task
        return min(_lost(r, first, fail_on_data_loss), r.end)
    return r.start


def _hidden(directory: Path, start: int, r: OffsetRange, read_committed: bool) -> Any:
    from slog.spark.transactions import uncommitted_batches

    return uncommitted_batches(directory, start, r.end) if read_committed else None


def _datadir_records(r: OffsetRange, fail_on_data_loss: bool,
                     read_committed: bool) -> Iterator[Any]:
    from slog.spark.segments import read_records

    directory = Path(r.location)
    start = _readable_start(r, directory, fail_on_data_loss)
    yield from read_records(directory, r.topic, r.partition, start, r.end,
                            hidden=_hidden(directory, start, r, read_committed))


def _protocol_records(r: OffsetRange, fail_on_data_loss: bool,
                      read_committed: bool) -> Iterator[Any]:
    from slog.client import Admin, Consumer, TopicPartition
    from slog.client.errors import OffsetOutOfRangeError

    tp = TopicPartition(r.topic, r.partition)
    consumer = Consumer(r.location, auto_offset_reset="none", client_id="slog-spark",
                        max_partition_fetch_bytes=8 * 1024 * 1024, fetch_max_wait_ms=200,
                        isolation_level="read_committed" if read_committed
                        else "read_uncommitted")
    try:
        consumer.assign([tp])
        consumer.seek(tp, r.start)
        position = r.start
        deadline = time.monotonic() + READ_TIMEOUT_S
        while position < r.end:
            try:
                records = consumer.poll(timeout_ms=500)
            except OffsetOutOfRangeError:
                with Admin(r.location) as admin:
                    earliest = admin.list_offsets({tp: "earliest"})[tp].offset
                if earliest <= position:
                    raise
                position = min(_lost(OffsetRange(r.topic, r.partition, position, r.end),
                                     earliest, fail_on_data_loss), r.end)
                consumer.seek(tp, position)
                continue
            if records:
                yield from (rec for rec in records if rec.offset < r.end)
            if records or consumer.position(tp) > position:
                # Progress; read_committed can move past aborted records returning none.
                deadline = time.monotonic() + READ_TIMEOUT_S
            position = consumer.position(tp)
            if time.monotonic() > deadline:
                raise TimeoutError(f"{tp}: no data for {READ_TIMEOUT_S:.0f} s at offset "
                                   f"{position}, before {r.end}")
    finally:
        consumer.close()


def read_range(r: OffsetRange, mode: str, fail_on_data_loss: bool,
               read_committed: bool = False) -> Iterator[Any]:
    """The ``ConsumerRecord`` tuples of one range, in offset order (with
    ``read_committed``, only those of committed transactions)."""
    if mode == DATA_DIR:
        return _datadir_records(r, fail_on_data_loss, read_committed)
    return _protocol_records(r, fail_on_data_loss, read_committed)


def arrow_schema(include_headers: bool) -> Any:
    import pyarrow as pa

    fields = [
        pa.field("key", pa.binary()), pa.field("value", pa.binary()),
        pa.field("topic", pa.string()), pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()), pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
        fields.append(pa.field("headers", pa.list_(header)))
    return pa.schema(fields)


def to_arrow(records: list[Any], schema: Any, include_headers: bool) -> Any:
    """One Arrow RecordBatch from ``ConsumerRecord`` tuples of one partition."""
    import pyarrow as pa

    global _MILLIS, _MICROS
    _MILLIS, _MICROS = pa.timestamp("ms", tz="UTC"), pa.timestamp("us", tz="UTC")

    # One range is one partition: topic and partition are constants, so repeat them
    # instead of converting a Python object per record.
    (_topics, _partitions, offsets, timestamps, types, keys, values,
     headers) = zip(*records, strict=True)
    first, count = records[0], len(records)
    columns = [
        pa.array(keys, pa.binary()), pa.array(values, pa.binary()),
        pa.repeat(pa.scalar(first[0], pa.string()), count),
        pa.repeat(pa.scalar(first[1], pa.int32()), count),
        pa.array(offsets, pa.int64()),
        pa.array(timestamps, _MILLIS).cast(_MICROS),
        pa.array(types, pa.int32()),
    ]
    if include_headers:
        columns.append(pa.array([[{"key": k, "value": v} for k, v in h] for h in headers],
                                schema.field("headers").type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _slices(batch: Any, batch_records: int) -> Iterator[Any]:
    for first in range(0, batch.num_rows, batch_records):
        yield batch.slice(first, batch_records)


def _datadir_batches(r: OffsetRange, schema: Any, include_headers: bool,
                     fail_on_data_loss: bool, batch_records: int,
                     read_committed: bool) -> Iterator[Any]:
    """Arrow batches of a replica's files: whole groups of record batches decoded at once
    (:mod:`slog.spark.columnar`); any batch it does not take goes through ``to_arrow``."""
    from slog.client.types import ConsumerRecord
    from slog.core import compression
    from slog.core.batch import COMPRESSION_MASK, CONTROL_BIT
    from slog.core.records import decode_records_as
    from slog.core.segment_reader import batches_from
    from slog.spark.columnar import decode_group, records_section, to_record_batch

    directory = Path(r.location)
    start = _readable_start(r, directory, fail_on_data_loss)
    hidden = _hidden(directory, start, r, read_committed)

    def decoded(data: bytes, group: list[tuple[int, int, Any]], slow: list[Any]) -> Any:
        columns = decode_group(data, group)
        if columns is None:
            records = [rec for chunk, pos, header in slow
                       for rec in decode_records_as(chunk, pos, header, ConsumerRecord,
                                                    r.topic, r.partition)
                       if start <= rec[2] < r.end]
            return to_arrow(records, schema, include_headers) if records else None
        if group[0][2].base_offset < start or group[-1][2].last_offset >= r.end:
            columns = columns.select((columns.offsets >= start) & (columns.offsets < r.end))
        if not len(columns):
            return None
        return to_record_batch(columns, r.topic, r.partition, schema, include_headers)

    group: list[tuple[int, int, Any]] = []  # records sections of `data`
    slow: list[Any] = []  # the same batches as (chunk, pos, header), for the fallback
    data = b""
    records = 0
    for chunk, pos, header in batches_from(directory, start, r.end):
        if header.attributes & CONTROL_BIT or header.record_count == 0 or \
                (hidden is not None and hidden(header)):
            continue
        codec = header.attributes & COMPRESSION_MASK
        if group and (codec or chunk is not data or records >= batch_records):
            if (batch := decoded(data, group, slow)) is not None:
                yield from _slices(batch, batch_records)
            group, slow, records = [], [], 0
        if codec:
            section_start, section_end = records_section(pos, header)
            try:
                plain = compression.decompress(codec, chunk[section_start:section_end])
            except CorruptRecordError:
                plain = b""  # the fallback decoder reports it with the batch's position
            batch = decoded(plain, [(0, len(plain), header)], [(chunk, pos, header)])
            if batch is not None:
                yield from _slices(batch, batch_records)
            continue
        data = chunk
        group.append((*records_section(pos, header), header))
        slow.append((chunk, pos, header))
        records += header.record_count
    if group and (batch := decoded(data, group, slow)) is not None:
        yield from _slices(batch, batch_records)


def arrow_batches(r: OffsetRange, mode: str, include_headers: bool, fail_on_data_loss: bool,
                  batch_records: int, read_committed: bool = False) -> Iterator[Any]:
    """Arrow RecordBatches of at most ``batch_records`` rows for one range."""
    schema = arrow_schema(include_headers)
    if mode == DATA_DIR:
        yield from _datadir_batches(r, schema, include_headers, fail_on_data_loss,
                                    batch_records, read_committed)
        return
    records = read_range(r, mode, fail_on_data_loss, read_committed)
    while True:
        chunk = list(islice(records, batch_records))
        if not chunk:
            return
        yield to_arrow(chunk, schema, include_headers)
