"""Leaders die, pause and shut down under load; acknowledged data survives.

Real broker processes on one data dir (see conftest). Each test ends by
checking the two replication invariants: every record acknowledged with
acks=all is readable exactly once at its acknowledged offset, and every
replica holds byte-identical batches up to the high watermark.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import pytest

from slog.client.errors import KafkaError
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from tests.cluster.conftest import (
    Cluster,
    check_acknowledged,
    check_identical_replicas,
    produce_body,
    produce_error,
    wait_until,
)


@dataclass
class Load:
    """A producer thread sending numbered records round-robin over partitions."""

    cluster: Cluster
    topic: str
    partitions: int
    options: dict = field(default_factory=dict)
    acked: dict[bytes, tuple[int, int]] = field(default_factory=dict)
    failed: list[tuple[bytes, str]] = field(default_factory=list)
    sent: int = 0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._producer = self.cluster.producer(**{"acks": "all", "linger_ms": 2,
                                                  **self.options})
        self._thread = threading.Thread(target=self._run, name="load", daemon=True)

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _delivered(self, value: bytes, metadata: object, error: Exception | None) -> None:
        with self._lock:
            if error is not None:
                self.failed.append((value, repr(error)))
            else:
                self.acked[value] = (metadata.partition, metadata.offset)  # type: ignore[attr-defined]

    def _run(self) -> None:
        while not self._stop.is_set():
            value = f"record-{self.sent}".encode()
            self._producer.send(self.topic, value, partition=self.sent % self.partitions,
                                on_delivery=lambda m, e, v=value: self._delivered(v, m, e))
            self.sent += 1
            if self.sent % 200 == 0:
                self._producer.flush(60)  # bounded in flight: at most 200 records queued

    def acked_count(self) -> int:
        with self._lock:
            return len(self.acked)

    def wait_progress(self, records: int = 200, timeout_s: float = 20) -> None:
        """Wait until ``records`` more records have been acknowledged."""
        target = self.acked_count() + records
        wait_until(lambda: self.acked_count() >= target, timeout_s,
                   f"{records} more acknowledged records")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        self._producer.flush(60)


# -- 1. kill the leader under load ------------------------------------------------------------

def test_kill_each_leader_under_load(cluster: Cluster) -> None:
    topic, partitions = "load", 3
    cluster.create_topic(topic, partitions, 3, configs={"min.insync.replicas": "2"})
    with Load(cluster, topic, partitions) as load:
        load.wait_progress()
        for p in range(partitions):
            victim = cluster.leader(topic, p)
            cluster.kill(victim)
            successor = cluster.wait_leader(topic, p, not_in={victim}, timeout_s=5)
            assert successor != victim
            load.wait_progress()
            cluster.restart(victim)
            cluster.wait_in_sync(topic)
            load.wait_progress()
    assert not load.failed, f"{len(load.failed)} records failed, first {load.failed[:3]}"
    assert len(load.acked) == load.sent
    marks = check_acknowledged(cluster, topic, range(partitions), load.acked)
    assert sum(marks.values()) == len(load.acked)  # idempotence: no duplicates either
    cluster.wait_in_sync(topic)
    check_identical_replicas(cluster, topic, marks)


# -- 3. pause the leader -------------------------------------------------------------------

def test_paused_leader_is_fenced_and_rejoins_as_follower(cluster: Cluster) -> None:
    topic = "paused"
    # The paused leader here is not the controller: a paused controller is
    # test_controller_lease.py's case (its lease expires, a standby takes over).
    others = sorted(b for b in cluster.brokers if b != cluster.controller())
    cluster.create_topic(topic, assignment={0: [*others, cluster.controller()]},
                         configs={"min.insync.replicas": "2"})
    with cluster.producer() as producer:
        for i in range(50):
            producer.send(topic, f"before-{i}".encode(), partition=0)
        producer.flush(20)
    old = cluster.leader(topic)
    followers = [b for b in cluster.brokers if b != old]
    epoch = cluster.state(topic).leader_epoch
    # Connected before the pause: requests can be queued while it is stopped.
    conns = [cluster.connect(old) for _ in range(4)]
    # The old leader gets acks=1 records its followers never fetch: the followers
    # stop for a moment (an answer to a fetch they already sent may still reach
    # them, so at most the first of these records), then the leader stops.
    for broker_id in followers:
        cluster.pause(broker_id)
    for i in range(5):
        cluster.append_to(old, topic, 0, [f"unreplicated-{i}".encode()], acks=1)
    cluster.step(f"pausing leader {old}")
    cluster.pause(old)
    for broker_id in followers:
        cluster.resume(broker_id)
    new = cluster.wait_leader(topic, not_in={old}, timeout_s=10)
    cluster.step(f"new leader {new}")
    assert cluster.state(topic).leader_epoch > epoch
    # Clients see the new leader in Metadata.
    admin = cluster.admin()
    meta = wait_until(lambda: (m := admin.cluster.refresh_metadata([topic]))
                      .topics[topic].partitions[0].leader == new and m, 10,
                      "Metadata to name the new leader")
    assert old not in meta.brokers  # fenced brokers are not advertised
    with cluster.producer() as producer:
        for i in range(50):
            producer.send(topic, f"during-{i}".encode(), partition=0)
        producer.flush(20)
    cluster.step("produced during the pause")
    # Writes sent to the old leader while it is stopped are served the moment it
    # runs again, before it has read the metadata that deposed it: still refused.
    for conn, acks in zip(conns, (1, -1, 1, -1), strict=True):
        conn.send(ApiKey.PRODUCE, produce_body(topic, 0, [b"stale-leader-write"], acks))
    cluster.resume(old)
    cluster.step("resumed")
    refused = {int(ErrorCode.not_leader_or_follower), int(ErrorCode.fenced_leader_epoch)}
    for conn in conns:
        code = produce_error(conn.receive()[1])
        conn.close()
        assert code in refused, f"the resumed old leader accepted a write (error {code})"
    # And so are new ones.
    code = cluster.produce_to(old, topic, 0, [b"stale-leader-write"], acks=1)
    assert code in refused, f"the resumed old leader accepted a write (error {code})"
    cluster.step("writes refused")
    cluster.wait_registered([old])
    cluster.step("registered again")
    cluster.wait_in_sync(topic)
    cluster.step("in sync")
    # It cut the records only it had before following the new leader.
    assert "truncating from 55 to" in cluster.log_text(old)
    hw = cluster.high_watermark(topic)
    values = [r.value for r in cluster.read_all(topic, 0, hw)]
    kept = [v for v in values if v.startswith(b"unreplicated-")]
    assert kept in ([], [b"unreplicated-0"]), kept
    assert [v for v in values if not v.startswith(b"unreplicated-")] == \
        [f"before-{i}".encode() for i in range(50)] + [f"during-{i}".encode() for i in range(50)]
    assert hw == 100 + len(kept)
    check_identical_replicas(cluster, topic, {0: hw})


# -- controlled shutdown and min.insync.replicas ------------------------------------------------

def test_controlled_shutdown_moves_leadership_first(cluster: Cluster) -> None:
    topic = "drain"
    cluster.create_topic(topic, 3, 3, configs={"min.insync.replicas": "2"})
    victim = cluster.leader(topic, 0)
    led = [p for p in range(3) if cluster.leader(topic, p) == victim]
    with Load(cluster, topic, 3, options={"retries": 50}) as load:
        load.wait_progress()
        cluster.stop(victim)
        log = cluster.log_text(victim)
        assert "controlled shutdown timed out" not in log
        for p in led:
            assert cluster.leader(topic, p) != victim  # moved before the process exited
        load.wait_progress()
        cluster.restart(victim)
        cluster.wait_in_sync(topic)
        load.wait_progress()
    assert not load.failed, f"acks=all errors during a controlled shutdown: {load.failed[:3]}"
    marks = check_acknowledged(cluster, topic, range(3), load.acked)
    check_identical_replicas(cluster, topic, marks)


@pytest.mark.brokers(2)
def test_acks_all_below_min_insync_replicas(cluster: Cluster) -> None:
    topic = "min-isr"
    cluster.create_topic(topic, 1, 2, configs={"min.insync.replicas": "2"})
    leader = cluster.leader(topic)
    follower = next(b for b in cluster.brokers if b != leader)
    assert cluster.produce_to(leader, topic, 0, [b"ok"], acks=-1) == 0
    cluster.kill(follower)
    cluster.wait_isr(topic, 0, [leader], timeout_s=10)
    wait_until(lambda: cluster.produce_to(leader, topic, 0, [b"no"], acks=-1)
               == int(ErrorCode.not_enough_replicas), 10,
               "the leader to refuse acks=all with NOT_ENOUGH_REPLICAS")
    # acks=1 still works; a retrying producer gives up at its delivery timeout, not later.
    assert cluster.produce_to(leader, topic, 0, [b"one"], acks=1) == 0
    with cluster.producer(delivery_timeout_ms=1_500, request_timeout_ms=1_000) as producer:
        started = time.monotonic()
        future = producer.send(topic, b"refused", partition=0)
        with pytest.raises(KafkaError):
            future.result(timeout=10)
        assert time.monotonic() - started < 5
    cluster.restart(follower)
    cluster.wait_in_sync(topic)
    assert cluster.produce_to(leader, topic, 0, [b"again"], acks=-1) == 0
