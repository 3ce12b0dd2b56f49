"""The transactional checker: a TxnHistory in, anomalies by class and a verdict out. Pure.

The output topic is read with isolation_level=read_committed, by verifier consumers while
the run goes on and by a final read of every partition once the cluster healed.

* aborted-read: a read_committed reader saw a record of a transaction its producer aborted;
* lost-commit: a record of a committed transaction is missing from the final read;
* partial: the final read holds some but not all records of one transaction (atomicity);
* missing-output: an acknowledged input record has no result in the final read;
* duplicate-output: an input record's result appears more than once in the final read
  (from one or several transactions): exactly-once output is broken;
* phantom: an output record no pipeline transaction ever sent.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from slog.chaos.checker import FINAL
from slog.chaos.checker import _Found as CheckerFound
from slog.chaos.history import Read
from slog.chaos.txn_history import ABORTED, COMMITTED, UNKNOWN, TxnHistory, split_output

CLASSES = ("aborted-read", "lost-commit", "partial", "missing-output", "duplicate-output",
           "phantom")
EXAMPLES = 5


@dataclass
class TxnVerdict:
    faults: int
    input_acked: int
    outcomes: dict[str, int]  # committed / aborted / unknown -> transactions
    output_read: int  # records in the final read of the output topic
    counts: dict[str, int]
    examples: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(self.counts.values())

    def line(self) -> str:
        counts = " ".join(f"{name} {self.counts[name]}" for name in CLASSES)
        txns = ", ".join(f"{self.outcomes[k]} {k}" for k in (COMMITTED, ABORTED, UNKNOWN))
        return (f"VERDICT {'ok' if self.ok else 'FAIL'}: {self.faults} faults, "
                f"{self.input_acked} inputs acked, transactions {txns}, "
                f"{self.output_read} outputs read, {counts}")

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "faults": self.faults, "input_acked": self.input_acked,
                "transactions": dict(self.outcomes), "output_read": self.output_read,
                "anomalies": dict(self.counts), "examples": self.examples}


class _Found(CheckerFound):
    """The log checker's tally, over this checker's classes."""

    def __init__(self) -> None:
        super().__init__()
        self.counts = dict.fromkeys(CLASSES, 0)


def _outcomes(history: TxnHistory) -> dict[str, str]:
    """Each transaction's outcome; one that wrote but never ended is unknown."""
    outcome = {w.transaction: UNKNOWN for w in history.writes}
    for ended in history.outcomes:
        outcome[ended.transaction] = ended.outcome
    return outcome


def check_txn(history: TxnHistory) -> TxnVerdict:
    found = _Found()
    outcome = _outcomes(history)
    written: dict[str, set[str]] = defaultdict(set)
    for write in history.writes:
        written[write.transaction].add(write.value)
    reads = [r for r in history.base.reads if not r.source.startswith("replica-")]
    final = [r for r in reads if r.source == FINAL]

    for read in reads:
        _, transaction = split_output(read.value)
        if read.value not in written.get(transaction, ()):
            found.add("phantom", _where(read))
        elif outcome[transaction] == ABORTED:
            found.add("aborted-read", f"{_where(read)} by {read.source}")

    seen: dict[str, set[str]] = defaultdict(set)  # transaction -> its values in the final read
    for read in final:
        seen[split_output(read.value)[1]].add(read.value)
    for transaction, values in sorted(written.items()):
        kept = seen.get(transaction, set())
        if outcome[transaction] == COMMITTED:
            for value in sorted(values - kept):
                found.add("lost-commit", f"{value} (committed) not in the final read")
        if kept and kept != values:
            found.add("partial", f"{transaction}: {len(kept)} of {len(values)} records "
                                 f"visible, e.g. {sorted(values - kept)[0]} is not")

    results: dict[str, list[Read]] = defaultdict(list)  # input value -> its results
    for read in final:
        results[split_output(read.value)[0]].append(read)
    for ack in history.base.acks:
        if not results.get(ack.value):
            found.add("missing-output", f"input {ack.value} (p{ack.partition}@{ack.offset})")
    for value, found_reads in sorted(results.items()):
        if len(found_reads) > 1:
            found.add("duplicate-output", f"input {value}: {len(found_reads)} results: "
                                          f"{sorted(_where(r) for r in found_reads)}")

    tally = Counter(outcome.values())
    return TxnVerdict(faults=sum(f.events for f in history.base.faults),
                      input_acked=len(history.base.acks),
                      outcomes={k: tally.get(k, 0) for k in (COMMITTED, ABORTED, UNKNOWN)},
                      output_read=len(final), counts=found.counts,
                      examples=dict(found.examples))


def _where(read: Read) -> str:
    return f"{read.value} at p{read.partition}@{read.offset}"
