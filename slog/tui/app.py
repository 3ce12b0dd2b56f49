"""The Textual app: header, Brokers / Topics / Groups / Events / Transactions views,
detail screens.

It renders :class:`DashboardState` and nothing else. Refreshes run in a thread
worker (the collector blocks on sockets), and so do actions; their outcomes
come back to the UI thread with ``call_from_thread``.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from functools import partial
from typing import Any, Protocol

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.events import Resize
from textual.widgets import Footer, Input, Static, TabbedContent, TabPane

from slog.client.admin import Admin
from slog.client.types import TopicPartition
from slog.tui import actions, views
from slog.tui.collect import Refresh
from slog.tui.screens import (
    ConfirmScreen,
    DetailScreen,
    GroupScreen,
    HelpScreen,
    PromptScreen,
    TopicScreen,
)
from slog.tui.state import DashboardState
from slog.tui.widgets import Table

TALL = 30  # lines from which the events strip shows under the views
UNREACHABLE = (ConnectionError, TimeoutError, OSError)


class Source(Protocol):
    """Where snapshots come from: the collector, or fixed data in tests."""

    @property
    def location(self) -> str: ...
    @property
    def reads_metadata_log(self) -> bool: ...

    def refresh(self) -> Refresh: ...
    def new_admin(self) -> Admin: ...
    def close(self) -> None: ...


class DashboardApp(App[None]):
    CSS_PATH = "dashboard.tcss"
    TITLE = "slog dashboard"
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help"),
        Binding("slash", "filter", "Filter"),
        Binding("R", "refresh_now", "Refresh", show=False),
        Binding("1", "show_tab('brokers')", "Brokers", show=False),
        Binding("2", "show_tab('topics')", "Topics", show=False),
        Binding("3", "show_tab('groups')", "Groups", show=False),
        Binding("4", "show_tab('events')", "Events", show=False),
        Binding("5", "show_tab('transactions')", "Transactions", show=False),
        Binding("e", "elect_topic", "Elect"),
        Binding("p", "add_partitions", "Add parts"),
        Binding("o", "reset_offsets", "Reset"),
        Binding("d", "delete", "Delete"),
    ]

    def __init__(self, source: Source, *, refresh_s: float = 1.0,
                 clock: Callable[[], float] = time.time):
        super().__init__()
        self.source = source
        self.refresh_s = refresh_s
        self.clock = clock
        self.state = DashboardState()
        self.filters: dict[str, str] = {}
        self.refreshes = 0  # completed refresh attempts (tests wait on it)
        self._refreshing = False

    # -- layout ------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static(id="header")
        yield Input(placeholder="filter (Esc clears)", id="filter")
        with TabbedContent(initial="topics", id="tabs"):
            with TabPane("Brokers", id="brokers"):
                yield Table(views.BROKER_COLUMNS, id="brokers-table")
            with TabPane("Topics", id="topics"):
                yield Table(views.TOPIC_COLUMNS, id="topics-table")
            with TabPane("Groups", id="groups"):
                yield Table(views.GROUP_COLUMNS, id="groups-table")
            with TabPane("Events", id="events"):
                yield Table(views.EVENT_COLUMNS, id="events-table")
            with TabPane("Transactions", id="transactions"):
                yield Table(views.TRANSACTION_COLUMNS, id="transactions-table")
        yield Table(views.EVENT_COLUMNS, id="events-strip")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#events-strip", Table).can_focus = False
        self._render_all()
        self.query_one("#topics-table", Table).focus()
        self._start_refresh()
        self.set_interval(self.refresh_s, self._start_refresh)

    def on_resize(self, event: Resize) -> None:
        self.screen_stack[0].set_class(event.size.height >= TALL, "tall")
        self._render_all()

    # -- refreshing --------------------------------------------------------------------
    def _start_refresh(self) -> None:
        if self._refreshing:
            return  # the previous refresh is still waiting on a slow broker
        self._refreshing = True
        self.run_worker(self._refresh_in_thread, thread=True, group="refresh",
                        exit_on_error=False)

    def _refresh_in_thread(self) -> None:
        try:
            outcome: Refresh | BaseException = self.source.refresh()
        except Exception as exc:  # shown, never fatal
            outcome = exc
        try:
            self.call_from_thread(self._landed, outcome)
        except RuntimeError:
            pass  # the app is shutting down
        finally:
            self._refreshing = False

    def _landed(self, outcome: Refresh | BaseException) -> None:
        self.refreshes += 1
        if isinstance(outcome, BaseException):
            if isinstance(outcome, UNREACHABLE):
                self.state.unreachable(str(outcome).splitlines()[0] or type(outcome).__name__,
                                       self.clock())
            else:
                self.notify(f"refresh failed: {outcome}", severity="error")
        else:
            self.state.update(outcome.snapshot, outcome.events,
                              events_from_log=self.source.reads_metadata_log)
        self._render_all()

    def action_refresh_now(self) -> None:
        self._start_refresh()

    # -- rendering ---------------------------------------------------------------------
    def _render_all(self) -> None:
        state = self.state
        self.query_one("#header", Static).update(views.header(
            state.snapshot, state.connection, self.source.location, self.clock()))
        self.query_one("#header", Static).set_class(
            not state.reachable and state.connection is not None, "down")
        if isinstance(self.screen, DetailScreen):
            self.screen.refresh_from(state)
            return
        # Only what is on screen: the other views are rendered when they are shown.
        tab, needle = self.current_tab, self.filters.get(self.current_tab, "")
        snapshot, history = state.snapshot, state.history
        if tab == "events":
            self._table("events").show(views.event_rows(reversed(state.events), needle))
        elif snapshot is not None:
            rows = {"brokers": views.broker_rows, "topics": views.topic_rows,
                    "groups": views.group_rows, "transactions": views.transaction_rows}[tab]
            self._table(tab).show(rows(snapshot, history, needle))
        if self.screen.has_class("tall"):
            latest = list(itertools.islice(reversed(state.events), 50))
            self.query_one("#events-strip", Table).show(views.event_rows(latest))

    def _table(self, tab: str) -> Table:
        return self.query_one(f"#{tab}-table", Table)

    @property
    def current_tab(self) -> str:
        return self.query_one(TabbedContent).active or "topics"

    def action_show_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab
        self._table(tab).focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Offer an action only where it applies (the footer follows)."""
        main = self.screen is self.screen_stack[0]
        where = {
            "elect_topic": main and self._tab_is("topics"),
            "add_partitions": isinstance(self.screen, TopicScreen) or
            (main and self._tab_is("topics")),
            "reset_offsets": isinstance(self.screen, GroupScreen) or
            (main and self._tab_is("groups")),
            "delete": main and (self._tab_is("topics") or self._tab_is("groups")),
        }
        return where.get(action, True)

    def _tab_is(self, tab: str) -> bool:
        try:
            return self.current_tab == tab
        except Exception:  # not composed yet
            return False

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self.refresh_bindings()
        self._render_all()
        box = self.query_one("#filter", Input)
        box.value = self.filters.get(self.current_tab, "")
        box.set_class(bool(box.value), "shown")

    # -- filter, help, detail ----------------------------------------------------------
    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("shown")
        self.call_after_refresh(box.focus)  # a hidden input cannot take focus yet

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.filters[self.current_tab] = event.value
            self._render_all()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            self._table(self.current_tab).focus()

    def on_key(self, event: Any) -> None:
        box = self.query_one("#filter", Input)
        if event.key == "escape" and self.screen is self.screen_stack[0] and \
                (box.has_focus or box.value):
            box.value = ""
            box.remove_class("shown")
            self._table(self.current_tab).focus()
            event.stop()

    async def action_back(self) -> None:
        """Leave a detail screen; the view behind it catches up with the refreshes it missed."""
        if len(self.screen_stack) > 1:
            self.pop_screen()
            self._render_all()

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def on_data_table_row_selected(self, event: Table.RowSelected) -> None:
        if isinstance(self.screen, DetailScreen) or event.row_key.value is None:
            return
        key = str(event.row_key.value)
        if event.data_table.id == "topics-table":
            self.push_screen(TopicScreen(key, self.state))
        elif event.data_table.id == "groups-table":
            self.push_screen(GroupScreen(key, self.state))

    # -- actions -----------------------------------------------------------------------
    def _selected(self, kind: str) -> str | None:
        """The topic or group the user points at: a detail screen's, or the view's row."""
        screen = self.screen
        if isinstance(screen, TopicScreen if kind == "topics" else GroupScreen):
            return screen.item
        if screen is self.screen_stack[0] and self.current_tab == kind:
            return self._table(kind).selected_key
        return None

    def _confirm_then(self, question: str, work: Callable[[Admin], str]) -> None:
        def answered(yes: bool | None) -> None:
            if yes:
                self._run_action(work)
        self.push_screen(ConfirmScreen(question), answered)

    def _run_action(self, work: Callable[[Admin], str]) -> None:
        self.run_worker(partial(self._action_in_thread, work), thread=True, group="actions",
                        exit_on_error=False)

    def _action_in_thread(self, work: Callable[[Admin], str]) -> None:
        try:
            admin = self.source.new_admin()
            try:
                message, severity = work(admin), "information"
            finally:
                admin.close()
        except Exception as exc:  # every failure is a notification
            message, severity = str(exc) or type(exc).__name__, "error"
        try:
            self.call_from_thread(self.notify, message, severity=severity,
                                  timeout=8 if severity == "error" else 4)
            self.call_from_thread(self._start_refresh)
        except RuntimeError:
            pass

    def action_elect_topic(self) -> None:
        topic = self._selected("topics")
        info = self.state.snapshot.topic(topic) if topic and self.state.snapshot else None
        if topic is None or info is None:
            self.notify("select a topic first", severity="warning")
            return
        tps = [TopicPartition(topic, p.partition) for p in info.partitions]
        self._confirm_then(f"Run a preferred-leader election for every partition of {topic}?",
                           lambda admin: actions.elect_preferred(admin, tps))

    def action_elect_partition(self) -> None:
        screen = self.screen
        if not isinstance(screen, TopicScreen) or screen.table.selected_key is None:
            self.notify("select a partition first", severity="warning")
            return
        tp = TopicPartition(screen.item, int(screen.table.selected_key))
        self._confirm_then(f"Run a preferred-leader election for {tp}?",
                           lambda admin: actions.elect_preferred(admin, [tp]))

    def action_add_partitions(self) -> None:
        topic = self._selected("topics")
        info = self.state.snapshot.topic(topic) if topic and self.state.snapshot else None
        if topic is None or info is None:
            self.notify("select a topic first", severity="warning")
            return
        now = len(info.partitions)

        def answered(value: str | None) -> None:
            if value is None:
                return
            try:
                total = int(value)
            except ValueError:
                self.notify(f"not a number: {value!r}", severity="error")
                return
            if total <= now:
                self.notify(f"{topic} has {now} partitions; ask for more", severity="error")
                return
            self._confirm_then(f"Grow {topic} from {now} to {total} partitions?",
                               lambda admin: actions.add_partitions(admin, topic, total))

        self.push_screen(PromptScreen(f"New partition count for {topic} (now {now}):",
                                      str(now + 1)), answered)

    def action_reset_offsets(self) -> None:
        group_id = self._selected("groups")
        group = self.state.snapshot.group(group_id) if group_id and self.state.snapshot else None
        if group_id is None or group is None:
            self.notify("select a group first", severity="warning")
            return
        tps = [TopicPartition(o.topic, o.partition) for o in group.offsets]

        def answered(value: str | None) -> None:
            if value is None:
                return
            try:
                actions.parse_reset_spec(value)
            except ValueError as exc:
                self.notify(str(exc), severity="error")
                return
            self._confirm_then(
                f"Reset {group_id}'s offsets on {len(tps)} partitions to {value.strip()}?",
                lambda admin: actions.reset_offsets(admin, group_id, tps, value))

        self.push_screen(PromptScreen(f"Reset {group_id} to (earliest, latest or an offset):",
                                      "earliest"), answered)

    def action_delete(self) -> None:
        if self.screen is not self.screen_stack[0]:
            return
        tab = self.current_tab
        name = self._selected(tab) if tab in ("topics", "groups") else None
        if name is None:
            self.notify("select a topic or group first", severity="warning")
            return
        if tab == "topics":
            self._confirm_then(f"Delete topic {name} and all its data?",
                               lambda admin: actions.delete_topic(admin, name))
        else:
            self._confirm_then(f"Delete group {name} and its committed offsets?",
                               lambda admin: actions.delete_group(admin, name))

    def on_unmount(self) -> None:
        self.source.close()
