"""kafkajs (Node.js), pinned in tests/compat/kafkajs/package-lock.json, against slog.

Each scenario is a small Node script in tests/compat/kafkajs/ that prints JSON lines; the
test runs it against real brokers and checks what it printed and what the brokers hold.
kafkajs is installed once per session with ``npm ci`` into a temporary directory; a
machine without node or npm fails these tests (CI installs Debian's ``nodejs npm``).
Set ``KAFKAJS_DEBUG=1`` to get kafkajs's debug log on the scripts' stderr.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from slog.client import Admin, NewTopic, Producer
from slog.protocol.apis import ApiKey
from tests.brokers import BrokerProcess
from tests.cluster.conftest import Cluster, check_acknowledged, wait_until

SCRIPTS = Path(__file__).parent / "kafkajs"
RUN_S = 45.0
Line = dict[str, Any]


@pytest.fixture(scope="session")
def node_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment in which the scripts find the pinned kafkajs."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        pytest.fail(f"kafkajs tests need {' and '.join(missing)} on PATH "
                    "(Debian: apt-get install nodejs npm)")
    prefix = tmp_path_factory.mktemp("kafkajs")
    for name in ("package.json", "package-lock.json"):
        shutil.copy(SCRIPTS / name, prefix / name)
    installed = subprocess.run(
        ["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--prefix", str(prefix)],
        capture_output=True, text=True, timeout=300)
    if installed.returncode:
        pytest.fail(f"npm ci of kafkajs failed:\n{installed.stdout}\n{installed.stderr}")
    return {**os.environ, "NODE_PATH": str(prefix / "node_modules"),
            "KAFKAJS_NO_PARTITIONER_WARNING": "1"}


class NodeScript:
    """A running script; a thread collects its JSON lines as they come."""

    def __init__(self, env: dict[str, str], script: str, **args: Any):
        self.name = script
        self.process = subprocess.Popen(
            ["node", str(SCRIPTS / f"{script}.js"), json.dumps(args)], env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines: list[Line] = []
        self._arrived: queue.Queue[Line] = queue.Queue()
        self._stderr: list[str] = []
        self._threads = [threading.Thread(target=self._read_stdout, daemon=True),
                         threading.Thread(target=self._read_stderr, daemon=True)]
        for thread in self._threads:
            thread.start()

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            try:
                line = json.loads(raw)
            except json.JSONDecodeError:  # not one of the script's lines: show it, skip it
                self._stderr.append(f"(stdout) {raw}")
                continue
            self.lines.append(line)
            self._arrived.put(line)

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        self._stderr.extend(self.process.stderr)

    def describe(self) -> str:
        return f"{self.name}.js printed {self.lines[-20:]}\nstderr:\n" + \
            "".join(self._stderr[-40:])

    def wait_for(self, condition: Callable[[Line], bool], what: str,
                 timeout_s: float = RUN_S) -> Line:
        """The next line (from now on) that satisfies ``condition``."""
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no {what} after {timeout_s:g}s: {self.describe()}"
            try:
                line = self._arrived.get(timeout=min(remaining, 0.5))
            except queue.Empty:
                assert self.process.poll() is None, f"exited before {what}: {self.describe()}"
                continue
            assert "error" not in line, self.describe()
            if condition(line):
                return line

    def finish(self, timeout_s: float = RUN_S) -> list[Line]:
        """Wait for a clean exit; every line it printed."""
        try:
            code = self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError(
                f"still running after {timeout_s:g}s: {self.describe()}") from None
        for thread in self._threads:
            thread.join(5)
        assert code == 0, f"exit code {code}: {self.describe()}"
        return self.lines

    def stop(self) -> list[Line]:
        """SIGTERM: the script leaves its group and exits."""
        self.process.send_signal(signal.SIGTERM)
        return self.finish()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def node(node_env: dict[str, str]) -> Iterator[Callable[..., NodeScript]]:
    """Start scripts; whatever is still running when the test ends is killed."""
    started: list[NodeScript] = []

    def start(script: str, **args: Any) -> NodeScript:
        started.append(NodeScript(node_env, script, **args))
        return started[-1]

    yield start
    for script in started:
        script.kill()


def run(node: Callable[..., NodeScript], script: str, **args: Any) -> list[Line]:
    return node(script, **args).finish()


def steps(lines: list[Line]) -> dict[str, Line]:
    return {line["step"]: line for line in lines}


def messages(lines: list[Line]) -> list[Line]:
    return [line for line in lines if "offset" in line]


def make_topic(bootstrap: str, name: str, partitions: int, per_partition: int = 0) -> None:
    """Create a topic with slog's client, with ``per_partition`` records "p<P>-<i>" in each."""
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])
    if per_partition:
        producer = Producer(bootstrap)
        for partition in range(partitions):
            for i in range(per_partition):
                producer.send(name, value=b"p%d-%d" % (partition, i), partition=partition)
        producer.flush()
        producer.close()


# ---------------------------------------------------------------------------- admin


def test_admin_topic_lifecycle(shared_broker: BrokerProcess, node: Callable[..., NodeScript]
                               ) -> None:
    topic = "kjs-admin"
    got = steps(run(node, "admin_topics", brokers=shared_broker.bootstrap, topic=topic,
                    replicationFactor=1))
    assert got["create"]["created"] is True
    assert got["create"]["again"] is False  # TOPIC_ALREADY_EXISTS is "not created"
    [described] = got["metadata"]["topics"]
    assert described["name"] == topic
    assert [(p["partition"], p["replicas"], p["isr"], p["error"])
            for p in described["partitions"]] == [(0, [1], [1], 0), (1, [1], [1], 0)]
    assert got["list"]["topics"] == [topic]
    assert got["create_partitions"]["partitions"] == 3

    configs = got["describe_configs"]
    assert configs["error"] == 0
    assert configs["entries"]["retention.ms"] == {"value": "86400000", "isDefault": False,
                                                  "source": 1}  # TOPIC_CONFIG
    assert configs["entries"]["max.message.bytes"]["value"] == "200000"
    assert configs["entries"]["cleanup.policy"] == {"value": "delete", "isDefault": True,
                                                    "source": 5}  # DEFAULT_CONFIG
    altered = got["alter_configs"]
    assert altered["errors"] == [0]
    assert altered["entries"]["retention.ms"]["value"] == "3600000"
    # AlterConfigs replaces the whole set: what the request left out is back to its default.
    assert altered["entries"]["max.message.bytes"]["isDefault"] is True

    assert got["offsets"]["offsets"] == [
        {"partition": p, "low": 0, "high": 5, "offset": 5} for p in range(3)]
    assert got["offsets_by_time"]["offsets"] == [5, 5, 5]
    # deleteTopicRecords: partition 0 up to offset 3, partition 1 everything (offset -1).
    assert [(o["low"], o["high"]) for o in got["delete_records"]["offsets"]] == \
        [(3, 5), (5, 5), (0, 5)]
    assert got["delete"]["topics"] == []


# ---------------------------------------------------------------------------- producer


@pytest.mark.parametrize(("acks", "compression", "idempotent"), [
    (-1, "none", False), (1, "gzip", False), (-1, "gzip", True)])
def test_send_then_group_consume(shared_broker: BrokerProcess, node: Callable[..., NodeScript],
                                 acks: int, compression: str, idempotent: bool) -> None:
    topic = f"kjs-send-acks{acks}-{compression}" + ("-idempotent" if idempotent else "")
    make_topic(shared_broker.bootstrap, topic, 3)
    sends = run(node, "produce", brokers=shared_broker.bootstrap, topic=topic, count=60,
                batch=12, acks=acks, compression=compression, idempotent=idempotent)
    assert len(sends) == 5
    assert all(error == 0 for send in sends for _, _, error in send["acks"])

    lines = run(node, "consume", brokers=shared_broker.bootstrap, topics=[topic],
                groupId=f"{topic}-g", max=60)
    got = messages(lines)
    assert sorted(m["value"] for m in got) == sorted(f"v{i}" for i in range(60))
    for m in got:
        i = int(m["value"][1:])
        assert (m["key"], m["headers"]) == (f"k{i % 7}", {"i": str(i), "h": "x"})
    # One key, one partition; and each partition's offsets are dense from 0.
    assert len({(m["key"], m["partition"]) for m in got}) == 7
    for partition in range(3):
        offsets = sorted(m["offset"] for m in got if m["partition"] == partition)
        assert offsets == list(range(len(offsets)))
    # Each send's records start, in each partition, at the base offset kafkajs was told.
    placed = {m["value"]: (m["partition"], m["offset"]) for m in got}
    for send in sends:
        firsts: dict[int, int] = {}
        for partition, offset in (placed[v] for v in send["values"]):
            firsts[partition] = min(offset, firsts.get(partition, offset))
        assert firsts == {p: base for p, base, _ in send["acks"]}


def test_send_batch_across_topics(shared_broker: BrokerProcess,
                                  node: Callable[..., NodeScript]) -> None:
    topics = ["kjs-batch-a", "kjs-batch-b"]
    for topic in topics:
        make_topic(shared_broker.bootstrap, topic, 1)
    [answer] = run(node, "send_batch", brokers=shared_broker.bootstrap, topics=topics, count=8)
    assert sorted(answer["acks"]) == [[t, 0, 0, 0] for t in topics]
    lines = run(node, "consume", brokers=shared_broker.bootstrap, topics=topics,
                groupId="kjs-batch-g", max=16)
    got = {(m["topic"], m["offset"]): (m["key"], m["value"]) for m in messages(lines)}
    assert got == {(t, i): (f"{t}-k{i}", f"{t}-v{i}") for t in topics for i in range(8)}


# ---------------------------------------------------------------------------- groups


def send_round(bootstrap: str, topic: str, partitions: int, rounds: range) -> set[str]:
    """Records "p<P>-<i>" for each i of ``rounds`` in each partition; their values."""
    producer = Producer(bootstrap)
    for partition in range(partitions):
        for i in rounds:
            producer.send(topic, value=b"p%d-%d" % (partition, i), partition=partition)
    producer.flush()
    producer.close()
    return {f"p{p}-{i}" for p in range(partitions) for i in rounds}


def values_of(*scripts: NodeScript) -> set[str]:
    return {m["value"] for script in scripts for m in messages(script.lines)}


def wait_values(wanted: set[str], *scripts: NodeScript) -> None:
    deadline = time.monotonic() + RUN_S
    while not wanted <= values_of(*scripts):
        missing = sorted(wanted - values_of(*scripts))
        assert time.monotonic() < deadline, \
            f"never consumed {missing[:8]}: " + "\n".join(s.describe() for s in scripts)
        time.sleep(0.05)


def assigned(script: NodeScript, topic: str, count: int) -> list[int]:
    """The partitions of ``topic`` given to the script at its next assignment of ``count``."""
    line = script.wait_for(lambda line: line.get("event") == "assigned" and
                           len(line["assignment"].get(topic, [])) == count,
                           f"an assignment of {count} partitions")
    return sorted(line["assignment"][topic])


def test_group_rebalance_and_resume(shared_broker: BrokerProcess,
                                    node: Callable[..., NodeScript]) -> None:
    bootstrap, topic, group = shared_broker.bootstrap, "kjs-group", "kjs-group-g"
    make_topic(bootstrap, topic, 4)
    first = send_round(bootstrap, topic, 4, range(10))
    a = node("consume", brokers=bootstrap, topics=[topic], groupId=group, clientId="a")
    assert assigned(a, topic, 4) == [0, 1, 2, 3]
    wait_values(first, a)

    # A second member: the group rebalances and splits the partitions between them.
    b = node("consume", brokers=bootstrap, topics=[topic], groupId=group, clientId="b")
    b_parts = assigned(b, topic, 2)
    a_parts = assigned(a, topic, 2)
    assert sorted(a_parts + b_parts) == [0, 1, 2, 3]
    [described] = [line for line in run(node, "admin_groups", brokers=bootstrap,
                                        groupIds=[group], topics=[topic])
                   if line["step"] == "describe"]
    assert described["groups"] == [{"groupId": group, "state": "Stable",
                                    "protocolType": "consumer",
                                    "protocol": "RoundRobinAssigner", "errorCode": 0,
                                    "members": 2}]
    second = send_round(bootstrap, topic, 4, range(10, 20))
    wait_values(second, a, b)
    assert {m["partition"] for m in messages(b.lines)} == set(b_parts)

    # One leaves (LeaveGroup on disconnect): the other gets every partition back.
    b.stop()
    assert assigned(a, topic, 4) == [0, 1, 2, 3]
    third = send_round(bootstrap, topic, 4, range(20, 30))
    wait_values(third, a)
    a.stop()
    everything = values_of(a, b)
    assert everything == first | second | third

    got = steps(run(node, "admin_groups", brokers=bootstrap, groupIds=[group], topics=[topic]))
    assert got["list"]["groups"] == [{"groupId": group, "protocolType": "consumer"}]
    assert got["describe"]["groups"][0]["state"] == "Empty"
    assert got["offsets"]["topics"] == [{"topic": topic,
                                         "partitions": [[p, 30] for p in range(4)]}]

    # A new member resumes from the committed offsets: only what came after.
    fourth = send_round(bootstrap, topic, 4, range(30, 32))
    resumed = run(node, "consume", brokers=bootstrap, topics=[topic], groupId=group, max=8)
    assert {m["value"] for m in messages(resumed)} == fourth
    assert {(m["partition"], m["offset"]) for m in messages(resumed)} == \
        {(p, o) for p in range(4) for o in (30, 31)}


def test_seek_and_pause(shared_broker: BrokerProcess, node: Callable[..., NodeScript]) -> None:
    topic = "kjs-seek"
    make_topic(shared_broker.bootstrap, topic, 2)
    send_round(shared_broker.bootstrap, topic, 2, range(10))
    lines = run(node, "seek_pause", brokers=shared_broker.bootstrap, topic=topic,
                groupId="kjs-seek-g", seekTo=6, total=14)
    assert lines[0] == {"event": "paused", "paused": [{"topic": topic, "partitions": [1]}]}
    resumed_at = lines.index({"event": "resumed", "paused": []})
    # Partition 0 from the seek, not from the beginning; partition 1 only once resumed.
    assert [(m["partition"], m["offset"]) for m in lines[1:resumed_at]] == \
        [(0, o) for o in range(6, 10)]
    assert [(m["partition"], m["offset"], m["value"]) for m in lines[resumed_at + 1:]] == \
        [(1, o, f"p1-{o}") for o in range(10)]


# ---------------------------------------------------------------------------- transactions


def test_transactions_commit_and_abort(shared_broker: BrokerProcess,
                                       node: Callable[..., NodeScript]) -> None:
    bootstrap, topic = shared_broker.bootstrap, "kjs-txn"
    make_topic(bootstrap, topic, 1)
    done = run(node, "transactions", brokers=bootstrap, topic=topic,
               transactionalId="kjs-txn-id", rounds=2)
    assert [line["outcome"] for line in done] == ["commit", "abort"] * 2
    committed = [v for line in done if line["outcome"] == "commit" for v in line["values"]]

    # kafkajs reads read_committed by default: the aborted records and the markers are
    # skipped, so the 8 committed records are the first 8 it gets.
    lines = run(node, "consume", brokers=bootstrap, topics=[topic], groupId="kjs-txn-rc", max=8)
    assert [m["value"] for m in messages(lines)] == committed
    # Each transaction is 4 records and a marker: commit 0-3, abort 5-8, commit 10-13.
    assert [m["offset"] for m in messages(lines)] == [0, 1, 2, 3, 10, 11, 12, 13]
    # read_uncommitted sees all 16 records, the aborted ones too.
    lines = run(node, "consume", brokers=bootstrap, topics=[topic], groupId="kjs-txn-ru",
                max=16, readUncommitted=True)
    assert [m["value"] for m in messages(lines)] == [v for line in done for v in line["values"]]
    got = steps(run(node, "admin_groups", brokers=bootstrap, groupIds=["kjs-txn-rc"],
                    topics=[topic]))
    assert got["offsets"]["topics"][0]["partitions"] == [[0, 14]]


def test_consume_transform_produce(shared_broker: BrokerProcess,
                                   node: Callable[..., NodeScript]) -> None:
    bootstrap, source, sink, group = (shared_broker.bootstrap, "kjs-ctp-in", "kjs-ctp-out",
                                      "kjs-ctp-g")
    make_topic(bootstrap, source, 2)
    make_topic(bootstrap, sink, 1)
    values = send_round(bootstrap, source, 2, range(15))
    # The first transaction is aborted (output and offsets), then every batch commits.
    lines = run(node, "transform", brokers=bootstrap, input=source, output=sink, groupId=group,
                transactionalId="kjs-ctp-id", max=30, abortFirst=True)
    assert lines[0]["event"] == "aborted"
    assert lines[-1] == {"event": "done", "moved": 30}

    out = run(node, "consume", brokers=bootstrap, topics=[sink], groupId="kjs-ctp-check",
              max=30)
    assert sorted(m["value"] for m in messages(out)) == sorted(v.upper() for v in values)
    got = steps(run(node, "admin_groups", brokers=bootstrap, groupIds=[group], topics=[source]))
    assert got["offsets"]["topics"][0]["partitions"] == [[0, 15], [1, 15]]


# ---------------------------------------------------------------------------- failover


def find_coordinator(cluster: Cluster, key: str, key_type: int) -> int:
    """The broker coordinating a group (key_type 0) or a transactional id (1)."""
    with cluster.connect(cluster.controller()) as conn:
        found = conn.request(ApiKey.FIND_COORDINATOR, {"key": key, "key_type": key_type},
                             version=3)
    assert found.error_code == 0, found
    return int(found.node_id)


def test_leader_killed_mid_produce(cluster: Cluster, node: Callable[..., NodeScript]) -> None:
    topic = "kjs-failover"
    cluster.create_topic(topic, 1, 3, configs={"min.insync.replicas": "2"})
    leader = cluster.leader(topic)
    producer = node("produce", brokers=cluster.bootstrap, topic=topic, count=400, batch=4,
                    acks=-1, idempotent=True)
    producer.wait_for(lambda line: line["acks"][0][1] >= 40, "40 acknowledged records")
    cluster.step(f"kill leader {leader}")
    cluster.kill(leader)
    before_kill = len(producer.lines)
    sends = producer.finish()
    assert before_kill < len(sends), "the producer finished before the leader died"
    assert cluster.wait_leader(topic, not_in=[leader]) != leader

    acked = {}
    for send in sends:
        [(partition, base, error)] = send["acks"]
        assert error == 0
        acked.update({v.encode(): (partition, base + i) for i, v in enumerate(send["values"])})
    assert len(acked) == 400
    marks = check_acknowledged(cluster, topic, [0], acked)
    assert marks == {0: 400}  # idempotent retries: nothing written twice


def test_transactions_and_groups_on_three_brokers(shared_cluster: Cluster,
                                                  node: Callable[..., NodeScript]) -> None:
    """Coordinators and leaders spread over brokers: kafkajs finds each one (FindCoordinator
    for groups and transactions) instead of talking to its bootstrap broker only."""
    topic = "kjs-spread"
    shared_cluster.create_topic(topic, 3, 3)
    done = run(node, "transactions", brokers=shared_cluster.bootstrap, topic=topic,
               transactionalId="kjs-spread-id", rounds=3)
    committed = sorted(v for line in done if line["outcome"] == "commit" for v in line["values"])
    lines = run(node, "consume", brokers=shared_cluster.bootstrap, topics=[topic],
                groupId="kjs-spread-g", max=len(committed))
    assert sorted(m["value"] for m in messages(lines)) == committed


def test_transaction_coordinator_killed(cluster: Cluster, node: Callable[..., NodeScript]
                                        ) -> None:
    topic, transactional_id = "kjs-txn-failover", "kjs-txn-failover-id"
    cluster.create_topic(topic, 2, 3, configs={"min.insync.replicas": "2"})
    producer = node("transactions", brokers=cluster.bootstrap, topic=topic,
                    transactionalId=transactional_id, rounds=40)
    producer.wait_for(lambda line: line["outcome"] == "abort", "a first transaction")
    coordinator = find_coordinator(cluster, transactional_id, key_type=1)
    cluster.step(f"kill transaction coordinator {coordinator}")
    cluster.kill(coordinator)
    before_kill = len(producer.lines)
    done = producer.finish()
    assert before_kill < len(done), "the transactions ended before the coordinator died"

    # Exactly the committed records, once each: nothing aborted, nothing written twice.
    committed = sorted(v for line in done if line["outcome"] == "commit" for v in line["values"])
    assert len(committed) == 160
    lines = run(node, "consume", brokers=cluster.bootstrap, topics=[topic],
                groupId="kjs-txn-failover-g", max=len(committed))
    assert sorted(m["value"] for m in messages(lines)) == committed


def committed(node: Callable[..., NodeScript], bootstrap: str, group: str, topic: str
              ) -> list[list[int]]:
    """[partition, committed offset] of ``group`` on ``topic``, as kafkajs's admin sees it."""
    got = steps(run(node, "admin_groups", brokers=bootstrap, groupIds=[group], topics=[topic]))
    return list(got["offsets"]["topics"][0]["partitions"])


def test_group_coordinator_killed(cluster: Cluster, node: Callable[..., NodeScript]) -> None:
    """The coordinator dies. kafkajs goes on fetching, but sends its heartbeats and commits
    to the dead coordinator until its retries run out; then the consumer crashes and
    restarts itself (kafkajs's own recovery, the same against Kafka), finds the new
    coordinator, and resumes from the offsets that one loaded from __consumer_offsets."""
    topic, group = "kjs-coordinator", "kjs-coordinator-g"
    cluster.create_topic(topic, 3, 3)
    first = send_round(cluster.bootstrap, topic, 3, range(10))
    consumer = node("consume", brokers=cluster.bootstrap, topics=[topic], groupId=group,
                    sessionTimeout=6000)
    wait_values(first, consumer)
    coordinator = find_coordinator(cluster, group, key_type=0)
    cluster.step(f"kill group coordinator {coordinator}")
    cluster.kill(coordinator)
    second = send_round(cluster.bootstrap, topic, 3, range(10, 20))
    wait_values(second, consumer)
    wait_until(lambda: committed(node, cluster.bootstrap, group, topic) ==
               [[p, 20] for p in range(3)], RUN_S, "offset 20 committed in every partition")
    consumer.stop()
    # At least once: every record, and none read more than twice (once more after the
    # restart, if its offset was not committed yet).
    counts = Counter(m["value"] for m in messages(consumer.lines))
    assert set(counts) == first | second
    assert max(counts.values()) <= 2


def test_admin_refusals_and_validate_only(shared_broker: BrokerProcess,
                                          node: Callable[..., NodeScript]) -> None:
    got = steps(run(node, "admin_refusals", brokers=shared_broker.bootstrap,
                    topic="kjs-refusals"))
    assert got["validate"]["ok"] is True
    assert got["validate_bad_rf"]["errors"] == ["INVALID_REPLICATION_FACTOR"]
    assert got["listed"]["ok"] == []  # validated, not created
    assert got["bad_config"]["errors"] == ["INVALID_CONFIG"]
    assert got["unknown_config"]["errors"] == ["INVALID_CONFIG"]
    assert got["bad_rf"]["errors"] == ["INVALID_REPLICATION_FACTOR"]
    assert got["bad_name"]["errors"] == ["INVALID_TOPIC_EXCEPTION"]
    assert got["create"]["ok"] is True
    assert got["fewer_partitions"]["errors"] == ["INVALID_PARTITIONS"]
    assert "errors" not in got["validate_partitions"]
    assert got["alter_bad_value"]["errors"] == ["INVALID_CONFIG"]
    assert got["alter_validate"]["ok"]["resources"][0]["errorCode"] == 0
    # Neither validated change was made.
    assert got["after"]["ok"] == {"partitions": 1, "retention": str(7 * 24 * 3600 * 1000)}
    assert got["too_large"]["errors"] == ["MESSAGE_TOO_LARGE"]
