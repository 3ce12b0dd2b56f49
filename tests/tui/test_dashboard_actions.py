"""The dashboard's cluster-changing actions and a lost cluster, driven as a user would.

Each action test selects a row (the view's filter), presses the action key, fills
the prompt and answers the confirm dialog, then checks the cluster through slog's
own ``Admin``/``GroupAdmin``, never through the dashboard. Cancelling must change
nothing; a request the cluster refuses must be a notification, with the app still
running and refreshing. The action tests share one 3-broker cluster (each uses its
own topics and groups); the lost-cluster test has a one-broker cluster of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from slog.client import Admin, NewTopic, Producer, TopicPartition
from slog.client.group_admin import GroupAdmin
from slog.tui.app import DashboardApp
from slog.tui.collect import Collector
from slog.tui.screens import ConfirmScreen, PromptScreen, TopicScreen
from slog.tui.widgets import Table
from tests.brokers import running_broker
from tests.cluster.conftest import FAST, Cluster, wait_until
from tests.tui.live import make_app, produce, table_keys, until

REFRESH_S = 0.25
SIZE = (100, 30)
VIEW_KEYS = {"topics": "2", "groups": "3"}


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One 3-broker cluster for every action test of this module."""
    nodes = Cluster(tmp_path_factory.mktemp("actions") / "data", 3, dict(FAST))
    with contextlib.closing(nodes):
        yield nodes.start()
    assert "Traceback" not in nodes.all_logs(), nodes.all_logs()[-6000:]


# -- driving the app -----------------------------------------------------------------------
async def select(pilot: Any, app: DashboardApp, view: str, name: str) -> None:
    """Switch to a view and filter it down to the one row, which the cursor is then on."""
    await pilot.press(VIEW_KEYS[view], "escape", "slash", *name, "enter")
    await until(pilot, lambda: app.query_one(f"#{view}-table", Table).selected_key == name,
                f"{name} under the cursor")


async def fill(pilot: Any, app: DashboardApp, answer: str | None = None) -> None:
    """Answer the prompt: type ``answer`` over its default, or take the default."""
    await until(pilot, lambda: isinstance(app.screen, PromptScreen), "the prompt")
    await pilot.press(*([] if answer is None else ["ctrl+u", *answer]), "enter")


async def confirm(pilot: Any, app: DashboardApp, key: str) -> None:
    await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm dialog")
    await pilot.press(key)


def notes(app: DashboardApp, severity: str) -> list[str]:
    return [n.message for n in app._notifications if n.severity == severity]


async def notified(pilot: Any, app: DashboardApp, severity: str, text: str) -> None:
    """Wait for a notification of ``severity`` that contains ``text``, then clear them
    all, so that the next call sees only what came later."""
    await until(pilot, lambda: any(text in m for m in notes(app, severity)),
                f"an {severity} notification with {text!r}")
    app.clear_notifications()


async def refreshes(pilot: Any, app: DashboardApp, count: int) -> None:
    """Wait out ``count`` more refreshes (the first may have started before the caller's
    change, so a count of 2 guarantees one that saw it)."""
    target = app.refreshes + count
    await until(pilot, lambda: app.refreshes >= target, f"{count} refreshes")


async def still_running(pilot: Any, app: DashboardApp) -> None:
    assert app.is_running
    await refreshes(pilot, app, 2)  # the refresh loop carries on


def run_app(cluster: Cluster, scenario: Any) -> None:
    async def run() -> None:
        app = make_app(cluster, REFRESH_S)
        async with app.run_test(size=SIZE) as pilot:
            await scenario(pilot, app)
            await pilot.press("q")

    asyncio.run(run())


# -- what the cluster says ------------------------------------------------------------------
def partition_count(admin: Admin, topic: str) -> int:
    [described] = admin.describe_topics([topic])
    return len(described.partitions)


def topic_names(admin: Admin) -> set[str]:
    return {t.name for t in admin.list_topics()}


def group_ids(admin: Admin) -> set[str]:
    return {g.group_id for g in GroupAdmin(admin.cluster).list_groups()}


def committed(admin: Admin, group_id: str) -> dict[int, int]:
    found = GroupAdmin(admin.cluster).list_offsets([group_id])[group_id]
    return {tp.partition: o.offset for tp, o in found.items() if o is not None}


# -- the actions ----------------------------------------------------------------------------
def test_add_partitions(shared: Cluster) -> None:
    shared.create_topic("grow", partitions=2, replication_factor=2)
    admin = shared.admin()

    async def scenario(pilot: Any, app: DashboardApp) -> None:
        await select(pilot, app, "topics", "grow")
        await pilot.press("p")
        await fill(pilot, app, "4")
        await confirm(pilot, app, "n")
        await refreshes(pilot, app, 2)
        assert partition_count(admin, "grow") == 2
        assert not notes(app, "information") and not notes(app, "error")

        await pilot.press("p")
        await fill(pilot, app, "4")
        await confirm(pilot, app, "y")
        await notified(pilot, app, "information", "grow now has 4 partitions")
        await until(pilot, lambda: partition_count(admin, "grow") == 4, "4 partitions")
        await until(pilot, lambda: len(app.state.snapshot.topic("grow").partitions) == 4,
                    "the dashboard to show 4 partitions")

        # Fewer than now: refused before anything is sent.
        await pilot.press("p")
        await fill(pilot, app, "3")
        await notified(pilot, app, "error", "grow has 4 partitions; ask for more")
        assert partition_count(admin, "grow") == 4

        # The cluster refuses: the topic grew to 6 elsewhere while the prompt was open.
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, PromptScreen), "the prompt")
        admin.create_partitions("grow", 6)
        await fill(pilot, app, "5")
        await confirm(pilot, app, "y")
        await notified(pilot, app, "error", "grow: INVALID_PARTITIONS")
        assert partition_count(admin, "grow") == 6
        await still_running(pilot, app)

    run_app(shared, scenario)


def test_reset_offsets(shared: Cluster) -> None:
    shared.create_topic("rewound", partitions=2, replication_factor=2)
    for partition in (0, 1):
        produce(shared, "rewound", 10, partition=partition)
    tps = [TopicPartition("rewound", 0), TopicPartition("rewound", 1)]
    consumer = shared.consumer(group_id="replay", enable_auto_commit=False)
    consumer.subscribe(["rewound"])

    def assigned() -> bool:
        consumer.poll(100)
        return len(consumer.assignment()) == 2

    wait_until(assigned, what="both partitions assigned")
    consumer.commit(dict.fromkeys(tps, 10))
    admin = shared.admin()

    def group_shown(app: DashboardApp, state: str) -> bool:
        snapshot = app.state.snapshot
        group = snapshot.group("replay") if snapshot else None
        return group is not None and group.state == state and len(group.offsets) == 2

    async def scenario(pilot: Any, app: DashboardApp) -> None:
        await until(pilot, lambda: group_shown(app, "Stable"), "the group with its offsets")
        await select(pilot, app, "groups", "replay")
        # An active group's members own its offsets: the coordinator refuses a reset...
        await pilot.press("o")
        await fill(pilot, app)  # the default: earliest
        await confirm(pilot, app, "y")
        await notified(pilot, app, "error", "has active members")
        # ...and deleting it.
        await pilot.press("d")
        await confirm(pilot, app, "y")
        await notified(pilot, app, "error", "replay: NON_EMPTY_GROUP")
        assert committed(admin, "replay") == {0: 10, 1: 10}
        assert "replay" in group_ids(admin)
        await still_running(pilot, app)

        consumer.close()
        await until(pilot, lambda: group_shown(app, "Empty"), "the group to be empty")
        assert committed(admin, "replay") == {0: 10, 1: 10}
        await pilot.press("o")
        await fill(pilot, app)  # the default: earliest
        await confirm(pilot, app, "escape")
        await refreshes(pilot, app, 2)
        assert committed(admin, "replay") == {0: 10, 1: 10}

        await pilot.press("o")
        await fill(pilot, app)  # the default: earliest
        await confirm(pilot, app, "y")
        await notified(pilot, app, "information", "reset replay on 2 partitions")
        assert committed(admin, "replay") == {0: 0, 1: 0}
        await until(pilot, lambda: app.state.snapshot.group("replay").lag == 20,
                    "the dashboard to show the new lag")

    try:
        run_app(shared, scenario)
    finally:
        consumer.close()


@pytest.mark.parametrize("view", ["topics", "groups"])
def test_delete(shared: Cluster, view: str) -> None:
    """Delete the topic or group "doom"; "gone" is deleted by someone else while the
    dialog is open, so the cluster refuses."""
    admin = shared.admin()
    kind = view[:-1]
    if view == "topics":
        for name in ("doom", "gone"):
            shared.create_topic(name, replication_factor=2)
        names, remove = partial(topic_names, admin), lambda name: admin.delete_topics([name])
        refusal = "UNKNOWN_TOPIC_OR_PARTITION"
    else:
        groups = GroupAdmin(admin.cluster)
        # On every broker, so that every coordinator knows the topic once it is created.
        shared.create_topic("archive", replication_factor=3)
        for name in ("doom", "gone"):  # groups of committed offsets, no members
            groups.alter_offsets(name, {TopicPartition("archive", 0): 0})
        names, remove = partial(group_ids, admin), lambda name: groups.delete_groups([name])
        refusal = "GROUP_ID_NOT_FOUND"

    async def scenario(pilot: Any, app: DashboardApp) -> None:
        await select(pilot, app, view, "doom")
        await pilot.press("d")
        await confirm(pilot, app, "n")
        await refreshes(pilot, app, 2)
        assert "doom" in names()
        assert table_keys(app, f"{view}-table") == ["doom"]

        await pilot.press("d")
        await confirm(pilot, app, "y")
        await notified(pilot, app, "information", f"deleted {kind} doom")
        await until(pilot, lambda: "doom" not in names(), f"the {kind} to go")
        await until(pilot, lambda: not table_keys(app, f"{view}-table"), "its row to go")

        await select(pilot, app, view, "gone")
        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the dialog")
        remove("gone")
        await confirm(pilot, app, "y")
        await notified(pilot, app, "error", f"gone: {refusal}")
        await still_running(pilot, app)

    run_app(shared, scenario)


# -- losing the cluster ---------------------------------------------------------------------
def send(bootstrap: str, topic: str, count: int) -> None:
    with Producer(bootstrap, acks="all") as producer:
        for i in range(count):
            producer.send(topic, value=b"beat %d" % i, partition=0)
        producer.flush()


def test_loses_the_cluster_keeps_its_data_and_reconnects(tmp_path: Path) -> None:
    with running_broker(tmp_path / "data") as broker:
        with Admin(broker.bootstrap) as admin:
            admin.create_topics([NewTopic("pulse", 1, 1)])
        send(broker.bootstrap, "pulse", 5)

        def high_watermark(app: DashboardApp) -> int | None:
            topic = app.state.snapshot.topic("pulse") if app.state.snapshot else None
            return topic.partitions[0].high_watermark if topic else None

        def header(app: DashboardApp) -> Static:
            return app.query_one("#header", Static)

        def title(app: DashboardApp) -> str:
            return str(app.screen.query_one("#detail-title", Static).render())

        async def run() -> None:
            collector = Collector(broker.bootstrap, data_dir=tmp_path / "data",
                                  request_timeout_ms=2000)
            app = DashboardApp(collector, refresh_s=REFRESH_S)
            async with app.run_test(size=SIZE) as pilot:
                await until(pilot, lambda: high_watermark(app) == 5, "the topic's 5 records")
                shown = app.state.snapshot

                broker.stop()
                stopped_at = app.refreshes
                await until(pilot, lambda: not app.state.reachable, "the unreachable state")
                # A refresh in flight while the broker stopped may still have succeeded:
                # the data kept is the last snapshot taken, at least as new as `shown`.
                last = app.state.snapshot
                assert last is not None and last.taken_at >= shown.taken_at
                assert app.refreshes - stopped_at <= 3, app.refreshes - stopped_at
                assert "UNREACHABLE" in str(header(app).render())
                assert header(app).has_class("down")
                await refreshes(pilot, app, 2)  # failing refreshes keep the last data
                assert app.state.snapshot is last and not app.state.reachable
                assert table_keys(app, "topics-table") == ["pulse"]
                assert any("unreachable" in e.text for e in app.state.events)
                # The partition detail, which has no header, says so too.
                await pilot.press("enter")
                await until(pilot, lambda: isinstance(app.screen, TopicScreen), "the detail")
                assert "UNREACHABLE" in title(app)
                assert table_keys(app, "detail-table") == ["0"]

                broker.start()
                await until(pilot, lambda: app.state.reachable, "the reconnection")
                send(broker.bootstrap, "pulse", 5)
                await until(pilot, lambda: high_watermark(app) == 10, "fresh data")
                assert app.state.snapshot.taken_at > shown.taken_at
                assert "UNREACHABLE" not in title(app)
                await pilot.press("escape")
                assert "UNREACHABLE" not in str(header(app).render())
                assert not header(app).has_class("down")
                assert any("reachable again" in e.text for e in app.state.events)
                await pilot.press("q")

        asyncio.run(run())
