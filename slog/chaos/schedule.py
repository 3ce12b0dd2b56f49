"""Seeded, reproducible fault schedules. Pure: no processes, no clock.

A schedule is an endless sequence of :class:`Op`. Which broker an op hits is
decided when it runs (the leader of a partition is only known then), but from
values drawn here (``pick``), so one seed always yields the same decisions
against the same cluster state.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

# --faults groups -> the op kinds they enable
FAULT_GROUPS: dict[str, tuple[str, ...]] = {
    "kill": ("kill", "kill-leader", "kill-controller"),
    "pause": ("pause", "pause-leader", "pause-controller"),
    "restart": ("rolling-restart", "clean-stop"),
    "torn": ("torn-tail",),
    "disk": ("full-disk",),
    "power": ("power-loss",),  # needs a power-cut command (RunConfig.power_cut_command)
}
COMBINED = "kill+pause"  # enabled when both kill and pause are
# relative weights: the kill/pause family dominates, as in the soak target
WEIGHTS = {"kill": 3, "kill-leader": 3, "kill-controller": 2, "pause": 2, "pause-leader": 3,
           "pause-controller": 2, "rolling-restart": 1, "clean-stop": 1, "torn-tail": 2,
           "full-disk": 2, COMBINED: 2, "power-loss": 2}


@dataclass(frozen=True)
class Op:
    kind: str
    pick: int  # chooses the broker / partition among those present when the op runs
    second_pick: int  # a second broker, for combinations and the torn tail's partition
    duration_s: float  # how long the fault lasts before it is healed
    tear: str  # torn-tail mode: "truncate" or "corrupt"
    gap_s: float  # quiet time after healing, before the next op


def parse_faults(text: str | Iterable[str]) -> list[str]:
    """``kill,pause`` -> the fault groups, checked; raises ValueError on unknown names."""
    names = [n.strip() for n in (text.split(",") if isinstance(text, str) else text)]
    names = [n for n in names if n]
    unknown = sorted(set(names) - set(FAULT_GROUPS))
    if unknown or not names:
        raise ValueError(f"unknown fault {', '.join(unknown) or '(none given)'}; "
                         f"choose from {', '.join(FAULT_GROUPS)}")
    return list(dict.fromkeys(names))


def op_kinds(groups: Iterable[str]) -> list[str]:
    groups = list(groups)
    kinds = [kind for group in groups for kind in FAULT_GROUPS[group]]
    if "kill" in groups and "pause" in groups:
        kinds.append(COMBINED)
    return kinds


def schedule(seed: int, groups: Iterable[str], session_timeout_s: float,
             script: Iterable[str] | None = None) -> Iterator[Op]:
    """The op sequence of ``seed``: endless over ``groups``' kinds, or exactly the kinds of
    ``script`` in order (CI uses one to cover each fault). Pauses last 1.5-3 session
    timeouts."""
    rng = random.Random(seed)
    kinds = op_kinds(groups)
    weights = [WEIGHTS[k] for k in kinds]
    scripted = None if script is None else iter(list(script))
    while True:
        kind = rng.choices(kinds, weights)[0] if scripted is None else next(scripted, None)
        if kind is None:
            return
        if kind not in WEIGHTS:
            raise ValueError(f"unknown fault op {kind!r}; choose from {', '.join(WEIGHTS)}")
        if kind.startswith("pause") or kind == COMBINED:
            duration = session_timeout_s * rng.uniform(1.5, 3.0)
        elif kind == "full-disk":
            duration = rng.uniform(2.0, 5.0)
        else:
            duration = rng.uniform(0.2, 2.0)  # how long a killed broker stays down
        yield Op(kind=kind, pick=rng.randrange(1 << 30), second_pick=rng.randrange(1 << 30),
                 duration_s=round(duration, 3), tear=rng.choice(("truncate", "corrupt")),
                 gap_s=round(rng.uniform(0.2, 1.5), 3))
