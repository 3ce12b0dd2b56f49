"""Screen snapshots of the dashboard with fixed data and a fixed clock.

Update after an intended change with ``pytest tests/tui --snapshot-update``
and look at the report before checking the SVGs in.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from slog.tui.app import DashboardApp
from slog.tui.collect import Refresh
from tests.tui.conftest import StaticSource
from tests.tui.sample import T0, refreshes, snapshot

STEPS = 8

pytestmark = pytest.mark.usefixtures("utc")


def make_app(data: list[Refresh] | None = None) -> DashboardApp:
    # A refresh interval far beyond the test: refreshes happen only when the test asks.
    return DashboardApp(StaticSource(data or refreshes(STEPS)), refresh_s=3600,
                        clock=lambda: T0 + 100)


def after_refreshes(*keys: str, count: int = STEPS) -> Callable[[Any], Awaitable[None]]:
    """Refresh ``count`` times (one snapshot each), then press ``keys``."""
    async def run_before(pilot: Any) -> None:
        app = pilot.app
        while app.refreshes < count:
            if app.refreshes == 0 or not app._refreshing:
                await pilot.press("R")
            await pilot.pause(0.01)
        await pilot.app.workers.wait_for_complete()
        for key in keys:
            await pilot.press(key)
        await pilot.pause()
    return run_before


def test_topics_view_80x24(snap_compare: Any) -> None:
    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=after_refreshes())


def test_brokers_view_80x24(snap_compare: Any) -> None:
    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=after_refreshes("1"))


def test_groups_view_80x24(snap_compare: Any) -> None:
    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=after_refreshes("3"))


def test_events_view_80x24(snap_compare: Any) -> None:
    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=after_refreshes("4"))


def test_transactions_view_80x24(snap_compare: Any) -> None:
    """Open transactions, the one past its timeout in red."""
    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=after_refreshes("5"))


def test_topic_detail_highlights_out_of_sync_replicas(snap_compare: Any) -> None:
    data = [*refreshes(STEPS - 1), Refresh(snapshot(STEPS - 1, down=3))]
    # orders is the second row: down once from __consumer_offsets, then Enter.
    assert snap_compare(make_app(data), terminal_size=(80, 24),
                        run_before=after_refreshes("down", "enter"))


def test_group_detail_with_lag_history(snap_compare: Any) -> None:
    assert snap_compare(make_app(), terminal_size=(80, 24),
                        run_before=after_refreshes("3", "enter"))


def test_unhealthy_cluster_header(snap_compare: Any) -> None:
    data = [*refreshes(STEPS - 1), Refresh(snapshot(STEPS - 1, down=3))]
    assert snap_compare(make_app(data), terminal_size=(80, 24), run_before=after_refreshes())


def test_large_terminal_shows_the_events_strip(snap_compare: Any) -> None:
    assert snap_compare(make_app(), terminal_size=(160, 45), run_before=after_refreshes())


def test_help_screen(snap_compare: Any) -> None:
    assert snap_compare(make_app(), terminal_size=(80, 24),
                        run_before=after_refreshes("question_mark"))


def test_filter_narrows_the_topics(snap_compare: Any) -> None:
    assert snap_compare(make_app(), terminal_size=(80, 24),
                        run_before=after_refreshes("slash", "o", "r", "d", "enter"))
