"""What a member asks the group coordinator, one frozen dataclass per request.

After Kafka's generated ``JoinGroupRequestData`` and its siblings: the broker's
handler builds one from the wire request of whatever version (defaults filled in
for fields older versions lack), and the coordinator and its helpers pass it on
whole instead of threading a dozen positional arguments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from slog.groups.member import Protocols
from slog.groups.offsets import OffsetAndMetadata, TopicPartition


@dataclass(frozen=True)
class JoinGroupRequest:
    group_id: str
    member_id: str  # "" (UNKNOWN_MEMBER_ID) for a new member
    group_instance_id: str | None  # static membership (KIP-345)
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols  # (name, metadata), in the member's order of preference
    # v4+: a new member first gets its id, and joins with it (KIP-394).
    require_known_member_id: bool = False
    # v9+: a static leader rejoining a stable group need not assign again (KIP-814).
    support_skip_assignment: bool = False


@dataclass(frozen=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None  # v5+; None: not checked
    protocol_name: str | None
    assignments: Mapping[str, bytes]  # member id -> assignment; only the leader sends any


@dataclass(frozen=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    generation_id: int


@dataclass(frozen=True)
class OffsetCommitRequest:
    group_id: str
    member_id: str  # "" with generation -1: a commit from outside group management
    group_instance_id: str | None
    generation_id: int
    offsets: Mapping[TopicPartition, OffsetAndMetadata]
    # v9+ (KIP-848): a member's commit to a group that does not exist is
    # GROUP_ID_NOT_FOUND; older versions keep ILLEGAL_GENERATION.
    report_unknown_group: bool = False


@dataclass(frozen=True)
class OffsetFetchRequest:
    """One group's part of an OffsetFetch: the single group of v0-v7, or each of v8+'s."""

    group_id: str
    partitions: Sequence[TopicPartition] | None  # None: all of the group's offsets
    # v9+ (KIP-848): a consumer group's member names itself and its epoch (checked like a
    # commit's); others send None and -1. A classic group ignores both, as Kafka does.
    member_id: str | None = None
    member_epoch: int = -1
    # v7+ (KIP-447): an offset a transaction committed whose marker has not landed yet is
    # answered UNSTABLE_OFFSET_COMMIT instead of the previous offset.
    require_stable: bool = False
