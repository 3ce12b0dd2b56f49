"""PendingTxnOffsets: what OffsetFetch(require_stable) must report as unstable."""

from __future__ import annotations

from slog.groups.offsets import OffsetAndMetadata
from slog.transactions.offsets import PendingTxnOffsets

TP = ("tx-in", 0)


def _offset(value: int) -> OffsetAndMetadata:
    return OffsetAndMetadata(value, 0, "", 0, None)


def test_committed_offsets_stay_unstable_until_their_append_completes() -> None:
    # The regression: take() at the COMMIT marker emptied the pending set before the
    # append stored the offset, so a fetch in between answered the previous offset.
    pending = PendingTxnOffsets()
    pending.add(7, 0, "g", {TP: _offset(10)})
    assert pending.partitions_of("g") == {TP}
    taken = pending.take(7, lambda group: True)
    assert taken == {"g": {TP: _offset(10)}}
    pending.storing("g", taken["g"])
    assert pending.partitions_of("g") == {TP}
    pending.stored("g", taken["g"])
    assert pending.partitions_of("g") == set()


def test_overlapping_appends_of_one_partition_are_counted() -> None:
    pending = PendingTxnOffsets()
    pending.storing("g", [TP])
    pending.storing("g", [TP])
    pending.stored("g", [TP])
    assert pending.partitions_of("g") == {TP}
    pending.stored("g", [TP])
    pending.stored("g", [TP])  # an extra report changes nothing
    assert pending.partitions_of("g") == set()


def test_forgetting_a_group_drops_its_offsets_from_every_open_transaction() -> None:
    pending = PendingTxnOffsets()
    other = ("tx-in", 1)
    pending.add(7, 0, "g", {TP: _offset(10), other: _offset(3)})
    pending.add(8, 0, "g", {TP: _offset(11)})
    pending.add(8, 0, "h", {TP: _offset(1)})
    pending.forget("g", [TP])
    assert pending.partitions_of("g") == {other}
    pending.forget("g")
    assert pending.partitions_of("g") == set()
    assert pending.take(7, lambda group: True) == {}
    assert pending.take(8, lambda group: True) == {"h": {TP: _offset(1)}}
