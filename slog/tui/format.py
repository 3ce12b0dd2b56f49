"""Text for cells: sizes, rates, sparklines and times (pure)."""

from __future__ import annotations

import time
from collections.abc import Sequence

BARS = "▁▂▃▄▅▆▇█"


def size(n: float | None) -> str:
    if n is None or n < 0:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return "-"  # unreachable


def rate(n: float | None, unit: str = "/s") -> str:
    if n is None:
        return "-"
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M{unit}"
    if n >= 1_000:
        return f"{n / 1_000:.1f}k{unit}"
    return f"{n:.0f}{unit}"


def byte_rate(n: float | None) -> str:
    return "-" if n is None else f"{size(n)}/s"


def count(n: int) -> str:
    return f"{n:,}"


def spark(values: Sequence[float], width: int = 12) -> str:
    """The last ``width`` values as bars, scaled to their own maximum (blank: no data)."""
    shown = list(values)[-width:]
    if not shown:
        return " " * width
    top = max(shown)
    bars = "".join(BARS[0] if top <= 0 else BARS[min(len(BARS) - 1,
                                                       int(v / top * (len(BARS) - 1) + 0.5))]
                   for v in shown)
    return bars.rjust(width)


def clock(at: float) -> str:
    """Local wall-clock time of day."""
    return time.strftime("%H:%M:%S", time.localtime(at))


def brokers(ids: Sequence[int]) -> str:
    return ",".join(str(b) for b in ids) or "-"
