"""core's read-only view of a partition's transaction state from its files
(:func:`slog.core.transaction_state.read_transactions`), on logs written by the
broker's own replica code (Partition over a PartitionLog: small segments, a
snapshot at every roll, a .txnindex entry per abort): at every offset it matches
what the writer knew there, with and without snapshots, with a damaged .txnindex,
and it never changes a file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from slog.core.log_config import LogConfig
from slog.core.segment_reader import batches_from
from slog.core.transaction_index import build_marker
from slog.core.transaction_state import read_transactions
from slog.replication.partition import Partition
from tests.transactions.test_txn_state_recovery import _append, _batch, _open

# Preallocated segments, as a broker writes them: readers must stop at the zeroed tail.
LIVE = LogConfig(segment_bytes=600, preallocate=True, write_caching=True)
COMMIT, ABORT, OPEN = b"c", b"a", b"o"

State = tuple[dict[int, int], list[object], int]


class Writer:
    """Appends transactional, idempotent and control batches and remembers, after each
    append, the writer's own transaction state (the reference to compare with)."""

    def __init__(self, partition: Partition):
        self.partition = partition
        self.sequences: dict[int, int] = {}
        self.states: dict[int, State] = {}
        self.fates: dict[int, bytes] = {}  # a data batch's offset -> its transaction's fate
        self.producers: dict[int, int] = {}  # a data batch's offset -> its producer

    def data(self, producer_id: int, fate: bytes, *, transactional: bool = True) -> None:
        sequence = self.sequences.get(producer_id, 0)
        self.sequences[producer_id] = sequence + 1
        offset = self._append(_batch(producer_id, sequence, fate, transactional=transactional))
        self.fates[offset] = fate
        self.producers[offset] = producer_id

    def end(self, producer_id: int, commit: bool) -> None:
        self._append(build_marker(producer_id, 0, commit, coordinator_epoch=1, timestamp=1))

    def _append(self, records: bytes) -> int:
        offset = _append(self.partition, records)
        end = self.partition.log.log_end_offset
        txns = self.partition.transactions
        self.states[end] = (dict(txns.ongoing), list(txns.aborted),
                            txns.last_stable_offset(end))
        return offset


def _workload(writer: Writer) -> None:
    """Two producers' transactions interleaved across segments (some aborted after
    spanning a roll), a third open from round 1 to 6 then aborted, an idempotent
    producer, and a transaction left open at the end."""
    for i in range(10):
        fate10 = COMMIT if i % 3 else ABORT
        fate11 = ABORT if i % 2 else COMMIT
        writer.data(10, fate10)
        writer.data(11, fate11)
        if i == 1:
            writer.data(13, ABORT)
        writer.data(12, COMMIT, transactional=False)
        writer.data(10, fate10)
        writer.end(10, fate10 == COMMIT)
        writer.data(11, fate11)
        writer.end(11, fate11 == COMMIT)
        if i == 6:
            writer.end(13, False)
    writer.data(10, OPEN)
    writer.data(11, COMMIT)
    writer.end(11, True)


@pytest.fixture
def written(tmp_path: Path) -> tuple[Path, Writer]:
    directory = tmp_path / "t-0"
    writer = Writer(_open(directory, LIVE))
    _workload(writer)
    writer.partition.log.latest_producer_snapshot()  # let the rolls' snapshot writes land
    assert len(list(directory.glob("*.snapshot"))) > 3
    assert len(list(directory.glob("*.txnindex"))) > 1
    return directory, writer


def _files(directory: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in directory.iterdir()}


def _check_every_offset(directory: Path, writer: Writer) -> None:
    for end, (ongoing, aborted, stable) in writer.states.items():
        txns = read_transactions(directory, 0, end)
        assert (txns.ongoing, list(txns.aborted), txns.last_stable_offset(end)) == \
            (ongoing, aborted, stable), f"state after the batches below {end}"


def test_it_matches_the_writer_at_every_offset_of_a_live_log(
        written: tuple[Path, Writer]) -> None:
    directory, writer = written
    before = _files(directory)
    _check_every_offset(directory, writer)
    end = writer.partition.log.log_end_offset
    first_open = min(o for o, fate in writer.fates.items() if fate == OPEN)
    assert read_transactions(directory, 0, end).last_stable_offset(end) == first_open
    assert _files(directory) == before  # read-only: nothing written, created or deleted
    writer.partition.log.close()


def test_without_snapshots_or_txnindex_files_it_replays_from_the_log_start(
        written: tuple[Path, Writer], tmp_path: Path) -> None:
    directory, writer = written
    writer.partition.log.close()
    bare = tmp_path / "bare"
    shutil.copytree(directory, bare, ignore=shutil.ignore_patterns("*.snapshot"))
    _check_every_offset(bare, writer)
    for path in bare.glob("*.txnindex"):
        path.unlink()  # and without .txnindex files: nothing trusted, all replayed
    _check_every_offset(bare, writer)


@pytest.mark.parametrize("damage", ["torn", "version", "unreadable"])
def test_a_damaged_txnindex_is_replayed_instead(written: tuple[Path, Writer],
                                                damage: str) -> None:
    directory, writer = written
    writer.partition.log.close()
    for path in sorted(directory.glob("*.txnindex"))[1:]:
        data = bytearray(path.read_bytes())
        if damage == "torn":
            del data[-3:]
        elif damage == "version":
            data[1] = 9
        path.write_bytes(bytes(data))
        if damage == "unreadable":
            path.unlink()
            path.mkdir()  # reading it fails with an OSError other than not-found
    before = _files(directory)
    _check_every_offset(directory, writer)
    assert _files(directory) == before  # left for the broker's own load to rewrite


def test_damaged_or_vanished_snapshots_fall_back_to_older_ones(
        written: tuple[Path, Writer]) -> None:
    directory, writer = written
    writer.partition.log.close()
    snapshots = sorted(directory.glob("*.snapshot"))
    snapshots[-1].write_bytes(b"\x00\x01garbage")
    snapshots[-2].write_bytes(b"")
    _check_every_offset(directory, writer)


def test_ranges_hide_exactly_aborted_and_open_transactions(
        written: tuple[Path, Writer]) -> None:
    directory, writer = written
    log = writer.partition.log
    end = log.log_end_offset
    # Every range: inside one segment, across snapshots, starting past a snapshot
    # (whose open transactions may end before the range), to the end.
    for start in range(end):
        for stop in range(start + 1, end + 1):
            if not writer.states[stop][0]:  # nothing open there, whatever began before
                stable = read_transactions(directory, start, stop).last_stable_offset(stop)
                assert stable == stop, f"last stable offset of [{start}, {stop})"
            txns = read_transactions(directory, start, stop, settle=True)
            aborted = txns.aborted_batches()
            for _chunk, _pos, header in batches_from(directory, start, stop):
                fate = writer.fates.get(header.base_offset)
                if fate is not None:
                    assert txns.hides(header, aborted) == (fate in (ABORT, OPEN)), \
                        f"batch {header.base_offset} ({fate!r}) of range [{start}, {stop})"
    log.close()


def test_a_range_reads_markers_past_its_end_only_until_its_transactions_end(
        written: tuple[Path, Writer]) -> None:
    directory, writer = written
    producer13 = next(o for o, producer in writer.producers.items() if producer == 13)
    stop = producer13 + 1  # producer 13's only batch; its ABORT marker comes rounds later
    assert 13 in read_transactions(directory, 0, stop).ongoing
    settled = read_transactions(directory, 0, stop, settle=True)
    assert 13 not in settled.ongoing
    assert any(a.producer_id == 13 and a.first_offset == producer13 for a in settled.aborted)
    writer.partition.log.close()


def test_a_missing_directory_has_no_transactions(tmp_path: Path) -> None:
    txns = read_transactions(tmp_path / "gone", 0, 10)
    assert not txns.ongoing and not txns.aborted
    assert txns.last_stable_offset(10) == 10

