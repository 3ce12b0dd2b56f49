"""Helpers for Pilot tests of the dashboard against real brokers."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from slog.tui.app import DashboardApp
from slog.tui.collect import Collector
from slog.tui.widgets import Table
from tests.cluster.conftest import Cluster

REFRESH_S = 0.5
WAIT_S = 30.0


def make_app(cluster: Cluster, refresh_s: float = REFRESH_S) -> DashboardApp:
    return DashboardApp(Collector(cluster.bootstrap, data_dir=cluster.data_dir),
                        refresh_s=refresh_s)


async def until(pilot: Any, condition: Callable[[], Any], what: str,
                timeout_s: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout_s}s waiting for {what}"
        await pilot.pause(0.05)


async def in_snapshot(app: DashboardApp, pilot: Any, find: Callable[[Any], Any],
                      what: str) -> Any:
    """What ``find`` finds in the dashboard's latest snapshot, once it finds something."""
    def found() -> Any:
        snap = app.state.snapshot
        return find(snap) if snap else None
    return await until(pilot, found, what)


def produce(cluster: Cluster, topic: str, count: int, partition: int = 0) -> None:
    producer = cluster.producer(acks="all")
    for i in range(count):
        producer.send(topic, value=b"v%d" % i, partition=partition)
    producer.flush()


def table_keys(app: DashboardApp, table_id: str) -> list[str]:
    table = app.screen.query_one(f"#{table_id}", Table)
    return [str(row.value) for row in table.rows]
