"""KIP-447's require_stable: a read_committed group member does not start from an offset
that an open transaction is about to replace. Without it, a member taking over a partition
mid-commit restarts from the older offset and the pipeline writes those results twice
(the transactional chaos workload's duplicate-output)."""

from __future__ import annotations

import threading
import time

from slog.client import Consumer, OffsetAndMetadata, Producer, TopicPartition
from slog.client.group_requests import fetch_body, find_coordinator, request
from slog.client.types import ConsumerRecord
from slog.core.kafka_errors import ErrorCode
from slog.protocol.apis import ApiKey
from tests.brokers import BrokerProcess
from tests.transactions.test_clients import TIMEOUT_S, _create

TOPIC, GROUP = "tx-stable-in", "tx-stable-group"
TP = TopicPartition(TOPIC, 0)


def _offsets_in_open_transaction(bootstrap: str, producer: Producer) -> None:
    """A group member reads 3 records and sends offset 3 in a transaction left open."""
    with Consumer(bootstrap, group_id=GROUP, auto_offset_reset="earliest",
                  enable_auto_commit=False, isolation_level="read_committed") as member:
        member.subscribe([TOPIC])
        records: list[ConsumerRecord] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(records) < 3 and time.monotonic() < deadline:
            records += member.poll(200)
        assert len(records) == 3
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(TOPIC + "-out", b"result")
        producer.send_offsets_to_transaction({TP: 3}, member.group_metadata())


def test_read_committed_member_waits_for_the_pending_offset(
        txn_broker: BrokerProcess) -> None:
    bootstrap = txn_broker.bootstrap
    _create(bootstrap, TOPIC, 1)
    _create(bootstrap, TOPIC + "-out", 1)
    with Producer(bootstrap) as source:
        for i in range(3):
            source.send(TOPIC, f"in{i}".encode())
    with Producer(bootstrap, transactional_id="tx-stable-1") as producer:
        _offsets_in_open_transaction(bootstrap, producer)
        with Consumer(bootstrap, group_id=GROUP, enable_auto_commit=False) as uncommitted:
            # read_uncommitted asks without require_stable: the old (no) offset, at once
            assert uncommitted.committed([TP]) == {TP: None}
            node = find_coordinator(uncommitted.cluster, GROUP)
            uncommitted.cluster.refresh_metadata([])
            conn = uncommitted.cluster.connection(node.node_id, "stable-probe")
            answer = request(conn, ApiKey.OFFSET_FETCH, fetch_body(GROUP, [TP], True))
            codes = [p.error_code for t in answer.topics for p in t.partitions]
            assert codes == [ErrorCode.unstable_offset_commit]
        found: list[dict[TopicPartition, OffsetAndMetadata | None]] = []
        with Consumer(bootstrap, group_id=GROUP, enable_auto_commit=False,
                      isolation_level="read_committed") as member:
            asking = threading.Thread(target=lambda: found.append(member.committed([TP])))
            asking.start()
            time.sleep(1.5)
            assert not found  # still waiting: the offset is unstable
            producer.commit_transaction(TIMEOUT_S)
            asking.join(TIMEOUT_S)
        [offsets] = found
        stable = offsets[TP]
        assert stable is not None and stable.offset == 3
