"""A TxnOffsetCommit (librdkafka's send_offsets_to_transaction) for a group id the
coordinator has never seen makes it a group at once, as Kafka does: Empty, simple (no
protocol type), with no offset until the COMMIT marker; an ABORT leaves it Empty without
offsets; DeleteGroups while the offsets wait deletes it and them; a kill -9 of the
coordinator keeps it with its pending offsets, which the COMMIT then stores.
Real broker processes, confluent-kafka clients and slog's GroupAdmin."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from slog.client import Admin, GroupAdmin, KafkaError
from slog.core.kafka_errors import ErrorCode
from tests.brokers import BrokerProcess, running_broker
from tests.cluster.conftest import wait_until
from tests.transactions.conftest import TXN_BROKER_CONFIG
from tests.transactions.test_clients import TIMEOUT_S
from tests.transactions.test_txn_offsets_cleanup import _filled, _offsets_pending

NO_OFFSET = -1001  # librdkafka's OFFSET_INVALID: the group has no committed offset


@pytest.fixture
def own_txn_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker of its own, for a test that kills it."""
    with running_broker(tmp_path / "data", 1, **TXN_BROKER_CONFIG) as process:
        yield process


def _listed(bootstrap: str, group: str) -> ConsumerGroupState | None:
    """The group's state in ListGroups (confluent-kafka), None when it is not listed;
    slog's GroupAdmin must list it the same."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    result = admin.list_consumer_groups().result(TIMEOUT_S)
    assert not result.errors
    found = {g.group_id: g for g in result.valid}
    with Admin(bootstrap) as slog_admin:
        by_slog = {g.group_id: g for g in GroupAdmin(slog_admin.cluster).list_groups()}
    if group not in found:
        assert group not in by_slog
        return None
    listing = found[group]
    assert listing.is_simple_consumer_group  # no protocol type, as Kafka's simple group
    assert by_slog[group].state == listing.state.name.capitalize()
    assert by_slog[group].protocol_type == ""
    return listing.state


def _loaded(bootstrap: str) -> bool:
    """Whether the restarted broker has loaded its offsets partitions (ListGroups answers
    COORDINATOR_LOAD_IN_PROGRESS until then)."""
    with Admin(bootstrap) as admin:
        try:
            GroupAdmin(admin.cluster).list_groups()
        except KafkaError as exc:
            assert exc.code is ErrorCode.coordinator_load_in_progress, exc
            return False
    return True


def _described(bootstrap: str, group: str) -> ConsumerGroupState:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    [future] = admin.describe_consumer_groups([group]).values()
    description = future.result(TIMEOUT_S)
    assert description.members == []
    return description.state


def _offset(bootstrap: str, group: str, topic: str) -> int:
    """The group's committed offset of ``topic``-0 (OffsetFetch without require_stable:
    a pending one is not answered)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])
    [future] = admin.list_consumer_group_offsets([request]).values()
    [tp] = future.result(TIMEOUT_S).topic_partitions
    assert tp.error is None
    return int(tp.offset)


def _wait_offset(bootstrap: str, group: str, topic: str, offset: int) -> None:
    """EndTxn answers before the markers are written (as Kafka's): the COMMIT reaches the
    group's offsets partition a little later."""
    wait_until(lambda: _offset(bootstrap, group, topic) == offset, TIMEOUT_S,
               f"{group}'s offset {offset}", interval_s=0.2)


def _pending_for_new_group(bootstrap: str, group: str, topic: str, transactional_id: str
                           ) -> Producer:
    """A transaction holding offset 3 of ``topic``-0 for ``group``, unknown until then."""
    _filled(bootstrap, topic, 5)
    assert _listed(bootstrap, group) is None
    return _offsets_pending(bootstrap, group, topic, transactional_id)


def test_the_group_exists_empty_before_the_commit_and_has_the_offset_after(
        txn_broker: BrokerProcess) -> None:
    bootstrap, topic, group = txn_broker.bootstrap, "txg-commit", "txg-commit-group"
    producer = _pending_for_new_group(bootstrap, group, topic, "txg-commit-1")
    assert _listed(bootstrap, group) is ConsumerGroupState.EMPTY
    assert _described(bootstrap, group) is ConsumerGroupState.EMPTY
    assert _offset(bootstrap, group, topic) == NO_OFFSET  # pending, not committed
    producer.commit_transaction(TIMEOUT_S)
    _wait_offset(bootstrap, group, topic, 3)
    assert _listed(bootstrap, group) is ConsumerGroupState.EMPTY


def test_after_an_abort_the_group_stays_empty_without_offsets(txn_broker: BrokerProcess
                                                              ) -> None:
    bootstrap, topic, group = txn_broker.bootstrap, "txg-abort", "txg-abort-group"
    producer = _pending_for_new_group(bootstrap, group, topic, "txg-abort-1")
    assert _listed(bootstrap, group) is ConsumerGroupState.EMPTY
    producer.abort_transaction(TIMEOUT_S)
    assert _listed(bootstrap, group) is ConsumerGroupState.EMPTY
    assert _described(bootstrap, group) is ConsumerGroupState.EMPTY
    assert _offset(bootstrap, group, topic) == NO_OFFSET


def test_deleting_the_group_while_its_offsets_wait_drops_them(txn_broker: BrokerProcess
                                                              ) -> None:
    """slog's rule (Kafka's too): DeleteGroups of an Empty group also tombstones the
    offsets awaiting a marker, so the COMMIT stores nothing and makes no group."""
    bootstrap, topic, group = txn_broker.bootstrap, "txg-delete", "txg-delete-group"
    producer = _pending_for_new_group(bootstrap, group, topic, "txg-delete-1")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_consumer_groups([group])[group].result(TIMEOUT_S)
    assert _listed(bootstrap, group) is None
    producer.commit_transaction(TIMEOUT_S)
    assert _listed(bootstrap, group) is None
    assert _offset(bootstrap, group, topic) == NO_OFFSET


def test_a_killed_coordinator_comes_back_with_the_group_and_its_pending_offsets(
        own_txn_broker: BrokerProcess) -> None:
    """As Kafka's replay of the transactional offset records: after kill -9 the group is
    there again, Empty, its offset still pending; the COMMIT after the restart stores it.
    A group whose transaction committed before the kill keeps its offset."""
    bootstrap, topic = own_txn_broker.bootstrap, "txg-kill"
    pending, committed = "txg-kill-pending", "txg-kill-committed"
    producer = _pending_for_new_group(bootstrap, pending, topic, "txg-kill-1")
    done = _offsets_pending(bootstrap, committed, topic, "txg-kill-2")
    done.commit_transaction(TIMEOUT_S)
    own_txn_broker.kill()
    own_txn_broker.start()
    wait_until(lambda: _loaded(bootstrap), TIMEOUT_S, "the offsets partitions' load",
               interval_s=0.2)
    assert _listed(bootstrap, pending) is ConsumerGroupState.EMPTY
    assert _offset(bootstrap, pending, topic) == NO_OFFSET
    _wait_offset(bootstrap, committed, topic, 3)  # its marker may be resent after the kill
    assert _listed(bootstrap, committed) is ConsumerGroupState.EMPTY
    producer.commit_transaction(TIMEOUT_S)
    _wait_offset(bootstrap, pending, topic, 3)
    assert _listed(bootstrap, pending) is ConsumerGroupState.EMPTY
