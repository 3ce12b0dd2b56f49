"""What the chaos workloads' client threads share: a stoppable worker thread that logs to a
history, and a reader that polls one consumer until stopped, logging what it reads and
carrying on through client errors (a fault must not end the verification)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from slog.chaos.history import HistoryLog
from slog.client import Consumer
from slog.client.types import ConsumerRecord

POLL_TIMEOUT_MS = 200
POLL_RETRY_S = 0.2  # after a failed poll: do not spin while a broker is down


def record_text(value: bytes | None) -> str:
    """A record's value as the history stores it."""
    return "" if value is None else value.decode(errors="replace")


class Worker(threading.Thread):
    """A client thread of a workload: it logs to ``log``, reports client errors to
    ``on_error`` and runs until :meth:`stop`."""

    def __init__(self, kind: str, name: str, bootstrap: str, topic: str, log: HistoryLog,
                 on_error: Callable[[str], None]):
        super().__init__(name=f"{kind}-{name}", daemon=True)
        self.bootstrap = bootstrap
        self.topic = topic
        self.log = log
        self.on_error = on_error
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()

    @property
    def stopping(self) -> bool:
        return self._halt.is_set()


class PollingReader(Worker):
    """A worker that reads ``topic`` with one consumer until stopped. Subclasses say how
    the consumer is made and starts (subscribe or assign) and what a polled batch logs."""

    def __init__(self, kind: str, name: str, bootstrap: str, topic: str, log: HistoryLog,
                 on_error: Callable[[str], None]):
        super().__init__(kind, name, bootstrap, topic, log, on_error)
        self.reader = name
        self.records = 0

    def open_consumer(self) -> Consumer:
        raise NotImplementedError

    def start_reading(self, consumer: Consumer) -> None:
        raise NotImplementedError

    def handle(self, consumer: Consumer, records: list[ConsumerRecord]) -> None:
        raise NotImplementedError

    def run(self) -> None:
        consumer = self.open_consumer()
        try:
            self.start_reading(consumer)
            while not self.stopping:
                try:
                    records = consumer.poll(POLL_TIMEOUT_MS)
                except Exception as exc:  # keep verifying through any client error
                    self.on_error(f"{self.reader}: poll failed: {exc}")
                    time.sleep(POLL_RETRY_S)
                    continue
                self.handle(consumer, records)
                self.records += len(records)
        finally:
            try:
                consumer.close()
            except Exception as exc:  # a broker may be down at the very end; nothing to lose
                self.on_error(f"{self.reader}: close failed: {exc}")
