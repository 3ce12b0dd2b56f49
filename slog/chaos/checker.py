"""The checker: a history in, anomalies by class and one verdict line out. Pure, no I/O.

Anomaly classes (Jepsen's names, as in its Kafka and Redpanda analyses):

* lost-write: acknowledged, never read, although reads reached later offsets
  of the same partition (with a final read of every partition, "read" means
  there: a value a consumer saw before the log lost it is still lost);
* unseen: acknowledged, never read, and nothing later was read either (so the
  reads may simply have stopped short; a complete final read makes this a loss);
* duplicate: one value at two positions (fails the run with idempotence on);
* inconsistent-offsets: two values at one position, across acknowledgements,
  consumer reads, the final read and each replica's files;
* non-monotonic poll: one reader, in one generation, saw a partition's offsets
  go backwards or repeat;
* double-owner: two consumers owned one partition in the same group generation.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from slog.chaos.history import Ack, History

FINAL = "final"  # the read of every partition from 0 to its HW once the cluster healed
REPLICA = "replica-"  # a replica's files, read once the brokers stopped: replica-<broker>
CLASSES = ("lost", "unseen", "duplicate", "inconsistent", "nonmonotonic", "double-owner")
EXAMPLES = 5  # of each anomaly kept for the report


@dataclass
class Verdict:
    faults: int
    acked: int
    verified: int
    counts: dict[str, int]
    examples: dict[str, list[str]] = field(default_factory=dict)
    idempotent: bool = True
    failed_sends: int = 0

    @property
    def failing(self) -> dict[str, int]:
        """The anomaly counts that fail the run (duplicates only with idempotence on)."""
        return {k: v for k, v in self.counts.items()
                if v and (k != "duplicate" or self.idempotent)}

    @property
    def ok(self) -> bool:
        return not self.failing

    def line(self) -> str:
        counts = " ".join(f"{name} {self.counts[name]}" for name in CLASSES)
        return (f"VERDICT {'ok' if self.ok else 'FAIL'}: {self.faults} faults, "
                f"{self.acked} acked, {self.verified} verified, {counts}")

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "faults": self.faults, "acked": self.acked,
                "verified": self.verified, "failed_sends": self.failed_sends,
                "anomalies": dict(self.counts), "examples": self.examples}


class _Found:
    def __init__(self) -> None:
        self.counts = dict.fromkeys(CLASSES, 0)
        self.examples: dict[str, list[str]] = defaultdict(list)

    def add(self, kind: str, example: str) -> None:
        self.counts[kind] += 1
        if len(self.examples[kind]) < EXAMPLES:
            self.examples[kind].append(example)


def check(history: History, *, idempotent: bool = True) -> Verdict:
    found = _Found()
    positions: dict[str, set[tuple[int, int]]] = defaultdict(set)  # value -> read positions
    at: dict[tuple[int, int], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    highest_read: dict[int, int] = defaultdict(lambda: -1)
    last: dict[tuple[str, int, int], int] = {}
    # With a final read, an acknowledged value counts as kept only if the final log holds it:
    # a consumer that read it once does not make up for the log losing it later.
    has_final = any(read.source == FINAL for read in history.reads)
    kept: dict[str, set[tuple[int, int]]] = defaultdict(set)
    # partition -> replica -> the offsets found in its files
    replicas: dict[int, dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))

    for read in history.reads:
        pos = (read.partition, read.offset)
        if read.source.startswith(REPLICA):
            replicas[read.partition][read.source].add(read.offset)
        positions[read.value].add(pos)
        at[pos][read.value].add(read.source)
        if not has_final or read.source == FINAL:
            kept[read.value].add(pos)
            highest_read[read.partition] = max(highest_read[read.partition], read.offset)
        key = (read.source, read.generation, read.partition)
        previous = last.get(key)
        if previous is not None and read.offset <= previous:
            found.add("nonmonotonic", f"{read.source} gen {read.generation} p{read.partition}: "
                                      f"offset {read.offset} after {previous}")
        last[key] = read.offset
    for ack in history.acks:
        at[(ack.partition, ack.offset)][ack.value].add("ack")

    verified = 0
    for ack in history.acks:
        seen = kept.get(ack.value)
        if seen and (ack.partition, ack.offset) in seen:
            verified += 1
            _check_replicas(ack, replicas.get(ack.partition, {}), found)
        elif not seen:
            kind = "lost" if highest_read[ack.partition] > ack.offset else "unseen"
            found.add(kind, f"{ack.value} acked at p{ack.partition}@{ack.offset}")
        # seen elsewhere only: the position holds two values, reported as inconsistent below
    for value, where in positions.items():
        if len(where) > 1:
            found.add("duplicate", f"{value} at {sorted(where)}")
    for (partition, offset), values in at.items():
        if len(values) > 1:
            found.add("inconsistent", f"p{partition}@{offset}: " + ", ".join(
                f"{v} ({'/'.join(sorted(s))})" for v, s in sorted(values.items())))
    _check_ownership(history, found)
    return Verdict(faults=sum(f.events for f in history.faults), acked=len(history.acks),
                   verified=verified, counts=found.counts, examples=dict(found.examples),
                   idempotent=idempotent, failed_sends=history.failed_sends)


def _check_replicas(ack: Ack, replicas: dict[str, set[int]], found: _Found) -> None:
    """A verified record must also be in every replica's files, from where each replica's
    log starts (a different value there is already an inconsistency)."""
    for source, offsets in sorted(replicas.items()):
        if ack.offset not in offsets and ack.offset >= min(offsets):
            found.add("lost", f"{ack.value} acked at p{ack.partition}@{ack.offset}, "
                              f"missing from {source}")


def _check_ownership(history: History, found: _Found) -> None:
    owners: dict[tuple[int, int], set[str]] = defaultdict(set)
    for assignment in history.assignments:
        for partition in assignment.partitions:
            owners[(assignment.generation, partition)].add(assignment.consumer)
    for (generation, partition), consumers in sorted(owners.items()):
        if len(consumers) > 1:
            found.add("double-owner", f"gen {generation} p{partition}: {sorted(consumers)}")
