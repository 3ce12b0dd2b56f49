"""The dashboard's pure parts: snapshot model, rates, events, state and cell text."""

from __future__ import annotations

from dataclasses import replace

import pytest
from rich.text import Text

from slog.core.metadata import MetadataImage
from slog.core.metadata_records import decode_record
from slog.tui import format as fmt
from slog.tui import views
from slog.tui.actions import parse_reset_spec
from slog.tui.events import condense, diff_events, partition_events, record_events
from slog.tui.history import History, Series
from slog.tui.model import GroupOffset, PartitionInfo
from slog.tui.state import DashboardState
from tests.tui.sample import T0, snapshot


def test_partition_health_counts_dead_brokers_as_out_of_sync() -> None:
    p = PartitionInfo("t", 0, 1, 0, (1, 2, 3), (1, 2, 3), offline_replicas=(3,))
    assert p.out_of_sync == (3,) and p.under_replicated and not p.offline
    assert PartitionInfo("t", 0, -1, 0, (1,), (1,)).offline
    assert not PartitionInfo("t", 0, 1, 0, (1, 2), (1, 2)).under_replicated


def test_snapshot_health_and_counts() -> None:
    healthy = snapshot(0)
    assert healthy.health == "ok" and healthy.under_replicated == 0
    degraded = snapshot(0, down=3)
    assert degraded.health == "warn"
    assert degraded.alive_brokers == 2
    assert degraded.under_replicated == 11  # every partition with a replica on broker 3
    assert replace(degraded, controller_id=-1).health == "error"


def test_group_lag_counts_uncommitted_partitions_from_zero() -> None:
    assert GroupOffset("t", 0, 40, 100, None).lag == 60
    assert GroupOffset("t", 0, -1, 100, None).lag == 100
    assert GroupOffset("t", 0, 5, -1, None).lag == 0  # end unknown: no claim


def test_series_rates_and_counter_resets() -> None:
    s = Series(length=4)
    for at, value in ((0, 0), (1, 10), (2, 30), (3, 5), (4, 25)):
        s.add(at, {"t": value})
    assert s.rates("t") == [20.0, 0.0, 20.0]  # the oldest point fell off; a drop counts 0
    assert s.rate("t") == 20.0
    s.add(4, {"t": 1000})  # the same instant again is ignored
    assert s.rate("t") == 20.0
    s.add(5, {"new": 1})
    assert s.values("new") == [1] and s.rate("new") is None and s.last("t") is None


def test_history_rates_from_snapshots() -> None:
    history = History()
    history.add(snapshot(0))
    history.add(snapshot(1))
    orders_before = snapshot(0).topic("orders").end_offsets
    orders_after = snapshot(1).topic("orders").end_offsets
    assert history.topic_messages.rate("orders") == orders_after - orders_before
    assert history.broker_in.rate("1") == 30_000
    assert history.group_lag.values("billing") == [snapshot(0).group("billing").lag,
                                                   snapshot(1).group("billing").lag]


def test_diff_events_see_a_broker_die_and_isr_shrink() -> None:
    events = diff_events(snapshot(0), snapshot(1, down=3))
    kinds = [e.kind for e in events]
    assert "broker-down" in kinds and "isr-shrink" in kinds
    back = diff_events(snapshot(1, down=3), snapshot(2))
    assert {"broker-up", "isr-expand"} <= {e.kind for e in back}
    # With the metadata log as the source, snapshot diffs report only groups.
    assert all(e.kind in ("group", "rebalance")
               for e in diff_events(snapshot(0), snapshot(1, down=3), include_metadata=False))
    assert diff_events(None, snapshot(0)) == []


def test_group_rebalance_events() -> None:
    before = snapshot(0)
    billing = before.group("billing")
    after = replace(before, taken_at=T0 + 1, groups=(
        replace(billing, state="PreparingRebalance"), before.group("reports")))
    [event] = diff_events(before, after)
    assert event.kind == "rebalance" and "Stable → PreparingRebalance" in event.text


def test_partition_events_leader_change_and_offline() -> None:
    [moved] = partition_events(1.0, "t-0", 1, (1, 2), 2, (1, 2))
    assert moved.kind == "leader" and moved.severity == "info"
    events = partition_events(1.0, "t-0", 2, (2,), -1, (2,))
    assert events[0].severity == "error" and "none" in events[0].text
    assert partition_events(1.0, "t-0", None, (), 1, (1,)) == []


def test_metadata_records_become_events() -> None:
    image = MetadataImage()
    records = [
        {"type": "controller", "controller_id": 1, "controller_epoch": 1, "ts": 1000},
        {"type": "broker", "broker_id": 2, "host": "h", "port": 1, "controller_epoch": 1},
        {"type": "topic", "name": "t", "topic_id": "x", "controller_epoch": 1},
        {"type": "partition", "topic": "t", "partition": 0, "replicas": [1, 2], "isr": [1, 2],
         "leader": 1, "controller_epoch": 1},
        {"type": "broker_fence", "broker_id": 2, "fenced": True, "controller_epoch": 1},
        {"type": "partition", "topic": "t", "partition": 0, "replicas": [1, 2], "isr": [1],
         "leader": 1, "controller_epoch": 1},
    ]
    seen = []
    for offset, fields in enumerate(records):
        record = decode_record(fields)
        seen += [e.kind for e in record_events(image, record, 1.0)]
        image.apply(record, offset)
    assert seen == ["controller", "broker-up", "topic", "broker-down", "isr-shrink"]


def test_state_reports_unreachable_once_and_recovers() -> None:
    state = DashboardState()
    state.update(snapshot(0))
    assert state.reachable
    assert len(state.unreachable("connection refused", T0 + 1)) == 1
    assert state.unreachable("connection refused", T0 + 2) == []
    assert not state.reachable and state.connection.since == T0 + 1
    assert state.snapshot is not None  # the last picture stays
    new = state.update(snapshot(3))
    assert state.reachable and any("reachable again" in e.text for e in new)


def test_header_text_says_unreachable() -> None:
    state = DashboardState()
    state.update(snapshot(0))
    state.unreachable("connection refused", T0 + 1)
    text = views.header(state.snapshot, state.connection, "b:9092", T0 + 11).plain
    assert "UNREACHABLE for 10s" in text and "connection refused" in text
    assert "connecting" in views.header(None, None, "b:9092", T0).plain


def test_rows_filter_and_highlight() -> None:
    snap = snapshot(0, down=3)
    history = History()
    history.add(snap)
    assert [k for k, _ in views.topic_rows(snap, history, "ORD")] == ["orders"]
    orders = snap.topic("orders")
    row = dict(views.partition_rows(orders))["0"]
    replicas = row[2]
    assert replicas.plain == "1,2,3"
    red = [span for span in replicas.spans if "red" in str(span.style)]
    assert [replicas.plain[s.start:s.end] for s in red] == ["3"]


def test_formatting() -> None:
    assert fmt.size(512) == "512 B" and fmt.size(1536) == "1.5 KiB" and fmt.size(None) == "-"
    assert fmt.rate(1500) == "1.5k/s" and fmt.rate(None) == "-"
    assert fmt.spark([0, 5, 10], 3) == "▁▅█" and fmt.spark([], 2) == "  "
    assert fmt.spark([0, 0], 2) == "▁▁"


def test_reset_spec() -> None:
    assert parse_reset_spec(" Earliest ") == "earliest"
    assert parse_reset_spec("42") == 42
    for bad in ("-1", "soon"):
        with pytest.raises(ValueError):
            parse_reset_spec(bad)


def test_like_partition_events_at_one_instant_fold_into_one_line() -> None:
    many = [e for p in range(6)
            for e in partition_events(10.2, f"t-{p}", 3, (1, 2, 3), 1 if p % 2 else 3,
                                      (1, 2))]
    few = partition_events(11.0, "u-0", 1, (1, 2), 1, (1,))
    folded = condense(many + few)
    texts = [e.text for e in folded]
    assert "ISR shrank on 6 partitions: -[3]" in texts
    assert sum("leader" in t for t in texts) == 3  # three leader moves stay separate lines
    assert texts[-1] == "u-0 ISR shrank: -[2] now [1]"


def test_rate_is_unknown_once_a_key_stops_reporting() -> None:
    s = Series()
    s.add(0, {"3": 100})
    s.add(1, {"3": 300})
    assert s.rate("3") == 200
    s.add(2, {})
    assert s.rate("3") is None


def test_transactions_lso_lag_and_hanging() -> None:
    young, old = snapshot(0), snapshot(7)
    orders = old.topic("orders")
    assert [p.lso_lag for p in orders.partitions] == [25, 0, 0, 2, 0, 0]
    assert [p.open_transactions for p in orders.partitions] == [1, 0, 0, 1, 0, 0]
    assert replace(orders.partitions[1], last_stable=-1).lso_lag == 0  # unknown: no lag
    assert young.hanging_transactions == 0 and old.hanging_transactions == 1
    # The event comes once, on the refresh it starts hanging, and says why.
    assert [e for e in diff_events(snapshot(4), snapshot(5)) if e.kind == "txn-hanging"] == []
    [event] = [e for e in diff_events(snapshot(5), snapshot(6)) if e.kind == "txn-hanging"]
    assert event.severity == "error"
    assert event.text == "transaction payments-writer is hanging: open 61s, timeout 60s"
    assert [e for e in diff_events(snapshot(6), snapshot(7)) if e.kind == "txn-hanging"] == []
    assert [e.kind for e in diff_events(None, old)] == ["txn-hanging"]  # already hanging
    rows = dict(views.transaction_rows(old, History()))
    assert list(rows) == ["billing-txn-0", "payments-writer"]
    state = rows["payments-writer"][2]
    assert isinstance(state, Text) and state.plain == "Ongoing HANGING"
    assert "red" in str(state.style)
    assert rows["payments-writer"][3] == "payments-1,orders-3"
    assert [str(c) for c in rows["billing-txn-0"]] == [
        "billing-txn-0", "4001/0", "Ongoing", "orders-0", "17s", "60s", "2"]
    assert "txns 2 (1 hanging)" in views.header(old, None, "b:9092", T0).plain
    no_txns = replace(young, transactions=())
    assert "txns" not in views.header(no_txns, None, "b:9092", T0).plain
