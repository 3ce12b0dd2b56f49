"""``slog cluster status --bootstrap``: the cluster view from the protocol.

For a cluster whose data dir is elsewhere (or a real Kafka), one Metadata
request gives the same :class:`~slog.core.cluster_view.ClusterView` the data
dir does. Kafka hides fenced brokers from Metadata, so a broker named in a
replica list but missing from the broker list is reported as not alive.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from slog.core.cluster_view import (
    DEFAULT_MIN_ISR,
    MIN_ISR_KEY,
    BrokerState,
    ClusterView,
    PartitionHealth,
    min_isr_of,
)


def view_from_protocol(bootstrap: str, request_timeout_ms: int = 5000) -> ClusterView:
    """Ask any broker in ``bootstrap``; client errors propagate (the caller maps them)."""
    from slog.client import Admin

    with Admin(bootstrap, client_id="slog-cli", request_timeout_ms=request_timeout_ms) as admin:
        meta = admin.cluster.refresh_metadata(None)
        listed = set(meta.brokers)
        referenced = {r for t in meta.topics.values() for p in t.partitions.values()
                      for r in p.replicas}
        brokers = [BrokerState(b.node_id, b.host, b.port, None, True, True, False,
                               b.node_id == meta.controller_id, b.rack)
                   for b in sorted(meta.brokers.values(), key=lambda b: b.node_id)]
        brokers += [BrokerState(b, None, None, None, False, False, False, False)
                    for b in sorted(referenced - listed)]
        topics = [t for _, t in sorted(meta.topics.items()) if not t.error_code]
        partitions = [
            PartitionHealth.judge(t.name, p.partition, p.leader, p.replicas, p.isr, listed,
                                  DEFAULT_MIN_ISR)
            for t in topics for _, p in sorted(t.partitions.items())
        ]
        partitions = _with_min_isr(partitions, lambda topic: _configured_min_isr(admin, topic))
    return ClusterView(
        source="protocol", location=bootstrap, cluster_id=meta.cluster_id,
        controller_id=meta.controller_id if meta.controller_id in listed else None,
        controller_epoch=None, brokers=brokers, partitions=partitions, topic_count=len(topics))


def _configured_min_isr(admin: Any, topic: str) -> int:
    from slog.client.errors import KafkaError

    try:
        entry = admin.describe_configs(topic).get(MIN_ISR_KEY)
    except KafkaError:
        return DEFAULT_MIN_ISR
    return min_isr_of({MIN_ISR_KEY: entry.value} if entry and entry.value else {})


def _with_min_isr(partitions: list[PartitionHealth], lookup: Callable[[str], int]
                  ) -> list[PartitionHealth]:
    """Fill in min.insync.replicas, asking only about topics that lost a replica
    (one DescribeConfigs per such topic, not per topic of the cluster)."""
    cache: dict[str, int] = {}
    out = []
    for p in partitions:
        if p.under_replicated:
            if p.topic not in cache:
                cache[p.topic] = lookup(p.topic)
            p = replace(p, min_insync_replicas=cache[p.topic])
        out.append(p)
    return out
