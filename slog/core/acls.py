"""ACL bindings and filters with Kafka's numbering (they travel in the metadata log).

A binding says: ``principal`` from ``host`` is ALLOWed/DENYed ``operation`` on
resources of ``resource_type`` whose name equals (LITERAL; ``*`` matches every
name) or starts with (PREFIXED) ``resource_name``. Filters (DescribeAcls,
DeleteAcls) use ANY / None as wildcards, and MATCH to mean "every binding that
applies to this resource name". Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from enum import IntEnum
from typing import Any

from slog.core.errors import SlogError

WILDCARD = "*"
CLUSTER_NAME = "kafka-cluster"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class AclError(SlogError, ValueError):
    """A binding that cannot be stored (unknown enum, bad principal...)."""


@dataclass(frozen=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def validate(self) -> AclBinding:
        if self.resource_type not in (ResourceType.TOPIC, ResourceType.GROUP,
                                      ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID):
            raise AclError(f"resource type {self.resource_type.name} cannot carry ACLs")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise AclError("an ACL's pattern type is LITERAL or PREFIXED")
        if self.operation in (Operation.UNKNOWN, Operation.ANY):
            raise AclError("an ACL names a concrete operation (or ALL)")
        if self.permission not in (Permission.ALLOW, Permission.DENY):
            raise AclError("an ACL's permission is ALLOW or DENY")
        kind, sep, name = self.principal.partition(":")
        if not sep or not kind or not name:
            raise AclError(f"principal {self.principal!r} is not of the form User:name")
        if not self.resource_name or not self.host:
            raise AclError("resource name and host cannot be empty")
        if self.resource_type == ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            raise AclError(f"the cluster resource is named {CLUSTER_NAME!r}")
        return self

    def applies_to(self, name: str) -> bool:
        """Whether this binding's resource pattern covers the resource ``name``."""
        if self.pattern_type == PatternType.LITERAL:
            return self.resource_name in (name, WILDCARD)
        return name.startswith(self.resource_name)

    def to_record(self) -> dict[str, Any]:
        return {key: (int(v) if isinstance(v, IntEnum) else v) for key, v in asdict(self).items()}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> AclBinding:
        try:
            return cls(ResourceType(int(record["resource_type"])), str(record["resource_name"]),
                       PatternType(int(record["pattern_type"])), str(record["principal"]),
                       str(record["host"]), Operation(int(record["operation"])),
                       Permission(int(record["permission"])))
        except (KeyError, ValueError, TypeError) as exc:
            raise AclError(f"bad ACL: {exc}") from exc


@dataclass(frozen=True)
class AclFilter:
    """None (or ANY) in a field matches every value."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, acl.resource_type):
            return False
        if not self._matches_pattern(acl):
            return False
        return (self.principal in (None, acl.principal)
                and self.host in (None, acl.host)
                and self.operation in (Operation.ANY, acl.operation)
                and self.permission in (Permission.ANY, acl.permission))

    def _matches_pattern(self, acl: AclBinding) -> bool:
        if self.pattern_type == PatternType.MATCH:
            return self.resource_name is None or acl.applies_to(self.resource_name)
        if self.pattern_type not in (PatternType.ANY, acl.pattern_type):
            return False
        return self.resource_name in (None, acl.resource_name)
