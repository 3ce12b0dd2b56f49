"""The ``slog`` PySpark data source: ``spark.read.format("slog")`` and ``readStream``.

Register it once per session with :func:`slog.spark.register`. Batch reads
plan one InputPartition per (topic, partition, offset range); streaming reads
use per-partition offset dicts in Kafka's JSON shape, ``{"topic": {"0": 42}}``,
and support ``Trigger.AvailableNow``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from slog.spark.catalog import TP, open_catalog
from slog.spark.options import SourceOptions, parse_options
from slog.spark.plan import OffsetRange, resolve_ranges, split_ranges
from slog.spark.reading import arrow_batches, schema_ddl

Offsets = dict[str, dict[str, int]]


class RangePartition(InputPartition):
    """One Spark task: records ``[start, end)`` of one partition, and how to reach them."""

    def __init__(self, r: OffsetRange, mode: str):
        super().__init__((r.topic, r.partition, r.start, r.end))
        self.range = r
        self.mode = mode


def _read(partition: InputPartition, options: SourceOptions) -> Iterator[Any]:
    assert isinstance(partition, RangePartition)
    if partition.range.size == 0:
        return iter(())
    return arrow_batches(partition.range, partition.mode, options.include_headers,
                         options.fail_on_data_loss, options.batch_records,
                         options.read_committed)


def _tasks(ranges: list[OffsetRange], options: SourceOptions, mode: str) -> list[RangePartition]:
    pieces = split_ranges(ranges, options.min_partitions, options.max_records_per_partition)
    return [RangePartition(r, mode) for r in pieces]


class SlogDataSource(DataSource):
    """Topics of a slog (or any Kafka) cluster as a DataFrame with the Kafka source's schema."""

    @classmethod
    def name(cls) -> str:
        return "slog"

    def schema(self) -> str:
        return schema_ddl(parse_options(self.options).include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        return SlogReader(parse_options(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return SlogStreamReader(parse_options(self.options))


class SlogReader(DataSourceReader):
    def __init__(self, options: SourceOptions):
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        catalog = open_catalog(self.options)
        try:
            ranges, _warnings = resolve_ranges(self.options, catalog)
            return _tasks(ranges, self.options, catalog.mode) or \
                [RangePartition(OffsetRange("", 0, 0, 0), catalog.mode)]
        finally:
            catalog.close()

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(partition, self.options)


def _to_offsets(positions: dict[TP, int]) -> Offsets:
    nested: Offsets = {}
    for (topic, partition), offset in sorted(positions.items()):
        nested.setdefault(topic, {})[str(partition)] = offset
    return nested


def _from_offsets(offsets: Offsets) -> dict[TP, int]:
    return {(topic, int(p)): int(o) for topic, parts in offsets.items() for p, o in parts.items()}


class SlogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of newly committed records; offsets are next offsets per partition."""

    def __init__(self, options: SourceOptions):
        self.options = options
        self._until: dict[TP, int] | None = None  # the AvailableNow target

    def _ends(self) -> tuple[dict[TP, int], dict[TP, int]]:
        catalog = open_catalog(self.options)
        try:
            tps = catalog.partitions(self.options)
            bounds = catalog.bounds(tps)
        finally:
            catalog.close()
        return ({tp: b.start for tp, b in bounds.items()},
                {tp: b.end for tp, b in bounds.items()})

    def initialOffset(self) -> Offsets:
        catalog = open_catalog(self.options)
        try:
            ranges, _warnings = resolve_ranges(replace(self.options, ending="latest"), catalog)
        finally:
            catalog.close()
        return _to_offsets({(r.topic, r.partition): r.start for r in ranges})

    def prepareForTriggerAvailableNow(self) -> None:
        self._until = self._ends()[1]

    def latestOffset(self, start: Offsets | None = None, limit: Any = None) -> Offsets:
        starts, ends = self._ends()
        done = _from_offsets(start or {})
        latest = {}
        for tp, end in ends.items():
            if self._until is not None:
                end = min(end, self._until.get(tp, starts[tp]))
            latest[tp] = max(end, done.get(tp, starts[tp]))
        return _to_offsets(latest)

    def partitions(self, start: Offsets, end: Offsets) -> Sequence[InputPartition]:
        first, last = _from_offsets(start), _from_offsets(end)
        catalog = open_catalog(self.options)
        try:
            bounds = catalog.bounds(sorted(last))
        finally:
            catalog.close()
        ranges = [OffsetRange(tp[0], tp[1], first.get(tp, bounds[tp].start), offset,
                              bounds[tp].location)
                  for tp, offset in sorted(last.items())]
        return _tasks(ranges, self.options, catalog.mode)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(partition, self.options)

    def commit(self, end: Offsets) -> None:
        pass  # nothing to release: offsets live in Spark's checkpoint
