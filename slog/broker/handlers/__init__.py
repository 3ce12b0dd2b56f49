"""One module per family of Kafka APIs; each exports ``HANDLERS``: api key → coroutine."""

from __future__ import annotations

from slog.broker.dispatcher import Handler
from slog.broker.handlers import admin, cluster, data, groups, reassign, replication


def all_handlers() -> dict[int, Handler]:
    handlers: dict[int, Handler] = {}
    for module in (cluster, data, admin, replication, reassign, groups):
        handlers.update(module.HANDLERS)
    return handlers
