"""The dashboard against a real 3-broker cluster, driven through Textual's pilot.

Brokers are real processes (the ``cluster`` fixture of tests/cluster); the app
runs its normal refresh worker and collector, with events from the data dir.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from textual.widgets import Static

from slog.client import TopicPartition
from slog.tui.app import DashboardApp
from slog.tui.collect import Collector
from slog.tui.screens import ConfirmScreen, GroupScreen, TopicScreen
from slog.tui.widgets import Table
from tests.brokers import BrokerProcess, free_port
from tests.cluster.conftest import Cluster
from tests.tui.live import (
    REFRESH_S,
    WAIT_S,
    in_snapshot,
    make_app,
    produce,
    table_keys,
    until,
)


def test_views_populate(cluster: Cluster) -> None:
    cluster.create_topic("orders", partitions=3, replication_factor=3)
    produce(cluster, "orders", 30, partition=1)

    async def run() -> None:
        app = make_app(cluster)
        async with app.run_test(size=(100, 30)) as pilot:
            await in_snapshot(app, pilot, lambda snap: (t := snap.topic("orders")) is not None
                              and t.partitions[1].size > 0, "orders with its size")
            snap = app.state.snapshot
            assert snap.cluster_id and snap.controller_id in (1, 2, 3)
            assert snap.controller_epoch is not None  # from the metadata log
            assert [b.broker_id for b in snap.brokers] == [1, 2, 3]
            p1 = snap.topic("orders").partitions[1]
            assert (p1.log_start, p1.high_watermark, p1.log_end) == (0, 30, 30)
            assert p1.isr and set(p1.isr) == set(p1.replicas)
            assert "orders" in table_keys(app, "topics-table")
            await pilot.press("1")  # only the view on screen is kept up to date
            assert table_keys(app, "brokers-table") == ["1", "2", "3"]
            await pilot.press("2")
            assert any("orders" in e.text for e in app.state.events)  # metadata-log events
            # Enter opens the partition detail of the row under the cursor.
            table = app.query_one("#topics-table", Table)
            table.move_cursor(row=table_keys(app, "topics-table").index("orders"))
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, TopicScreen), "the detail screen")
            assert table_keys(app, "detail-table") == ["0", "1", "2"]
            await pilot.press("escape")
            await pilot.press("q")

    asyncio.run(run())


def test_killed_broker_is_under_replicated_within_two_refreshes(cluster: Cluster) -> None:
    cluster.create_topic("events", partitions=3, replication_factor=3)

    async def run() -> None:
        app = make_app(cluster)
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: app.state.snapshot and app.state.snapshot.topic("events"),
                        "the topic")
            assert app.state.snapshot.under_replicated == 0
            cluster.kill(3)
            killed_at = app.refreshes
            await until(pilot, lambda: app.state.snapshot.topic("events").under_replicated == 3,
                        "every partition under-replicated")
            # The refresh in flight at the kill may predate it; the next one must see it.
            assert app.refreshes - killed_at <= 2, app.refreshes - killed_at
            assert app.state.snapshot.health != "ok"
            assert any(e.kind in ("broker-down", "isr-shrink") for e in app.state.events)

            cluster.restart(3)
            cluster.wait_registered([3])
            cluster.wait_in_sync("events")
            await until(pilot, lambda: app.state.snapshot.under_replicated == 0 and
                        app.state.snapshot.alive_brokers == 3, "the restart to clear it")
            await pilot.press("q")

    asyncio.run(run())


def test_consumer_group_appears_with_its_lag(cluster: Cluster) -> None:
    cluster.create_topic("ledger", partitions=1, replication_factor=3)
    produce(cluster, "ledger", 50)
    tp = TopicPartition("ledger", 0)
    consumer = cluster.consumer(group_id="auditors")
    consumer.subscribe(["ledger"])
    deadline = time.monotonic() + WAIT_S
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(100)
    consumer.commit({tp: 20})
    member = consumer.group_metadata()  # what the coordinator told this, its only member
    assert member.generation_id > 0

    async def run() -> None:
        app = make_app(cluster)
        async with app.run_test(size=(100, 30)) as pilot:
            found = await in_snapshot(
                app, pilot, lambda snap: g if (g := snap.group("auditors")) and g.offsets else None,
                "the group with its offsets")
            assert found.lag == 30 and found.state == "Stable" and len(found.members) == 1
            [offset] = found.offsets
            assert (offset.committed, offset.log_end, offset.owner) == \
                (20, 50, found.members[0].member_id)
            # Not in DescribeGroups: from the group metadata record in the data dir.
            assert (found.generation, found.leader) == (member.generation_id, member.member_id)
            assert found.leader == found.members[0].member_id
            await pilot.press("3")
            assert "auditors" in table_keys(app, "groups-table")
            row = app.screen.query_one("#groups-table", Table).get_row("auditors")
            assert str(row[2]) == str(member.generation_id)  # the generation column
            assert str(row[4]) != "-"  # the leader column
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, GroupScreen), "the group detail")
            assert table_keys(app, "detail-table") == ["ledger-0"]
            await pilot.press("q")

    try:
        asyncio.run(run())
        # Without this cluster's data dir (as against a real Kafka) they stay unknown.
        blind = Collector(cluster.bootstrap)
        try:
            found = blind.refresh().snapshot.group("auditors")
            assert found is not None and (found.generation, found.leader) == (None, None)
        finally:
            blind.close()
    finally:
        consumer.close()


def test_preferred_election_action(cluster: Cluster) -> None:
    cluster.create_topic("moves", assignment={0: [1, 2, 3]})
    cluster.stop(1)  # a controlled shutdown moves the leadership away
    cluster.wait_leader("moves", 0, not_in=[1])
    cluster.restart(1)
    cluster.wait_registered([1])
    cluster.wait_in_sync("moves")
    assert cluster.leader("moves") != 1

    async def run() -> None:
        app = make_app(cluster)
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: "moves" in table_keys(app, "topics-table"), "the topic")
            table = app.query_one("#topics-table", Table)
            table.move_cursor(row=table_keys(app, "topics-table").index("moves"))
            await pilot.press("e")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm dialog")
            await pilot.press("y")
            await until(pilot, lambda: app.state.snapshot.topic("moves").partitions[0].leader
                        == 1, "broker 1 to lead again")
            assert cluster.leader("moves") == 1
            await pilot.press("q")

    asyncio.run(run())


def test_log_end_ahead_of_the_high_watermark(cluster: Cluster) -> None:
    """With its followers paused, a leader's LEO runs ahead of the HW; the collector sees
    both (ListOffsets with Kafka's debugging replica id -2 answers the LEO)."""
    cluster.create_topic("ahead", assignment={0: [1, 2, 3]})
    collector = Collector(cluster.bootstrap)
    try:
        collector.refresh()  # connected to every broker before two of them stop answering
        cluster.pause(2)
        cluster.pause(3)
        base = cluster.append_to(1, "ahead", 0, [b"a", b"b", b"c"], acks=1)
        part = collector.refresh().snapshot.topic("ahead").partitions[0]
        assert (part.high_watermark, part.log_end) == (base, base + 3)
    finally:
        collector.close()
        cluster.resume(2)
        cluster.resume(3)


def test_reconnects_when_the_cluster_comes_up(tmp_path: Path) -> None:
    port = free_port()
    broker = BrokerProcess(1, tmp_path / "data", port, {})

    async def run() -> None:
        app = DashboardApp(Collector(broker.bootstrap, request_timeout_ms=2000),
                           refresh_s=REFRESH_S)
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: app.state.connection is not None and
                        not app.state.reachable, "the unreachable state")
            assert "cannot reach" in str(app.query_one("#header", Static).render())
            broker.start()
            await until(pilot, lambda: app.state.reachable and app.state.snapshot,
                        "a snapshot once the broker is up")
            assert app.state.snapshot.alive_brokers == 1
            await pilot.press("q")

    try:
        asyncio.run(run())
    finally:
        broker.stop()
