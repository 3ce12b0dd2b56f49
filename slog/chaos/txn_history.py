"""What the transactional chaos workload records beyond the plain history: each record a
pipeline transaction wrote, and how each transaction ended as far as its producer knows.

An output record's value is ``<input value>|<transaction>``, so the checker can tell
from a value alone which input it processed and which transaction wrote it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slog.chaos.history import History, HistoryLog, event_json, from_json

COMMITTED, ABORTED, UNKNOWN = "committed", "aborted", "unknown"
SEPARATOR = "|"


def output_value(input_value: str, transaction: str) -> str:
    return f"{input_value}{SEPARATOR}{transaction}"


def split_output(value: str) -> tuple[str, str]:
    """``<input>|<transaction>`` -> (input, transaction); ('value', '') when malformed."""
    input_value, _, transaction = value.rpartition(SEPARATOR)
    return (input_value, transaction) if input_value else (value, "")


@dataclass(frozen=True, slots=True)
class TxnWrite:
    """Transaction ``transaction`` sent ``value`` (the result of one input record)."""

    transaction: str
    value: str


@dataclass(frozen=True, slots=True)
class TxnOutcome:
    """How ``transaction`` ended for its producer: committed (commit_transaction returned),
    aborted (abort_transaction returned) or unknown (neither call succeeded)."""

    transaction: str
    outcome: str
    error: str = ""


@dataclass
class TxnHistory:
    base: History = field(default_factory=History)  # input acks, output reads, faults
    writes: list[TxnWrite] = field(default_factory=list)
    outcomes: list[TxnOutcome] = field(default_factory=list)


_TYPES: dict[str, type] = {"txn-write": TxnWrite, "txn-outcome": TxnOutcome}
_NAMES = {cls: name for name, cls in _TYPES.items()}


class TxnLog:
    """Thread-safe; the plain events go to ``base`` (a HistoryLog, shared with the nemesis
    and the verifiable producer), the transaction events are kept here."""

    def __init__(self, base: HistoryLog):
        self.base = base
        self._lock = threading.Lock()
        self._writes: list[TxnWrite] = []
        self._outcomes: list[TxnOutcome] = []

    def wrote(self, transaction: str, values: Iterable[str]) -> None:
        with self._lock:
            self._writes.extend(TxnWrite(transaction, v) for v in values)

    def ended(self, transaction: str, outcome: str, error: str = "") -> None:
        with self._lock:
            self._outcomes.append(TxnOutcome(transaction, outcome, error))

    @property
    def history(self) -> TxnHistory:
        with self._lock:
            return TxnHistory(self.base.history, list(self._writes), list(self._outcomes))

    def append_to(self, path: Path) -> None:
        """Add the transaction events to a history file the base log wrote."""
        history = self.history
        with path.open("a", encoding="utf-8") as handle:
            events: list[TxnWrite | TxnOutcome] = [*history.writes, *history.outcomes]
            for event in events:
                handle.write(event_json(_NAMES[type(event)], event) + "\n")


def read_txn_history(lines: Iterable[str]) -> TxnHistory:
    """A transactional history back from JSON lines (plain and transaction events)."""
    log = TxnLog(HistoryLog())
    for line in lines:
        if not line.strip():
            continue
        data: dict[str, Any] = json.loads(line)
        cls = _TYPES.get(data["type"])
        if cls is TxnWrite:
            log.wrote(data["transaction"], [data["value"]])
        elif cls is TxnOutcome:
            log.ended(data["transaction"], data["outcome"], data.get("error", ""))
        else:
            log.base.add(from_json(line))
    return log.history
