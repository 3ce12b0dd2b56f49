"""Cluster events: from the controller's metadata log, or from comparing snapshots.

Both sources describe a change the same way (:func:`partition_events`,
:func:`broker_events`), so the events pane reads alike against slog's data dir
and against a real Kafka. Everything here is pure except
:class:`MetadataLogEvents`, which tails the log files.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from slog.core import metadata_records as records
from slog.core.health import NO_LEADER
from slog.core.metadata import MetadataImage
from slog.tui.model import ClusterSnapshot, GroupInfo, PartitionInfo, TransactionInfo

INFO, WARN, ERROR = "info", "warn", "error"


@dataclass(frozen=True)
class Event:
    at: float  # seconds since the epoch
    kind: str  # leader, isr-shrink, isr-expand, broker-up, broker-down, topic, rebalance,
    # txn-hanging...
    text: str
    severity: str = INFO
    change: str = ""  # for per-partition events, what changed ("-[3]", "3 → 1")


PARTITION_KINDS = {"leader": "leader moved", "isr-shrink": "ISR shrank",
                   "isr-expand": "ISR expanded"}
CONDENSE_FROM = 4  # this many like events at one instant become one line


def condense(events: list[Event]) -> list[Event]:
    """Fold per-partition events of one kind at the same second into one line each:
    a broker's death is "ISR shrank on 50 partitions: -[3]", not 50 lines."""
    groups: dict[tuple[int, str], list[Event]] = {}
    for e in events:
        if e.kind in PARTITION_KINDS:
            groups.setdefault((int(e.at), e.kind), []).append(e)
    out, done = [], set()
    for e in events:
        key = (int(e.at), e.kind)
        same = groups.get(key, [])
        if len(same) < CONDENSE_FROM:
            out.append(e)
        elif key not in done:
            done.add(key)
            changes = {x.change for x in same}
            what = f": {changes.pop()}" if len(changes) == 1 else ""
            worst = ERROR if any(x.severity == ERROR for x in same) else same[0].severity
            out.append(Event(e.at, e.kind, f"{PARTITION_KINDS[e.kind]} on {len(same)} "
                             f"partitions{what}", worst))
    return out


def _leader(broker: int) -> str:
    return "none" if broker == NO_LEADER else str(broker)


def partition_events(at: float, name: str, old_leader: int | None, old_isr: Iterable[int],
                     leader: int, isr: Iterable[int]) -> list[Event]:
    """Leader change and ISR shrink/expand of one partition (``name`` is topic-partition);
    ``old_leader`` None means the partition is new."""
    if old_leader is None:
        return []
    events = []
    before, after = set(old_isr), set(isr)
    if leader != old_leader:
        severity = ERROR if leader == NO_LEADER else INFO
        change = f"{_leader(old_leader)} → {_leader(leader)}"
        events.append(Event(at, "leader", f"{name} leader {change}", severity, change))
    if before - after:
        change = f"-{sorted(before - after)}"
        events.append(Event(at, "isr-shrink", f"{name} ISR shrank: {change} now {sorted(after)}",
                            WARN, change))
    if after - before:
        change = f"+{sorted(after - before)}"
        events.append(Event(at, "isr-expand",
                            f"{name} ISR expanded: {change} now {sorted(after)}", INFO, change))
    return events


def broker_events(at: float, broker_id: int, was_up: bool | None, up: bool,
                  why: str = "") -> list[Event]:
    if was_up is None or was_up == up:
        return []
    if up:
        return [Event(at, "broker-up", f"broker {broker_id} is up")]
    return [Event(at, "broker-down", f"broker {broker_id} is down{why}", ERROR)]


# -- snapshot diffs (any Kafka) ----------------------------------------------------------

def _partitions(snapshot: ClusterSnapshot) -> dict[tuple[str, int], PartitionInfo]:
    return {(p.topic, p.partition): p for p in snapshot.partitions}


def _group_events(at: float, old: GroupInfo | None, new: GroupInfo) -> list[Event]:
    if old is None:
        return [Event(at, "group", f"group {new.group_id} appeared ({new.state})")]
    members_before = {m.member_id for m in old.members}
    members_after = {m.member_id for m in new.members}
    if old.state != new.state or members_before != members_after:
        change = f"{old.state} → {new.state}" if old.state != new.state else new.state
        return [Event(at, "rebalance", f"group {new.group_id} {change}, "
                      f"{len(members_after)} member(s)")]
    return []


def _hanging_events(old: ClusterSnapshot | None, new: ClusterSnapshot) -> list[Event]:
    """Transactions that began hanging (open past their timeout) since the last refresh
    (on the first refresh: those hanging already)."""
    before: dict[str, TransactionInfo] = {} if old is None else {
        t.transactional_id: t for t in old.transactions}
    events = []
    for t in new.transactions:
        was = before.get(t.transactional_id)
        if not t.hanging(new.taken_at) or (was is not None and old is not None
                                           and was.hanging(old.taken_at)
                                           and was.producer_id == t.producer_id):
            continue
        age = t.age_s(new.taken_at) or 0.0
        events.append(Event(new.taken_at, "txn-hanging",
                            f"transaction {t.transactional_id} is hanging: open {age:.0f}s, "
                            f"timeout {t.timeout_ms / 1000:g}s", ERROR))
    return events


def diff_events(old: ClusterSnapshot | None, new: ClusterSnapshot,
                include_metadata: bool = True) -> list[Event]:
    """What changed between two refreshes. ``include_metadata=False`` leaves out
    what the metadata log reports better (brokers, leaders, ISR, topics)."""
    if old is None:
        return _hanging_events(None, new)
    at = new.taken_at
    events: list[Event] = []
    if include_metadata:
        if old.controller_id != new.controller_id:
            events.append(Event(at, "controller", f"controller {_leader(old.controller_id)} → "
                                f"{_leader(new.controller_id)}", WARN))
        before = {b.broker_id: b.alive and not b.fenced for b in old.brokers}
        for b in new.brokers:
            events += broker_events(at, b.broker_id, before.get(b.broker_id),
                                    b.alive and not b.fenced)
        old_topics = {t.name for t in old.topics}
        new_topics = {t.name for t in new.topics}
        events += [Event(at, "topic", f"topic {n} created")
                   for n in sorted(new_topics - old_topics)]
        events += [Event(at, "topic", f"topic {n} deleted", WARN)
                   for n in sorted(old_topics - new_topics)]
        previous = _partitions(old)
        for key, p in _partitions(new).items():
            was = previous.get(key)
            if was is None and p.topic in old_topics:
                events.append(Event(at, "topic", f"{p.topic}-{p.partition} added"))
            events += partition_events(at, f"{p.topic}-{p.partition}",
                                       None if was is None else was.leader,
                                       () if was is None else was.isr, p.leader, p.isr)
    old_groups = {g.group_id: g for g in old.groups}
    for g in new.groups:
        events += _group_events(at, old_groups.get(g.group_id), g)
    for gone in sorted(old_groups.keys() - {g.group_id for g in new.groups}):
        events.append(Event(at, "group", f"group {gone} is gone"))
    return events + _hanging_events(old, new)


# -- the metadata log (slog's data dir) --------------------------------------------------

def record_events(image: MetadataImage, record: records.MetadataRecord, at: float) -> list[Event]:
    """The events one metadata record means, judged against the image before it."""
    if isinstance(record, records.ControllerRecord):
        return [Event(at, "controller", f"broker {record.controller_id} became controller "
                      f"(epoch {record.controller_epoch})", WARN)]
    if isinstance(record, records.RegisterBrokerRecord):
        broker_id = record.registration.broker_id
        if record.registration.fenced:
            return []
        again = " (restarted)" if broker_id in image.brokers else ""
        return [Event(at, "broker-up", f"broker {broker_id} registered{again}")]
    if isinstance(record, records.FenceBrokerRecord):
        known = image.brokers.get(record.broker_id)
        was_up = None if known is None else not known.fenced
        return broker_events(at, record.broker_id, was_up, not record.fenced, " (fenced)")
    if isinstance(record, records.TopicRecord):
        return [Event(at, "topic", f"topic {record.name} created")]
    if isinstance(record, records.RemoveTopicRecord):
        return [Event(at, "topic", f"topic {record.name} deleted", WARN)]
    if isinstance(record, records.PartitionRecord):
        new = record.state
        old = image.partition(new.topic, new.partition)
        if old is None:
            return []
        return partition_events(at, f"{new.topic}-{new.partition}", old.leader, old.isr,
                                new.leader, new.isr)
    return []


class MetadataLogEvents:
    """Tails a data dir's metadata log; the first poll replays history into events too,
    each stamped with its record's time."""

    def __init__(self, data_dir: Path):
        from slog.core.metadata_log import MetadataLogReader
        from slog.core.names import DataDirLayout

        self._reader = MetadataLogReader(DataDirLayout(data_dir).metadata_dir)
        self.image = MetadataImage()

    def poll(self) -> Iterator[Event]:
        for offset, record in self._reader.poll():
            at = record.ts / 1000
            events = record_events(self.image, record, at)
            if self.image.apply(record, offset):
                yield from events
