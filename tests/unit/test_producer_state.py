from __future__ import annotations

from slog.core.batch import BatchHeader
from slog.core.producer_state import ProducerStateManager, SequenceCheck


def header(pid: int, epoch: int, seq: int, count: int = 1) -> BatchHeader:
    return BatchHeader(0, 100, 0, 2, 0, 0, count - 1, 0, 0, pid, epoch, seq, count)


def test_retry_of_a_recent_batch_is_a_duplicate() -> None:
    state = ProducerStateManager()
    state.update(header(7, 0, 0, 5), first_offset=100)
    state.update(header(7, 0, 5, 5), first_offset=105)
    verdict, previous = state.check(header(7, 0, 0, 5))
    assert verdict is SequenceCheck.DUPLICATE and previous is not None
    assert previous.first_offset == 100
    assert state.check(header(7, 0, 10, 1))[0] is SequenceCheck.NEW


def test_gap_is_out_of_order_and_old_epoch_is_fenced() -> None:
    state = ProducerStateManager()
    state.update(header(7, 1, 0, 1), first_offset=0)
    assert state.check(header(7, 1, 5))[0] is SequenceCheck.OUT_OF_ORDER
    assert state.check(header(7, 0, 1))[0] is SequenceCheck.FENCED_EPOCH
    assert state.check(header(7, 2, 0))[0] is SequenceCheck.NEW
    assert state.check(header(7, 2, 3))[0] is SequenceCheck.OUT_OF_ORDER


def test_only_the_last_five_batches_are_remembered() -> None:
    state = ProducerStateManager()
    for i in range(6):
        state.update(header(1, 0, i), first_offset=i)
    assert state.check(header(1, 0, 0))[0] is SequenceCheck.OUT_OF_ORDER
    assert state.check(header(1, 0, 1))[0] is SequenceCheck.DUPLICATE


def test_non_idempotent_batches_are_always_new() -> None:
    state = ProducerStateManager()
    assert state.check(header(-1, -1, -1))[0] is SequenceCheck.NEW
