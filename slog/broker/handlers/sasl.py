"""SaslHandshake and SaslAuthenticate (KIP-152): authenticating a connection.

The session (one per connection) remembers the chosen mechanism and the
exchange in progress. A failed authentication is answered with
SASL_AUTHENTICATION_FAILED and the connection is then closed, as Kafka does.
"""

from __future__ import annotations

import logging
from typing import Any

from slog.broker.dispatcher import RequestContext
from slog.broker.handlers.common import NONE
from slog.core.scram import SaslError
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode

log = logging.getLogger("slog.broker.sasl")

ILLEGAL_SASL_STATE = ErrorCode.illegal_sasl_state
UNSUPPORTED_MECHANISM = ErrorCode.unsupported_sasl_mechanism
AUTHENTICATION_FAILED = ErrorCode.sasl_authentication_failed


async def sasl_handshake(ctx: RequestContext, request: Any) -> dict[str, Any]:
    security, session = ctx.broker.security, ctx.session
    enabled = session is not None and session.sasl_required
    mechanisms = list(security.mechanisms) if enabled else []
    if not enabled or session is None or session.authenticated \
            or session.mechanism is not None:
        if session is not None:
            session.close_after_response = True
        return {"error_code": ILLEGAL_SASL_STATE, "mechanisms": mechanisms}
    if request.mechanism not in security.mechanisms:
        session.close_after_response = True
        return {"error_code": UNSUPPORTED_MECHANISM, "mechanisms": mechanisms}
    session.mechanism = request.mechanism
    session.raw_tokens = ctx.version == 0
    return {"error_code": NONE, "mechanisms": mechanisms}


def _failed(error: int, message: str) -> dict[str, Any]:
    return {"error_code": error, "error_message": message, "auth_bytes": b"",
            "session_lifetime_ms": 0}


async def sasl_authenticate(ctx: RequestContext, request: Any) -> dict[str, Any]:
    security, session = ctx.broker.security, ctx.session
    if session is None or not session.sasl_required or session.mechanism is None \
            or session.authenticated:
        if session is not None:
            session.close_after_response = True
        return _failed(ILLEGAL_SASL_STATE, "SaslAuthenticate is not expected now")
    try:
        answer = await security.authenticate_off_loop(session, bytes(request.auth_bytes))
    except SaslError as exc:
        log.info("authentication of %s failed: %s", ctx.peer, exc)
        session.close_after_response = True
        return _failed(AUTHENTICATION_FAILED,
                       f"Authentication failed during authentication due to: {exc}")
    if session.authenticated:
        log.info("%s authenticated as %s (%s)", ctx.peer, session.principal, session.mechanism)
    return {"error_code": NONE, "error_message": None, "auth_bytes": answer,
            "session_lifetime_ms": 0}


HANDLERS = {
    ApiKey.SASL_HANDSHAKE: sasl_handshake,
    ApiKey.SASL_AUTHENTICATE: sasl_authenticate,
}
