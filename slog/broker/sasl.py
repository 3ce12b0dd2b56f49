"""SASL steps that do not go through a handler, and ACL helpers handlers share.

After a SaslHandshake v0 the client sends its SASL tokens as bare frames, with
no request header (the flow before KIP-152); :func:`raw_sasl_token` answers
them in the same form.
"""

from __future__ import annotations

import logging
import struct
from typing import TYPE_CHECKING

from slog.broker.security import Security, Session
from slog.core.acls import Operation, ResourceType
from slog.core.scram import SaslError

if TYPE_CHECKING:
    from slog.broker.dispatcher import RequestContext

log = logging.getLogger("slog.broker.sasl")

_SIZE = struct.Struct(">i")


async def raw_sasl_token(security: Security, session: Session, frame: bytes | memoryview,
                   peer: str) -> bytes | None:
    """The size-prefixed answer to one bare SASL token; None: close (failed)."""
    try:
        answer = await security.authenticate_off_loop(session, bytes(frame))
    except SaslError as exc:
        log.info("authentication of %s failed: %s", peer, exc)
        return None
    return _SIZE.pack(len(answer)) + answer


def any_topic_allowed(ctx: RequestContext, operation: Operation) -> bool:
    """Whether the principal may do ``operation`` on at least one existing topic."""
    return any(ctx.allowed(operation, ResourceType.TOPIC, name) for name in ctx.broker.image.topics)
