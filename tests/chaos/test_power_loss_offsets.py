"""After a power loss the nemesis compares the group's committed offsets with those
before it: lower (or gone) is a failure; unreadable is said, not counted."""

from __future__ import annotations

from typing import Any, cast

from slog.chaos.nemesis import Nemesis


def nemesis(committed: Any) -> Nemesis:
    return Nemesis(cluster=cast(Any, None), topic="chaos", partitions=2, record=print,
                   committed=committed, committed_retry_s=0.01)


def test_offsets_kept_or_further_pass() -> None:
    n = nemesis(lambda: {0: 5, 1: 9})
    assert n._offsets_went_back({0: 5, 1: 2}) == "; committed offsets of 2 partitions kept"
    assert n.offsets_went_back == []


def test_lower_or_vanished_offsets_are_reported() -> None:
    n = nemesis(lambda: {0: 4})
    detail = n._offsets_went_back({0: 5, 1: 2})
    assert n.offsets_went_back == ["committed offsets went back: p0 5->4, p1 2->-1"]
    assert detail.endswith(n.offsets_went_back[0])


def test_unreadable_offsets_are_not_compared() -> None:
    asked: list[int] = []

    def unavailable() -> dict[int, int]:
        asked.append(1)
        raise OSError("no coordinator")

    n = nemesis(unavailable)
    assert "not compared" in n._offsets_went_back({0: 5})
    assert n.offsets_went_back == []
    assert len(asked) == 5  # retried while no coordinator answers, then given up
