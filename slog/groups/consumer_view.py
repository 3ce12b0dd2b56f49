"""A KIP-848 group seen through the classic APIs (DescribeGroups), as Kafka shows it.

Tools that only speak DescribeGroups still see such a group: protocol type
``consumer``, the assignor's name as the protocol, and each member's
subscription and current assignment in the classic consumer protocol's bytes.
"""

from __future__ import annotations

from collections.abc import Callable

from slog.core.consumer_protocol import (
    Assignment,
    Subscription,
    encode_assignment,
    encode_subscription,
)
from slog.groups.consumer_group import ConsumerGroup
from slog.groups.group import GroupSummary, MemberSummary


def classic_summary(group: ConsumerGroup, topic_name: Callable[[str], str | None]
                    ) -> GroupSummary:
    """``topic_name``: a topic id's name (None once deleted: such partitions are left out)."""
    members = []
    for m in group.members.values():
        named = tuple(sorted((name, p) for topic_id, p in m.assigned
                             if (name := topic_name(topic_id)) is not None))
        topics = tuple(sorted(set(m.subscribed_topic_names) |
                              {t for t in group.subscribed if m.subscribes(t)}))
        members.append(MemberSummary(
            m.member_id, m.instance_id, m.client_id, m.client_host,
            encode_subscription(Subscription(topics, rack_id=m.rack_id)),
            encode_assignment(Assignment(named))))
    return GroupSummary(group.state.value, group.protocol_type, group.assignor_name(),
                        tuple(members))
