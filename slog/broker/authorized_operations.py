"""The ``authorized_operations`` bit fields of Metadata, DescribeCluster and DescribeGroups.

A client that asks (``include_*_authorized_operations``) gets one bit per
operation its principal may perform on the resource (bit ``1 << op``, Kafka's
operation codes); a client that does not ask gets :data:`NOT_REQUESTED`. Only
the operations Kafka defines for the resource type are looked at, so without an
authorizer (everything allowed) the answer is that full set, as Kafka's is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from slog.core.acls import Operation, ResourceType

# Kafka's "authorized operations not requested" sentinel (INT32_MIN).
NOT_REQUESTED: Final = -(2**31)

_OP = Operation
# The operations that mean something for each resource type (Kafka's AclEntry).
SUPPORTED_OPERATIONS: Final[dict[ResourceType, tuple[Operation, ...]]] = {
    ResourceType.TOPIC: (_OP.READ, _OP.WRITE, _OP.CREATE, _OP.DESCRIBE, _OP.DELETE,
                         _OP.ALTER, _OP.DESCRIBE_CONFIGS, _OP.ALTER_CONFIGS),
    ResourceType.GROUP: (_OP.READ, _OP.DESCRIBE, _OP.DELETE),
    ResourceType.CLUSTER: (_OP.CREATE, _OP.CLUSTER_ACTION, _OP.DESCRIBE_CONFIGS,
                           _OP.ALTER_CONFIGS, _OP.IDEMPOTENT_WRITE, _OP.ALTER, _OP.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (_OP.DESCRIBE, _OP.WRITE),
}

Allowed = Callable[[Operation, ResourceType, str], bool]


def authorized_operations(allowed: Allowed, resource_type: ResourceType, name: str) -> int:
    """The bit field of the supported operations ``allowed`` grants on the resource."""
    bits = 0
    for operation in SUPPORTED_OPERATIONS[resource_type]:
        if allowed(operation, resource_type, name):
            bits |= 1 << operation
    return bits
