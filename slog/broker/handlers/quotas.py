"""DescribeClientQuotas and AlterClientQuotas (KIP-546): quotas kept in the metadata log.

Altering is applied by the controller (other brokers forward it,
:mod:`slog.broker.forwarding`); describing is answered by any broker from its
metadata image. The ACL checks (DESCRIBE_CONFIGS / ALTER_CONFIGS on the
cluster) are the dispatcher's, as for configs. Enforcement: :mod:`slog.broker.quotas`.
"""

from __future__ import annotations

from typing import Any

from slog.broker.dispatcher import RequestContext
from slog.core.quotas import (
    ComponentFilter,
    QuotaEntity,
    QuotaError,
    check_filter,
    filter_matches,
    quota_entity,
)
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from slog.replication.controller import ControllerError


def _entity_rows(entity: QuotaEntity) -> list[dict[str, Any]]:
    return [{"entity_type": kind, "entity_name": name} for kind, name in entity]


async def describe_client_quotas(ctx: RequestContext, request: Any) -> dict[str, Any]:
    try:
        components = check_filter(ComponentFilter(c.entity_type, int(c.match_type), c.match)
                                  for c in request.components)
    except QuotaError as exc:
        return {"throttle_time": 0, "error_code": ErrorCode.invalid_request,
                "error_message": str(exc), "entries": None}
    entries = [
        {"entity": _entity_rows(entity),
         "values": [{"key": key, "value": value} for key, value in sorted(values.items())]}
        for entity, values in sorted(ctx.broker.image.client_quotas.items(),
                                     key=lambda item: repr(item[0]))
        if filter_matches(components, request.strict, entity)
    ]
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "entries": entries}


def _alter_one(ctx: RequestContext, entry: Any, validate_only: bool
               ) -> tuple[ErrorCode, str | None]:
    controller = ctx.broker.controller
    if controller is None:
        return ErrorCode.not_controller, "this broker is not the controller"
    try:
        entity = quota_entity((e.entity_type, e.entity_name) for e in entry.entity)
        changes: dict[str, float | None] = {}
        for op in entry.ops:
            if op.key in changes:
                raise QuotaError(f"the quota key {op.key!r} appears twice")
            changes[op.key] = None if op.remove else float(op.value)
        controller.alter_client_quotas(entity, changes, validate_only=validate_only)
    except QuotaError as exc:
        return ErrorCode.invalid_request, str(exc)
    except ControllerError as exc:
        return exc.code, str(exc)
    return ErrorCode.none, None


async def alter_client_quotas(ctx: RequestContext, request: Any) -> dict[str, Any]:
    entries = []
    for entry in request.entries:
        error, message = _alter_one(ctx, entry, request.validate_only)
        entries.append({"error_code": error, "error_message": message,
                        "entity": [{"entity_type": e.entity_type, "entity_name": e.entity_name}
                                   for e in entry.entity]})
    return {"throttle_time": 0, "entries": entries}


HANDLERS = {
    ApiKey.DESCRIBE_CLIENT_QUOTAS: describe_client_quotas,
    ApiKey.ALTER_CLIENT_QUOTAS: alter_client_quotas,
}
