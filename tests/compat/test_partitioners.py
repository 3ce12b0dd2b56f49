"""slog's key partitioners against the clients they mirror, key by key, on a real broker.

``murmur2`` must place every key where kafka-python's default partitioner and
librdkafka's ``murmur2_random`` do; ``crc32`` where librdkafka's ``consistent``
does. The references are the real clients producing to a slog topic, and the
partition each record landed in is read back from the topic.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from slog.client import Producer
from slog.client.partitioner import PARTITIONERS, key_partitioner
from tests.brokers import BrokerProcess, run_cli
from tests.compat.clients import Rec, confluent_consume_partitions, confluent_deliver

TIMEOUT_S = 30
PARTITIONS = 7  # a prime, so no hash looks right by landing on few partitions


def sample_keys() -> list[bytes]:
    """Several hundred keys: empty, ASCII, non-ASCII utf-8, and raw bytes of every length 0..40."""
    rng = random.Random(17)
    keys = [b"", b"a", b"alice", b"bob", b"order-42", b"\x00", b"\xff\xff\xff\xff"]
    keys += [k.encode() for k in ("é", "ключ", "キー", "🔑🔑", "naïve-key", "Straße", "中文键名")]
    keys += [f"user-{i}".encode() for i in range(200)]
    keys += [rng.randbytes(rng.randrange(41)) for _ in range(200)]
    return list(dict.fromkeys(keys))  # distinct, in order


KEYS = sample_keys()


@pytest.fixture(scope="module")
def admin(shared_broker: BrokerProcess) -> Iterator[AdminClient]:
    yield AdminClient({"bootstrap.servers": shared_broker.bootstrap})


def create(admin: AdminClient, name: str) -> str:
    for future in admin.create_topics([NewTopic(name, PARTITIONS, 1)]).values():
        future.result(TIMEOUT_S)
    return name


def landed(bootstrap: str, topic: str) -> dict[bytes, int]:
    """Each record's key -> the partition it was read back from (one record per key)."""
    records = confluent_consume_partitions(bootstrap, topic, range(PARTITIONS))
    where: dict[bytes, int] = {}
    for record in records:
        assert record.key is not None
        assert record.key not in where, f"key {record.key!r} written twice"
        where[record.key] = record.partition
    return where


def slog_send(bootstrap: str, topic: str, keys: Sequence[bytes], partitioner: str
              ) -> list[int]:
    with Producer(bootstrap, partitioner=partitioner, linger_ms=5) as producer:
        futures = [producer.send(topic, b"slog", key) for key in keys]
        return [future.result(timeout=TIMEOUT_S).partition for future in futures]


def test_sample_has_hundreds_of_keys_with_empty_and_non_ascii() -> None:
    assert len(KEYS) >= 400
    assert b"" in KEYS
    assert any(not key.isascii() for key in KEYS)


def test_murmur2_matches_kafka_python_producer(shared_broker: BrokerProcess,
                                               admin: AdminClient) -> None:
    from kafka import KafkaProducer

    topic = create(admin, "parts-murmur2-kafka-python")
    producer = KafkaProducer(bootstrap_servers=shared_broker.bootstrap, acks="all")
    try:
        futures = [producer.send(topic, key=key, value=b"kafka-python") for key in KEYS]
        producer.flush(TIMEOUT_S)
        theirs = [future.get(timeout=TIMEOUT_S).partition for future in futures]
    finally:
        producer.close(TIMEOUT_S)
    where = landed(shared_broker.bootstrap, topic)
    assert [where[key] for key in KEYS] == theirs  # the reports tell the truth
    ours = [key_partitioner("murmur2")(key, PARTITIONS) for key in KEYS]
    assert ours == theirs
    assert slog_send(shared_broker.bootstrap, topic, KEYS, "murmur2") == theirs
    assert len(set(theirs)) == PARTITIONS


@pytest.mark.parametrize(("ours", "librdkafka"), [("murmur2", "murmur2_random"),
                                                    ("crc32", "consistent"),
                                                    ("crc32", "consistent_random")])
def test_partitioner_matches_librdkafka(shared_broker: BrokerProcess, admin: AdminClient,
                                        ours: str, librdkafka: str) -> None:
    topic = create(admin, f"parts-{ours}-{librdkafka.replace('_', '-')}")
    # consistent_random scatters empty keys at random (consistent hashes them to 0),
    # so only there the empty key has no fixed place to compare.
    keys = [key for key in KEYS if key or librdkafka != "consistent_random"]
    confluent_deliver(shared_broker.bootstrap, topic, [Rec(key, b"librdkafka") for key in keys],
                      partitioner=librdkafka)
    where = landed(shared_broker.bootstrap, topic)
    theirs = [where[key] for key in keys]
    assert [key_partitioner(ours)(key, PARTITIONS) for key in keys] == theirs
    assert slog_send(shared_broker.bootstrap, topic, keys, ours) == theirs
    assert len(set(theirs)) == PARTITIONS


def test_str_keys_hash_as_their_utf8_bytes() -> None:
    for name, by_key in PARTITIONERS.items():
        for text in ("é", "ключ", "🔑🔑", "plain", ""):
            assert by_key(text, PARTITIONS) == by_key(text.encode(), PARTITIONS), name


def test_unknown_partitioner_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="murmur3, murmur2, crc32"):
        Producer("127.0.0.1:1", partitioner="fnv")


def test_cli_produce_partitioner(shared_broker: BrokerProcess, admin: AdminClient) -> None:
    """``slog produce --partitioner`` places keyed lines by that hash; keyless ones still go."""
    keys = [f"user-{i}" for i in range(100)] + ["ключ", "キー", "Straße"]
    for name in ("murmur2", "crc32", "murmur3"):
        topic = create(admin, f"parts-cli-{name}")
        lines = "".join(f"{key}:v\n" for key in keys) + "no key here\n"
        done = run_cli("produce", topic, "-K:", "--partitioner", name, "-o", "json",
                       "--bootstrap", shared_broker.bootstrap, input_text=lines)
        assert done.returncode == 0, done.stderr
        assert '"partitioner": "' + name + '"' in done.stdout
        records = confluent_consume_partitions(shared_broker.bootstrap, topic,
                                               range(PARTITIONS))
        assert len(records) == len(keys) + 1
        by_key = key_partitioner(name)
        for record in records:
            if record.key is not None:
                assert record.partition == by_key(record.key, PARTITIONS), (name, record.key)
    refused = run_cli("produce", "t", "--partitioner", "fnv",
                      "--bootstrap", shared_broker.bootstrap, input_text="x\n")
    assert refused.returncode != 0 and "fnv" in refused.stderr


def test_cli_choices_are_the_client_partitioners() -> None:
    from slog.cli.produce_cmd import PartitionerChoice

    assert [choice.value for choice in PartitionerChoice] == list(PARTITIONERS)
