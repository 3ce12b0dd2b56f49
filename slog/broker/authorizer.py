"""The ACL authorizer: may this principal do this operation on this resource? Pure.

Kafka's StandardAuthorizer rules:

* super users may do everything;
* a resource with no binding at all (for any principal) is allowed only when
  ``allow.everyone.if.no.acl.found`` is true;
* a matching DENY wins over any ALLOW;
* ALLOW of READ, WRITE, DELETE or ALTER implies DESCRIBE, ALLOW of
  ALTER_CONFIGS implies DESCRIBE_CONFIGS, and ALL covers every operation;
* ``User:*`` matches every principal and host ``*`` every host; a LITERAL
  name ``*`` every resource of its type; PREFIXED names match by prefix.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from slog.core.acls import AclBinding, Operation, Permission, ResourceType

ANY_PRINCIPAL = "User:*"
ANY_HOST = "*"

_IMPLIES: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset({Operation.DESCRIBE, Operation.READ, Operation.WRITE,
                                   Operation.DELETE, Operation.ALTER}),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS}),
}


@dataclass(frozen=True)
class AuthorizerSettings:
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False

    @classmethod
    def parse(cls, super_users: str, allow_if_no_acl: bool) -> AuthorizerSettings:
        """``super.users`` is ``User:a;User:b`` as in Kafka."""
        users = frozenset(u.strip() for u in super_users.split(";") if u.strip())
        return cls(users, allow_if_no_acl)


def authorize(acls: Iterable[AclBinding], settings: AuthorizerSettings, principal: str,
              host: str, operation: Operation, resource_type: ResourceType, name: str) -> bool:
    if principal in settings.super_users:
        return True
    granting = _IMPLIES.get(operation, frozenset({operation})) | {Operation.ALL}
    relevant = False
    allowed = False
    for acl in acls:
        if acl.resource_type != resource_type or not acl.applies_to(name):
            continue
        relevant = True
        if acl.principal not in (principal, ANY_PRINCIPAL) or acl.host not in (host, ANY_HOST):
            continue
        if acl.permission == Permission.DENY and acl.operation in (operation, Operation.ALL):
            return False
        if acl.permission == Permission.ALLOW and acl.operation in granting:
            allowed = True
    if not relevant:
        return settings.allow_everyone_if_no_acl_found
    return allowed
