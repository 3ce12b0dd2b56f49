"""A group member (Kafka's MemberMetadata) and the results handed back to members.

Errors are members of Kafka's ``ErrorCode`` (``slog.core.kafka_errors``), which
the broker copies into responses as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from slog.core.kafka_errors import ErrorCode

UNKNOWN_MEMBER_ID = ""  # what a member sends before it has an id
NO_GENERATION = -1


@dataclass(frozen=True)
class JoinedMember:
    """One entry of the JoinGroup response's member list (sent to the leader only)."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinResult:
    member_id: str
    error: ErrorCode = ErrorCode.none
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    members: tuple[JoinedMember, ...] = ()


@dataclass(frozen=True)
class SyncResult:
    error: ErrorCode = ErrorCode.none
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


JoinCallback = Callable[[JoinResult], None]
SyncCallback = Callable[[SyncResult], None]
Protocols = Sequence[tuple[str, bytes]]


@dataclass
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # in the member's order of preference
    assignment: bytes = b""
    # A pending JoinGroup / SyncGroup waits on these; None when none is pending.
    join_callback: JoinCallback | None = field(default=None, repr=False)
    sync_callback: SyncCallback | None = field(default=None, repr=False)
    # New members have not completed a join yet; they expire on their own timer.
    is_new: bool = False
    heartbeat_deadline_ms: float = 0.0

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_callback is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_callback is not None

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise KeyError(f"member {self.member_id} does not support protocol {protocol!r}")

    def matches(self, protocols: Protocols) -> bool:
        """Same protocols, same order, same metadata: a rejoin that changes nothing."""
        return [(n, bytes(m)) for n, m in protocols] == self.protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        return next(name for name in self.protocol_names if name in candidates)

    def has_satisfied_heartbeat(self, now_ms: float) -> bool:
        """Kafka's rule: members waiting in a rebalance count as alive, new ones do not."""
        if not self.is_new and (self.is_awaiting_join or self.is_awaiting_sync):
            return True
        return now_ms < self.heartbeat_deadline_ms
