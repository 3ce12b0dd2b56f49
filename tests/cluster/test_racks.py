"""broker.rack end to end: racks in metadata, rack-aware placement, fetch from follower.

Four brokers in racks a, b, c, a (what ``slog cluster up --racks a,b,c`` gives),
with KIP-392's RackAwareReplicaSelector on. Clients are real: confluent-kafka
(librdkafka), kafka-python, kcat, slog's client and raw Fetch requests.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slog.core.config import RACK_AWARE_REPLICA_SELECTOR
from slog.core.records import iter_decoded_batches
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from tests.cluster.conftest import FAST, Cluster, wait_until
from tests.compat.clients import fetch_request, kcat_metadata

RACKS = {1: "a", 2: "b", 3: "c", 4: "a"}
# Slower liveness than FAST: the HW test pauses a follower for a few seconds and
# needs it to stay in the ISR meanwhile.
SETTINGS = {**FAST, "broker.session.timeout.ms": "8000", "replica.lag.time.max.ms": "10000",
            "replica.selector.class": RACK_AWARE_REPLICA_SELECTOR}
NEAR = "near"  # leader 1 (rack a), followers 2 (rack b) and 3 (rack c)


@pytest.fixture(scope="module")
def racked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cluster = Cluster(Path(tmp_path_factory.mktemp("racks")) / "data", len(RACKS), SETTINGS)
    for broker_id, rack in RACKS.items():
        cluster.brokers[broker_id].overrides["broker.rack"] = rack
    try:
        cluster.start()
        cluster.create_topic(NEAR, assignment={0: [1, 2, 3]})
        with cluster.producer(acks="all") as producer:
            for i in range(200):
                producer.send(NEAR, f"v{i}".encode(), partition=0)
            producer.flush()
        wait_until(lambda: all(_follower_hw(cluster, b) == 200 for b in (2, 3)),
                   what="followers to learn HW 200")
        yield cluster
    finally:
        cluster.close()
    tracebacks = [b for b in cluster.brokers if "Traceback" in cluster.log_text(b)]
    assert not tracebacks, "\n".join(cluster.log_text(b)[-6000:] for b in tracebacks)


def _fetch(cluster: Cluster, broker_id: int, offset: int, *, rack: str = "",
           version: int = 12, max_wait_ms: int = 100, replica_id: int = -1) -> Any:
    body = {**fetch_request(NEAR, 0, offset, max_wait_ms), "rack_id": rack,
            "replica_id": replica_id}
    with cluster.connect(broker_id) as conn:
        return conn.request(ApiKey.FETCH, body, version=version).responses[0].partitions[0]


def _follower_hw(cluster: Cluster, broker_id: int) -> int:
    return int(_fetch(cluster, broker_id, 0, rack="x", max_wait_ms=0).high_watermark)


def _record_offsets(answer: Any) -> list[int]:
    return [r.offset for _, _, records in iter_decoded_batches(answer.records or b"")
            for r in records]


# -- metadata ------------------------------------------------------------------------------

def test_metadata_shows_racks_to_every_client(racked: Cluster) -> None:
    from confluent_kafka.admin import AdminClient
    from kafka.admin import KafkaAdminClient

    # kcat -L lists the brokers (its output has no rack column).
    assert {b["id"] for b in kcat_metadata(racked.bootstrap)["brokers"]} == set(RACKS)
    admin = KafkaAdminClient(bootstrap_servers=racked.bootstrap, request_timeout_ms=10_000)
    try:
        described = admin.describe_cluster()  # DescribeCluster
    finally:
        admin.close()
    assert {b["broker_id"]: b["rack"] for b in described["brokers"]} == RACKS
    librdkafka = AdminClient({"bootstrap.servers": racked.bootstrap})
    nodes = librdkafka.describe_cluster(request_timeout=10).result().nodes
    assert {n.id: n.rack for n in nodes} == RACKS
    with racked.admin() as admin:
        meta = admin.cluster.refresh_metadata(None)  # Metadata
    assert {b.node_id: b.rack for b in meta.brokers.values()} == RACKS


# -- placement -----------------------------------------------------------------------------

def test_created_topics_spread_each_partition_over_racks(racked: Cluster) -> None:
    racked.create_topic("spread3", partitions=8, replication_factor=3)
    racked.create_topic("spread2", partitions=8, replication_factor=2)
    with racked.admin() as admin:
        admin.create_partitions("spread2", 12)
    wait_until(lambda: len(racked.image().topics["spread2"].partitions) == 12,
               what="spread2 to have 12 partitions")
    for topic, rf in (("spread3", 3), ("spread2", 2)):
        for state in racked.image().topics[topic].partitions.values():
            assert len({RACKS[b] for b in state.replicas}) == rf, (topic, state)
    # Leaders walk brokers rack by rack: 8 partitions over 4 brokers lead 2 each.
    leaders = [s.replicas[0] for s in racked.image().topics["spread3"].partitions.values()]
    assert sorted(leaders) == [1, 1, 2, 2, 3, 3, 4, 4]


# -- fetch from follower (KIP-392) ---------------------------------------------------------

def test_leader_points_a_consumer_to_a_replica_in_its_rack(racked: Cluster) -> None:
    answer = _fetch(racked, 1, 0, rack="b")
    assert answer.error_code == ErrorCode.none
    assert answer.preferred_read_replica == 2
    assert not answer.records
    assert _fetch(racked, 1, 0, rack="c").preferred_read_replica == 3
    # The leader's own rack, an unknown rack, no rack: the leader serves.
    for rack in ("a", "z", ""):
        served = _fetch(racked, 1, 0, rack=rack)
        assert served.preferred_read_replica == -1 and _record_offsets(served)[:1] == [0]


def test_a_follower_serves_v11_consumers_only(racked: Cluster) -> None:
    served = _fetch(racked, 2, 0, rack="b")
    assert served.error_code == ErrorCode.none
    assert _record_offsets(served)[0] == 0
    assert served.high_watermark == 200
    assert _fetch(racked, 2, 0, version=10).error_code == ErrorCode.not_leader_or_follower
    assert _fetch(racked, 2, 0, replica_id=3).error_code == ErrorCode.not_leader_or_follower
    # Past its log end: out of range (the consumer asks the leader again).
    with racked.connect(2) as conn:
        body = fetch_request(NEAR, 0, 10_000)
        body["topics"][0]["partitions"][0]["current_leader_epoch"] = \
            racked.state(NEAR).leader_epoch
        answer = conn.request(ApiKey.FETCH, body, version=12).responses[0].partitions[0]
    assert answer.error_code == ErrorCode.offset_out_of_range
    # ListOffsets stays with the leader.
    with racked.connect(2) as conn:
        listed = conn.request(ApiKey.LIST_OFFSETS, {
            "replica_id": -1, "isolation_level": 0, "topics": [{"name": NEAR, "partitions": [
                {"partition_index": 0, "timestamp": -1, "current_leader_epoch": -1}]}]})
    assert listed.topics[0].partitions[0].error_code == ErrorCode.not_leader_or_follower


def test_confluent_consumer_in_a_follower_rack_reads_everything_from_the_follower(
        racked: Cluster) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    fetched_from: list[tuple[int, int]] = []  # (leader, broker fetched from) per stats tick
    debug_lines: list[str] = []

    def on_stats(text: str) -> None:
        part = json.loads(text).get("topics", {}).get(NEAR, {}).get("partitions", {}).get("0")
        if part:
            fetched_from.append((part["leader"], part["broker"]))

    class Capture:
        def log(self, level: int, fmt: str, *args: Any) -> None:
            debug_lines.append(fmt % args if args else fmt)

    consumer = Consumer({
        "bootstrap.servers": racked.bootstrap, "group.id": "near-b", "client.rack": "b",
        "enable.auto.commit": False, "enable.partition.eof": True, "fetch.wait.max.ms": 100,
        "statistics.interval.ms": 100, "stats_cb": on_stats, "debug": "fetch",
        "logger": Capture()})
    values: list[bytes] = []
    try:
        consumer.assign([TopicPartition(NEAR, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 30
        while True:
            assert time.monotonic() < deadline, f"read {len(values)} of 200"
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, str(msg.error())
                if len(values) >= 200:
                    break
                continue
            values.append(msg.value())
        # A few more stats ticks once everything is read.
        consumer.poll(0.5)
    finally:
        consumer.close()
    assert values == [f"v{i}".encode() for i in range(200)]
    assert (1, 2) in fetched_from, f"librdkafka never fetched from broker 2: {fetched_from}"
    # librdkafka says so too: "... migrating from broker 1 to 2 (leader is 1): preferred
    # replica updated".
    migrations = [line for line in debug_lines if "preferred replica" in line]
    assert any("to 2" in line for line in migrations), migrations or debug_lines[-20:]


def test_slog_consumer_with_a_client_rack_follows_the_preferred_replica(racked: Cluster
                                                                         ) -> None:
    from slog.client import TopicPartition

    consumer = racked.consumer(client_rack="c", fetch_max_wait_ms=100)
    tp = TopicPartition(NEAR, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    values: list[bytes | None] = []
    deadline = time.monotonic() + 30
    while len(values) < 200:
        assert time.monotonic() < deadline, f"read {len(values)} of 200"
        values += [r.value for r in consumer.poll(200)]
    fetched_from = set(consumer._cluster.pooled("fetch"))  # its fetch connections
    consumer.close()
    assert values == [f"v{i}".encode() for i in range(200)]
    assert 3 in fetched_from, fetched_from


def test_a_follower_serves_up_to_its_high_watermark_only(racked: Cluster) -> None:
    """Broker 3 paused keeps the HW at 200 while follower 2 already holds more."""
    racked.pause(3)
    try:
        racked.append_to(1, NEAR, 0, [b"late-1", b"late-2"], acks=1)
        wait_until(lambda: max(racked.replica_values(2, NEAR, 0)) == 201,
                   what="follower 2 to copy the unacknowledged records")
        answer = _fetch(racked, 2, 0, rack="b")
        assert answer.high_watermark == 200
        assert max(_record_offsets(answer)) < 200
        started = time.monotonic()
        at_hw = _fetch(racked, 2, 200, rack="b", max_wait_ms=300)
        assert at_hw.error_code == ErrorCode.none and not _record_offsets(at_hw)
        assert time.monotonic() - started >= 0.25  # it long-polled, then gave up empty
        # A long poll at the HW wakes as soon as the HW moves on the follower.
        woke: dict[str, Any] = {}

        def long_poll() -> None:
            woke["answer"] = _fetch(racked, 2, 200, rack="b", max_wait_ms=15_000)
            woke["at"] = time.monotonic()

        poller = threading.Thread(target=long_poll)
        poller.start()
        time.sleep(0.3)
        resumed_at = time.monotonic()
        racked.resume(3)
        poller.join(20)
        assert not poller.is_alive()
        assert _record_offsets(woke["answer"]) == [200, 201]
        assert woke["at"] - resumed_at < 5
    finally:
        racked.resume(3)
