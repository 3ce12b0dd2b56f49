"""Modal dialogs (confirm, prompt, help) and the detail screens."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Footer, Input, Label, Static

from slog.tui import format as fmt
from slog.tui import views
from slog.tui.state import DashboardState
from slog.tui.widgets import Table

HELP = """\
[b]Move[/b]     ↑/↓ or j/k, PgUp/PgDn, g/G; Tab or 1-5 switch views
[b]Open[/b]     Enter: a topic's partitions, a group's offsets; Esc back
[b]Filter[/b]   / then type; Esc clears.  [b]Refresh[/b]  R (also automatic)

[b]Actions[/b] (each asks first)
  e  preferred-leader election: a topic, or one partition
  p  add partitions to a topic
  o  reset a group's offsets: earliest, latest or an offset
  d  delete the topic or group

[b]Colours[/b]  green healthy, yellow under-replicated or lagging,
          red offline or down. In replica lists the leader is
          bold and out-of-sync replicas are red. Transactions
          open longer than their timeout are red (hanging).
q quits."""


class ConfirmScreen(ModalScreen[bool]):
    BINDINGS = [Binding("escape,n", "answer(False)", "No"), Binding("y", "answer(True)", "Yes")]

    def __init__(self, question: str):
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.question, classes="question")
            with Horizontal(classes="buttons"):
                yield Button("Yes (y)", variant="error", id="yes")
                yield Button("No (n)", variant="primary", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)


class PromptScreen(ModalScreen[str | None]):
    """One line of input; Enter answers, Esc cancels."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, question: str, value: str = ""):
        super().__init__()
        self.question, self.value = question, value

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.question, classes="question")
            yield Input(self.value, id="answer")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "close", "Close")]

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog help"):
            yield Static(HELP)

    def action_close(self) -> None:
        self.dismiss(None)


class DetailScreen(Screen[None]):
    """A live table about one topic or group; the app calls ``refresh_from`` on updates."""

    BINDINGS = [Binding("escape", "app.back", "Back")]
    COLUMNS: tuple[str, ...] = ()

    def __init__(self, name: str, state: DashboardState):
        super().__init__()
        self.item = name
        self.state = state

    def compose(self) -> ComposeResult:
        yield Static(id="detail-title")
        yield Table(self.COLUMNS, id="detail-table")
        yield Static(id="detail-footer")
        yield Footer()

    def on_mount(self) -> None:
        self.refresh_from(self.state)
        self.query_one(Table).focus()

    @property
    def table(self) -> Table:
        return self.query_one(Table)

    def refresh_from(self, state: DashboardState) -> None:
        raise NotImplementedError

    def show_title(self, title: Text, state: DashboardState) -> None:
        """The title, saying so when the cluster is unreachable: this screen has no header,
        and its rows are then the last data, not live."""
        connection = state.connection
        if connection is not None and not connection.reachable:
            title.append(f"\nUNREACHABLE since {fmt.clock(connection.since)}, retrying; "
                         "showing the last data", "bold white on red")
        self.query_one("#detail-title", Static).update(title)


class TopicScreen(DetailScreen):
    """Partition detail: leader, replicas, ISR, log start, LSO, HW, LEO, the LSO lag and
    open transactions, and size."""

    COLUMNS = views.PARTITION_COLUMNS
    BINDINGS = [Binding("e", "app.elect_partition", "Elect"),
                Binding("p", "app.add_partitions", "Add parts")]

    def refresh_from(self, state: DashboardState) -> None:
        topic = state.snapshot.topic(self.item) if state.snapshot else None
        title = Text(f"topic {self.item}", "bold")
        if topic is None:
            title.append("  (gone)", "bold red")
            self.table.show([])
        else:
            title.append(f"  {len(topic.partitions)} partitions, RF {topic.replication_factor},"
                         f" {fmt.size(topic.size)}, {topic.under_replicated} under-replicated")
            self.table.show(views.partition_rows(topic))
        self.show_title(title, state)
        rates = state.history.topic_messages.rates(self.item)
        self.query_one("#detail-footer", Static).update(Text.assemble(
            ("messages/s ", "dim"), (fmt.spark(rates, 40), "cyan"),
            f"  {fmt.rate(rates[-1] if rates else None)}"))


class GroupScreen(DetailScreen):
    """Group detail: committed offset, LEO, lag and owner per partition; lag history."""

    COLUMNS = views.GROUP_OFFSET_COLUMNS
    BINDINGS = [Binding("o", "app.reset_offsets", "Reset")]

    def refresh_from(self, state: DashboardState) -> None:
        group = state.snapshot.group(self.item) if state.snapshot else None
        title = Text(f"group {self.item}", "bold")
        if group is None:
            title.append("  (gone)", "bold red")
            self.table.show([])
        else:
            title.append(f"  {group.state}, {len(group.members)} members, "
                         f"assignor {group.assignor or '-'}, coordinator {group.coordinator}, "
                         f"lag {fmt.count(group.lag)}")
            if group.error:
                title.append(f"  {group.error}", "red")
            self.table.show(views.group_offset_rows(group))
        self.show_title(title, state)
        lag = state.history.group_lag.values(self.item)
        self.query_one("#detail-footer", Static).update(Text.assemble(
            ("lag ", "dim"), (fmt.spark(lag, 40), "magenta"),
            f"  {fmt.count(int(lag[-1])) if lag else '-'}"))
