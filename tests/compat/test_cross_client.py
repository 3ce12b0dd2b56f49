"""What each client writes, every other client reads identically.

Writers: kcat, confluent-kafka, kafka-python, aiokafka and slog's BatchBuilder
sent through BrokerConnection. Readers: the same five. Every writer gets its own
topic, with its own compression codec so decompression is crossed too; each
reader must see the writer's records with the same keys, values, headers,
CreateTime timestamps and offsets, nulls included (as far as the writer's API
can express them: see ``writer_can_send``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from tests.brokers import BrokerProcess
from tests.compat.clients import (
    READERS,
    RECENT_MS,
    WRITERS,
    Rec,
    assert_same_records,
    create_topic,
    now_ms,
    records_for,
)

TS0 = RECENT_MS
RECORDS = (
    Rec(b"key-0", b"plain value", (("trace-id", b"abc"), ("empty", b"")), TS0),
    Rec(None, b"null key", (), TS0 + 1),
    Rec(b"tombstone", None, (), TS0 + 2),
    # Earlier than the first record: a negative timestamp delta inside the batch.
    Rec("ключ".encode(), "värde ✓\nsecond line".encode(), (("dup", b"1"), ("dup", b"2")),
        TS0 - 86_400_000),
    Rec(b"null-header", b"v", (("h\u00e9", None),), TS0 + 3),
    Rec(None, None, (), TS0 + 4),
    Rec(b"", b"", (), TS0 + 5),
    Rec(b"big", b"0123456789abcdef" * 2048, (("size", b"32k"),), TS0 + 6),
)
COMPRESSION = {"kcat": "snappy", "confluent": "zstd", "kafka-python": "lz4",
               "aiokafka": "gzip", "slog": "snappy"}


@dataclass(frozen=True)
class Written:
    topic: str
    records: list[Rec]
    window: tuple[int, int]  # when the producer ran, for producer-stamped timestamps


@pytest.fixture(scope="module")
def written(shared_broker: BrokerProcess) -> Callable[[str], Written]:
    """Each writer's topic, produced once (lazily, so one broken writer fails only its row)."""
    cache: dict[str, Written] = {}

    def get(writer: str) -> Written:
        if writer not in cache:
            topic = f"cross-{writer}"
            create_topic(shared_broker.bootstrap, topic)
            records = records_for(writer, RECORDS)
            start = now_ms()
            offsets = WRITERS[writer](shared_broker.bootstrap, topic, records,
                                      compression=COMPRESSION[writer])
            if offsets:  # kcat reports none
                assert offsets == list(range(len(records))), f"{writer} got offsets {offsets}"
            cache[writer] = Written(topic, records, (start, now_ms()))
        return cache[writer]

    return get


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_round_trip(shared_broker: BrokerProcess, written: Callable[[str], Written],
                    writer: str, reader: str) -> None:
    produced = written(writer)
    got = READERS[reader](shared_broker.bootstrap, produced.topic, 0)
    assert_same_records(got, produced.records, stamped_between=produced.window,
                        label=f"{writer} -> {reader}")


def test_every_writer_sends_nulls_and_headers() -> None:
    """The matrix is only meaningful if each writer really covers the tricky cases."""
    for writer in WRITERS:
        sent = records_for(writer, RECORDS)
        assert any(r.key is None for r in sent), writer
        assert any(r.value is None for r in sent), writer
        assert any(len(r.headers) > 1 for r in sent), writer
        if writer != "kcat":
            assert all(r.timestamp is not None for r in sent), writer
    assert any(r.key is None and r.value is None for r in records_for("confluent", RECORDS))
    assert any(r.key is None and r.value is None for r in records_for("kcat", RECORDS))
