"""Kafka's error codes and the one exception that carries them, for every layer.

`ErrorCode` is kio's enum: Kafka's numbers and names (lower-case,
``ErrorCode.not_leader_or_follower == 6``) with Kafka's retriable flag. kio sits
below every slog layer, so core, replication, groups and the broker raise and
compare members of this enum, never error names as strings: a misspelt member
is an ``AttributeError`` (and fails tests/unit/test_kafka_errors.py, which checks
every member slog names against Kafka's numbers), not a wrong answer on the wire.

`KafkaApiError` is what the server side raises when a request must be answered
with an error code; handlers turn ``exc.code`` into the response field. The
client's ``KafkaError`` classes read the same flags from here, so a code is
retriable (or invalidates metadata) on both sides or on neither.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from slog.core.errors import SlogError

__all__ = [
    "INVALID_METADATA",
    "ErrorCode",
    "KafkaApiError",
    "error_name",
    "invalid_metadata",
    "retriable",
]

# The codes of Kafka's InvalidMetadataException family: the client's view of
# the cluster is stale, so it refreshes metadata before it retries (every one of
# them is also retriable).
INVALID_METADATA: frozenset[ErrorCode] = frozenset({
    ErrorCode.unknown_topic_or_partition,
    ErrorCode.leader_not_available,
    ErrorCode.not_leader_or_follower,
    ErrorCode.replica_not_available,
    ErrorCode.network_exception,
    ErrorCode.kafka_storage_error,
    ErrorCode.listener_not_found,
    ErrorCode.fenced_leader_epoch,
    ErrorCode.preferred_leader_not_available,
    ErrorCode.eligible_leaders_not_available,
    ErrorCode.election_not_needed,
    ErrorCode.unknown_topic_id,
    ErrorCode.inconsistent_topic_id,
})


def _known(code: int) -> ErrorCode | None:
    try:
        return ErrorCode(code)
    except ValueError:  # a code newer than kio's table
        return None


def error_name(code: int) -> str:
    """Kafka's upper-case name for a code (``UNKNOWN_ERROR_<n>`` for one kio lacks)."""
    known = _known(code)
    return known.name.upper() if known is not None else f"UNKNOWN_ERROR_{code}"


def retriable(code: int) -> bool:
    """Kafka's verdict: may the same request succeed if sent again? (Unknown: no.)"""
    known = _known(code)
    return known is not None and known.retriable


def invalid_metadata(code: int) -> bool:
    """Does this code mean the sender's metadata is stale (refresh, then retry)?"""
    return code in INVALID_METADATA


class KafkaApiError(SlogError):
    """A request slog answers with Kafka error ``code``; ``str()`` is the message."""

    def __init__(self, code: ErrorCode, message: str = ""):
        if not isinstance(code, ErrorCode):  # the guard that strings used to slip past
            raise TypeError(f"KafkaApiError needs an ErrorCode member, not {code!r}")
        super().__init__(message or code.name)
        self.code = code

    @property
    def name(self) -> str:
        return self.code.name.upper()

    @property
    def message(self) -> str:
        return str(self)

    @property
    def retriable(self) -> bool:
        return self.code.retriable

    @property
    def invalid_metadata(self) -> bool:
        return self.code in INVALID_METADATA

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.code, str(self)))
