"""Helpers shared by the handlers: error codes and topic lookups."""

from __future__ import annotations

from slog.protocol.errors import ErrorCode


def code(name: str) -> int:
    """Kafka's numeric error code for an ``ErrorCode`` member name."""
    return ErrorCode[name].value


NONE = 0
UNKNOWN_TOPIC = code("unknown_topic_or_partition")
NOT_LEADER = code("not_leader_or_follower")
LEADER_NOT_AVAILABLE = code("leader_not_available")
INVALID_TOPIC = code("invalid_topic_exception")
NOT_CONTROLLER = code("not_controller")
