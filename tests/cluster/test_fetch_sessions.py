"""Fetch sessions (KIP-227) and parked long polls, on real brokers with real clients.

* The protocol itself, over a raw connection: a full fetch opens a session,
  incremental fetches name only what changed and are answered with only the
  partitions that have something to say, Kafka's session errors, and a parked
  fetch woken by its own partition only.
* kafka-python (which opens sessions), librdkafka and aiokafka consumers keep
  consuming through the death of a partition leader: a session never hides a
  moved partition.
* With one session slot, two kafka-python consumers evict each other and both
  keep consuming (they fall back to full fetches).
* Idle followers fetch a few times a second, whatever the partition count;
  counted with the broker's own request counters (SIGUSR1 writes them to its log).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections import Counter
from typing import Any

import pytest

from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from tests.cluster.conftest import Cluster, broker_stats, wait_until

TIMEOUT_S = 60.0


# -- helpers ---------------------------------------------------------------------------
def session_fetch(conn: Any, session_id: int, epoch: int, parts: list[tuple[int, int]],
                  forgotten: list[int] = (), topic: str = "s", max_wait_ms: int = 100
                  ) -> Any:
    body = {"replica_id": -1, "max_wait": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": session_id, "session_epoch": epoch,
            "topics": [{"topic": topic, "partitions": [
                {"partition": p, "fetch_offset": offset, "partition_max_bytes": 1 << 20,
                 "current_leader_epoch": -1, "log_start_offset": -1} for p, offset in parts]}]
            if parts else [],
            "forgotten_topics_data": [{"topic": topic, "partitions": list(forgotten)}]
            if forgotten else [], "rack_id": ""}
    return conn.request(ApiKey.FETCH, body, version=12)


def listed(response: Any) -> dict[int, Any]:
    return {p.partition_index: p for t in response.responses for p in t.partitions}


# -- the protocol -----------------------------------------------------------------------
@pytest.mark.brokers(1)
def test_a_fetch_answers_at_most_its_max_bytes_past_the_first_batch(cluster: Cluster) -> None:
    # KIP-74: the first batch comes whole even past max_bytes, the rest must fit. Every
    # partition getting "at least one batch" made a 1,000-partition fetch answer 100 MB,
    # past what librdkafka accepts (receive.message.max.bytes).
    cluster.create_topic("big", partitions=4, replication_factor=1)
    for partition in range(4):
        cluster.produce_to(1, "big", partition, [os.urandom(10_000)] * 4, acks=1)
    with cluster.connect(1) as conn:
        body = {"replica_id": -1, "max_wait": 100, "min_bytes": 1, "max_bytes": 50_000,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": "big", "partitions": [
                    {"partition": p, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                     "current_leader_epoch": -1, "log_start_offset": -1} for p in range(4)]}],
                "forgotten_topics_data": [], "rack_id": ""}
        response = conn.request(ApiKey.FETCH, body, version=12)
    sizes = [len(p.records or b"") for t in response.responses for p in t.partitions]
    assert sizes.count(0) == 3 and max(sizes) > 40_000, sizes  # one batch of ~40 KB


@pytest.mark.brokers(1)
def test_incremental_session_names_only_what_changed(cluster: Cluster) -> None:
    cluster.create_topic("s", partitions=3, replication_factor=1)
    assert cluster.produce_to(1, "s", 0, [b"a", b"b", b"c"], acks=1) == 0
    with cluster.connect(1) as conn:
        full = session_fetch(conn, 0, 0, [(0, 0), (1, 0), (2, 0)])
        assert full.error_code == 0 and full.session_id != 0
        assert set(listed(full)) == {0, 1, 2}  # a full answer lists every partition
        assert listed(full)[0].records and listed(full)[0].high_watermark == 3
        sid = full.session_id

        # Partition 0 moved past its records: nothing to say, so after max_wait an
        # answer listing no partition at all.
        started = time.monotonic()
        idle = session_fetch(conn, sid, 1, [(0, 3)], max_wait_ms=300)
        assert idle.error_code == 0 and idle.session_id == sid
        assert listed(idle) == {}
        assert time.monotonic() - started >= 0.25

        # A parked fetch wakes for its own partition, and lists only that one.
        timer = threading.Timer(0.5, cluster.produce_to, (1, "s", 1, [b"x"], 1))
        timer.start()
        started = time.monotonic()
        woken = session_fetch(conn, sid, 2, [], max_wait_ms=20_000)
        timer.join()
        assert time.monotonic() - started < 10
        assert set(listed(woken)) == {1} and listed(woken)[1].records

        # Forgotten partitions are no longer read: an append to 2 does not wake us.
        session_fetch(conn, sid, 3, [(1, 1)], forgotten=[2])
        timer = threading.Timer(0.3, cluster.produce_to, (1, "s", 2, [b"y"], 1))
        timer.start()
        started = time.monotonic()
        quiet = session_fetch(conn, sid, 4, [], max_wait_ms=1500)
        timer.join()
        assert listed(quiet) == {} and time.monotonic() - started >= 1.4

        # Kafka's errors: a wrong epoch, an unknown session.
        stale = session_fetch(conn, sid, 2, [])
        assert stale.error_code == ErrorCode.invalid_fetch_session_epoch
        assert stale.session_id == 0 and listed(stale) == {}
        unknown = session_fetch(conn, sid + 1 if sid < 2**31 - 1 else 1, 1, [])
        assert unknown.error_code == ErrorCode.fetch_session_id_not_found

        # Epoch -1 closes the session (a full, sessionless fetch).
        closed = session_fetch(conn, sid, -1, [(0, 0)])
        assert closed.error_code == 0 and closed.session_id == 0 and listed(closed)[0].records
        gone = session_fetch(conn, sid, 5, [])
        assert gone.error_code == ErrorCode.fetch_session_id_not_found


@pytest.mark.brokers(1)
def test_a_request_behind_a_parked_fetch_ends_the_park(cluster: Cluster) -> None:
    cluster.create_topic("s", partitions=1, replication_factor=1)
    body = {"replica_id": -1, "max_wait": 20_000, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
            "forgotten_topics_data": [], "topics": [{"topic": "s", "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                 "current_leader_epoch": -1, "log_start_offset": -1}]}]}
    with cluster.connect(1, timeout_s=30) as conn:
        started = time.monotonic()
        conn.send(ApiKey.FETCH, body, version=12)
        time.sleep(0.3)  # the fetch is parked by now
        conn.send(ApiKey.API_VERSIONS, {}, version=0)
        _, fetched = conn.receive()
        _, versions = conn.receive()
        # Answers come in order: without ending the park the second waited 20 s.
        assert time.monotonic() - started < 10
        assert fetched.error_code == 0 and versions.error_code == 0


# -- real consumers through a leader's death ----------------------------------------------
TOPIC = "moving"
PARTITIONS = 3
BEFORE, AFTER = 60, 60


def _produce(cluster: Cluster, start: int, count: int) -> None:
    with cluster.producer(acks="all", retries=20) as producer:
        for i in range(start, start + count):
            producer.send(TOPIC, f"m{i}".encode(), partition=i % PARTITIONS)
        producer.flush(30)


def _kafka_python_consume(cluster: Cluster, wanted: int, halfway: threading.Event,
                          resume: threading.Event, out: list[bytes]) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id=None,
                             auto_offset_reset="earliest", fetch_max_wait_ms=200,
                             metadata_max_age_ms=1000, request_timeout_ms=10_000,
                             retry_backoff_ms=50)
    try:
        consumer.assign([KTP(TOPIC, p) for p in range(PARTITIONS)])
        _drain(lambda: [r.value for rs in consumer.poll(200).values() for r in rs],
               wanted, halfway, resume, out)
    finally:
        consumer.close()


def _confluent_consume(cluster: Cluster, wanted: int, halfway: threading.Event,
                       resume: threading.Event, out: list[bytes]) -> None:
    from confluent_kafka import Consumer as CKConsumer
    from confluent_kafka import TopicPartition as CKTP

    consumer = CKConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": "unused",
                           "enable.auto.commit": False, "fetch.wait.max.ms": 200,
                           "topic.metadata.refresh.interval.ms": 1000})
    try:
        consumer.assign([CKTP(TOPIC, p, 0) for p in range(PARTITIONS)])

        def poll() -> list[bytes]:
            message = consumer.poll(0.2)
            if message is None or message.error():
                return []
            return [message.value()]

        _drain(poll, wanted, halfway, resume, out)
    finally:
        consumer.close()


def _aiokafka_consume(cluster: Cluster, wanted: int, halfway: threading.Event,
                      resume: threading.Event, out: list[bytes]) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as ATP

    async def run() -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id=None,
                                    auto_offset_reset="earliest", fetch_max_wait_ms=200,
                                    metadata_max_age_ms=1000, retry_backoff_ms=50)
        await consumer.start()
        try:
            consumer.assign([ATP(TOPIC, p) for p in range(PARTITIONS)])
            deadline = time.monotonic() + TIMEOUT_S
            while len(out) < wanted and time.monotonic() < deadline:
                batch = await consumer.getmany(timeout_ms=200)
                out.extend(r.value for rs in batch.values() for r in rs)
                if len(out) >= BEFORE and not halfway.is_set():
                    halfway.set()
                    while not resume.is_set():
                        await asyncio.sleep(0.05)
        finally:
            with contextlib.suppress(asyncio.CancelledError):  # aiokafka's fetcher, closing
                await consumer.stop()

    asyncio.run(run())


def _drain(poll: Any, wanted: int, halfway: threading.Event, resume: threading.Event,
           out: list[bytes]) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while len(out) < wanted and time.monotonic() < deadline:
        out.extend(poll())
        if len(out) >= BEFORE and not halfway.is_set():
            halfway.set()
            resume.wait(TIMEOUT_S)


CONSUMERS = {"kafka-python": _kafka_python_consume, "confluent-kafka": _confluent_consume,
             "aiokafka": _aiokafka_consume}


@pytest.mark.parametrize("client", sorted(CONSUMERS))
def test_consumers_follow_a_partition_whose_leader_dies(cluster: Cluster, client: str) -> None:
    # Every broker leads one partition; the one leading partition 0 dies mid-way.
    brokers = sorted(cluster.brokers)
    cluster.create_topic(TOPIC, assignment={
        p: [brokers[p % 3], brokers[(p + 1) % 3], brokers[(p + 2) % 3]]
        for p in range(PARTITIONS)})
    _produce(cluster, 0, BEFORE)
    out: list[bytes] = []
    halfway, resume = threading.Event(), threading.Event()
    worker = threading.Thread(target=CONSUMERS[client],
                              args=(cluster, BEFORE + AFTER, halfway, resume, out))
    worker.start()
    try:
        assert halfway.wait(TIMEOUT_S), f"{client} consumed {len(out)} of {BEFORE}"
        victim = cluster.leader(TOPIC, 0)
        cluster.kill(victim)
        cluster.wait_leader(TOPIC, 0, not_in={victim})
        _produce(cluster, BEFORE, AFTER)
    finally:
        resume.set()
        worker.join(TIMEOUT_S + 10)
    assert not worker.is_alive()
    got = set(out)
    missing = {f"m{i}".encode() for i in range(BEFORE + AFTER)} - got
    assert not missing, f"{client} never received {sorted(missing)[:10]}"


# -- session eviction with real clients -------------------------------------------------
@pytest.mark.brokers(1)
@pytest.mark.broker_config({"max.incremental.fetch.session.cache.slots": "1"})
def test_one_session_slot_two_kafka_python_consumers(cluster: Cluster) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    # The bigger consumer's session evicts the smaller one's, which then gets
    # FETCH_SESSION_ID_NOT_FOUND, fetches in full and cannot take the slot back.
    # The small consumer must hold the slot first: had the big one come first, the
    # small one could never have evicted it and there would be nothing to see.
    cluster.create_topic("small", partitions=1, replication_factor=1)
    cluster.create_topic("big", partitions=3, replication_factor=1)
    consumers: dict[str, tuple[KafkaConsumer, int]] = {}
    received: dict[str, list[bytes]] = {"small": [], "big": []}

    def read_round(round_: int) -> None:
        expected = {}
        for topic, (_, count) in consumers.items():
            values = [f"{topic}-{round_}-{p}".encode() for p in range(count)]
            for p, value in enumerate(values):
                assert cluster.produce_to(1, topic, p, [value], acks=1) == 0
            expected[topic] = values

        def done() -> bool:
            for topic, (consumer, _) in consumers.items():
                received[topic] += [r.value for rs in consumer.poll(100).values()
                                    for r in rs]
            return all(set(expected[t]) <= set(received[t]) for t in expected)

        wait_until(done, TIMEOUT_S, f"the consumers to read round {round_}")

    try:
        for round_, (topic, count) in enumerate((("small", 1), ("big", 3))):
            consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id=None,
                                     auto_offset_reset="earliest", fetch_max_wait_ms=100)
            consumer.assign([KTP(topic, p) for p in range(count)])
            consumers[topic] = (consumer, count)
            read_round(round_)
            if topic == "small":
                wait_until(lambda: broker_stats(cluster, 1)["fetch_sessions"] == 1,
                           TIMEOUT_S, "the small consumer's session")
        for round_ in range(2, 5):
            read_round(round_)
        stats = broker_stats(cluster, 1)
        assert stats["fetch_sessions"] == 1
        assert stats["fetch_session_evictions"] >= 1
    finally:
        for consumer, _ in consumers.values():
            consumer.close()


# -- an idle cluster ----------------------------------------------------------------------
def test_idle_followers_fetch_a_few_times_a_second(cluster: Cluster) -> None:
    cluster.create_topic("idle", partitions=120)
    with cluster.producer(acks="all") as producer:
        for p in range(120):
            producer.send("idle", b"x", partition=p)
        producer.flush(30)
    time.sleep(2)  # let the followers catch up and settle
    seconds = 5.0
    before = {b: broker_stats(cluster, b) for b in cluster.brokers}
    time.sleep(seconds)
    after = {b: broker_stats(cluster, b) for b in cluster.brokers}
    states = [cluster.state("idle", p) for p in range(120)]
    for broker_id in cluster.brokers:
        # One replica fetcher (and fetch session) per broker following this one.
        followers = len({r for s in states if s.leader == broker_id for r in s.replicas
                         if r != broker_id})
        fetches = after[broker_id].get("Fetch", 0) - before[broker_id].get("Fetch", 0)
        # replica.fetch.wait.max.ms is 500 ms: about 2 fetches a second per follower.
        assert fetches <= followers * 4 * seconds, \
            f"broker {broker_id} served {fetches} fetches in {seconds:g} s while idle " \
            f"({followers} followers)"
        assert after[broker_id]["fetch_sessions"] >= followers
    cluster.step(f"leaders: {sorted(Counter(s.leader for s in states).items())}")
    # The cluster still works: a write reaches every replica.
    with cluster.producer(acks="all") as producer:
        producer.send("idle", b"after", partition=7)
        producer.flush(30)
    wait_until(lambda: all(b"after" in cluster.replica_values(b, "idle", 7).values()
                           for b in cluster.state("idle", 7).replicas), 20,
               "every replica of idle-7 to have the write")
