"""The transactional checker against hand-made histories: one history per anomaly class,
each found alone, and a clean history found clean."""

from __future__ import annotations

from pathlib import Path

from slog.chaos.history import Ack, Fault, History, HistoryLog, Read, iter_file
from slog.chaos.txn_checker import CLASSES, check_txn
from slog.chaos.txn_history import (
    ABORTED,
    COMMITTED,
    UNKNOWN,
    TxnHistory,
    TxnLog,
    TxnOutcome,
    TxnWrite,
    output_value,
    read_txn_history,
)

INPUTS = ["in-0", "in-1", "in-2", "in-3"]


def clean() -> TxnHistory:
    """Four acked inputs; t0 (two of them) and t2 (the other two) committed and read by the
    verifier and the final read; t1 processed the last two first and aborted, unread."""
    acks = [Ack(v, 0, i) for i, v in enumerate(INPUTS)]
    writes = [TxnWrite("t0", output_value(v, "t0")) for v in INPUTS[:2]]
    writes += [TxnWrite("t1", output_value(v, "t1")) for v in INPUTS[2:]]
    writes += [TxnWrite("t2", output_value(v, "t2")) for v in INPUTS[2:]]
    outcomes = [TxnOutcome("t0", COMMITTED), TxnOutcome("t1", ABORTED, "fenced"),
                TxnOutcome("t2", COMMITTED)]
    # offsets 2-3 hold t1's aborted records and 4 its marker; t2 follows
    visible = [(0, writes[0].value), (1, writes[1].value), (5, writes[4].value),
               (6, writes[5].value)]
    reads = [Read(source, 0, offset, value) for source in ("verifier", "final")
             for offset, value in visible]
    base = History(acks=acks, reads=reads, faults=[Fault("kill-leader", 2, 0.0, 1.0)])
    return TxnHistory(base, writes, outcomes)


def only(verdict_counts: dict[str, int], **expected: int) -> bool:
    return verdict_counts == {n: expected.get(n.replace("-", "_"), 0) for n in CLASSES}


def test_clean_history_is_ok() -> None:
    verdict = check_txn(clean())
    assert verdict.ok and only(verdict.counts)
    assert verdict.outcomes == {COMMITTED: 2, ABORTED: 1, UNKNOWN: 0}
    assert verdict.line() == (
        "VERDICT ok: 1 faults, 4 inputs acked, transactions 2 committed, 1 aborted, 0 unknown, "
        "4 outputs read, aborted-read 0 lost-commit 0 partial 0 missing-output 0 "
        "duplicate-output 0 phantom 0")


def test_aborted_read() -> None:
    history = clean()
    history.base.reads.append(Read("verifier", 0, 2, output_value("in-2", "t1")))
    verdict = check_txn(history)
    assert only(verdict.counts, aborted_read=1)
    assert "in-2|t1 at p0@2 by verifier" in verdict.examples["aborted-read"][0]


def test_lost_committed_write() -> None:
    history = clean()  # all of t2 gone from the final log (the verifier had read it)
    history.base.reads[:] = [r for r in history.base.reads
                             if not (r.source == "final" and r.value.endswith("|t2"))]
    verdict = check_txn(history)
    # both records of the committed t2 are lost, and so are the results of in-2 and in-3
    assert only(verdict.counts, lost_commit=2, missing_output=2)


def test_partial_transaction() -> None:
    history = clean()  # t2's outcome unknown to its producer, and half of it visible
    history.outcomes[-1] = TxnOutcome("t2", UNKNOWN, "timed out")
    history.base.reads[:] = [r for r in history.base.reads
                             if not (r.source == "final" and r.value == "in-3|t2")]
    verdict = check_txn(history)
    assert only(verdict.counts, partial=1, missing_output=1)
    assert verdict.examples["partial"] == ["t2: 1 of 2 records visible, e.g. in-3|t2 is not"]


def test_unknown_outcome_all_or_nothing_is_fine() -> None:
    history = clean()  # an indefinite commit that took effect: no anomaly
    history.outcomes[-1] = TxnOutcome("t2", UNKNOWN, "timed out")
    assert check_txn(history).ok


def test_duplicate_output() -> None:
    history = clean()  # t1 was in fact committed too: in-2 and in-3 have two results each
    history.outcomes[1] = TxnOutcome("t1", COMMITTED)
    history.base.reads += [Read("final", 0, 2, output_value("in-2", "t1")),
                           Read("final", 0, 3, output_value("in-3", "t1"))]
    verdict = check_txn(history)
    assert only(verdict.counts, duplicate_output=2)
    assert verdict.examples["duplicate-output"][0] == (
        "input in-2: 2 results: ['in-2|t1 at p0@2', 'in-2|t2 at p0@5']")


def test_missing_output() -> None:
    history = clean()  # an input acked after the pipeline stopped: never processed
    history.base.acks.append(Ack("in-4", 0, 4))
    verdict = check_txn(history)
    assert only(verdict.counts, missing_output=1)


def test_phantom() -> None:
    history = clean()
    history.base.reads.append(Read("final", 1, 0, "garbage"))
    verdict = check_txn(history)
    assert only(verdict.counts, phantom=1)


def test_history_file_round_trip(tmp_path: Path) -> None:
    original = clean()
    path = tmp_path / "history.jsonl"
    base = HistoryLog(path)
    base.add_all([*original.base.acks, *original.base.reads, *original.base.faults])
    base.close()
    log = TxnLog(base)
    for write in original.writes:
        log.wrote(write.transaction, [write.value])
    for outcome in original.outcomes:
        log.ended(outcome.transaction, outcome.outcome, outcome.error)
    log.append_to(path)
    back = read_txn_history(iter_file(path))
    assert back == original
    assert check_txn(back).ok
