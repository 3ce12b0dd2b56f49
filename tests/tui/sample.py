"""Deterministic cluster snapshots for unit and screen tests."""

from __future__ import annotations

from slog.tui.collect import Refresh
from slog.tui.events import Event
from slog.tui.model import (
    BrokerInfo,
    ClusterSnapshot,
    GroupInfo,
    GroupOffset,
    MemberInfo,
    PartitionInfo,
    TopicInfo,
    TransactionInfo,
)

T0 = 1_700_000_000.0
BROKERS = (BrokerInfo(1, "127.0.0.1", 9092, True), BrokerInfo(2, "127.0.0.1", 9093, True),
           BrokerInfo(3, "127.0.0.1", 9094, True))


def _partitions(topic: str, count: int, rf: int, produced: int, *, down: int | None = None,
                unstable: dict[int, int] | None = None) -> tuple[PartitionInfo, ...]:
    """``unstable``: partition → offsets an open transaction holds below the HW."""
    parts = []
    for p in range(count):
        replicas = tuple(((p + i) % 3) + 1 for i in range(rf))
        isr = tuple(r for r in replicas if r != down) or replicas[:1]
        leader = replicas[0] if replicas[0] != down else (isr[0] if isr[0] != down else -1)
        hw = produced * (p + 1)
        held = (unstable or {}).get(p, 0)
        parts.append(PartitionInfo(topic, p, leader, 3, replicas, isr,
                                   (down,) if down in replicas else (), 0, hw, hw + p % 2,
                                   hw * 120, last_stable=hw - held,
                                   open_transactions=int(held > 0)))
    return tuple(parts)


def snapshot(step: int = 0, *, down: int | None = None) -> ClusterSnapshot:
    """The sample cluster after ``step`` seconds; broker ``down`` is dead."""
    produced = 100 + 40 * step + (step % 3) * 15
    brokers = tuple(b if b.broker_id != down else BrokerInfo(b.broker_id, b.host, b.port, False)
                    for b in BROKERS)
    topics = (
        TopicInfo("__consumer_offsets", True, _partitions("__consumer_offsets", 3, 3, 2,
                                                          down=down)),
        TopicInfo("orders", False, _partitions("orders", 6, 3, produced, down=down,
                                               unstable={0: 25, 3: 2})),
        TopicInfo("payments", False, _partitions("payments", 3, 2, produced // 2, down=down,
                                                 unstable={1: 4 + step})),
        TopicInfo("audit.log", False, _partitions("audit.log", 1, 1, 7)),
    )
    member = MemberInfo("billing-7f3a2c1e-5d4b-4e8a-9c1d", "billing", "/127.0.0.1",
                        (("orders", 0), ("orders", 1), ("orders", 2)))
    billing = GroupInfo(
        "billing", "Stable", "consumer", "range", 2, (member,),
        tuple(GroupOffset("orders", p, produced * (p + 1) - 10 * p - step % 4,
                          produced * (p + 1), member.member_id if p < 3 else None)
              for p in range(6)))
    reports = GroupInfo("reports", "Empty", "consumer", "", 1, (),
                        (GroupOffset("payments", 0, 50, produced // 2, None),))
    # Open transactions: one young, one that starts hanging (past its 60 s) at step 6.
    transactions = (
        TransactionInfo("billing-txn-0", 4001, "Ongoing", 2, 0, 60_000,
                        int((T0 - 10) * 1000), (("orders", 0),)),
        TransactionInfo("payments-writer", 4007, "Ongoing", 1, 3, 60_000,
                        int((T0 - 55) * 1000), (("payments", 1), ("orders", 3))),
    )
    return ClusterSnapshot(
        taken_at=T0 + step, cluster_id="sample-cluster-id", controller_id=1,
        brokers=brokers, topics=topics, groups=(billing, reports), controller_epoch=4,
        broker_bytes={b.broker_id: 100_000 + b.broker_id * 1000 + step * 30_000
                      for b in brokers if b.broker_id != down},
        transactions=transactions)


EVENTS = [
    Event(T0 - 30, "controller", "broker 1 became controller (epoch 4)", "warn"),
    Event(T0 - 20, "broker-down", "broker 3 is down (fenced)", "error"),
    Event(T0 - 19, "isr-shrink", "orders-2 ISR shrank: -[3] now [1, 2]", "warn"),
    Event(T0 - 5, "broker-up", "broker 3 registered (restarted)"),
    Event(T0 - 4, "isr-expand", "orders-2 ISR expanded: +[3] now [1, 2, 3]"),
]


def refreshes(steps: int = 8) -> list[Refresh]:
    """A minute-like history: events on the first refresh, then plain snapshots."""
    return [Refresh(snapshot(i), EVENTS if i == 0 else []) for i in range(steps)]
