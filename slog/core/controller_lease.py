"""The controller lease, and the epoch fence on metadata appends.

``controller.lock`` (a flock) elects a controller and frees itself the instant
its holder dies, but a holder paused with SIGSTOP keeps it for as long as the
pause lasts. The lease adds the two things a lock cannot give:

* **Expiry.** ``controller.lease`` names the controller (broker id, incarnation)
  and its epoch; its mtime is the last renewal. A thread renews it every
  session timeout / 8 (at most 1 s) while the controller runs, and a standby may
  take over once it is older than the session timeout: a paused controller has
  lost the lease by the time its brokers' heartbeats would fence it. The file is
  written once per term (temp file, fsync, rename, directory fsync) and renewed
  through that term's descriptor, so a deposed controller that wakes up renews
  only its own replaced file, never its successor's.
* **A fence.** ``metadata/append.lock`` serialises every metadata append and
  every takeover. A takeover re-reads the lease under it before writing the new
  one; an append checks under it that the lease still carries the writer's
  epoch and names the writer. A controller deposed while it was paused cannot append when it wakes:
  the log refuses the write (NOT_CONTROLLER), readers never see it.

A controller paused in the middle of an append (a few milliseconds, fsync
included) holds the append lock, and takeovers wait for it to finish: that
append was made under a valid lease and must not be torn.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from slog.core.checkpoint import write_atomically
from slog.core.errors import SlogError
from slog.core.kafka_errors import ErrorCode, KafkaApiError
from slog.core.locks import FileLock

log = logging.getLogger("slog.controller")

RENEWALS_PER_LEASE = 8
LONGEST_RENEWAL_INTERVAL_S = 1.0
LOCK_RETRY_S = 0.001


class LeaseBusyError(SlogError):
    """The append lock stayed taken for longer than the caller would wait."""


class NotControllerError(KafkaApiError):
    """A metadata append by a controller whose lease has passed to another."""

    def __init__(self, message: str):
        super().__init__(ErrorCode.not_controller, message)


@dataclass(frozen=True)
class Lease:
    """What ``controller.lease`` says."""

    controller: int
    epoch: int
    incarnation: str  # of the holder's process: a restarted broker is not its old self
    renewed_at: float  # time.time() of the last renewal (the file's mtime); 0: released

    def expires_at(self, duration_s: float) -> float:
        return self.renewed_at + duration_s

    def expired(self, duration_s: float, now: float) -> bool:
        return now > self.expires_at(duration_s)


class ControllerLease:
    """One broker's handle on the lease file and the append lock."""

    def __init__(self, path: Path, append_lock: Path, duration_s: float):
        self.path = path
        self.duration_s = duration_s
        self._append_lock = FileLock(append_lock)
        self._renewer: _Renewer | None = None  # while this broker holds the lease
        self._holder: tuple[int, str] | None = None  # who this handle claimed it for

    # -- reading -----------------------------------------------------------------------
    def read(self) -> Lease | None:
        """The lease on disk; None when there is none or it cannot be read (a
        standby then takes over, which writes a good one)."""
        try:
            with open(self.path, "rb") as handle:
                renewed_at = os.fstat(handle.fileno()).st_mtime
                fields = json.loads(handle.read())
            return Lease(int(fields["controller"]), int(fields["epoch"]),
                         str(fields["incarnation"]), renewed_at)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("cannot read %s (%s): treating the lease as vacant", self.path, exc)
            return None

    def names(self, epoch: int) -> bool:
        """True while the lease on disk still carries ``epoch`` (no lock: a hint)."""
        lease = self.read()
        return lease is not None and lease.epoch == epoch

    # -- the append lock ---------------------------------------------------------------
    @contextmanager
    def exclusive(self, wait_s: float) -> Iterator[None]:
        """Hold the append lock; LeaseBusyError after ``wait_s`` (0: one try)."""
        deadline = time.monotonic() + wait_s
        while not self._append_lock.try_acquire():
            if time.monotonic() >= deadline:
                raise LeaseBusyError(f"{self._append_lock.path} is held by another process")
            time.sleep(LOCK_RETRY_S)
        try:
            yield
        finally:
            self._append_lock.unlock()  # the file stays open for the next append

    def check(self, epoch: int) -> None:
        """Under :meth:`exclusive`: refuse a write by a controller at ``epoch`` unless
        the lease still carries that epoch, claimed by this handle."""
        lease = self.read()
        if lease is None or lease.epoch != epoch or \
                (lease.controller, lease.incarnation) != self._holder:
            holder = "nobody" if lease is None else \
                f"broker {lease.controller} at epoch {lease.epoch}"
            raise NotControllerError(f"the controller lease has passed from epoch {epoch} to "
                                     f"{holder}")

    # -- holding the lease ---------------------------------------------------------------
    def claim(self, controller: int, incarnation: str, epoch: int) -> None:
        """Under :meth:`exclusive`: write the lease for a new term and renew it from
        now on."""
        self.abandon()
        self._holder = (controller, incarnation)
        record = {"controller": controller, "epoch": epoch, "incarnation": incarnation}
        write_atomically(self.path, json.dumps(record).encode())
        interval = min(LONGEST_RENEWAL_INTERVAL_S, self.duration_s / RENEWALS_PER_LEASE)
        self._renewer = _Renewer(os.open(self.path, os.O_RDONLY), interval, epoch)

    def release(self) -> None:
        """Give the lease up at once (a clean stop): it reads as expired."""
        if self._renewer is not None:
            self._renewer.stop(expire=True)
            self._renewer = None

    def abandon(self) -> None:
        """Stop renewing a lease that has passed to another controller."""
        if self._renewer is not None:
            self._renewer.stop(expire=False)
            self._renewer = None

    def close(self) -> None:
        self.abandon()
        self._append_lock.release()


class _Renewer:
    """Renews one term's lease file (its mtime: nothing to tear) from a thread, like
    the broker heartbeat: a busy event loop is not a dead controller, while SIGSTOP
    stops this thread too."""

    def __init__(self, fd: int, interval_s: float, epoch: int):
        self._fd: int | None = fd
        self._interval_s = interval_s
        self._stopped = threading.Event()
        self._lock = threading.Lock()  # the descriptor is closed only between renewals
        threading.Thread(target=self._run, name=f"controller-lease-{epoch}",
                         daemon=True).start()

    def stop(self, *, expire: bool) -> None:
        with self._lock:
            self._stopped.set()
            if self._fd is None:
                return
            try:
                if expire:
                    os.utime(self._fd, (0, 0))
            except OSError as exc:
                log.warning("cannot release the controller lease: %s", exc)
            finally:
                os.close(self._fd)
                self._fd = None

    def _run(self) -> None:
        failing = False
        while not self._stopped.wait(self._interval_s):
            with self._lock:
                if self._fd is None:
                    return
                try:
                    os.utime(self._fd)
                    failing = False
                except OSError as exc:
                    if not failing:  # once per failure streak
                        log.warning("cannot renew the controller lease: %s", exc)
                    failing = True
