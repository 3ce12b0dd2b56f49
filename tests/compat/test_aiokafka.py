"""aiokafka producer and manually assigned consumer against slog."""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaProducer

from tests.brokers import BrokerProcess
from tests.compat.clients import RECENT_MS, aiokafka_consume_partitions, create_topic

TIMEOUT_S = 20


async def produce_and_consume(bootstrap: str, topic: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all",
                                enable_idempotence=True, linger_ms=5)
    await producer.start()
    try:
        sent = {}
        for i in range(40):
            metadata = await producer.send_and_wait(
                topic, key=b"k%d" % (i % 4), value=b"v%d" % i, headers=[("i", b"%d" % i)],
                timestamp_ms=RECENT_MS + i)
            sent[(metadata.partition, metadata.offset)] = (b"k%d" % (i % 4), b"v%d" % i,
                                                            RECENT_MS + i)
        # A batch built by hand goes out as one produce request.
        batch = producer.create_batch()
        for i in range(10):
            assert batch.append(key=None, value=b"batched %d" % i, timestamp=None) is not None
        batch_metadata = await (await producer.send_batch(batch, topic, partition=1))
    finally:
        await producer.stop()
    assert {p for p, _ in sent} == {0, 1}

    consumed = await aiokafka_consume_partitions(bootstrap, topic, [0, 1])
    got = {(c.partition, c.offset): (c.key, c.value, c.timestamp, c.headers) for c in consumed}
    assert len(got) == len(consumed) == 50
    for position, (key, value, timestamp) in sent.items():
        assert got.pop(position) == (key, value, timestamp, (("i", value[1:]),))
    batched = sorted(got.items())
    assert [v[1] for _, v in batched] == [b"batched %d" % i for i in range(10)]
    assert [k for k, _ in batched] == [(1, batch_metadata.offset + i) for i in range(10)]


def test_send_and_wait_then_getmany(shared_broker: BrokerProcess) -> None:
    topic = "aio-roundtrip"
    create_topic(shared_broker.bootstrap, topic, partitions=2)
    asyncio.run(asyncio.wait_for(produce_and_consume(shared_broker.bootstrap, topic), TIMEOUT_S))
