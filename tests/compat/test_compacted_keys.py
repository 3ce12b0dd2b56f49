"""A compacted topic refuses keyless records with INVALID_RECORD, as Kafka does (real clients).

A compacted log keeps the latest value per key; a record without one has no
place in it. Kafka's brokers refuse the whole batch holding it; librdkafka's
test 0011 expects that.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError as CkError
from confluent_kafka import Producer as CkProducer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from slog.client import Producer
from slog.client.errors import KafkaError
from slog.core import compression as codecs
from slog.core.record_keys import MAX_DECOMPRESSED
from slog.core.records import build_batch
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from tests.brokers import BrokerProcess
from tests.compat.clients import confluent_consume, produce_request, slog_connection

TIMEOUT_S = 30


@pytest.fixture(scope="module")
def admin(shared_broker: BrokerProcess) -> Iterator[AdminClient]:
    yield AdminClient({"bootstrap.servers": shared_broker.bootstrap})


def create(admin: AdminClient, name: str, policy: str | None) -> str:
    config = {"cleanup.policy": policy} if policy else {}
    for future in admin.create_topics([NewTopic(name, 1, 1, config=config)]).values():
        future.result(TIMEOUT_S)
    return name


def librdkafka_send(bootstrap: str, topic: str, keys: list[bytes | None],
                    **config: Any) -> list[Any]:
    """Deliver one record per key, all in one batch; each record's delivery error (or None)."""
    producer = CkProducer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 100,
                           "retries": 0, **config})
    errors: dict[int, Any] = {}

    def report(index: int) -> Callable[[Any, Any], None]:
        def on_delivery(err: Any, _msg: Any) -> None:
            errors[index] = err
        return on_delivery

    for i, key in enumerate(keys):
        producer.produce(topic, value=f"value {i}".encode(), key=key, partition=0,
                         on_delivery=report(i))
    assert producer.flush(TIMEOUT_S) == 0
    return [errors[i] for i in range(len(keys))]


@pytest.mark.parametrize(("policy", "compression"), [("compact", "none"),
                                                      ("compact,delete", "lz4"),
                                                      ("delete,compact", "zstd")])
def test_librdkafka_gets_invalid_record_for_a_keyless_record(
        shared_broker: BrokerProcess, admin: AdminClient, policy: str, compression: str) -> None:
    topic = create(admin, f"keys-{policy.replace(',', '-')}-{compression}", policy)
    bootstrap = shared_broker.bootstrap
    assert librdkafka_send(bootstrap, topic, [b"a", b"", b"c"],
                           **{"compression.type": compression}) == [None] * 3
    # One keyless record refuses the batch it travels in, keyed records and all.
    errors = librdkafka_send(bootstrap, topic, [b"d", None, b"e"],
                             **{"compression.type": compression})
    assert [err.code() for err in errors] == [CkError.INVALID_RECORD] * 3
    # Every keyless record is named in record_errors: with more than one, librdkafka
    # fails those with INVALID_RECORD and the rest with _INVALID_DIFFERENT_RECORD.
    errors = librdkafka_send(bootstrap, topic, [None, b"f", None, b"g"],
                             **{"compression.type": compression})
    assert [err.code() for err in errors] == [
        CkError.INVALID_RECORD, CkError._INVALID_DIFFERENT_RECORD,
        CkError.INVALID_RECORD, CkError._INVALID_DIFFERENT_RECORD]
    assert [r.key for r in confluent_consume(bootstrap, topic)] == [b"a", b"", b"c"]


def test_idempotent_librdkafka_producer_is_refused_too(shared_broker: BrokerProcess,
                                                       admin: AdminClient) -> None:
    topic = create(admin, "keys-idempotent", "compact")
    errors = librdkafka_send(shared_broker.bootstrap, topic, [None],
                             **{"enable.idempotence": True, "retries": 5})
    assert errors[0] is not None and errors[0].code() == CkError.INVALID_RECORD
    assert librdkafka_send(shared_broker.bootstrap, topic, [b"k"],
                           **{"enable.idempotence": True, "retries": 5}) == [None]


def test_delete_topics_keep_taking_keyless_records(shared_broker: BrokerProcess,
                                                   admin: AdminClient) -> None:
    topic = create(admin, "keys-delete", None)
    assert librdkafka_send(shared_broker.bootstrap, topic, [None, b"k", None]) == [None] * 3


def test_turning_compaction_on_starts_refusing(shared_broker: BrokerProcess,
                                               admin: AdminClient) -> None:
    topic = create(admin, "keys-altered", "delete")
    bootstrap = shared_broker.bootstrap
    assert librdkafka_send(bootstrap, topic, [None]) == [None]
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact",
                    incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(TIMEOUT_S)
    errors = librdkafka_send(bootstrap, topic, [None])
    assert errors[0] is not None and errors[0].code() == CkError.INVALID_RECORD


def test_slog_producer_sees_invalid_record_with_the_reason(shared_broker: BrokerProcess,
                                                           admin: AdminClient) -> None:
    topic = create(admin, "keys-slog-client", "compact")
    with Producer(shared_broker.bootstrap, linger_ms=50) as producer:
        keyed = producer.send(topic, b"v", b"k", partition=0)
        assert keyed.result(timeout=TIMEOUT_S).offset == 0
        refused = producer.send(topic, b"v", None, partition=0)
        with pytest.raises(KafkaError) as caught:
            refused.result(timeout=TIMEOUT_S)
        # The refused batch took no sequence numbers: the idempotent producer goes on.
        assert producer.send(topic, b"v2", b"k", partition=0).result(timeout=TIMEOUT_S).offset == 1
    assert caught.value.code == ErrorCode.invalid_record
    assert "compact" in str(caught.value) and "key" in str(caught.value)


def test_a_decompression_bomb_is_corrupt_and_the_broker_lives(shared_broker: BrokerProcess,
                                                              admin: AdminClient) -> None:
    """Checking keys means decompressing; a tiny zstd batch expanding past the limit is refused."""
    topic = create(admin, "keys-bomb", "compact")
    bomb = build_batch([(b"k", bytes(MAX_DECOMPRESSED), (), None)], compression=codecs.ZSTD)
    with slog_connection(shared_broker.bootstrap) as conn:
        response = conn.request(ApiKey.PRODUCE, produce_request(topic, 0, bomb))
        [answer] = response.responses[0].partition_responses
        assert answer.error_code == ErrorCode.corrupt_message
        assert "more than" in answer.error_message
        keyless = build_batch([(None, b"v", (), None)], compression=codecs.ZSTD)
        response = conn.request(ApiKey.PRODUCE, produce_request(topic, 0, keyless))
        [answer] = response.responses[0].partition_responses
        assert answer.error_code == ErrorCode.invalid_record
        assert [e.batch_index for e in answer.record_errors] == [0]
