"""CreateAcls, DescribeAcls and DeleteAcls: the ACLs kept in the metadata log.

Creating and deleting are applied by the controller (other brokers forward
them, :mod:`slog.broker.forwarding`, so ALTER on the cluster is checked there
for the client's principal); describing is
answered by any broker from its metadata image and needs DESCRIBE on the
cluster. Without an authorizer (``authorizer.class.name`` empty) all three
answer SECURITY_DISABLED, as Kafka does.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from slog.broker.dispatcher import RequestContext
from slog.broker.handlers.common import NONE, NOT_CONTROLLER
from slog.core.acls import (
    CLUSTER_NAME,
    AclBinding,
    AclError,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode

SECURITY_DISABLED = ErrorCode.security_disabled
CLUSTER_DENIED = ErrorCode.cluster_authorization_failed
INVALID_REQUEST = ErrorCode.invalid_request


def _refusal(ctx: RequestContext, operation: Operation) -> tuple[int, str] | None:
    """(error, message) when the ACL APIs cannot be used by this connection."""
    if not ctx.broker.security.authorizer_enabled:
        return SECURITY_DISABLED, "no authorizer is configured on the broker"
    if not ctx.allowed(operation, ResourceType.CLUSTER, CLUSTER_NAME):
        return CLUSTER_DENIED, f"{operation.name} on the cluster is not allowed"
    return None


def _filter(f: Any) -> AclFilter:
    try:
        return AclFilter(ResourceType(f.resource_type_filter), f.resource_name_filter,
                         PatternType(f.pattern_type_filter), f.principal_filter, f.host_filter,
                         Operation(f.operation), Permission(f.permission_type))
    except ValueError as exc:
        raise AclError(f"bad ACL filter: {exc}") from exc


def _binding_fields(acl: AclBinding) -> dict[str, Any]:
    return {"resource_type": int(acl.resource_type), "resource_name": acl.resource_name,
            "pattern_type": int(acl.pattern_type), "principal": acl.principal,
            "host": acl.host, "operation": int(acl.operation),
            "permission_type": int(acl.permission)}


# -- CreateAcls -------------------------------------------------------------------------
def _creation(c: Any) -> AclBinding:
    try:
        return AclBinding(ResourceType(c.resource_type), c.resource_name,
                          PatternType(c.resource_pattern_type), c.principal, c.host,
                          Operation(c.operation), Permission(c.permission_type)).validate()
    except ValueError as exc:
        raise AclError(str(exc)) from exc


async def create_acls(ctx: RequestContext, request: Any) -> dict[str, Any]:
    refusal = _refusal(ctx, Operation.ALTER)
    controller = ctx.broker.controller
    if refusal is None and controller is None:
        refusal = NOT_CONTROLLER, "this broker is not the controller"
    if refusal is not None:
        error, message = refusal
        return {"throttle_time": 0, "results": [
            {"error_code": error, "error_message": message} for _ in request.creations]}
    results: list[dict[str, Any]] = []
    valid: list[AclBinding] = []
    for creation in request.creations:
        try:
            valid.append(_creation(creation))
            results.append({"error_code": NONE, "error_message": None})
        except AclError as exc:
            results.append({"error_code": INVALID_REQUEST, "error_message": str(exc)})
    assert controller is not None  # else refused above
    controller.create_acls(valid)
    return {"throttle_time": 0, "results": results}


# -- DescribeAcls -----------------------------------------------------------------------
async def describe_acls(ctx: RequestContext, request: Any) -> dict[str, Any]:
    refusal = _refusal(ctx, Operation.DESCRIBE)
    if refusal is not None:
        return {"throttle_time": 0, "error_code": refusal[0], "error_message": refusal[1],
                "resources": []}
    try:
        wanted = _filter(request)
    except AclError as exc:
        return {"throttle_time": 0, "error_code": INVALID_REQUEST, "error_message": str(exc),
                "resources": []}
    by_resource: dict[tuple[int, str, int], list[AclBinding]] = defaultdict(list)
    for acl in ctx.broker.image.acls:
        if wanted.matches(acl):
            by_resource[(acl.resource_type, acl.resource_name, acl.pattern_type)].append(acl)
    resources = [
        {"resource_type": int(rtype), "resource_name": name, "pattern_type": int(pattern),
         "acls": [{"principal": a.principal, "host": a.host, "operation": int(a.operation),
                   "permission_type": int(a.permission)}
                  for a in sorted(acls, key=lambda a: (a.principal, a.operation, a.host))]}
        for (rtype, name, pattern), acls in sorted(by_resource.items())
    ]
    return {"throttle_time": 0, "error_code": NONE, "error_message": None,
            "resources": resources}


# -- DeleteAcls -------------------------------------------------------------------------
async def delete_acls(ctx: RequestContext, request: Any) -> dict[str, Any]:
    refusal = _refusal(ctx, Operation.ALTER)
    controller = ctx.broker.controller
    if refusal is None and controller is None:
        refusal = NOT_CONTROLLER, "this broker is not the controller"
    if refusal is not None:
        return {"throttle_time": 0, "filter_results": [
            {"error_code": refusal[0], "error_message": refusal[1], "matching_acls": []}
            for _ in request.filters]}
    filters: list[AclFilter | AclError] = []
    for f in request.filters:
        try:
            filters.append(_filter(f))
        except AclError as exc:
            filters.append(exc)
    usable = [f for f in filters if isinstance(f, AclFilter)]
    assert controller is not None  # else refused above
    deleted = iter(controller.delete_acls(usable))
    results = []
    for f in filters:
        if isinstance(f, AclError):
            results.append({"error_code": INVALID_REQUEST, "error_message": str(f),
                            "matching_acls": []})
            continue
        matching = [{"error_code": NONE, "error_message": None, **_binding_fields(acl)}
                    for acl in next(deleted)]
        results.append({"error_code": NONE, "error_message": None, "matching_acls": matching})
    return {"throttle_time": 0, "filter_results": results}


HANDLERS = {
    ApiKey.CREATE_ACLS: create_acls,
    ApiKey.DESCRIBE_ACLS: describe_acls,
    ApiKey.DELETE_ACLS: delete_acls,
}
