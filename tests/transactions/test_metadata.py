"""TransactionMetadata: Kafka's state machine, pure; and its __transaction_state records."""

from __future__ import annotations

import pytest

from slog.core.kafka_errors import ErrorCode
from slog.core.wire import WireFormatError
from slog.transactions.metadata import (
    MAX_PRODUCER_EPOCH,
    TransactionError,
    TransactionMetadata,
    TransactionState,
)
from slog.transactions.records import decode_key, decode_value, encode_key, encode_value

S = TransactionState


def _apply(meta: TransactionMetadata, transit: object) -> None:
    meta.complete(transit)  # type: ignore[arg-type]


def _ongoing() -> TransactionMetadata:
    meta = TransactionMetadata("tx", producer_id=7)
    _apply(meta, meta.prepare_epoch_bump(60_000, now_ms=1))
    _apply(meta, meta.prepare_add_partitions({("t", 0)}, now_ms=2))
    return meta


def test_a_transaction_commits_through_kafkas_states() -> None:
    meta = TransactionMetadata("tx", producer_id=7)
    bump = meta.prepare_epoch_bump(60_000, now_ms=1)
    assert (bump.producer_epoch, bump.state) == (0, S.EMPTY)
    assert meta.state is S.EMPTY and meta.producer_epoch == -1  # not applied yet
    _apply(meta, bump)
    _apply(meta, meta.prepare_add_partitions({("t", 0)}, now_ms=5))
    _apply(meta, meta.prepare_add_partitions({("t", 1)}, now_ms=9))
    assert meta.state is S.ONGOING and meta.partitions == {("t", 0), ("t", 1)}
    assert meta.start_ms == 5  # the transaction started with its first partition
    _apply(meta, meta.prepare_end(commit=True, now_ms=10))
    assert meta.state is S.PREPARE_COMMIT
    _apply(meta, meta.prepare_complete(now_ms=11))
    assert meta.state is S.COMPLETE_COMMIT and not meta.partitions
    # The next transaction starts from CompleteCommit, at the same epoch.
    _apply(meta, meta.prepare_add_partitions({("t", 2)}, now_ms=20))
    assert meta.state is S.ONGOING and meta.start_ms == 20 and meta.producer_epoch == 0


def test_a_pending_change_makes_others_wait() -> None:
    meta = _ongoing()
    meta.prepare_end(commit=False, now_ms=3)
    with pytest.raises(TransactionError) as raised:
        meta.prepare_add_partitions({("t", 1)}, now_ms=4)
    assert raised.value.code is ErrorCode.concurrent_transactions
    meta.abandon()  # the write failed: nothing changed
    assert meta.state is S.ONGOING and meta.pending is None


@pytest.mark.parametrize("commit", [True, False])
def test_a_completion_and_the_next_start_are_two_transitions_in_one_change(
        commit: bool) -> None:
    meta = _ongoing()
    _apply(meta, meta.prepare_end(commit=commit, now_ms=3))
    complete, begin = meta.prepare_complete_and_add({("t", 1)}, now_ms=7)
    assert complete.state is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)
    assert not complete.partitions
    assert (begin.state, begin.partitions, begin.start_ms) == (S.ONGOING, {("t", 1)}, 7)
    assert meta.state is (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT)  # not applied
    assert meta.pending == begin
    _apply(meta, begin)
    assert meta.state is S.ONGOING and meta.partitions == {("t", 1)}


def test_only_a_prepared_transaction_completes_with_the_next_start() -> None:
    meta = _ongoing()
    with pytest.raises(TransactionError) as raised:
        meta.prepare_complete_and_add({("t", 1)}, now_ms=4)
    assert raised.value.code is ErrorCode.invalid_txn_state
    assert meta.pending is None and meta.state is S.ONGOING


@pytest.mark.parametrize("state", [S.EMPTY, S.COMPLETE_ABORT, S.PREPARE_COMMIT])
def test_ending_what_is_not_ongoing_is_an_invalid_state(state: TransactionState) -> None:
    meta = TransactionMetadata("tx", producer_id=7, producer_epoch=0, state=state)
    with pytest.raises(TransactionError) as raised:
        meta.prepare_end(commit=True, now_ms=1)
    assert raised.value.code is ErrorCode.invalid_txn_state


def test_fencing_aborts_at_the_next_epoch_and_rolls_back_if_unwritten() -> None:
    meta = _ongoing()
    fence = meta.prepare_fence_and_abort(now_ms=5)
    assert meta.state is S.PREPARE_EPOCH_FENCE
    assert (fence.state, fence.producer_epoch, fence.last_producer_epoch) == \
        (S.PREPARE_ABORT, 1, 0)
    meta.abandon()
    assert meta.state is S.ONGOING and meta.producer_epoch == 0
    _apply(meta, meta.prepare_fence_and_abort(now_ms=6))
    assert meta.state is S.PREPARE_ABORT and meta.producer_epoch == 1


def test_an_exhausted_epoch_gets_a_new_producer_id() -> None:
    meta = TransactionMetadata("tx", producer_id=7, producer_epoch=MAX_PRODUCER_EPOCH - 1)
    assert meta.epoch_exhausted
    _apply(meta, meta.prepare_epoch_bump(1000, now_ms=1, new_producer_id=8))
    assert (meta.producer_id, meta.producer_epoch, meta.last_producer_id) == (8, 0, 7)


def test_expiry_counts_only_open_transactions() -> None:
    meta = _ongoing()
    assert not meta.is_expired(now_ms=2 + 60_000)
    assert meta.is_expired(now_ms=3 + 60_000)
    _apply(meta, meta.prepare_end(commit=True, now_ms=4))
    assert not meta.is_expired(now_ms=10**9)


def test_kafka_state_names() -> None:
    assert [s.kafka_name for s in S] == [
        "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
        "CompleteAbort", "Dead", "PrepareEpochFence"]


def test_records_round_trip_in_kafkas_layout() -> None:
    meta = _ongoing()
    meta.partitions.add(("other", 3))
    value = encode_value(meta.snapshot())
    # version 0, producer id 7, epoch 0, timeout 60000, status Ongoing (1), then partitions
    assert value[:17] == bytes.fromhex("0000" "0000000000000007" "0000" "0000ea60" "01")
    assert decode_value(value) == meta.snapshot()
    assert encode_key("tx") == b"\x00\x00\x00\x02tx"
    assert decode_key(encode_key("tx")) == "tx"


@pytest.mark.parametrize("data", [b"", b"\x00\x01\x00\x00", b"\x00\x00" + b"\x00" * 10,
                                  bytes.fromhex("0000" "0000000000000007" "0000" "0000ea60"
                                                "09" "00000000" + "00" * 16)])
def test_bad_records_raise_wire_format_errors(data: bytes) -> None:
    with pytest.raises(WireFormatError):
        decode_value(data)
