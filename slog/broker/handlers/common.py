"""Error codes the handlers share (members of Kafka's ``ErrorCode``)."""

from __future__ import annotations

from slog.protocol.errors import ErrorCode

NONE = ErrorCode.none
UNKNOWN_TOPIC = ErrorCode.unknown_topic_or_partition
NOT_LEADER = ErrorCode.not_leader_or_follower
LEADER_NOT_AVAILABLE = ErrorCode.leader_not_available
INVALID_TOPIC = ErrorCode.invalid_topic_exception
NOT_CONTROLLER = ErrorCode.not_controller
