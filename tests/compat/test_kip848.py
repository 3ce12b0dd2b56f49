"""KIP-848 consumer groups with real clients: librdkafka consumers with
``group.protocol=consumer`` against one real broker, and the two APIs on the wire."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from slog.client.connection import BrokerConnection
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from tests.brokers import BrokerProcess, running_broker
from tests.groups.helpers import heartbeat_when_ready, unique

SESSION_MS = 6000
BROKER = {"group.consumer.session.timeout.ms": str(SESSION_MS),
          "group.consumer.heartbeat.interval.ms": "500",
          "offsets.topic.num.partitions": "4", "offsets.topic.replication.factor": "1"}
TIMEOUT_S = 60


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("kip848") / "data", **BROKER) as process:
        yield process


def create(broker: BrokerProcess, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(TIMEOUT_S)


def produce(broker: BrokerProcess, topic: str, values: list[bytes], partitions: int) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % partitions)
    assert producer.flush(TIMEOUT_S) == 0


def consumer(broker: BrokerProcess, group: str, **extra: Any) -> Consumer:
    return Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                     "group.protocol": "consumer", "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, **extra})


def drain(c: Consumer, want: int, seen: list[bytes], timeout_s: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while len(seen) < want:
        assert time.monotonic() < deadline, f"got {len(seen)} of {want}"
        msg = c.poll(0.2)
        if msg is not None and msg.error() is None:
            seen.append(msg.value())


def assigned_member(broker: BrokerProcess, group: str, topic: str) -> Consumer:
    """A member subscribed to ``topic`` once it holds partitions (all, if alone)."""
    member = consumer(broker, group)
    member.subscribe([topic])
    deadline = time.monotonic() + TIMEOUT_S
    while not member.assignment():
        assert time.monotonic() < deadline
        member.poll(0.1)
    return member


def produce_slowly(broker: BrokerProcess, topic: str, values: list[bytes],
                   partitions: int) -> None:
    """A load spread over a few seconds, round robin over the partitions."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % partitions)
        if i % 100 == 0:
            producer.poll(0)
            time.sleep(0.02)
    producer.flush(TIMEOUT_S)


def describe(conn: BrokerConnection, group: str) -> Any:
    response = conn.request(ApiKey.CONSUMER_GROUP_DESCRIBE, {"group_ids": [group]}, version=1)
    return response.groups[0]


def test_one_member_consumes_commits_and_a_successor_resumes(broker: BrokerProcess,
                                                              conn: BrokerConnection) -> None:
    topic, group = unique("k1"), unique("g")
    create(broker, topic, 4)
    produce(broker, topic, [b"a%d" % i for i in range(200)], 4)
    first = consumer(broker, group)
    first.subscribe([topic])
    seen: list[bytes] = []
    drain(first, 200, seen)
    assert sorted(seen) == sorted(b"a%d" % i for i in range(200))
    first.commit(asynchronous=False)
    described = describe(conn, group)
    assert described.error_code == ErrorCode.none and described.group_state == "Stable"
    (member,) = described.members
    assert member.member_epoch == described.group_epoch == described.assignment_epoch
    assert sorted(p for t in member.assignment.topic_partitions for p in t.partitions) == \
        [0, 1, 2, 3]
    assert member.member_type == 1 and described.assignor_name == "uniform"
    listed = conn.request(ApiKey.LIST_GROUPS, {"types_filter": ["consumer"]}, version=5)
    assert any(g.group_id == group and g.group_type == "consumer" for g in listed.groups)
    first.close()  # leaves (epoch -1)
    assert describe(conn, group).group_state == "Empty"
    produce(broker, topic, [b"b%d" % i for i in range(40)], 4)
    second = consumer(broker, group)
    second.subscribe([topic])
    more: list[bytes] = []
    drain(second, 40, more)
    time.sleep(0.5)
    while (msg := second.poll(0.2)) is not None:
        more.append(msg.value())
    assert sorted(more) == sorted(b"b%d" % i for i in range(40))  # nothing read twice
    committed = second.committed([TopicPartition(topic, p) for p in range(4)], TIMEOUT_S)
    assert [tp.offset for tp in committed] == [50, 50, 50, 50]
    second.close()


class Ownership:
    """Who holds each partition, from the consumers' own assign/revoke callbacks
    (all run on this thread): a partition given to a member while another still
    holds it is a double ownership."""

    def __init__(self) -> None:
        self.owner: dict[tuple[str, int], str] = {}
        self.violations: list[str] = []

    def callbacks(self, name: str) -> dict[str, Any]:
        def assigned(_c: Consumer, partitions: list[TopicPartition]) -> None:
            for tp in partitions:
                held = self.owner.get((tp.topic, tp.partition))
                if held is not None and held != name:
                    self.violations.append(f"{tp.partition} to {name} while {held} holds it")
                self.owner[(tp.topic, tp.partition)] = name

        def revoked(_c: Consumer, partitions: list[TopicPartition]) -> None:
            for tp in partitions:
                if self.owner.get((tp.topic, tp.partition)) == name:
                    del self.owner[(tp.topic, tp.partition)]

        return {"on_assign": assigned, "on_revoke": revoked, "on_lost": revoked}


def test_members_join_and_leave_under_load(broker: BrokerProcess,
                                           conn: BrokerConnection) -> None:
    topic, group = unique("k2"), unique("g")
    partitions, total = 8, 3000
    create(broker, topic, partitions)
    values = [b"v%d" % i for i in range(total)]

    ownership = Ownership()
    members: dict[str, Consumer] = {}
    seen: set[bytes] = set()

    def join(name: str) -> None:
        c = consumer(broker, group, **{"enable.auto.commit": True,
                                       "auto.commit.interval.ms": 200})
        c.subscribe([topic], **ownership.callbacks(name))
        members[name] = c

    def poll_all(rounds: int) -> None:
        for _ in range(rounds):
            for c in list(members.values()):
                msg = c.poll(0.02)
                if msg is not None and msg.error() is None:
                    seen.add(msg.value())

    producer = threading.Thread(target=produce_slowly, args=(broker, topic, values, partitions))
    producer.start()
    join("a")
    poll_all(30)
    join("b")
    poll_all(30)
    join("c")
    poll_all(60)
    members.pop("a").close()
    poll_all(30)
    join("d")
    deadline = time.monotonic() + TIMEOUT_S
    while len(seen) < total and time.monotonic() < deadline:
        poll_all(10)
    producer.join()
    assert not ownership.violations, ownership.violations
    assert len(seen) == total, f"{total - len(seen)} records never consumed"
    # Settles: every partition owned once, every member at the group's epoch.
    deadline = time.monotonic() + TIMEOUT_S
    while describe(conn, group).group_state != "Stable":
        assert time.monotonic() < deadline
        poll_all(5)
    described = describe(conn, group)
    owned = [p for m in described.members for t in m.assignment.topic_partitions
             for p in t.partitions]
    assert sorted(owned) == list(range(partitions))
    assert sorted(len([p for t in m.assignment.topic_partitions for p in t.partitions])
                  for m in described.members) == [2, 3, 3]
    for c in members.values():
        c.close()


_KILLABLE = """
import sys, time
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
              "group.protocol": "consumer", "auto.offset.reset": "earliest"})
c.subscribe([sys.argv[3]])
while True:
    c.poll(0.2)
    if c.assignment():
        print("assigned", flush=True)
"""


def test_a_killed_member_is_removed_after_its_session(broker: BrokerProcess,
                                                       conn: BrokerConnection,
                                                       tmp_path: Path) -> None:
    topic, group = unique("k3"), unique("g")
    create(broker, topic, 4)
    script = tmp_path / "member.py"
    script.write_text(_KILLABLE)
    victim = subprocess.Popen([sys.executable, str(script), broker.bootstrap, group, topic],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert victim.stdout is not None
        assert victim.stdout.readline().strip() == "assigned"
        survivor = consumer(broker, group)
        survivor.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT_S
        while len(describe(conn, group).members) < 2 or len(survivor.assignment()) != 2:
            assert time.monotonic() < deadline
            survivor.poll(0.1)
        victim.kill()
        victim.wait()
        killed_at = time.monotonic()
        while len(survivor.assignment()) != 4:
            assert time.monotonic() < killed_at + SESSION_MS / 1000 + 15
            survivor.poll(0.1)
        assert time.monotonic() - killed_at >= SESSION_MS / 1000 - 1  # the session, not sooner
        assert len(describe(conn, group).members) == 1
        survivor.close()
    finally:
        victim.kill()


def test_regex_subscription_follows_new_topics(broker: BrokerProcess) -> None:
    prefix, group = unique("rx"), unique("g")
    create(broker, f"{prefix}-a", 2)
    create(broker, "other-" + prefix, 1)
    produce(broker, f"{prefix}-a", [b"a1", b"a2"], 2)
    produce(broker, "other-" + prefix, [b"no"], 1)
    c = consumer(broker, group, **{"topic.metadata.refresh.interval.ms": 1000})
    c.subscribe([f"^{prefix}-.*"])
    seen: list[bytes] = []
    drain(c, 2, seen)
    create(broker, f"{prefix}-b", 1)  # the group epoch moves: a new matching topic
    produce(broker, f"{prefix}-b", [b"b1"], 1)
    drain(c, 3, seen)
    assert sorted(seen) == [b"a1", b"a2", b"b1"]
    c.close()


def test_group_state_survives_a_restart(broker: BrokerProcess, conn: BrokerConnection
                                        ) -> None:
    """Epochs and assignments are in __consumer_offsets: a restarted coordinator
    answers the member at the epoch it had."""
    topic, group = unique("k5"), unique("g")
    create(broker, topic, 3)
    body = {"group_id": group, "member_id": "m-" + group, "member_epoch": 0,
            "rebalance_timeout": 30000, "subscribed_topic_names": [topic],
            "topic_partitions": []}
    joined = heartbeat_when_ready(conn, body)
    assert joined.error_code == ErrorCode.none and joined.member_epoch > 0
    assert joined.heartbeat_interval.total_seconds() == 0.5
    owned = joined.assignment.topic_partitions
    assert sorted(owned[0].partitions) == [0, 1, 2]
    conn.close()
    broker.stop()
    broker.start()
    host, port = broker.bootstrap.rsplit(":", 1)
    with BrokerConnection(host, int(port)).connect() as again:
        beat = {"group_id": group, "member_id": "m-" + group,
                "member_epoch": joined.member_epoch,
                "topic_partitions": [{"topic_id": owned[0].topic_id,
                                      "partitions": list(owned[0].partitions)}]}
        answer = heartbeat_when_ready(again, beat)
        assert answer.error_code == ErrorCode.none
        assert answer.member_epoch == joined.member_epoch
        # A stale epoch is fenced; leaving works.
        fenced = again.request(ApiKey.CONSUMER_GROUP_HEARTBEAT,
                               {**beat, "member_epoch": joined.member_epoch + 5}, version=1)
        assert fenced.error_code == ErrorCode.fenced_member_epoch
        left = again.request(ApiKey.CONSUMER_GROUP_HEARTBEAT,
                             {**beat, "member_epoch": -1, "topic_partitions": None}, version=1)
        assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)


def test_a_classic_member_joins_a_consumer_group(broker: BrokerProcess,
                                                 conn: BrokerConnection) -> None:
    """As in Kafka 4, a classic JoinGroup for a consumer group with members joins it
    (the server assigns); the other direction is tests/compat/test_kip848_migration.py."""
    topic, group = unique("k6"), unique("g")
    create(broker, topic, 2)
    member = assigned_member(broker, group, topic)
    classic = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                        "group.protocol": "classic", "session.timeout.ms": 6000,
                        "heartbeat.interval.ms": 300})
    classic.subscribe([topic])
    deadline = time.monotonic() + TIMEOUT_S
    while len(classic.assignment()) != 1 or len(member.assignment()) != 1:
        assert time.monotonic() < deadline
        classic.poll(0.05)
        member.poll(0.05)
    described = describe(conn, group)
    assert described.error_code == ErrorCode.none and len(described.members) == 2
    classic.close()
    member.close()


@pytest.mark.parametrize(("body", "error"), [
    ({"member_id": "", "member_epoch": 0}, ErrorCode.invalid_request),  # v1: id required
    ({"member_epoch": 0, "rebalance_timeout": -1}, ErrorCode.invalid_request),
    ({"member_epoch": 0, "subscribed_topic_names": None}, ErrorCode.invalid_request),
    ({"member_epoch": -2}, ErrorCode.invalid_request),  # static leave without instance id
    ({"member_epoch": 7}, ErrorCode.group_id_not_found),
    ({"member_epoch": 0, "server_assignor": "nope"}, ErrorCode.unsupported_assignor),
    ({"member_epoch": 0, "subscribed_topic_regex": "("}, ErrorCode.invalid_regular_expression),
])
def test_bad_heartbeats_get_kafkas_errors(conn: BrokerConnection, body: dict[str, Any],
                                          error: ErrorCode) -> None:
    request = {"group_id": unique("g"), "member_id": "m", "rebalance_timeout": 1000,
               "subscribed_topic_names": ["t"], "topic_partitions": [], **body}
    answer = conn.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, request, version=1)
    assert answer.error_code == error, answer.error_message


def test_slog_consumers_on_the_consumer_protocol(broker: BrokerProcess,
                                                 conn: BrokerConnection) -> None:
    """slog's own consumer with group_protocol="consumer": two members split the
    partitions, a third (librdkafka) joins, one leaves; nothing is lost and the
    committed offsets let a successor resume."""
    from slog.client import Consumer as SlogConsumer

    topic, group = unique("k7"), unique("g")
    create(broker, topic, 4)
    produce(broker, topic, [b"s%d" % i for i in range(400)], 4)

    def member() -> SlogConsumer:
        c = SlogConsumer(broker.bootstrap, group_id=group, group_protocol="consumer",
                         auto_offset_reset="earliest", auto_commit_interval_ms=200,
                         fetch_max_wait_ms=100)
        c.subscribe([topic])
        return c

    seen: list[bytes] = []
    members = [member(), member()]
    deadline = time.monotonic() + TIMEOUT_S
    while len(seen) < 400 or any(len(c.assignment()) != 2 for c in members):
        assert time.monotonic() < deadline, (len(seen), [c.assignment() for c in members])
        for c in members:
            seen += [r.value for r in c.poll(50)]
    assert sorted(seen) == sorted(b"s%d" % i for i in range(400))
    assert not members[0].assignment() & members[1].assignment()
    described = describe(conn, group)
    assert described.group_state == "Stable" and len(described.members) == 2
    for c in members:
        c.commit()
        c.close()
    assert describe(conn, group).group_state == "Empty"
    produce(broker, topic, [b"t%d" % i for i in range(20)], 4)
    successor = member()
    more: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(more) < 20:
        assert time.monotonic() < deadline
        more += [r.value for r in successor.poll(50)]
    assert sorted(more) == sorted(b"t%d" % i for i in range(20))
    successor.close()


def test_cli_consumes_with_the_consumer_protocol_and_describes_the_group(
        broker: BrokerProcess) -> None:
    import json

    from tests.brokers import run_cli

    topic, group = unique("k8"), unique("g")
    create(broker, topic, 2)
    produce(broker, topic, [b"c%d" % i for i in range(10)], 2)
    done = run_cli("consume", topic, "-g", group, "--group-protocol", "consumer", "-e",
                   "-b", broker.bootstrap)
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.split()) == sorted(f"c{i}" for i in range(10))
    member = assigned_member(broker, group, topic)  # a member while describing
    state = run_cli("group", "describe", group, "--state", "-o", "json", "-b",
                    broker.bootstrap)
    [row] = json.loads(state.stdout)
    assert (row["type"], row["state"], row["assignor"], row["members"]) == \
        ("consumer", "Stable", "uniform", 1)
    assert row["group_epoch"] == row["assignment_epoch"] >= 1
    members = run_cli("group", "describe", group, "--members", "--verbose", "-o", "json",
                      "-b", broker.bootstrap)
    [m] = json.loads(members.stdout)
    assert m["member_epoch"] == row["group_epoch"] and m["partitions"] == 2
    assert m["target_assigned"] == m["assigned"] == [{"topic": topic, "partition": p}
                                                     for p in (0, 1)]
    offsets = run_cli("group", "describe", group, "-o", "json", "-b", broker.bootstrap)
    assert sorted((r["partition"], r["current_offset"]) for r in json.loads(offsets.stdout)) \
        == [(0, 5), (1, 5)]
    member.close()


def test_deleting_a_topic_drops_a_consumer_groups_offsets(broker: BrokerProcess,
                                                          conn: BrokerConnection) -> None:
    topic, group = unique("k9"), unique("g")
    create(broker, topic, 1)
    produce(broker, topic, [b"x", b"y"], 1)
    member = consumer(broker, group)
    member.subscribe([topic])
    seen: list[bytes] = []
    drain(member, 2, seen)
    member.commit(asynchronous=False)

    def committed() -> list[Any]:
        response = conn.request(ApiKey.OFFSET_FETCH, {"groups": [
            {"group_id": group, "member_id": None, "member_epoch": -1, "topics": None}]},
            version=9)
        return [(t.name, p.committed_offset) for t in response.groups[0].topics
                for p in t.partitions]

    assert committed() == [(topic, 2)]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.delete_topics([topic]).values():
        future.result(TIMEOUT_S)
    deadline = time.monotonic() + TIMEOUT_S
    while committed():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    member.close()


def test_a_static_member_restarts_without_a_rebalance(broker: BrokerProcess,
                                                       conn: BrokerConnection) -> None:
    topic, group = unique("k10"), unique("g")
    create(broker, topic, 4)

    def static(instance: str) -> Consumer:
        c = consumer(broker, group, **{"group.instance.id": instance})
        c.subscribe([topic])
        return c

    def settle(members: list[Consumer], each: int) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while any(len(c.assignment()) != each for c in members):
            assert time.monotonic() < deadline
            for c in members:
                c.poll(0.1)

    first, second = static("i1"), static("i2")
    settle([first, second], 2)
    before = describe(conn, group)
    held = sorted(tp.partition for tp in first.assignment())
    first.close()  # a static member leaves with epoch -2: it keeps its place
    left = {m.instance_id: m for m in describe(conn, group).members}
    assert left["i1"].member_epoch == -2 and len(left) == 2
    again = static("i1")
    settle([again, second], 2)
    after = describe(conn, group)
    assert after.group_epoch == before.group_epoch  # no rebalance
    assert sorted(tp.partition for tp in again.assignment()) == held
    assert {m.instance_id for m in after.members} == {"i1", "i2"}
    again.close()
    second.close()


def test_offset_delete_spares_subscribed_topics(broker: BrokerProcess,
                                                conn: BrokerConnection) -> None:
    topic, other, group = unique("k11"), unique("k11o"), unique("g")
    create(broker, topic, 1)
    create(broker, other, 1)
    member = assigned_member(broker, group, topic)
    member.commit(offsets=[TopicPartition(topic, 0, 1), TopicPartition(other, 0, 1)],
                  asynchronous=False)
    answer = conn.request(ApiKey.OFFSET_DELETE, {"group_id": group, "topics": [
        {"name": t, "partitions": [{"partition_index": 0}]} for t in (topic, other)]},
        version=0)
    assert answer.error_code == ErrorCode.none
    assert {t.name: t.partitions[0].error_code for t in answer.topics} == {
        topic: ErrorCode.group_subscribed_to_topic, other: ErrorCode.none}
    left = member.committed([TopicPartition(topic, 0), TopicPartition(other, 0)], TIMEOUT_S)
    assert [tp.offset for tp in left] == [1, -1001]  # -1001: no committed offset
    member.close()


def test_metadata_by_topic_id(broker: BrokerProcess, conn: BrokerConnection) -> None:
    """KIP-848 clients ask Metadata (v12+) for the topic ids of their assignments."""
    import uuid

    topic = unique("k12")
    create(broker, topic, 2)
    by_name = conn.request(ApiKey.METADATA, {"topics": [{"name": topic}]}, version=12)
    topic_id = by_name.topics[0].topic_id
    unknown = uuid.uuid4()
    answer = conn.request(ApiKey.METADATA, {"topics": [
        {"topic_id": topic_id, "name": None}, {"topic_id": unknown, "name": None},
        {"topic_id": None, "name": None}]}, version=12)
    found = {t.topic_id: t for t in answer.topics}
    assert set(found) == {topic_id, unknown}  # the entry with neither is ignored
    assert (found[topic_id].name, len(found[topic_id].partitions)) == (topic, 2)
    assert (found[unknown].name, found[unknown].error_code) == \
        (None, ErrorCode.unknown_topic_id)


def test_slog_consumer_pattern_is_the_groups_regex(broker: BrokerProcess,
                                                   conn: BrokerConnection) -> None:
    from slog.client import Consumer as SlogConsumer

    prefix, group = unique("sx"), unique("g")
    create(broker, f"{prefix}-a", 1)
    produce(broker, f"{prefix}-a", [b"a"], 1)
    c = SlogConsumer(broker.bootstrap, group_id=group, group_protocol="consumer",
                     auto_offset_reset="earliest", fetch_max_wait_ms=100)
    c.subscribe(pattern=f"{prefix}-.*")
    seen: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    while seen != [b"a"]:
        assert time.monotonic() < deadline
        seen += [r.value for r in c.poll(50)]
    [member] = describe(conn, group).members
    assert member.subscribed_topic_regex == f"{prefix}-.*"
    create(broker, f"{prefix}-b", 1)  # the broker's regex picks it up
    produce(broker, f"{prefix}-b", [b"b"], 1)
    while b"b" not in seen:
        assert time.monotonic() < deadline
        seen += [r.value for r in c.poll(50)]
    c.close()
