"""What the handlers share: error codes (members of Kafka's ``ErrorCode``) and the
helpers that bridge callback-style coordinators to async handlers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from slog.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from slog.broker.dispatcher import RequestContext

T = TypeVar("T")

NONE = ErrorCode.none
UNKNOWN_TOPIC = ErrorCode.unknown_topic_or_partition
NOT_LEADER = ErrorCode.not_leader_or_follower
LEADER_NOT_AVAILABLE = ErrorCode.leader_not_available
INVALID_TOPIC = ErrorCode.invalid_topic_exception
NOT_CONTROLLER = ErrorCode.not_controller


async def answer_of(register: Callable[[Callable[[T], None]], None]) -> T:
    """Call ``register(callback)`` and wait for the callback's argument (the group
    coordinators answer through callbacks once their records are written)."""
    future: asyncio.Future[T] = asyncio.get_running_loop().create_future()

    def resolve(value: T) -> None:
        if not future.done():
            future.set_result(value)

    register(resolve)
    return await future


def client_host(ctx: RequestContext) -> str:
    """The client's address as Kafka reports it in group descriptions ("/host")."""
    return "/" + ctx.peer.rpartition(":")[0]
