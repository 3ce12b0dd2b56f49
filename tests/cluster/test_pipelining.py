"""Pipelined requests on one connection while acks=all produces wait for replication.

The broker appends a run of pipelined Produce requests as they arrive, without
waiting for the previous one's followers, but it must still append them in
order, answer them in order, and not let any other request overtake them.
"""

from __future__ import annotations

from slog.protocol.apis import ApiKey
from tests.cluster.conftest import Cluster, produce_body


def test_pipelined_produces_are_appended_and_answered_in_order(cluster: Cluster) -> None:
    topic = "pipelined"
    cluster.create_topic(topic, 1, 3, configs={"min.insync.replicas": "2"})
    leader = cluster.leader(topic)
    with cluster.connect(leader) as conn:
        sent = []
        for i in range(12):
            acks = -1 if i % 3 else 1
            sent.append(conn.send(ApiKey.PRODUCE, produce_body(
                topic, 0, [f"r{i}-{j}".encode() for j in range(i + 1)], acks)))
            if i == 5:  # something else in the middle: answered after the produces before it
                sent.append(conn.send(ApiKey.METADATA, {
                    "topics": [{"name": topic}], "allow_auto_topic_creation": False}))
        received = [conn.receive() for _ in sent]
    assert [correlation for correlation, _ in received] == sent
    offsets = []
    for _, response in received:
        if hasattr(response, "brokers"):  # the Metadata response
            assert response.topics[0].partitions[0].leader_id == leader
            continue
        [result] = response.responses[0].partition_responses
        assert result.error_code == 0
        offsets.append(int(result.base_offset))
    # Request i carried i + 1 records: appended back to back, in request order.
    assert offsets == [sum(range(1, i + 1)) for i in range(12)]
    hw = cluster.high_watermark(topic)
    assert hw == sum(range(1, 13))
    values = [r.value for r in cluster.read_all(topic, 0, hw)]
    assert values == [f"r{i}-{j}".encode() for i in range(12) for j in range(i + 1)]
