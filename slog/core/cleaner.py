"""Log compaction (``cleanup.policy=compact``): keep the latest record of every key.

Kafka's LogCleaner, simplified to one pass per log:

1. The cleanable part of a log is its closed segments wholly below the high
   watermark; the active segment is never touched.
2. When enough of it is dirty (written since the last cleaning, at least
   ``MIN_CLEANABLE_RATIO`` of its bytes), the dirty part is scanned into a map
   key -> offset of the latest record with that key.
3. Every cleanable segment is rewritten without the records the map makes
   obsolete and without tombstones (null values) older than
   ``delete.retention.ms``. Offsets are preserved: a batch keeps its base
   offset, its lastOffsetDelta and its producer fields, records keep their
   offset deltas, and a rebuilt batch gets a fresh CRC, so it is a valid v2
   batch that any client reads. A batch with nothing left goes away; a segment
   with nothing left is dropped (the first one is kept, empty).
4. Each rewrite replaces its segment file in one rename
   (:meth:`PartitionLog.replace_segment`), so a crash leaves the old or the new file.

Transactions: only what is below the last stable offset is cleanable (an open
transaction may still abort), and records of aborted transactions are dropped
and never supersede anything. A COMMIT or ABORT marker goes once no data batch
of its transaction is left (Kafka's rule; :class:`MarkerFilter`) and its delete
horizon has passed: the first pass that finds it so stamps the horizon (now +
``delete.retention.ms``, in memory: a restart only delays the removal), a later
pass removes it, so a consumer that read the transaction's records has that long
to read its marker too. Before such a rewrite is swapped in, the producer-state
snapshots at or below the removed markers are deleted (a replay from one taken
while the transaction was open would never meet its end), then the removed ABORT
markers' ``.txnindex`` entries are dropped and their transactions forgotten
(``forget_aborted``: the partition's memory; after the file, so that a rebuild
of that memory in between cannot bring them back): a reader told of an aborted
transaction whose marker is gone would skip its producer's records for ever after.

Records without a key cannot be superseded and are kept (Kafka refuses them
on compacted topics at produce time; slog does not, so dropping them would
lose data silently). Where the cleaning got to is kept in memory: after a
restart the first pass cleans everything once more, which is harmless.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import struct
import time as _time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import crc32c

from slog.core import compression as codecs
from slog.core.batch import (
    COMPRESSION_MASK,
    CRC_POS,
    CRC_START,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    BatchHeader,
)
from slog.core.checkpoint import TEMP_SUFFIX
from slog.core.errors import CorruptRecordError
from slog.core.log import PartitionLog
from slog.core.records import Record, encode_varint, encode_varlong, iter_decoded_batches
from slog.core.segment import LogSegment
from slog.core.transaction_index import AbortedBatches, read_marker

log = logging.getLogger(__name__)

MIN_CLEANABLE_RATIO = 0.5  # Kafka's min.cleanable.dirty.ratio default
_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC = struct.Struct(">I")
TopicPartition = tuple[str, int]
# Told the offsets of ABORT (and COMMIT) markers about to be removed from a log.
ForgetAborted = Callable[[list[int]], None]


class LogCleaner:
    """Compacts the logs that ask for it; the broker calls :meth:`maybe_clean` often."""

    def __init__(self, backoff_ms: int = 15_000, *, enabled: bool = True,
                 time: Callable[[], float] = _time.time):
        self.enabled = enabled
        self.backoff_ms = backoff_ms  # a dynamic config: the next run uses the new value
        self._time = time
        self._next_run = 0.0
        self._first_dirty: dict[Path, int] = {}  # per log directory
        # Per log directory: the log they were stamped in (a topic deleted and created
        # again reuses the directory, not the offsets' markers) and marker offset ->
        # when it may go (see MarkerFilter).
        self._marker_horizons: dict[Path, tuple[PartitionLog, dict[int, int]]] = {}

    def is_due(self) -> bool:
        """Whether maybe_clean would run now (lets callers skip gathering its inputs)."""
        return self.enabled and self._time() >= self._next_run

    def maybe_clean(self, logs: Mapping[TopicPartition, PartitionLog],
                    high_watermarks: Mapping[TopicPartition, int],
                    aborted: Mapping[TopicPartition, AbortedBatches] | None = None,
                    forget_aborted: Callable[[TopicPartition, list[int]], None] | None = None,
                    ) -> int:
        """Clean every compacted log that is dirty enough, at most once per backoff.
        ``high_watermarks``: where each log's cleanable part ends (the last stable
        offset); ``aborted``: each log's aborted transactions; ``forget_aborted``:
        called with the markers about to be removed from a log, before they are.
        Returns the number of segments rewritten. Runs on any thread."""
        now = self._time()
        if not self.enabled or now < self._next_run:
            return 0
        self._next_run = now + self.backoff_ms / 1000
        rewritten = 0
        for key, plog in logs.items():
            if plog.closed or not plog.config.compact_enabled:
                continue
            try:
                forget = None if forget_aborted is None else \
                    functools.partial(forget_aborted, key)
                rewritten += self.clean(plog, high_watermarks.get(key),
                                        aborted=(aborted or {}).get(key), forget_aborted=forget)
            except Exception:  # one bad log must not stop the others (or the broker)
                log.exception("cleaning %s failed", plog.directory.name)
        return rewritten

    def clean(self, plog: PartitionLog, high_watermark: int | None = None, *,
              force: bool = False, aborted: AbortedBatches | None = None,
              forget_aborted: ForgetAborted | None = None) -> int:
        segments = _cleanable(plog, high_watermark)
        if not segments:
            return 0
        first_dirty = self._first_dirty.get(plog.directory, segments[0].base_offset)
        dirty = [s for s in segments if s.base_offset >= first_dirty]
        total = sum(s.size for s in segments)
        now_ms = int(self._time() * 1000)
        stamped_in, horizons = self._marker_horizons.get(plog.directory, (plog, {}))
        if stamped_in is not plog:
            horizons = {}
        # Markers past their horizon are a reason to clean on their own, or a log
        # that stopped being written to would keep them for ever.
        markers_due = any(h <= now_ms for h in horizons.values())
        if not (force or markers_due) and (
                not dirty or sum(s.size for s in dirty) < MIN_CLEANABLE_RATIO * total):
            return 0
        is_aborted = aborted or AbortedBatches()
        latest = _offset_map(dirty, is_aborted)
        retention_ms = plog.config.delete_retention_ms
        markers = MarkerFilter(horizons, now_ms, retention_ms)
        rewritten = 0
        for segment in segments:
            if _rewrite(plog, segment, latest, now_ms - retention_ms, is_aborted, markers,
                        forget_aborted, first=segment is segments[0]):
                rewritten += 1
        self._first_dirty[plog.directory] = segments[-1].next_offset
        self._marker_horizons[plog.directory] = (plog, markers.stamped)
        log.info("cleaned %s: %d of %d segments rewritten, %d keys, %d markers removed",
                 plog.directory.name, rewritten, len(segments), len(latest),
                 markers.removed_count)
        return rewritten


class MarkerFilter:
    """Which COMMIT/ABORT markers one cleaning pass removes (Kafka's
    CleanedTransactionMetadata and delete horizon, without I/O).

    Fed every batch of the cleaned range in log order, with whether the pass
    keeps it. A transaction's data batches all precede its marker, and the range
    starts at the log start, so at a marker the filter knows whether any batch
    of that transaction is left. A marker with none left is stamped with a
    horizon (now + ``retention_ms``) on the first pass that sees it so, and
    removed by a pass at or after that horizon; ``stamped`` carries the kept
    stamps to the next pass (a marker no longer found is forgotten).
    """

    def __init__(self, horizons: Mapping[int, int], now_ms: int, retention_ms: int):
        self._horizons = horizons
        self._now_ms = now_ms
        self._retention_ms = retention_ms
        self._with_data: set[int] = set()  # producers whose current transaction kept data
        self.stamped: dict[int, int] = {}
        self.removed_count = 0
        self._held = False

    def hold(self) -> None:
        """Remove no more markers this pass: a rewrite that dropped records was not
        swapped in, so they may still be in the log."""
        self._held = True

    def data_batch(self, header: BatchHeader, kept: bool) -> None:
        if kept and header.is_transactional:
            self._with_data.add(header.producer_id)

    def keep_marker(self, header: BatchHeader) -> bool:
        """Whether the marker batch ``header`` stays (one call per marker, in order)."""
        if header.producer_id in self._with_data:
            self._with_data.discard(header.producer_id)
            return True
        offset = header.base_offset
        horizon = self._horizons.get(offset)
        if horizon is not None and horizon <= self._now_ms and not self._held:
            self.removed_count += 1
            return False
        self.stamped[offset] = self._now_ms + self._retention_ms if horizon is None else horizon
        return True


def _cleanable(plog: PartitionLog, high_watermark: int | None) -> list[LogSegment]:
    """Closed segments wholly below the high watermark, oldest first."""
    segments = plog.segments
    upper = plog.log_end_offset if high_watermark is None else high_watermark
    out = []
    for segment, following in itertools.pairwise(segments):
        if following.base_offset > upper:
            break
        out.append(segment)
    return out


def _records(segment: LogSegment) -> Iterable[tuple[int, BatchHeader, list[Record]]]:
    view = segment.read(segment.base_offset, max(segment.size, 1), None, True)
    if view is None or view.view is None:
        return []
    return iter_decoded_batches(view.view, allow_partial_tail=False)


def _offset_map(segments: Iterable[LogSegment], is_aborted: AbortedBatches
                ) -> dict[bytes, int]:
    latest: dict[bytes, int] = {}
    for segment in segments:
        for _, header, records in _records(segment):
            if header.is_control or is_aborted(header):
                continue
            for record in records:
                if record.key is not None:
                    latest[record.key] = record.offset
    return latest


def _keep(record: Record, latest: Mapping[bytes, int], horizon: int) -> bool:
    if record.key is None:
        return True
    if record.offset < latest.get(record.key, -1):
        return False  # superseded by a later record with the same key
    return record.value is not None or record.timestamp >= horizon


def _kept_records(data: memoryview, pos: int, header: BatchHeader, records: list[Record],
                  latest: Mapping[bytes, int], horizon: int, is_aborted: AbortedBatches,
                  markers: MarkerFilter) -> list[Record]:
    if header.is_control:
        # A control batch that is no transaction marker is kept as it is.
        if read_marker(data, pos) is None or markers.keep_marker(header):
            return records
        return []
    kept = [] if is_aborted(header) else [r for r in records if _keep(r, latest, horizon)]
    markers.data_batch(header, bool(kept))
    return kept


def _rewrite(plog: PartitionLog, segment: LogSegment, latest: Mapping[bytes, int],
             horizon: int, is_aborted: AbortedBatches, markers: MarkerFilter,
             forget_aborted: ForgetAborted | None, *, first: bool) -> bool:
    """Write the kept batches of ``segment`` next to it and swap it in; False if
    nothing would change."""
    out: list[bytes] = []
    changed = False
    removed_markers: list[int] = []
    try:
        batches = list(_records(segment))
    except CorruptRecordError as exc:
        log.warning("not cleaning %s: %s", segment.log_path, exc)
        return False
    view = segment.read(segment.base_offset, max(segment.size, 1), None, True)
    data = view.view if view is not None and view.view is not None else memoryview(b"")
    for pos, header, records in batches:
        kept = _kept_records(data, pos, header, records, latest, horizon, is_aborted, markers)
        if len(kept) == len(records):
            out.append(bytes(data[pos : pos + header.size]))
            continue
        changed = True
        if kept:
            out.append(rebuild_batch(header, kept))
        elif header.is_control:
            removed_markers.append(header.base_offset)
    if not changed:
        return False
    if removed_markers:  # in this order (see the module's docstring)
        plog.delete_snapshots_through(max(removed_markers))
        plog.remove_txn_entries(segment, removed_markers)
        if forget_aborted is not None:
            forget_aborted(removed_markers)
    if not out and not first:
        swapped = plog.replace_segment(segment, None)
    else:
        temp = segment.log_path.with_name(segment.log_path.name + ".cleaned" + TEMP_SUFFIX)
        with open(temp, "wb") as handle:
            handle.write(b"".join(out))
            handle.flush()
            os.fsync(handle.fileno())
        swapped = plog.replace_segment(segment, temp)
    if not swapped:
        markers.hold()
    return swapped


# -- batches ------------------------------------------------------------------------------


def _encode_record(record: Record, base_offset: int, base_timestamp: int) -> bytes:
    def blob(data: bytes | None) -> bytes:
        return encode_varint(-1) if data is None else encode_varint(len(data)) + data

    headers = b"".join(blob(k.encode()) + blob(v) for k, v in record.headers)
    body = b"".join((b"\x00", encode_varlong(record.timestamp - base_timestamp),
                     encode_varint(record.offset - base_offset), blob(record.key),
                     blob(record.value), encode_varint(len(record.headers)), headers))
    return encode_varint(len(body)) + body


def rebuild_batch(original: BatchHeader, records: list[Record]) -> bytes:
    """A v2 batch holding ``records`` at their own offsets, with ``original``'s base
    offset, lastOffsetDelta, attributes, codec and producer fields."""
    base_timestamp = original.base_timestamp
    body = b"".join(_encode_record(r, original.base_offset, base_timestamp) for r in records)
    codec = original.attributes & COMPRESSION_MASK
    if codec:
        body = codecs.compress(codec, body)
    max_timestamp = original.max_timestamp if original.is_log_append_time \
        else max(r.timestamp for r in records)
    out = bytearray(HEADER_SIZE)
    out += body
    _HEADER.pack_into(out, 0, original.base_offset, len(out) - LOG_OVERHEAD,
                      original.partition_leader_epoch, MAGIC, 0, original.attributes,
                      original.last_offset_delta, base_timestamp, max_timestamp,
                      original.producer_id, original.producer_epoch, original.base_sequence,
                      len(records))
    _CRC.pack_into(out, CRC_POS, crc32c.crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)
