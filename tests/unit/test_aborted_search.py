"""The aborted-transaction index a read_committed fetch searches: bisected and cut
short at a marker's last stable offset, it must find exactly what a scan of every
aborted transaction finds (random interleaved producers, some holding transactions
open across thousands of offsets)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from slog.core.aborted_txn_index import AbortedTxn
from slog.core.batch import BatchHeader, parse_header
from slog.core.records import BatchBuilder
from slog.core.transaction_index import (
    AbortedBatches,
    AbortedTransaction,
    Marker,
    PartitionTransactions,
    build_marker,
)


def _data_header() -> BatchHeader:
    builder = BatchBuilder(producer_id=1, producer_epoch=0, base_sequence=0,
                           is_transactional=True)
    builder.append(None, b"v")
    return parse_header(builder.build(), 0)


DATA = _data_header()
CONTROL = parse_header(build_marker(1, 0, False, coordinator_epoch=0, timestamp=0), 0)
# Chance that a producer's next batch ends its open transaction: a few producers keep
# theirs open long, so aborted transactions overlap many others.
END_CHANCES = (0.9, 0.6, 0.3, 0.05, 0.005, 0.0005)


@dataclass
class Workload:
    txns: PartitionTransactions = field(default_factory=PartitionTransactions)
    aborted: list[AbortedTransaction] = field(default_factory=list)  # the reference
    recorded: list[AbortedTxn] = field(default_factory=list)  # what track() returned
    data: list[tuple[BatchHeader, bool]] = field(default_factory=list)  # (batch, aborted?)
    end: int = 0


def run_workload(seed: int, aborts: int) -> Workload:
    """Batches of one record each, offsets 0..end-1, until ``aborts`` transactions
    aborted."""
    rng = random.Random(seed)
    load = Workload()
    open_txns: dict[int, list[int]] = {}  # producer id -> its data batches' indexes
    while len(load.aborted) < aborts:
        producer_id = rng.randrange(len(END_CHANCES))
        offset = load.end
        load.end += 1
        batches = open_txns.get(producer_id)
        if batches is None or rng.random() >= END_CHANCES[producer_id]:
            header = DATA._replace(base_offset=offset, producer_id=producer_id)
            open_txns.setdefault(producer_id, []).append(len(load.data))
            load.data.append((header, False))
            assert load.txns.track(header, offset, None) is None
            continue
        committed = rng.random() < 0.5
        header = CONTROL._replace(base_offset=offset, producer_id=producer_id)
        recorded = load.txns.track(header, offset, Marker(committed, 0))
        del open_txns[producer_id]
        if committed:
            assert recorded is None
            continue
        first = load.data[batches[0]][0].base_offset
        assert recorded is not None and recorded[:3] == (producer_id, first, offset)
        load.recorded.append(recorded)
        load.aborted.append(AbortedTransaction(producer_id, first, offset))
        for index in batches:
            load.data[index] = (load.data[index][0], True)
    return load


def scan(aborted: list[AbortedTransaction], start: int, end: int) -> list[tuple[int, int]]:
    return [(a.producer_id, a.first_offset) for a in aborted
            if a.last_offset >= start and a.first_offset < end]


def random_ranges(rng: random.Random, end: int, count: int) -> list[tuple[int, int]]:
    ranges = []
    for _ in range(count):
        start = rng.randrange(end)
        ranges.append((start, min(end, start + rng.choice((1, 10, 100, 1000, 50_000)))))
    return ranges


@pytest.mark.parametrize("seed", range(5))
def test_aborted_between_finds_what_a_scan_finds(seed: int) -> None:
    load = run_workload(seed, aborts=2_000)
    assert list(load.txns.aborted) == load.aborted
    rng = random.Random(seed)
    for start, end in [(0, load.end), (load.end, load.end + 10),
                       *random_ranges(rng, load.end, 300)]:
        assert load.txns.aborted_between(start, end) == scan(load.aborted, start, end)


def test_aborted_between_with_100000_aborted_transactions() -> None:
    load = run_workload(7, aborts=100_000)
    rng = random.Random(7)
    # Each brute-force scan walks all 100,000: a few dozen ranges keep the test short.
    for start, end in random_ranges(rng, load.end, 40):
        assert load.txns.aborted_between(start, end) == scan(load.aborted, start, end)


def test_forget_below_and_restore_keep_the_search_exact() -> None:
    load = run_workload(11, aborts=3_000)
    rng = random.Random(11)
    log_start = load.end // 3
    load.txns.forget_below(log_start)
    kept = [a for a in load.aborted if a.last_offset >= log_start]
    assert list(load.txns.aborted) == kept
    restored = PartitionTransactions()
    # Restored from .txnindex entries (in any order), as a partition's load does.
    restored.restore_aborted(reversed([e for e in load.recorded if e.last_offset >= log_start]))
    assert list(restored.aborted) == kept
    for start, end in random_ranges(rng, load.end, 300):
        start = max(start, log_start)
        expected = scan(kept, start, end)
        assert load.txns.aborted_between(start, end) == expected
        assert restored.aborted_between(start, end) == expected
    restored.clear()
    assert list(restored.aborted) == [] and restored.aborted_between(0, load.end) == []


def test_a_stored_stable_offset_past_its_marker_does_not_hide_overlaps() -> None:
    """A .txnindex entry whose last stable offset is past its marker (no valid entry
    has one) must not end the search before a later, overlapping abort."""
    txns = PartitionTransactions()
    txns.restore_aborted([AbortedTxn(1, 0, 15, 1_000), AbortedTxn(2, 3, 40, 41)])
    assert txns.aborted_between(10, 30) == [(1, 0), (2, 3)]


def test_aborted_batches_agree_with_the_workload() -> None:
    load = run_workload(3, aborts=5_000)
    is_aborted = load.txns.aborted_batches()
    assert load.txns.aborted_batches() is is_aborted  # kept until the aborted change
    from_any_order = AbortedBatches(reversed(load.aborted))
    for header, aborted in load.data:
        assert is_aborted(header) is aborted
        assert from_any_order(header) is aborted
    load.txns.forget_below(load.end // 2)
    assert load.txns.aborted_batches() is not is_aborted
