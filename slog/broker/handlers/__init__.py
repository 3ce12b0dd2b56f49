"""One module per family of Kafka APIs; each exports ``HANDLERS``: api key → coroutine."""

from __future__ import annotations

from slog.broker.dispatcher import Handler
from slog.broker.handlers import (
    acls,
    admin,
    cluster,
    configs,
    consumer_groups,
    data,
    fetch,
    groups,
    log_dirs,
    quorum,
    quotas,
    reassign,
    records,
    replication,
    sasl,
    scram,
    topic_partitions,
    transactions,
)


def all_handlers() -> dict[int, Handler]:
    handlers: dict[int, Handler] = {}
    for module in (cluster, data, fetch, admin, configs, replication, reassign, groups,
                   consumer_groups, log_dirs, quorum, sasl, acls, scram, records, quotas,
                   topic_partitions, transactions):
        handlers.update(module.HANDLERS)
    return handlers
