"""The controller dies mid-work, and topics are deleted while a replica is down."""

from __future__ import annotations

import threading
import time

from slog.client import Admin, NewTopic
from slog.client.errors import KafkaError, TopicAlreadyExistsError
from slog.protocol.apis import ApiKey
from tests.cluster.conftest import WAIT_S, Cluster, check_identical_replicas, wait_until

TOPICS = 40


# -- 5. controller failover ------------------------------------------------------------------

class TopicCreator(threading.Thread):
    """Creates topics (RF=2) one by one, retrying each until the cluster says it exists."""

    def __init__(self, cluster: Cluster, names: list[str]):
        super().__init__(name="creator", daemon=True)
        self.cluster = cluster
        self.names = names
        self.done: list[str] = []
        self.retries = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for name in self.names:
                self._create(name)
                self.done.append(name)
        except BaseException as exc:
            self.error = exc

    def _create(self, name: str) -> None:
        deadline = time.monotonic() + 20
        while True:
            try:
                with Admin(self.cluster.bootstrap, request_timeout_ms=3_000) as admin:
                    admin.create_topics([NewTopic(name, 2, 2)])
                return
            except TopicAlreadyExistsError:
                return  # an earlier attempt got through before its answer was lost
            except (KafkaError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline:
                    raise
                self.retries += 1
                time.sleep(0.05)


def test_controller_killed_during_topic_creation(cluster: Cluster) -> None:
    names = [f"created-{i}" for i in range(TOPICS)]
    old = cluster.controller()
    epoch = cluster.image().controller_epoch
    creator = TopicCreator(cluster, names)
    creator.start()
    wait_until(lambda: len(creator.done) >= 5, 20, "the first topics")
    cluster.kill(old)
    cluster.step(f"killed controller {old} after {len(creator.done)} topics")
    new = wait_until(lambda: (c := cluster.controller()) != old and c, 10,
                     "another broker to take over")
    assert cluster.image().controller_epoch > epoch
    cluster.step(f"controller {new}")
    before = len(creator.done)
    wait_until(lambda: len(creator.done) >= before + 5 or not creator.is_alive(), 20,
               "creates to go on under the new controller")
    cluster.restart(old)
    creator.join(60)
    assert creator.error is None, repr(creator.error)
    assert creator.done == names
    cluster.step(f"created {len(names)} topics with {creator.retries} retries")
    # Every topic exists once, with a leader for each partition, everywhere.
    image = cluster.image()
    assert set(names) <= set(image.topics)
    for name in names:
        cluster.wait_in_sync(name)
    with cluster.admin() as admin:
        listed = {t.name for t in admin.list_topics()}
    assert set(names) <= listed
    wait_until(lambda: all(cluster.layout.partition_dir(b, name, state.partition).is_dir()
                           for name in names for state in image.topics[name].partitions.values()
                           for b in state.replicas), 10, "every replica to open its log")


def test_controller_killed_during_reassignment(cluster: Cluster) -> None:
    topic = "moving"
    controller = cluster.controller()
    keep, other = sorted(b for b in cluster.brokers if b != controller)
    cluster.create_topic(topic, assignment={0: [keep, controller]})
    with cluster.producer() as producer:
        for i in range(2000):
            producer.send(topic, f"record-{i}".encode() * 50, partition=0)
        producer.flush(30)
    # The adding replica is paused so it cannot catch up (and end the move) before the kill.
    cluster.pause(other)
    try:
        with cluster.connect(controller) as conn:
            response = conn.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, {
                "timeout_ms": 5_000, "topics": [{"name": topic, "partitions": [
                    {"partition_index": 0, "replicas": [keep, other]}]}]}, version=0)
            cluster.kill(controller)
        assert response.error_code == 0
        assert [p.error_code for t in response.responses for p in t.partitions] == [0]
        state = cluster.state(topic)
    finally:
        cluster.resume(other)
    assert state.adding == (other,), f"the reassignment finished before the kill: {state}"
    cluster.step(f"killed controller {controller} mid-reassignment: {state}")
    wait_until(lambda: cluster.controller() != controller, 10, "a new controller")
    wait_until(lambda: (s := cluster.state(topic)).replicas == (keep, other) and
               not s.adding and not s.removing, 20, "the new controller to finish the move")
    cluster.wait_in_sync(topic)
    cluster.restart(controller)
    # The removed replica deletes its copy once it sees it no longer hosts the partition.
    wait_until(lambda: not cluster.layout.partition_dir(controller, topic, 0).exists(), 20,
               f"broker {controller} to delete its old replica")
    hw = cluster.high_watermark(topic)
    assert hw == 2000
    check_identical_replicas(cluster, topic, {0: hw})


# -- 7. deletion with a broker down ------------------------------------------------------

def test_delete_topic_while_a_replica_is_down(cluster: Cluster) -> None:
    topic = "doomed"
    cluster.create_topic(topic, 2, 3)
    with cluster.producer() as producer:
        for i in range(100):
            producer.send(topic, f"old-{i}".encode(), partition=i % 2)
        producer.flush(20)
    down = next(b for b in cluster.brokers if b != cluster.controller())
    cluster.kill(down)
    with cluster.admin() as admin:
        admin.delete_topics([topic])
    wait_until(lambda: topic not in cluster.image().topics, 10, "the topic to be removed")
    running = [b for b in cluster.brokers if b != down]
    wait_until(lambda: not any(cluster.layout.partition_dir(b, topic, p).exists()
                               for b in running for p in range(2)), 10,
               "running replicas to delete their files")
    assert cluster.layout.partition_dir(down, topic, 0).exists()  # nobody touched them
    cluster.restart(down)
    cluster.wait_registered([down])
    wait_until(lambda: not any(cluster.layout.partition_dir(down, topic, p).exists()
                               for p in range(2)), 10,
               f"broker {down} to delete the deleted topic's files")
    assert not list(cluster.layout.logs_dir(down).glob(f"{topic}-*"))


def test_topic_recreated_under_the_same_name_while_a_replica_is_down(cluster: Cluster) -> None:
    """The returning replica must drop the old topic's data, not serve it as the new one's."""
    topic = "reborn"
    cluster.create_topic(topic, 1, 3)
    for i in range(30):  # one batch each, so no truncation point falls inside a batch
        cluster.append_to(cluster.leader(topic), topic, 0, [f"old-{i}".encode()], acks=-1)
    controller = cluster.controller()
    down = next(b for b in cluster.brokers if b != controller)
    cluster.kill(down)
    with cluster.admin() as admin:
        admin.delete_topics([topic])
    wait_until(lambda: topic not in cluster.image().topics, 10, "the topic to be removed")
    others = [b for b in cluster.brokers if b != down]
    # Same name, same replicas, new topic id: the leader is not the returning broker.
    with cluster.admin() as admin:
        admin.create_topics([NewTopic(topic, assignment={0: [*others, down]})])
    leader = cluster.wait_leader(topic)
    assert leader != down
    # The leader must hold the new topic's log before we write: until it applies the
    # deletion it still leads the old one, and what it takes there is deleted with it.
    new_id = cluster.image().topics[topic].topic_id
    metadata = cluster.layout.partition_dir(leader, topic, 0) / "partition.metadata"
    wait_until(lambda: metadata.exists() and new_id in metadata.read_text(), WAIT_S,
               "the leader to hold the new topic's log")
    for i in range(10):
        cluster.append_to(leader, topic, 0, [f"new-{i}".encode()], acks=1)
    cluster.restart(down)
    cluster.wait_in_sync(topic)
    values = cluster.replica_values(down, topic, 0)
    assert all(v is not None and v.startswith(b"new-") for v in values.values()), \
        f"broker {down} kept the deleted topic's records: {sorted(values.items())[:3]}"
    try:
        wait_until(lambda: cluster.high_watermark(topic) == 10, WAIT_S, "the HW to reach 10")
    except AssertionError as exc:  # say where each replica stands, and what the leader logged
        ends = {b: max(cluster.replica_values(b, topic, 0), default=-1) + 1
                for b in cluster.brokers}
        tail = "\n".join(line for line in cluster.brokers[leader].log_text.splitlines()
                         if topic in line)[-3000:]
        raise AssertionError(f"{exc}: HW {cluster.high_watermark(topic)}, "
                             f"{cluster.state(topic)}, replica LEOs {ends}\n{tail}") from None
    check_identical_replicas(cluster, topic, {0: 10})
