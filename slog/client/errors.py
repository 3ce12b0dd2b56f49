"""Errors raised by slog's client.

Every error a broker reports becomes a :class:`KafkaError` carrying Kafka's
numeric ``code``, its upper-case ``name`` (``TOPIC_ALREADY_EXISTS``), the
broker's ``message`` when it sent one, and Kafka's two flags: ``retriable``
(sending again may work) and ``invalid_metadata`` (refresh metadata first). The
flags come from the table the broker uses, ``slog.core.kafka_errors``, so both
sides agree on every code. :meth:`KafkaError.for_code` picks the most specific
subclass, so callers can write ``except TopicAlreadyExistsError`` or compare
``err.code`` with an ``ErrorCode`` member.

Operations on several items (topics, partitions) raise the error of the first
item that failed; ``errors`` on that exception maps *every* failed item to its
error and ``results`` holds what the call returned for the items that worked.

Transport problems are not Kafka errors: :class:`BrokerUnavailableError` (no
broker answered) and :class:`ConnectionClosedError` (a connection died) are
``ConnectionError`` subclasses. Client-side time limits raise
:class:`KafkaTimeoutError`, a ``TimeoutError``. An argument the client cannot
use (a bad bootstrap address, offset spec or setting) raises
:class:`InvalidArgumentError`, a ``ValueError``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from slog.core.kafka_errors import error_name, invalid_metadata
from slog.core.kafka_errors import retriable as is_retriable
from slog.protocol.errors import ErrorCode

__all__ = [
    "BrokerUnavailableError",
    "ConnectionClosedError",
    "DuplicateSequenceError",
    "ErrorCode",
    "InvalidArgumentError",
    "InvalidConfigError",
    "InvalidPartitionsError",
    "InvalidProducerEpochError",
    "InvalidReplicationFactorError",
    "InvalidTopicError",
    "KafkaError",
    "KafkaTimeoutError",
    "LeaderNotAvailableError",
    "MessageTooLargeError",
    "NotControllerError",
    "NotLeaderOrFollowerError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "ProduceError",
    "TopicAlreadyExistsError",
    "UnknownTopicOrPartitionError",
    "error_name",
    "is_retriable",
]


class KafkaError(Exception):
    """An error code returned by a broker (or synthesised with Kafka's meaning)."""

    code_value: ClassVar[int | None] = None
    _by_code: ClassVar[dict[int, type[KafkaError]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.code_value is not None:
            KafkaError._by_code.setdefault(cls.code_value, cls)

    def __init__(self, code: int | None = None, message: str | None = None, *,
                 item: str | None = None):
        if code is None:
            if self.code_value is None:
                raise TypeError("KafkaError needs an error code")
            code = self.code_value
        self.code = int(code)
        self.name = error_name(self.code)
        self.message = message or ""
        self.retriable = is_retriable(self.code)
        self.invalid_metadata = invalid_metadata(self.code)
        self.item = item
        self.errors: dict[str, KafkaError] = {}
        self.results: Any = None
        where = f"{item}: " if item else ""
        detail = f": {message}" if message else ""
        super().__init__(f"{where}{self.name}{detail}")

    @classmethod
    def for_code(cls, code: int, message: str | None = None, *, item: str | None = None
                 ) -> KafkaError:
        """The most specific error class for ``code``."""
        return cls._by_code.get(int(code), KafkaError)(int(code), message, item=item)

    def __reduce__(self) -> tuple[Any, ...]:
        return (KafkaError.for_code, (self.code, self.message or None), {"item": self.item})


def raise_for_items(failures: dict[str, KafkaError], results: Any = None) -> None:
    """Raise the first failure (in item order) with every failure attached."""
    if not failures:
        return
    first = next(iter(failures.values()))
    first.errors = dict(failures)
    first.results = results
    raise first


class OffsetOutOfRangeError(KafkaError):
    code_value = ErrorCode.offset_out_of_range


class UnknownTopicOrPartitionError(KafkaError):
    code_value = ErrorCode.unknown_topic_or_partition


class LeaderNotAvailableError(KafkaError):
    code_value = ErrorCode.leader_not_available


class NotLeaderOrFollowerError(KafkaError):
    code_value = ErrorCode.not_leader_or_follower


class MessageTooLargeError(KafkaError):
    code_value = ErrorCode.message_too_large


class InvalidTopicError(KafkaError):
    code_value = ErrorCode.invalid_topic_exception


class TopicAlreadyExistsError(KafkaError):
    code_value = ErrorCode.topic_already_exists


class InvalidPartitionsError(KafkaError):
    code_value = ErrorCode.invalid_partitions


class InvalidReplicationFactorError(KafkaError):
    code_value = ErrorCode.invalid_replication_factor


class InvalidConfigError(KafkaError):
    code_value = ErrorCode.invalid_config


class NotControllerError(KafkaError):
    code_value = ErrorCode.not_controller


class OutOfOrderSequenceError(KafkaError):
    code_value = ErrorCode.out_of_order_sequence_number


class DuplicateSequenceError(KafkaError):
    code_value = ErrorCode.duplicate_sequence_number


class InvalidProducerEpochError(KafkaError):
    code_value = ErrorCode.invalid_producer_epoch


class ProduceError(KafkaError):
    """A record could not be delivered; ``topic`` and ``partition`` say where it was going."""

    def __init__(self, code: int, message: str | None = None, *, topic: str = "",
                 partition: int = -1):
        super().__init__(code, message, item=f"{topic}-{partition}" if topic else None)
        self.topic = topic
        self.partition = partition

    def __reduce__(self) -> tuple[Any, ...]:
        return (ProduceError, (self.code, self.message or None),
                {"topic": self.topic, "partition": self.partition, "item": self.item})


class InvalidArgumentError(ValueError):
    """The caller passed an argument the client cannot use; nothing was sent."""


class KafkaTimeoutError(TimeoutError):
    """A client-side time limit passed (flush, metadata wait, result)."""


class BrokerUnavailableError(ConnectionError):
    """No broker answered at the address(es) tried."""


class ConnectionClosedError(ConnectionError):
    """A broker connection closed or failed while requests were outstanding."""
