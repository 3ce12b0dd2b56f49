"""Table rows and header text from a snapshot (no Textual: Rich text only).

Every builder returns ``(key, cells)`` rows; the app puts them in DataTables,
and tests can read them directly.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text

from slog.tui import format as fmt
from slog.tui.events import ERROR, WARN, Event
from slog.tui.history import History
from slog.tui.model import ClusterSnapshot, GroupInfo, PartitionInfo, TopicInfo, TransactionInfo
from slog.tui.state import Connection

Row = tuple[str, list[Text | str]]
HEALTH_STYLE = {"ok": "bold green", "warn": "bold yellow", "error": "bold red"}
SEVERITY_STYLE = {WARN: "yellow", ERROR: "bold red"}
GROUP_STATE_STYLE = {"Stable": "green", "Empty": "dim", "Dead": "red",
                     "PreparingRebalance": "yellow", "CompletingRebalance": "yellow",
                     "Assigning": "yellow", "Reconciling": "yellow"}  # the last two: KIP-848

BROKER_COLUMNS = ("id", "address", "status", "leads", "in/s", "out/s", "role")
TOPIC_COLUMNS = ("topic", "parts", "RF", "size", "msgs/s", "trend", "URP", "lag")
GROUP_COLUMNS = ("group", "state", "gen", "assignor", "leader", "members", "lag", "trend")
PARTITION_COLUMNS = ("part", "leader", "replicas", "ISR", "log start", "LSO", "HW", "LEO",
                     "LSO lag", "txns", "size")
TRANSACTION_COLUMNS = ("transactional id", "producer", "state", "partitions", "age",
                       "timeout", "coord")
GROUP_OFFSET_COLUMNS = ("topic", "part", "committed", "LEO", "lag", "owner")
EVENT_COLUMNS = ("time", "event")


def matches(name: str, needle: str) -> bool:
    return not needle or needle.lower() in name.lower()


def header(snapshot: ClusterSnapshot | None, connection: Connection | None,
           location: str, now: float) -> Text:
    text = Text()
    if snapshot is None:
        text.append("slog dashboard ", "bold")
        text.append(f"connecting to {location}…" if connection is None or connection.reachable
                    else f"cannot reach {location}: {connection.error}", "bold red")
        return text
    health = snapshot.health
    text.append("● ", HEALTH_STYLE[health])
    text.append(f"cluster {snapshot.cluster_id or '?'}  ", "bold")
    epoch = "" if snapshot.controller_epoch is None else f" (epoch {snapshot.controller_epoch})"
    controller = "none" if snapshot.controller_id < 0 else f"{snapshot.controller_id}{epoch}"
    text.append(f"controller {controller}  ",
                "bold red" if snapshot.controller_id < 0 else "")
    alive, total = snapshot.alive_brokers, len(snapshot.brokers)
    text.append(f"brokers {alive}/{total}", "green" if alive == total else "bold red")
    text.append(f"\ntopics {len(snapshot.topics)}  partitions {len(snapshot.partitions)}  ")
    urp, offline = snapshot.under_replicated, snapshot.offline
    text.append(f"under-replicated {urp}", "bold yellow" if urp else "green")
    text.append("  ")
    text.append(f"offline {offline}", "bold red" if offline else "green")
    if snapshot.transactions:  # only then: most clusters have none, and the line is full
        hanging = snapshot.hanging_transactions
        text.append(f"  txns {len(snapshot.transactions)}")
        if hanging:
            text.append(f" ({hanging} hanging)", "bold red")
    if connection is not None and not connection.reachable:
        text.append(f"\nUNREACHABLE for {now - connection.since:.0f}s, retrying: "
                    f"{connection.error}", "bold white on red")
    else:
        text.append(f"  updated {fmt.clock(snapshot.taken_at)}", "dim")
        if snapshot.warnings:
            text.append(f"\n⚠ {snapshot.warnings[0]}", "yellow")
    return text


def broker_rows(snapshot: ClusterSnapshot, history: History, needle: str = "") -> list[Row]:
    rows: list[Row] = []
    for b in snapshot.brokers:
        if not matches(f"{b.broker_id} {b.address}", needle):
            continue
        status = Text(b.status, "green" if b.status == "alive" else "bold red")
        key = str(b.broker_id)
        role = "controller" if b.broker_id == snapshot.controller_id else ""
        rows.append((key, [str(b.broker_id), b.address, status,
                           str(snapshot.leaderships(b.broker_id)),
                           fmt.byte_rate(history.broker_in.rate(key)),
                           fmt.byte_rate(history.broker_out.rate(key)), role]))
    return rows


def _count_cell(n: int, style: str) -> Text:
    return Text(str(n), style if n else "dim")


def topic_rows(snapshot: ClusterSnapshot, history: History, needle: str = "") -> list[Row]:
    lag = snapshot.group_lag_by_topic()
    rows: list[Row] = []
    for t in snapshot.topics:
        if not matches(t.name, needle):
            continue
        name = Text(t.name, "dim" if t.internal else "")
        if t.offline:
            name.stylize("bold red")
        rows.append((t.name, [
            name, str(len(t.partitions)), str(t.replication_factor),
            fmt.size(t.size if any(p.size >= 0 for p in t.partitions) else None),
            fmt.rate(history.topic_messages.rate(t.name)),
            Text(fmt.spark(history.topic_messages.rates(t.name), 10), "cyan"),
            _count_cell(t.under_replicated, "bold yellow"),
            fmt.count(lag[t.name]) if t.name in lag else "-"]))
    return rows


def group_rows(snapshot: ClusterSnapshot, history: History, needle: str = "") -> list[Row]:
    rows: list[Row] = []
    for g in snapshot.groups:
        if not matches(g.group_id, needle):
            continue
        rows.append((g.group_id, [
            g.group_id, Text(g.state if g.group_type == "classic" else
                             f"{g.state} ({g.group_type})", GROUP_STATE_STYLE.get(g.state, "")),
            "-" if g.generation is None else str(g.generation), g.assignor or "-",
            _short(g.leader) if g.leader else "-", str(len(g.members)),
            Text(fmt.count(g.lag), "bold yellow" if g.lag else ""),
            Text(fmt.spark(history.group_lag.values(g.group_id), 10), "magenta")]))
    return rows


def _replica_list(p: PartitionInfo, ids: Iterable[int]) -> Text:
    """Replica ids, out-of-sync ones in red and the leader in bold."""
    text = Text()
    for i, b in enumerate(ids):
        if i:
            text.append(",")
        style = "bold red" if b in p.out_of_sync else "bold" if b == p.leader else ""
        text.append(str(b), style)
    return text if text.plain else Text("-")


def partition_rows(topic: TopicInfo) -> list[Row]:
    rows: list[Row] = []
    for p in topic.partitions:
        leader = Text("none", "bold red") if p.offline else Text(str(p.leader))
        rows.append((str(p.partition), [
            str(p.partition), leader, _replica_list(p, p.replicas), _replica_list(p, p.isr),
            _offset(p.log_start), _offset(p.last_stable), _offset(p.high_watermark),
            _offset(p.log_end), _count_cell(p.lso_lag, "bold yellow"),
            _count_cell(p.open_transactions, "bold yellow"),
            fmt.size(p.size if p.size >= 0 else None)]))
    return rows


def group_offset_rows(group: GroupInfo) -> list[Row]:
    return [(f"{o.topic}-{o.partition}", [
        o.topic, str(o.partition), _offset(o.committed), _offset(o.log_end),
        Text(fmt.count(o.lag), "bold yellow" if o.lag else ""),
        _short(o.owner) if o.owner else Text("-", "dim")]) for o in group.offsets]


def _seconds(s: float | None) -> str:
    return "-" if s is None else f"{s:.0f}s" if s < 3600 else f"{s / 3600:.1f}h"


def _transaction_partitions(t: TransactionInfo) -> str:
    names = [f"{topic}-{p}" for topic, p in t.partitions]
    shown = ",".join(names[:2]) or "-"
    return shown if len(names) <= 2 else f"{shown} +{len(names) - 2}"


def transaction_rows(snapshot: ClusterSnapshot, history: History, needle: str = ""
                     ) -> list[Row]:
    """Open transactions; hanging ones (open past their timeout) in red."""
    rows: list[Row] = []
    for t in snapshot.transactions:
        if not matches(t.transactional_id, needle):
            continue
        hanging = t.hanging(snapshot.taken_at)
        state = Text(f"{t.state} HANGING" if hanging else t.state,
                     "bold red" if hanging else "" if t.state == "Ongoing" else "yellow")
        epoch = "" if t.producer_epoch < 0 else f"/{t.producer_epoch}"
        rows.append((t.transactional_id, [
            Text(t.transactional_id, "bold red" if hanging else ""),
            f"{t.producer_id}{epoch}", state, _transaction_partitions(t),
            Text(_seconds(t.age_s(snapshot.taken_at)), "bold red" if hanging else ""),
            _seconds(t.timeout_ms / 1000 if t.timeout_ms >= 0 else None), str(t.coordinator)]))
    return rows


def event_rows(events: Iterable[Event], needle: str = "") -> list[Row]:
    return [(str(i), [fmt.clock(e.at), Text(e.text, SEVERITY_STYLE.get(e.severity, ""))])
            for i, e in enumerate(events) if matches(e.text, needle)]


def _offset(n: int) -> str:
    return "-" if n < 0 else fmt.count(n)


def _short(member_id: str) -> str:
    """Member ids are client-id + a UUID; the client id and a few characters are enough."""
    return member_id if len(member_id) <= 24 else f"{member_id[:21]}…"
