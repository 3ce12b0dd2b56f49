"""Who may become the controller: controller.lock, and the lease behind it.

The controller holds ``controller.lock`` and the controller lease
(:mod:`slog.core.controller_lease`). A standby may take over when

* there is no lease (a new data dir) and ``controller.lock`` is free, or the
  lease was released (a clean stop);
* the lease has expired: its holder stopped renewing it for a session timeout
  (SIGSTOP, a hung machine) even though it may still hold the lock;
* its holder's process is gone: ``controller.lock`` or the holder's
  ``alive.lock`` is free, which the OS makes so the instant it dies (and whose
  close wakes every broker's controller loop), so a dead controller is replaced
  at once, not after a session timeout.

A controller that took over from a paused one does not hold the lock until the
paused one wakes, notices it was deposed and lets go. Whoever gets the lock then
while the lease names a live controller hands it back (unlocks it, keeping the
file open so that no close wakes the others), and the controller takes it on its
next tick.
"""

from __future__ import annotations

import logging
import os
import time

from slog.core.controller_lease import ControllerLease, Lease
from slog.core.locks import FileLock
from slog.core.names import DataDirLayout

log = logging.getLogger("slog.broker")

EXPIRY_MARGIN_S = 0.01  # look just after the lease runs out, not just before
# A vacant lease whose takeover found the append lock taken (an append, or another
# standby taking over) is tried again this soon.
BUSY_RETRY_S = 0.05


class ControllerElection:
    def __init__(self, layout: DataDirLayout, broker_id: int, session_timeout_s: float):
        self.broker_id = broker_id
        self.incarnation = f"{os.getpid()}@{time.time():.6f}"
        self.lease = ControllerLease(layout.controller_lease, layout.metadata_append_lock,
                                     session_timeout_s)
        self._layout = layout
        self._lock = FileLock(layout.controller_lock)
        self._alive_probes: dict[int, FileLock] = {}  # kept open: a probe closes no file
        self._seen: Lease | None = None  # the live lease the last vacancy check found
        self._vacant = False  # the last check found a vacancy (yet we do not lead)

    def vacancy(self) -> str | None:
        """Why this broker may take over now, or None while a live controller holds
        the lease. Takes ``controller.lock`` when it is free."""
        reason = self._vacancy()
        self._vacant = reason is not None
        return reason

    def _vacancy(self) -> str | None:
        locked = self._lock.try_acquire()
        lease = self._seen = self.lease.read()
        if lease is None:  # a first start, or a controller of a slog without leases:
            return "no controller lease" if locked else None  # the lock decides
        now = time.time()
        if lease.renewed_at == 0:
            return f"broker {lease.controller} released the lease (epoch {lease.epoch})"
        if lease.expired(self.lease.duration_s, now):
            return (f"the lease of broker {lease.controller} (epoch {lease.epoch}) expired "
                    f"{now - lease.expires_at(self.lease.duration_s):.1f} s ago")
        if lease.controller == self.broker_id:
            return f"the lease (epoch {lease.epoch}) names an earlier run of this broker"
        if not self._alive(lease.controller):
            return f"broker {lease.controller}, the lease holder (epoch {lease.epoch}), is gone"
        if locked:
            self._lock.unlock()  # the lease holder's: it takes the lock on its next tick
        return None

    def standby_wait_s(self, longest_s: float) -> float:
        """How long a standby may sleep: until the lease it saw could expire (soon
        again if it has, and the takeover found the append lock taken)."""
        if self._vacant:  # and yet no takeover: it found the append lock taken
            return BUSY_RETRY_S
        if self._seen is None:  # controller.lock held without a lease: its close wakes us
            return longest_s
        left = self._seen.expires_at(self.lease.duration_s) - time.time() + EXPIRY_MARGIN_S
        return min(longest_s, max(left, BUSY_RETRY_S))

    def leads(self, epoch: int) -> bool:
        """The controller's check at every tick: does the lease still carry its epoch?
        While it does, take ``controller.lock`` too if a deposed holder let go of it."""
        if not self.lease.names(epoch):
            return False
        self._lock.try_acquire()
        return True

    def resign(self) -> None:
        """Stop leading: stop renewing and let go of ``controller.lock`` (its close
        wakes the other brokers). The caller released or abandoned the lease first."""
        self.lease.abandon()
        self._lock.release()

    def close(self) -> None:
        self.resign()
        self.lease.close()
        for probe in self._alive_probes.values():
            probe.release()
        self._alive_probes.clear()

    def _alive(self, broker_id: int) -> bool:
        probe = self._alive_probes.get(broker_id)
        if probe is None:
            probe = self._alive_probes[broker_id] = \
                FileLock(self._layout.broker(broker_id).alive_lock)
        return probe.held_by_another()
