"""Offset ranges to read: resolve the options against a catalog, then split for Spark.

``resolve_ranges`` turns startingOffsets / startingTimestamp / endingOffsets
into one ``[start, end)`` per partition, clipped to what is committed, and
reports ranges that retention already deleted. ``split_ranges`` cuts them into
Spark tasks. Both are pure given the catalog's answers.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from slog.core.errors import SlogError
from slog.spark.catalog import TP, Catalog, PartitionBounds
from slog.spark.options import (
    EARLIEST,
    EARLIEST_MARK,
    LATEST,
    LATEST_MARK,
    OptionError,
    SourceOptions,
)


class DataLossError(SlogError, RuntimeError):
    """Offsets asked for are gone (retention) and failOnDataLoss is true."""


@dataclass(frozen=True)
class OffsetRange:
    topic: str
    partition: int
    start: int
    end: int  # exclusive
    location: str = ""

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def _wanted(spec: str | dict[TP, int], tp: TP, bounds: PartitionBounds, name: str) -> int:
    if spec == EARLIEST:
        return bounds.start
    if spec == LATEST:
        return bounds.end
    assert isinstance(spec, dict)
    offset = spec.get(tp)
    if offset is None:
        # Kafka's source requires every partition; new partitions default sensibly here.
        return bounds.start if name == "startingOffsets" else bounds.end
    if offset == EARLIEST_MARK:
        return bounds.start
    if offset == LATEST_MARK:
        return bounds.end
    return offset


def data_loss_message(tp: TP, wanted: int, available: int) -> str:
    return (f"offsets {wanted}..{available - 1} of {tp[0]}-{tp[1]} are no longer available "
            f"(deleted by retention; the log starts at {available})")


def resolve_ranges(options: SourceOptions, catalog: Catalog,
                   tps: list[TP] | None = None) -> tuple[list[OffsetRange], list[str]]:
    """Per-partition ranges and the data-loss warnings (raised instead if failOnDataLoss)."""
    tps = catalog.partitions(options) if tps is None else tps
    for spec, name in ((options.starting, "startingOffsets"), (options.ending, "endingOffsets")):
        if isinstance(spec, dict):
            unknown = sorted(set(spec) - set(tps))
            if unknown:
                raise OptionError(f"{name} names partitions that are not read: "
                                  + ", ".join(f"{t}-{p}" for t, p in unknown))
    bounds = catalog.bounds(tps)
    by_time = (catalog.offsets_for_timestamp(tps, options.starting_timestamp)
               if options.starting_timestamp is not None else {})
    ranges: list[OffsetRange] = []
    warnings: list[str] = []
    for tp in tps:
        b = bounds[tp]
        if options.starting_timestamp is not None:
            found = by_time.get(tp)
            start = b.end if found is None else found
        else:
            start = _wanted(options.starting, tp, b, "startingOffsets")
        asked_end = _wanted(options.ending, tp, b, "endingOffsets")
        if asked_end < start:
            raise OptionError(f"{tp[0]}-{tp[1]}: the ending offset {asked_end} is before the "
                              f"starting offset {start}")
        end = min(asked_end, b.end)
        if start < b.start:
            message = data_loss_message(tp, start, b.start)
            if options.fail_on_data_loss:
                raise DataLossError(message + "; set failOnDataLoss=false to skip them")
            warnings.append(message)
            start = b.start
        ranges.append(OffsetRange(tp[0], tp[1], min(start, end), end, b.location))
    return ranges, warnings


def split_ranges(ranges: list[OffsetRange], min_partitions: int,
                 max_records: int) -> list[OffsetRange]:
    """One task per range, large ones cut so no task exceeds ``max_records`` offsets and
    there are at least ``min_partitions`` tasks (cut in proportion to each range's size)."""
    live = [r for r in ranges if r.size > 0]
    total = sum(r.size for r in live)
    tasks: list[OffsetRange] = []
    for r in live:
        pieces = math.ceil(r.size / max_records)
        if min_partitions > len(live) and total:
            pieces = max(pieces, round(min_partitions * r.size / total))
        pieces = max(1, min(pieces, r.size))
        step = r.size / pieces
        bounds = [r.start + round(i * step) for i in range(pieces)] + [r.end]
        tasks += [OffsetRange(r.topic, r.partition, a, b, r.location)
                  for a, b in itertools.pairwise(bounds) if b > a]
    return tasks
