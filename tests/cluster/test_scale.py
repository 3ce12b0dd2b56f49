"""A CI-sized scale run: thousands of partitions on three real brokers.

Asserts behaviour, not time (the timed figures belong in a benchmark): a
topic of 2,000 partitions (RF 3, so 6,000 replicas) is created with every
replica's log, the brokers keep answering ApiVersions within a second while
they create the files, every partition gets a leader and a full ISR, and a
kill -9 of a broker moves all its leaderships in one metadata append.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict

import pytest

from slog.client import Admin, NewTopic
from slog.core.metadata_log import MetadataLogReader
from slog.core.metadata_records import FenceBrokerRecord, PartitionRecord
from slog.protocol.apis import ApiKey
from tests.cluster.conftest import Cluster, wait_until

PARTITIONS = 2_000
RESPONSIVE_S = 1.0


class ApiVersionsProbe(threading.Thread):
    """Asks every broker for ApiVersions in turn and keeps the slowest answer."""

    def __init__(self, cluster: Cluster):
        super().__init__(name="probe", daemon=True)
        self.cluster = cluster
        self.stop = threading.Event()
        self.slowest = 0.0
        self.answers = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            connections = {b: self.cluster.connect(b) for b in self.cluster.brokers}
            try:
                while not self.stop.is_set():
                    for connection in connections.values():
                        started = time.monotonic()
                        connection.request(ApiKey.API_VERSIONS, {}, version=0)
                        self.slowest = max(self.slowest, time.monotonic() - started)
                        self.answers += 1
                    time.sleep(0.05)
            finally:
                for connection in connections.values():
                    connection.close()
        except BaseException as exc:  # reported by the test
            self.error = exc


def _logs(cluster: Cluster, broker_id: int, topic: str) -> int:
    logs_dir = cluster.layout.logs_dir(broker_id)
    return sum(1 for entry in logs_dir.iterdir() if entry.name.startswith(f"{topic}-"))


@pytest.mark.broker_config({"log.preallocate": "false"})
def test_thousands_of_partitions(cluster: Cluster) -> None:
    probe = ApiVersionsProbe(cluster)
    probe.start()
    try:
        with Admin(cluster.bootstrap, request_timeout_ms=60_000) as admin:
            admin.create_topics([NewTopic("wide", PARTITIONS, 3)])
        for broker_id in cluster.brokers:
            wait_until(lambda b=broker_id: _logs(cluster, b, "wide") == PARTITIONS, 120,
                       f"broker {broker_id} to create {PARTITIONS} logs")
        wait_until(lambda: cluster.in_sync("wide"), 120, "every partition in sync")
    finally:
        probe.stop.set()
        probe.join()
    assert probe.error is None, probe.error
    assert probe.answers > 0
    assert probe.slowest < RESPONSIVE_S, f"ApiVersions took {probe.slowest:.2f}s during creation"
    states = [p for p in cluster.image().all_partitions() if p.topic == "wide"]
    assert len(states) == PARTITIONS
    assert all(p.leader in p.isr and len(p.isr) == 3 for p in states)

    # kill -9 a broker that is not the controller: one append moves all it led.
    victim = next(b for b in cluster.brokers if b != cluster.controller())
    led = {(p.topic, p.partition) for p in states if p.leader == victim}
    assert led
    start = MetadataLogReader(cluster.layout.metadata_dir)
    start_offset = max((offset for offset, _ in start.poll()), default=-1) + 1
    cluster.kill(victim)
    wait_until(lambda: all(p.leader not in (victim, -1) for p in cluster.image().all_partitions()
                           if p.topic == "wide"), 60, "new leaders for the victim's partitions")
    writes: dict[int, set[tuple[str, int]]] = defaultdict(set)  # ts -> moved partitions
    fence_ts = None
    for _, record in MetadataLogReader(cluster.layout.metadata_dir, start_offset).poll():
        if isinstance(record, FenceBrokerRecord) and record.broker_id == victim:
            fence_ts = record.ts
        if isinstance(record, PartitionRecord) and \
                (key := (record.state.topic, record.state.partition)) in led:
            writes[record.ts].add(key)
    assert fence_ts is not None
    assert writes[fence_ts] == led, f"leaderships moved in {len(writes)} appends"
