"""Consumer groups against a real broker process, with slog's group consumer."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import pytest

from slog.client import Admin, Consumer, GroupAdmin, NewTopic, RebalanceListener, TopicPartition
from slog.client.cluster import ClusterClient
from slog.client.connection import BrokerConnection
from slog.core.consumer_protocol import Subscription, encode_subscription
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from tests.brokers import BrokerProcess
from tests.groups.helpers import (
    assignments,
    group_consumer,
    make_topic,
    poll_all,
    produce,
    unique,
    wait_for,
)


def close_all(consumers: list[Consumer]) -> None:
    for consumer in consumers:
        consumer.close()


# -- (1) the seed's experiment ----------------------------------------------------------------
def test_one_group_gets_everything_the_other_shares_it(broker: BrokerProcess) -> None:
    """topic1 with three partitions; group1 has one consumer, group2 three; keys 1, 2, 3:
    group1 receives all three, each consumer of group2 receives one key."""
    topic = make_topic(broker.bootstrap, 3)
    group1, group2 = unique("group1"), unique("group2")
    solo = group_consumer(broker.bootstrap, group1)
    trio = [group_consumer(broker.bootstrap, group2, client_id=f"c{i}") for i in range(3)]
    everyone = [solo, *trio]
    try:
        for consumer in everyone:
            consumer.subscribe([topic])
        wait_for(lambda: assignments(everyone) == [[0, 1, 2], [0], [1], [2]],
                 step=lambda: poll_all(everyone), what="both groups to settle")
        produce(broker.bootstrap, topic, [(b"%d" % k, b"message %d" % k, k - 1)
                                          for k in (1, 2, 3)])
        got: dict[int, list[Any]] = {}
        wait_for(lambda: sum(len(v) for v in got.values()) == 6,
                 step=lambda: poll_all(everyone, got), what="six deliveries")
        keys = {i: sorted(r.key for r in records) for i, records in got.items()}
        assert keys[0] == [b"1", b"2", b"3"]
        assert sorted(keys[i] for i in (1, 2, 3)) == [[b"1"], [b"2"], [b"3"]]
        for i in (1, 2, 3):  # each trio member got the key of the partition it owns
            assert {r.partition for r in got[i]} == {tp.partition for tp in trio[i - 1]
                                                     .assignment()}
    finally:
        close_all(everyone)


# -- (2) growing and shrinking --------------------------------------------------------------
def range_rule(members: int, partitions: int = 3) -> list[list[int]]:
    per, extra = divmod(partitions, members)
    out, start = [], 0
    for i in range(members):
        size = per + (1 if i < extra else 0)
        out.append(list(range(start, start + size)))
        start += size
    return out


def test_growing_and_shrinking_follows_the_range_rule(broker: BrokerProcess) -> None:
    topic = make_topic(broker.bootstrap, 3)
    group = unique("grow")
    live: list[Consumer] = []
    try:
        for i in range(1, 5):
            consumer = group_consumer(broker.bootstrap, group, client_id=f"consumer{i}")
            consumer.subscribe([topic])
            live.append(consumer)
            wait_for(lambda: assignments(live) == range_rule(len(live)),
                     step=lambda: poll_all(live), what=f"{len(live)} consumers to settle")
        assert live[3].assignment() == set()  # the fourth consumer gets nothing
        while len(live) > 1:
            live.pop(0).close()
            wait_for(lambda: assignments(live) == range_rule(len(live)),
                     step=lambda: poll_all(live), what=f"{len(live)} consumers to settle")
        assert assignments(live) == [[0, 1, 2]]
    finally:
        close_all(live)


# -- (3) ownership, delivery and commits during rebalances ---------------------------------
class Recorder(RebalanceListener):
    def __init__(self, consumer: Consumer, owners: dict[int, dict[str, set[int]]],
                 lock: threading.Lock):
        self.consumer, self.owners, self.lock = consumer, owners, lock

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        meta = self.consumer.group_metadata()
        with self.lock:
            owned = self.owners.setdefault(meta.generation_id, {})
            owned[meta.member_id] = {tp.partition for tp in self.consumer.assignment()}


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_rebalances_keep_ownership_exclusive_and_lose_nothing(broker: BrokerProcess,
                                                              strategy: str) -> None:
    topic = make_topic(broker.bootstrap, 6)
    group = unique(f"churn-{strategy}")
    total = 3000
    owners: dict[int, dict[str, set[int]]] = {}
    seen: set[bytes] = set()
    commits: dict[int, list[int]] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def member(lifetime_s: float) -> None:
        consumer = group_consumer(broker.bootstrap, group,
                                  partition_assignment_strategy=[strategy])
        consumer.subscribe([topic], listener=Recorder(consumer, owners, lock))
        deadline = time.monotonic() + lifetime_s
        try:
            while time.monotonic() < deadline and not stop.is_set():
                for record in consumer.poll(50):
                    with lock:
                        seen.add(record.value)  # type: ignore[arg-type]
        finally:
            consumer.close()

    def watch_commits() -> None:
        with ClusterClient(broker.bootstrap) as cluster:
            admin = GroupAdmin(cluster)
            while not stop.is_set():
                try:
                    found = admin.list_offsets([group])[group]
                except Exception:
                    found = {}
                for tp, value in found.items():
                    if value is not None:
                        commits.setdefault(tp.partition, []).append(value.offset)
                time.sleep(0.05)

    def produce_slowly() -> None:
        for start in range(0, total, 300):
            produce(broker.bootstrap, topic, [(None, b"%06d" % i, i % 6)
                                              for i in range(start, start + 300)])
            time.sleep(0.2)

    threads = [threading.Thread(target=watch_commits), threading.Thread(target=produce_slowly),
               threading.Thread(target=member, args=(60,)),
               threading.Thread(target=member, args=(1.5,))]
    for thread in threads:
        thread.start()
    time.sleep(1.0)
    late = [threading.Thread(target=member, args=(1.2,)), threading.Thread(target=member,
                                                                           args=(60,))]
    for thread in late:
        thread.start()
    try:
        wait_for(lambda: len(seen) == total, timeout_s=40, what="every record")
    finally:
        stop.set()
        for thread in threads + late:
            thread.join(30)
    assert seen == {b"%06d" % i for i in range(total)}  # at least once: nothing lost
    assert len(owners) >= 3, owners  # it really rebalanced
    for generation, by_member in owners.items():
        claimed = [p for parts in by_member.values() for p in parts]
        assert len(claimed) == len(set(claimed)), f"generation {generation}: {by_member}"
    for partition, history in commits.items():
        assert history == sorted(history), f"partition {partition} went backwards: {history}"


# -- (5) a consumer killed with SIGKILL ---------------------------------------------------
VICTIM = textwrap.dedent("""
    import sys, time
    from slog.client import Consumer
    consumer = Consumer(sys.argv[1], group_id=sys.argv[2], client_id="victim",
                        session_timeout_ms=1000, heartbeat_interval_ms=100,
                        auto_offset_reset="earliest")
    consumer.subscribe([sys.argv[3]])
    while True:
        consumer.poll(100)
        if consumer.assignment():
            print("assigned", flush=True)
""")


def test_killed_consumer_partitions_move_after_the_session_timeout(broker: BrokerProcess
                                                                   ) -> None:
    topic = make_topic(broker.bootstrap, 4)
    group = unique("kill")
    victim = subprocess.Popen([sys.executable, "-c", VICTIM, broker.bootstrap, group, topic],
                              stdout=subprocess.PIPE, text=True)
    survivor = group_consumer(broker.bootstrap, group, client_id="survivor")
    try:
        assert victim.stdout is not None and victim.stdout.readline().strip() == "assigned"
        survivor.subscribe([topic])
        wait_for(lambda: len(survivor.assignment()) == 2, step=lambda: poll_all([survivor]),
                 what="the survivor to get half")
        victim.kill()
        victim.wait()
        killed = time.monotonic()
        wait_for(lambda: len(survivor.assignment()) == 4, step=lambda: poll_all([survivor]),
                 what="the victim's partitions")
        took = time.monotonic() - killed
        assert 0.8 <= took <= 8, took  # not before its 1 s session ran out
    finally:
        victim.kill()
        survivor.close()


# -- (6) bad requests ----------------------------------------------------------------------
def _connection(bootstrap: str) -> BrokerConnection:
    host, port = bootstrap.rsplit(":", 1)
    return BrokerConnection(host, int(port)).connect()


def _describe(bootstrap: str, group: str) -> tuple[str, int, list[str]]:
    with ClusterClient(bootstrap) as cluster:
        found = GroupAdmin(cluster).describe_groups([group])[group]
    return found.state, len(found.members), sorted(m.member_id for m in found.members)


def test_bad_requests_get_kafka_errors_and_change_nothing(broker: BrokerProcess) -> None:
    topic = make_topic(broker.bootstrap, 2)
    group = unique("bad")
    members = [group_consumer(broker.bootstrap, group, client_id=f"m{i}",
                              enable_auto_commit=False) for i in range(4)]
    metadata = encode_subscription(Subscription((topic,)))
    try:
        for consumer in members:
            consumer.subscribe([topic])
        wait_for(lambda: sum(len(a) for a in assignments(members)) == 2 and
                 all(c.group_metadata().generation_id > 0 for c in members) and
                 len({c.group_metadata().generation_id for c in members}) == 1,
                 step=lambda: poll_all(members), what="four members")
        members[0].commit({TopicPartition(topic, 0): 5})
        generation = members[0].group_metadata().generation_id
        before = _describe(broker.bootstrap, group)
        with _connection(broker.bootstrap) as conn:
            join = {"group_id": group, "session_timeout": 1000, "rebalance_timeout": 1000,
                    "member_id": "", "group_instance_id": None,
                    "protocols": [{"name": "range", "metadata": metadata}]}
            response = conn.request(ApiKey.JOIN_GROUP, {**join, "protocol_type": "consumer"},
                                    version=5)
            assert response.error_code == ErrorCode.group_max_size_reached  # a fifth member
            members[3].close()  # room for one more, but not of another protocol type
            wait_for(lambda: len({c.group_metadata().generation_id for c in members[:3]}) == 1
                     and members[0].group_metadata().generation_id > generation,
                     step=lambda: poll_all(members[:3]), what="three members")
            generation = members[0].group_metadata().generation_id
            before = _describe(broker.bootstrap, group)
            response = conn.request(ApiKey.JOIN_GROUP, {**join, "protocol_type": "connect"},
                                    version=5)
            assert response.error_code == ErrorCode.inconsistent_group_protocol
            member_id = members[1].group_metadata().member_id
            response = conn.request(ApiKey.SYNC_GROUP, {
                "group_id": group, "generation_id": generation + 7, "member_id": member_id,
                "assignments": []}, version=3)
            assert response.error_code == ErrorCode.illegal_generation
            response = conn.request(ApiKey.OFFSET_COMMIT, {
                "group_id": group, "generation_id_or_member_epoch": generation,
                "member_id": "ghost", "topics": [{"name": topic, "partitions": [
                    {"partition_index": 0, "committed_offset": 99,
                     "committed_metadata": ""}]}]}, version=7)
            assert response.topics[0].partitions[0].error_code == ErrorCode.unknown_member_id
            response = conn.request(ApiKey.HEARTBEAT, {
                "group_id": group, "generation_id": generation, "member_id": "ghost"},
                version=3)
            assert response.error_code == ErrorCode.unknown_member_id
        poll_all(members[:3])
        assert _describe(broker.bootstrap, group) == before
        assert all(c.group_metadata().generation_id == generation for c in members[:3])
        assert members[0].committed([TopicPartition(topic, 0)])[TopicPartition(topic, 0)] \
            .offset == 5  # type: ignore[union-attr]
    finally:
        close_all(members)


def test_commit_and_committed_with_manual_assignment(broker: BrokerProcess) -> None:
    """assign() with a group id: offsets are stored, no group management."""
    topic = make_topic(broker.bootstrap, 1)
    produce(broker.bootstrap, topic, [(None, b"v%d" % i, 0) for i in range(10)])
    group = unique("simple")
    tp = TopicPartition(topic, 0)
    with group_consumer(broker.bootstrap, group) as consumer:
        consumer.assign([tp])
        wait_for(lambda: consumer.position(tp) == 10,
                 step=lambda: consumer.poll(50), what="the end")
        consumer.commit()
        assert consumer.committed([tp])[tp].offset == 10  # type: ignore[union-attr]
    with group_consumer(broker.bootstrap, group) as again:  # resumes from the commit
        again.assign([tp])
        assert again.position(tp) == 10


def test_deleting_a_topic_removes_its_committed_offsets(broker: BrokerProcess) -> None:
    """As in Kafka: a topic created again under the same name starts with no offsets,
    and a group whose only offsets were on the deleted topic goes away."""
    topic, kept = make_topic(broker.bootstrap, 1), make_topic(broker.bootstrap, 1)
    produce(broker.bootstrap, topic, [(None, b"v%d" % i, 0) for i in range(5)])
    produce(broker.bootstrap, kept, [(None, b"k%d" % i, 0) for i in range(3)])
    both, only = unique("both"), unique("only")
    for group, topics in ((both, [topic, kept]), (only, [topic])):
        with group_consumer(broker.bootstrap, group) as consumer:
            tps = [TopicPartition(t, 0) for t in topics]
            consumer.assign(tps)
            wait_for(lambda c=consumer, tps=tps: all(c.position(tp) > 0 for tp in tps),
                     step=lambda c=consumer: c.poll(50), what="the end")
            consumer.commit()
    with Admin(broker.bootstrap) as admin:
        admin.delete_topics([topic])
        groups = GroupAdmin(admin.cluster)

        def offsets() -> dict[str, Any]:
            return groups.list_offsets([both])[both]

        wait_for(lambda: TopicPartition(topic, 0) not in offsets(),
                 what="the deleted topic's offsets to go")
        assert offsets()[TopicPartition(kept, 0)].offset == 3  # type: ignore[union-attr]
        wait_for(lambda: only not in {g.group_id for g in groups.list_groups()},
                 what="the group left without offsets to go")
        admin.create_topics([NewTopic(topic, 1)])
    with group_consumer(broker.bootstrap, both) as again:
        again.assign([TopicPartition(topic, 0)])
        assert again.committed([TopicPartition(topic, 0)])[TopicPartition(topic, 0)] is None


# -- client features: poll timeout, static membership, patterns, seek/pause, async commit ----
class Events(RebalanceListener):
    def __init__(self) -> None:
        self.log: list[tuple[str, set[int]]] = []

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        self.log.append(("assigned", {tp.partition for tp in partitions}))

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        self.log.append(("revoked", {tp.partition for tp in partitions}))

    def on_partitions_lost(self, partitions: set[TopicPartition]) -> None:
        self.log.append(("lost", {tp.partition for tp in partitions}))


def test_a_consumer_that_stops_polling_leaves_the_group(broker: BrokerProcess) -> None:
    topic = make_topic(broker.bootstrap, 2)
    group = unique("stalled")
    events = Events()
    slow = group_consumer(broker.bootstrap, group, client_id="a-slow", max_poll_interval_ms=600)
    busy = group_consumer(broker.bootstrap, group, client_id="b-busy")
    try:
        slow.subscribe([topic], listener=events)
        busy.subscribe([topic])
        wait_for(lambda: assignments([slow, busy]) == [[0], [1]],
                 step=lambda: poll_all([slow, busy]), what="two members")
        # slow stops calling poll(): after max.poll.interval.ms it leaves the group.
        wait_for(lambda: assignments([busy]) == [[0, 1]], step=lambda: poll_all([busy]),
                 what="busy to take over")
        slow.poll(20)  # back: its partitions were lost, it rejoins
        assert ("lost", {0}) in events.log
        wait_for(lambda: assignments([slow, busy]) == [[0], [1]],
                 step=lambda: poll_all([slow, busy]), what="slow to rejoin")
    finally:
        close_all([slow, busy])


def test_static_member_restart_does_not_rebalance(broker: BrokerProcess) -> None:
    topic = make_topic(broker.bootstrap, 2)
    group = unique("static")
    other = group_consumer(broker.bootstrap, group, client_id="other", session_timeout_ms=5000)
    first = group_consumer(broker.bootstrap, group, group_instance_id="host-1",
                           session_timeout_ms=5000)
    try:
        first.subscribe([topic])
        other.subscribe([topic])
        wait_for(lambda: sorted(assignments([first, other])) == [[0], [1]],
                 step=lambda: poll_all([first, other]), what="two members")
        generation = other.group_metadata().generation_id
        owned = first.assignment()
        first.close()  # a static member sends no LeaveGroup
        restarted = group_consumer(broker.bootstrap, group, group_instance_id="host-1",
                                   session_timeout_ms=5000)
        first = restarted
        restarted.subscribe([topic])
        wait_for(lambda: restarted.assignment() == owned,
                 step=lambda: poll_all([restarted, other]), what="the restart")
        assert restarted.group_metadata().generation_id == generation
        assert other.group_metadata().generation_id == generation  # nobody rebalanced
    finally:
        close_all([first, other])


def test_pattern_subscription_picks_up_new_topics(broker: BrokerProcess) -> None:
    prefix = unique("pattern")
    with Admin(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(f"{prefix}-a", 1)])
    consumer = group_consumer(broker.bootstrap, unique("pattern-group"),
                              metadata_max_age_ms=200)
    try:
        consumer.subscribe(pattern=rf"{prefix}-.*")
        wait_for(lambda: consumer.assignment() == {TopicPartition(f"{prefix}-a", 0)},
                 step=lambda: poll_all([consumer]), what="the first topic")
        with Admin(broker.bootstrap) as admin:
            admin.create_topics([NewTopic(f"{prefix}-b", 1), NewTopic(f"x{prefix}-c", 1)])
        wait_for(lambda: consumer.assignment() == {TopicPartition(f"{prefix}-a", 0),
                                                   TopicPartition(f"{prefix}-b", 0)},
                 step=lambda: poll_all([consumer]), what="the new topic")
        assert consumer.subscribed_topics() == {f"{prefix}-a", f"{prefix}-b"}
    finally:
        consumer.close()


def test_seek_pause_resume_and_async_commit(broker: BrokerProcess) -> None:
    topic = make_topic(broker.bootstrap, 2)
    produce(broker.bootstrap, topic, [(None, b"%d" % i, i % 2) for i in range(10)])
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    consumer = group_consumer(broker.bootstrap, unique("seek"), enable_auto_commit=False)
    results: list[Any] = []
    try:
        consumer.subscribe([topic])
        seen: dict[int, list[Any]] = {}
        wait_for(lambda: len(seen.get(0, [])) == 10, step=lambda: poll_all([consumer], seen),
                 what="everything")
        consumer.pause([tp1])
        consumer.seek(tp0, 2)
        consumer.seek(tp1, 0)
        again: dict[int, list[Any]] = {}
        wait_for(lambda: len(again.get(0, [])) == 3, step=lambda: poll_all([consumer], again),
                 what="the re-read")
        assert {r.partition for r in again[0]} == {0}  # tp1 is paused
        consumer.resume([tp1])
        wait_for(lambda: len(again[0]) == 8, step=lambda: poll_all([consumer], again),
                 what="the resumed partition")
        consumer.commit(asynchronous=True, callback=lambda offsets, error: results.append(
            (dict(offsets), error)))
        wait_for(lambda: bool(results), step=lambda: poll_all([consumer]),
                 what="the commit callback")
        offsets, error = results[0]
        assert error is None and {tp: o.offset for tp, o in offsets.items()} == {tp0: 5,
                                                                                 tp1: 5}
    finally:
        consumer.close()
