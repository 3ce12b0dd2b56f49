"""kcat (librdkafka's command-line client) against a real slog broker."""

from __future__ import annotations

from tests.brokers import BrokerProcess
from tests.compat.clients import (
    RECENT_MS,
    Rec,
    create_topic,
    kcat_consume,
    kcat_metadata,
    kcat_offsets_for_times,
    require_kcat,
    run_kcat,
    slog_produce,
)

LINE_FORMAT = "%k %s %p %o\\n"


def test_kcat_is_installed() -> None:
    assert "kcat" in run_kcat("-V").stdout.decode()
    assert require_kcat()


def test_produce_with_keys_and_consume(shared_broker: BrokerProcess) -> None:
    topic = "kcat-keys"  # auto-created by kcat's metadata request
    lines = [f"key-{i}:value {i}" for i in range(20)] + [":no key", "k:"]
    run_kcat("-b", shared_broker.bootstrap, "-P", "-K:", "-t", topic, "-p", "0",
             input_bytes="\n".join(lines).encode() + b"\n")
    out = run_kcat("-b", shared_broker.bootstrap, "-C", "-e", "-q", "-o", "beginning",
                   "-t", topic, "-f", LINE_FORMAT).stdout.decode()
    expected = [f"key-{i} value {i} 0 {i}" for i in range(20)] + [" no key 0 20", "k  0 21"]
    assert out.splitlines() == expected


def test_keyed_records_spread_over_partitions(shared_broker: BrokerProcess) -> None:
    topic = "kcat-partitioned"
    create_topic(shared_broker.bootstrap, topic, partitions=3)
    keys = [f"user-{i % 7}" for i in range(60)]
    run_kcat("-b", shared_broker.bootstrap, "-P", "-K:", "-t", topic,
             input_bytes="".join(f"{k}:event {i}\n" for i, k in enumerate(keys)).encode())
    out = run_kcat("-b", shared_broker.bootstrap, "-C", "-e", "-q", "-o", "beginning",
                   "-t", topic, "-f", LINE_FORMAT).stdout.decode()
    rows = [line.split(" ") for line in out.splitlines()]
    assert len(rows) == 60
    partition_of: dict[str, set[int]] = {}
    offsets: dict[int, list[int]] = {}
    values_per_key: dict[str, list[int]] = {}
    for key, _event, number, partition, offset in rows:
        partition_of.setdefault(key, set()).add(int(partition))
        offsets.setdefault(int(partition), []).append(int(offset))
        values_per_key.setdefault(key, []).append(int(number))
    assert all(len(p) == 1 for p in partition_of.values()), partition_of  # keys stick
    assert len(offsets) > 1, "seven keys all hashed to one partition"
    for partition, seen in offsets.items():
        assert seen == list(range(len(seen))), (partition, seen)
    for key, numbers in values_per_key.items():
        assert numbers == sorted(numbers), f"order within {key} lost"


def test_metadata_json(shared_broker: BrokerProcess) -> None:
    topic = "kcat-metadata"
    create_topic(shared_broker.bootstrap, topic, partitions=4)
    metadata = kcat_metadata(shared_broker.bootstrap)
    assert metadata["controllerid"] == shared_broker.broker_id
    assert metadata["brokers"] == [{"id": shared_broker.broker_id,
                                    "name": shared_broker.bootstrap}]
    topics = {t["topic"]: t for t in metadata["topics"]}
    assert topic in topics
    entry = topics[topic]
    assert "error" not in entry
    assert sorted(p["partition"] for p in entry["partitions"]) == [0, 1, 2, 3]
    for p in entry["partitions"]:
        assert p["leader"] == shared_broker.broker_id
        assert p["replicas"] == [{"id": shared_broker.broker_id}]
        assert p["isrs"] == [{"id": shared_broker.broker_id}]

    single = kcat_metadata(shared_broker.bootstrap, topic)
    assert [t["topic"] for t in single["topics"]] == [topic]


def test_offsets_for_timestamps(shared_broker: BrokerProcess) -> None:
    topic = "kcat-times"
    create_topic(shared_broker.bootstrap, topic)
    base = RECENT_MS - 60_000
    # Three batches so the lookup has to pick the right batch, then the right record.
    for first in (0, 10, 20):
        slog_produce(shared_broker.bootstrap, topic,
                     [Rec(b"k", b"v%d" % i, (), base + 1000 * i) for i in range(first, first + 10)])
    bs = shared_broker.bootstrap
    assert kcat_offsets_for_times(bs, topic, 0, base - 1) == 0
    assert kcat_offsets_for_times(bs, topic, 0, base) == 0
    assert kcat_offsets_for_times(bs, topic, 0, base + 1) == 1
    assert kcat_offsets_for_times(bs, topic, 0, base + 12_000) == 12
    assert kcat_offsets_for_times(bs, topic, 0, base + 12_500) == 13
    assert kcat_offsets_for_times(bs, topic, 0, base + 29_000) == 29
    assert kcat_offsets_for_times(bs, topic, 0, base + 29_001) == -1  # nothing that late
    assert kcat_offsets_for_times(bs, topic, 0, -2) == 0  # OFFSET_BEGINNING
    assert kcat_offsets_for_times(bs, topic, 0, -1) == 30  # OFFSET_END
    # Consuming from the offset kcat found gives the records from that time on.
    got = kcat_consume(bs, topic)
    assert [c.timestamp for c in got] == [base + 1000 * i for i in range(30)]


def test_headers_and_nulls(shared_broker: BrokerProcess) -> None:
    topic = "kcat-headers"
    run_kcat("-b", shared_broker.bootstrap, "-P", "-K:", "-Z", "-t", topic, "-p", "0",
             "-H", "trace=42", "-H", "flag", "-H", "empty=",
             input_bytes=b"a:1\n:no key\ntomb:\n")
    got = kcat_consume(shared_broker.bootstrap, topic)
    headers = (("trace", b"42"), ("flag", None), ("empty", b""))
    assert [(c.key, c.value, c.headers) for c in got] == [
        (b"a", b"1", headers), (None, b"no key", headers), (b"tomb", None, headers)]
