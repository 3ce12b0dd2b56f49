"""Keyboard handling and error notifications, with fixed data (no cluster needed)."""

from __future__ import annotations

import asyncio

from slog.tui.app import DashboardApp
from slog.tui.screens import ConfirmScreen, HelpScreen, PromptScreen, TopicScreen
from slog.tui.widgets import Table
from tests.tui.conftest import StaticSource
from tests.tui.sample import refreshes


def make_app() -> DashboardApp:
    return DashboardApp(StaticSource(refreshes(3)), refresh_s=3600)


def test_keys_move_filter_open_and_quit() -> None:
    async def run() -> None:
        app = make_app()
        async with app.run_test(size=(80, 24)) as pilot:
            await app.workers.wait_for_complete()
            await pilot.pause()
            topics = app.query_one("#topics-table", Table)
            assert topics.selected_key == "__consumer_offsets"
            await pilot.press("j", "j")
            assert topics.selected_key == "payments"
            await pilot.press("k")
            assert topics.selected_key == "orders"
            await pilot.press("enter")
            await pilot.pause()
            assert isinstance(app.screen, TopicScreen) and app.screen.item == "orders"
            await pilot.press("escape")
            await pilot.press("question_mark")
            assert isinstance(app.screen, HelpScreen)
            await pilot.press("escape")
            await pilot.press("slash", "p", "a", "y", "enter")
            await pilot.pause()
            assert [str(r.value) for r in topics.rows] == ["payments"]
            await pilot.press("escape")
            await pilot.pause()
            assert len(topics.rows) == 4
            await pilot.press("3")
            assert app.query_one("#groups-table", Table).selected_key == "billing"
            await pilot.press("q")
        assert app.return_code in (0, None)

    asyncio.run(run())


def test_failed_action_is_a_notification_not_a_crash() -> None:
    async def run() -> None:
        app = make_app()
        async with app.run_test(size=(80, 24)) as pilot:
            await app.workers.wait_for_complete()
            await pilot.pause()
            await pilot.press("d")  # delete the topic under the cursor
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("y")
            await app.workers.wait_for_complete()
            await pilot.pause()
            messages = [n.message for n in app._notifications]
            assert any("no cluster behind it" in m for m in messages), messages
            # A bad partition count is refused before anything is sent.
            await pilot.press("p")
            assert isinstance(app.screen, PromptScreen)
            await pilot.press("ctrl+a", "x", "enter")
            await pilot.pause()
            assert any("not a number" in n.message for n in app._notifications)
            assert app.is_running
            await pilot.press("q")

    asyncio.run(run())
