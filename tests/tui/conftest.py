"""Fixtures for the dashboard tests: the real cluster (shared with tests/cluster), a
fixed-data source for deterministic screens, and a fixed time zone."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from slog.client.admin import Admin
from slog.tui.collect import Refresh
from tests.cluster.conftest import cluster, pytest_configure  # noqa: F401 - re-exported fixture


class StaticSource:
    """Hands out fixed refreshes in order, then repeats the last; no cluster behind it."""

    location = "fixed:9092"
    reads_metadata_log = False

    def __init__(self, refreshes: list[Refresh]):
        self._refreshes = list(refreshes)
        self.calls = 0

    def refresh(self) -> Refresh:
        self.calls += 1
        return self._refreshes[min(self.calls, len(self._refreshes)) - 1]

    def new_admin(self) -> Admin:
        raise ConnectionError("fixed data has no cluster behind it")

    def close(self) -> None:
        pass


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Clock times render the same everywhere."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()
