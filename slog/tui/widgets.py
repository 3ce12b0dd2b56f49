"""Small widgets: a keyboard-first table that keeps its cursor across refreshes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from slog.tui.views import Row


class Table(DataTable[Text | str]):
    """A row-cursor DataTable with j/k and ``show(rows)`` that keeps the selection."""

    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("g", "scroll_top", "Top", show=False),
        Binding("G", "scroll_bottom", "Bottom", show=False),
    ]

    def __init__(self, columns: Sequence[str], *, id: str | None = None):
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self._columns = tuple(columns)
        self._shown: list[Row] | None = None
        self._column_keys: list[Any] = []

    def on_mount(self) -> None:
        self._column_keys = self.add_columns(*self._columns)

    @property
    def selected_key(self) -> str | None:
        if not self.row_count:
            return None
        try:
            key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        except Exception:  # the cursor points past a table that just shrank
            return None
        return None if key.value is None else str(key.value)

    def show(self, rows: list[Row]) -> None:
        """Replace the rows, keeping the cursor on the same key (or row index)."""
        if rows == self._shown:
            return  # nothing changed (most refreshes of a quiet cluster)
        previous, self._shown = self._shown, rows
        if previous is not None and [k for k, _ in previous] == [k for k, _ in rows]:
            self._update_cells(previous, rows)  # same rows: touch only the changed cells
            return
        selected, index = self.selected_key, self.cursor_row
        scroll = self.scroll_y
        self.clear()
        for key, cells in rows:
            self.add_row(*cells, key=key)
        keys = [key for key, _ in rows]
        if selected in keys:
            self.move_cursor(row=keys.index(selected), animate=False, scroll=False)
        elif rows:
            self.move_cursor(row=min(index, len(rows) - 1), animate=False, scroll=False)
        self.scroll_to(y=scroll, animate=False)

    def _update_cells(self, previous: list[Row], rows: list[Row]) -> None:
        for (key, old_cells), (_, cells) in zip(previous, rows, strict=True):
            for column, old, new in zip(self._column_keys, old_cells, cells, strict=True):
                if old != new:
                    self.update_cell(key, column, new, update_width=True)
