"""The nemesis: carries out schedule ops against a ChaosCluster and records each as a Fault.

Every op heals what it broke (SIGCONT, restart, disk freed) before it returns,
and then waits for the cluster to be healthy again (full ISRs); how long that
took is part of the record. One op damages at most two brokers at once, and
only one of them loses data (the torn tail), so with RF=3 and
min.insync.replicas=2 every acknowledged record keeps a surviving copy.

The exception is the power loss: every broker is killed at once and the file
system under the data dir forgets what was not fsynced (a command given by the
caller does that, e.g. the test file system of ``tests/powerfs``). Then every
replica loses its unsynced tail at once (the KIP-966 case), and only what
slog fsynced before acknowledging keeps acknowledged records, and committed
offsets, alive.
"""

from __future__ import annotations

import os
import random
import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from slog.broker.daemon import in_parallel
from slog.chaos.cluster import ChaosCluster, RecoveryTimeout
from slog.chaos.history import Fault
from slog.chaos.replicas import segments, valid_batches
from slog.chaos.schedule import COMBINED, Op
from slog.core.batch import CRC_START

FULL_DISK_MAX_S = 30.0
DISK_FULL_SIGNS = ("No space left on device", "File too large")


def _quiet(line: str) -> None:
    pass


@dataclass
class Nemesis:
    cluster: ChaosCluster
    topic: str
    partitions: int
    record: Callable[[Fault], None]
    recovery_timeout_s: float = 60.0
    settle_s: float = 1.5
    log: Callable[[str], None] = _quiet
    power_cut_command: str | None = None  # drops unsynced data under the data dir
    committed: Callable[[], dict[int, int]] | None = None  # the group's committed offsets
    committed_retry_s: float = 1.0  # between reads of them while no coordinator answers
    # broker faults injected (a rolling restart counts one per broker)
    events: int = field(default=0, init=False)
    recovery_s: list[float] = field(default_factory=list, init=False)
    slow_recoveries: list[str] = field(default_factory=list, init=False)
    offsets_went_back: list[str] = field(default_factory=list, init=False)

    # -- targets -----------------------------------------------------------------------
    def _target(self, kind: str, op: Op) -> int:
        ids = self.cluster.ids
        if kind.endswith("-controller"):
            controller = self.cluster.controller()
            if controller:
                return controller
        elif kind.endswith("-leader"):
            leader = self.cluster.leader(self.topic, op.pick % self.partitions)
            if leader:
                return leader
        return ids[op.pick % len(ids)]

    def _other(self, broker_id: int, op: Op) -> int:
        others = [b for b in self.cluster.ids if b != broker_id]
        return others[op.second_pick % len(others)]

    # -- ops ---------------------------------------------------------------------------
    def run(self, op: Op) -> None:
        start = time.time()
        handler = {
            "kill": self._kill, "kill-leader": self._kill, "kill-controller": self._kill,
            "pause": self._pause, "pause-leader": self._pause, "pause-controller": self._pause,
            "rolling-restart": self._rolling_restart, "clean-stop": self._clean_stop,
            "torn-tail": self._torn_tail, "full-disk": self._full_disk, COMBINED: self._combined,
            "power-loss": self._power_loss,
        }[op.kind]
        events = self.events
        before = self._committed() if op.kind == "power-loss" else None
        broker, detail = handler(op)
        healed = time.time()
        try:
            self.cluster.wait_healthy(self.recovery_timeout_s, self.settle_s)
        except RecoveryTimeout as exc:
            self.slow_recoveries.append(f"{op.kind} on {broker}: {exc}")
            self.log(f"slow recovery after {op.kind} on broker {broker}: {exc}")
        recovered = max(0.0, time.time() - healed - self.settle_s)
        self.recovery_s.append(recovered)
        if before:
            detail += self._offsets_went_back(before)
        fault = Fault(op.kind, broker, start, time.time(),
                      f"{detail}; recovered in {recovered:.2f}s", self.events - events)
        self.record(fault)
        self.log(f"{op.kind} broker {broker}: {fault.detail}")
        time.sleep(op.gap_s)

    def _outage(self, broker: int, op: Op, take_down: Callable[[int], None],
                bring_back: Callable[[int], None]) -> None:
        """One broker out of service for the op's duration."""
        take_down(broker)
        self.events += 1
        time.sleep(op.duration_s)
        bring_back(broker)

    def _kill(self, op: Op) -> tuple[int, str]:
        broker = self._target(op.kind, op)
        self._outage(broker, op, self.cluster.kill, self.cluster.restart)
        return broker, f"kill -9, down {op.duration_s:.2f}s"

    def _pause(self, op: Op) -> tuple[int, str]:
        broker = self._target(op.kind, op)
        self._outage(broker, op, self.cluster.pause, self.cluster.resume)
        return broker, f"SIGSTOP for {op.duration_s:.2f}s"

    def _combined(self, op: Op) -> tuple[int, str]:
        killed = self._target("kill-leader", op)
        paused = self._other(killed, op)
        self.cluster.kill(killed)
        self.cluster.pause(paused)
        self.events += 2
        time.sleep(op.duration_s)
        self.cluster.resume(paused)
        self.cluster.restart(killed)
        return killed, f"kill -9 of {killed} with SIGSTOP of {paused} for {op.duration_s:.2f}s"

    def _power_loss(self, op: Op) -> tuple[int, str]:
        """Every broker killed at once, unsynced data dropped, every broker restarted; then
        the group's committed offsets must be where they were (or further)."""
        if not self.power_cut_command:
            raise ValueError("the power-loss fault needs a power-cut command")
        self.cluster.kill_every()
        self.events += len(self.cluster.ids)
        done = subprocess.run(shlex.split(self.power_cut_command), capture_output=True,
                              text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"power-cut command failed ({done.returncode}): "
                               f"{(done.stderr or done.stdout).strip()[-500:]}")
        time.sleep(op.duration_s)
        failures = [r for r in in_parallel(self.cluster.restart, self.cluster.ids).values()
                    if isinstance(r, Exception)]
        if failures:
            raise failures[0]
        return 0, f"power loss, down {op.duration_s:.2f}s, dropped {done.stdout.strip()}"

    def _offsets_went_back(self, before: dict[int, int]) -> str:
        """After a power loss, once healthy: no committed offset may be lower than before."""
        after = self._committed(attempts=5)
        if after is None:
            return "; committed offsets unavailable after the loss: not compared"
        back = {p: (o, after.get(p, -1)) for p, o in before.items() if after.get(p, -1) < o}
        if not back:
            return f"; committed offsets of {len(before)} partitions kept"
        went_back = "committed offsets went back: " + ", ".join(
            f"p{p} {old}->{new}" for p, (old, new) in sorted(back.items()))
        self.offsets_went_back.append(went_back)
        return f"; {went_back}"

    def _committed(self, attempts: int = 1) -> dict[int, int] | None:
        """The group's committed offsets, or None if they cannot be read (no coordinator
        just now): then this loss goes unchecked, and says so."""
        if self.committed is None:
            return None
        for attempt in range(attempts):
            try:
                return self.committed()
            except Exception as exc:
                self.log(f"committed offsets unavailable: {exc}")
                if attempt + 1 < attempts:
                    time.sleep(self.committed_retry_s)
        return None

    def _clean_stop(self, op: Op) -> tuple[int, str]:
        broker = self._target("leader", op)
        self._outage(broker, op, self.cluster.stop, self.cluster.restart)
        return broker, f"SIGTERM, down {op.duration_s:.2f}s"

    def _rolling_restart(self, op: Op) -> tuple[int, str]:
        controller = self.cluster.controller()
        order = sorted(self.cluster.ids, key=lambda b: b == controller)
        for broker in order:
            self.cluster.stop(broker)
            self.events += 1
            self.cluster.restart(broker)
            self.cluster.wait_healthy(self.recovery_timeout_s)
        return 0, f"rolling restart of {order}"

    def _torn_tail(self, op: Op) -> tuple[int, str]:
        broker = self._target("kill", op)
        self.cluster.kill(broker)
        self.events += 1
        partition = op.second_pick % self.partitions
        detail = tear(self.cluster.partition_dir(broker, self.topic, partition), op)
        self.cluster.restart(broker)
        return broker, f"kill -9, p{partition} {detail}"

    def _full_disk(self, op: Op) -> tuple[int, str]:
        """Fill a leader's disk for the op's duration, and on until the broker has been
        refused space at least once (segments reserve their space when they roll, so the
        disk only bites at a roll), up to FULL_DISK_MAX_S."""
        broker = self._target("leader", op)
        log = self.cluster.broker_log(broker)
        seen = _size(log)
        started = time.monotonic()
        detail = self.cluster.fill_disk(broker)
        time.sleep(op.duration_s)
        refused = _refusals(log, seen)
        while not refused and time.monotonic() - started < FULL_DISK_MAX_S:
            time.sleep(0.2)
            refused = _refusals(log, seen)
        held = time.monotonic() - started
        self.cluster.free_disk(broker)
        return broker, f"{detail} for {held:.2f}s; {refused} write(s) refused"


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _refusals(log: Path, start: int) -> int:
    """How many times the broker logged a write refused for space since byte ``start``."""
    try:
        with open(log, "rb") as handle:
            handle.seek(start)
            text = handle.read().decode(errors="replace")
    except OSError:
        return 0
    return sum(text.count(sign) for sign in DISK_FULL_SIGNS)


def tear(directory: Path, op: Op) -> str:
    """Truncate or corrupt the tail of the active segment (the broker is stopped)."""
    files = segments(directory)
    if not files:
        return "no segment to tear"
    active = files[-1]
    batches = list(valid_batches(active))
    if not batches:
        return f"{active.name} empty"
    rng = random.Random(op.second_pick)
    pos, _, raw = batches[-1]
    end = pos + len(raw)
    if op.tear == "truncate":
        cut = pos + rng.randrange(1, len(raw))
        os.truncate(active, cut)
        return f"{active.name} truncated at {cut} (inside the last batch, {pos}..{end})"
    # inside what the CRC covers (attributes onwards): a flip recovery is meant to catch
    at = pos + CRC_START + rng.randrange(len(raw) - CRC_START)
    with open(active, "r+b") as handle:
        handle.seek(at)
        byte = handle.read(1)
        handle.seek(at)
        handle.write(bytes([byte[0] ^ 0xFF]))
    return f"{active.name} byte {at} flipped (in the last batch, {pos}..{end})"
