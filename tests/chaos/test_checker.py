"""The checker against hand-made histories: each anomaly class found, and nothing else."""

from __future__ import annotations

from slog.chaos.checker import CLASSES, check
from slog.chaos.history import (
    Ack,
    Assignment,
    Fault,
    History,
    HistoryLog,
    Read,
    read_history,
    to_json,
)
from slog.chaos.load import ack_rate, longest_stalls


def clean_history() -> History:
    """Three acknowledged values on two partitions, read by a consumer, the final read and
    two replicas, with one consumer per partition per generation."""
    acks = [Ack("v0", 0, 0), Ack("v1", 0, 1), Ack("v2", 1, 0)]
    reads = []
    for source in ("c0", "final", "replica-1", "replica-2"):
        generation = 3 if source == "c0" else -1
        reads += [Read(source, a.partition, a.offset, a.value, generation) for a in acks]
    return History(acks=acks, reads=reads,
                   assignments=[Assignment("c0", 3, (0,)), Assignment("c1", 3, (1,))],
                   faults=[Fault("kill", 1, 0.0, 1.0), Fault("rolling-restart", 0, 1, 2, "", 3)])


def only(counts: dict[str, int], **expected: int) -> bool:
    return counts == {name: expected.get(name.replace("-", "_"), 0) for name in CLASSES}


def test_clean_history_is_ok() -> None:
    verdict = check(clean_history())
    assert verdict.ok
    assert only(verdict.counts)
    assert verdict.line() == ("VERDICT ok: 4 faults, 3 acked, 3 verified, lost 0 unseen 0 "
                              "duplicate 0 inconsistent 0 nonmonotonic 0 double-owner 0")


def test_lost_write_acked_missing_while_later_offsets_were_read() -> None:
    history = clean_history()
    history.acks.append(Ack("gone", 0, 2))
    history.reads.append(Read("final", 0, 3, "later"))
    verdict = check(history)
    assert only(verdict.counts, lost=1)
    assert not verdict.ok
    assert "gone acked at p0@2" in verdict.examples["lost"][0]
    assert verdict.line().startswith("VERDICT FAIL: 4 faults, 4 acked, 3 verified, lost 1 ")


def test_unseen_acked_and_nothing_later_read() -> None:
    history = clean_history()
    history.acks.append(Ack("tail", 1, 1))
    verdict = check(history)
    assert only(verdict.counts, unseen=1)
    assert not verdict.ok


def test_duplicate_fails_only_with_idempotence() -> None:
    history = clean_history()
    history.reads.append(Read("final", 0, 2, "v0"))  # v0 again, at offset 2
    assert only(check(history).counts, duplicate=1)
    assert not check(history, idempotent=True).ok
    assert check(history, idempotent=False).ok


def test_inconsistent_offsets_across_replicas() -> None:
    history = clean_history()
    history.reads.append(Read("replica-3", 1, 0, "other"))
    verdict = check(history)
    assert only(verdict.counts, inconsistent=1)
    assert "replica-3" in verdict.examples["inconsistent"][0]


def test_inconsistent_offsets_between_ack_and_read() -> None:
    history = clean_history()
    history.acks.append(Ack("moved", 1, 5))
    history.reads.append(Read("final", 1, 5, "intruder"))
    history.reads.append(Read("final", 1, 6, "moved"))
    verdict = check(history)
    assert verdict.counts["inconsistent"] == 1  # p1@5 holds "moved" (ack) and "intruder"
    assert verdict.counts["lost"] == verdict.counts["unseen"] == 0  # "moved" was read
    assert verdict.verified == 3
    assert not verdict.ok


def test_nonmonotonic_poll_within_a_generation() -> None:
    history = clean_history()
    history.reads.append(Read("c0", 0, 0, "v0", 3))  # back to offset 0 in generation 3
    verdict = check(history)
    assert only(verdict.counts, nonmonotonic=1)


def test_rereading_after_a_rebalance_is_monotonic() -> None:
    history = clean_history()
    history.reads.append(Read("c0", 0, 0, "v0", 4))  # a new generation may start over
    assert check(history).ok


def test_double_owner_within_a_generation() -> None:
    history = clean_history()
    history.assignments.append(Assignment("c1", 3, (0, 1)))
    verdict = check(history)
    assert only(verdict.counts, double_owner=1)
    assert verdict.examples["double-owner"] == ["gen 3 p0: ['c0', 'c1']"]


def test_owner_changes_across_generations_are_fine() -> None:
    history = clean_history()
    history.assignments.append(Assignment("c1", 4, (0, 1)))
    assert check(history).ok


def test_unacknowledged_reads_are_not_anomalies() -> None:
    history = clean_history()
    history.reads.append(Read("final", 1, 1, "sent-but-never-acked"))
    history.failed_sends = 1
    verdict = check(history)
    assert verdict.ok and verdict.failed_sends == 1


def test_every_anomaly_at_once_is_counted_once_each() -> None:
    history = clean_history()
    history.acks += [Ack("gone", 0, 2), Ack("tail", 1, 9)]
    history.reads += [Read("final", 0, 3, "later"), Read("final", 0, 4, "v1"),
                      Read("replica-3", 0, 3, "other"), Read("c0", 0, 0, "v0", 3)]
    history.assignments.append(Assignment("c1", 3, (0,)))
    verdict = check(history)
    assert only(verdict.counts, lost=1, unseen=1, duplicate=1, inconsistent=1, nonmonotonic=1,
                double_owner=1)


def test_history_round_trips_through_json_lines(tmp_path) -> None:  # type: ignore[no-untyped-def]
    history = clean_history()
    history.acks.append(Ack("gone", 0, 2))
    history.reads.append(Read("final", 0, 3, "later"))
    path = tmp_path / "history.jsonl"
    log = HistoryLog(path)
    log.add_all([*history.acks, *history.reads, *history.assignments, *history.faults])
    log.close()
    again = read_history(path.read_text().splitlines())
    assert again == history
    assert check(again).line() == check(history).line()
    assert to_json(Ack("x", 1, 2, 3.5)) == \
        '{"type":"ack","value":"x","partition":1,"offset":2,"time":3.5}'


def test_load_figures() -> None:
    acks = [Ack(f"v{i}", i % 2, i, 10.0 + i * 0.5) for i in range(20)]  # 2 acks/s
    assert ack_rate(acks, 10.0, 15.0) == 2.0
    assert ack_rate(acks, 15.0, 15.0) == 0.0
    # partition 0 acks at 10, 11, 12, ...; a fault from 11.5 to 14.2 sees 12, 13, 14
    stalls = longest_stalls(acks, [Fault("kill", 1, 11.5, 14.2), Fault("kill", 1, 12, 12.5)])
    assert stalls == {"kill": 1.0}
    assert longest_stalls([], [Fault("pause", 2, 3.0, 5.5)]) == {"pause": 2.5}


def test_a_value_consumed_then_lost_from_the_log_is_lost() -> None:
    """What the harness found (see test_maximal_isr): acked, read by a consumer, then
    truncated away and its offset reused by a later value."""
    history = clean_history()
    history.acks += [Ack("acked-then-truncated", 0, 2), Ack("reuses-the-offset", 0, 2)]
    history.reads += [Read("c0", 0, 2, "acked-then-truncated", 3)]
    for source in ("final", "replica-1", "replica-2"):  # the log as every replica has it
        history.reads += [Read(source, 0, 2, "reuses-the-offset"), Read(source, 0, 3, "later")]
    verdict = check(history)
    assert only(verdict.counts, lost=1, inconsistent=1)
    assert verdict.verified == 4
    assert "acked-then-truncated" in verdict.examples["lost"][0]


def test_a_record_missing_from_one_replica_is_lost() -> None:
    """Verified through the final read, but one replica's files lack it (a replica that
    recovered from a power loss without it)."""
    history = clean_history()
    history.reads = [r for r in history.reads if (r.source, r.value) != ("replica-2", "v1")]
    verdict = check(history)
    assert only(verdict.counts, lost=1)
    assert verdict.verified == 3
    assert verdict.examples["lost"] == ["v1 acked at p0@1, missing from replica-2"]
