"""``slog acl add|list|remove``: topic, group, transactional-id and cluster ACLs,
like kafka-acls (``--producer`` and ``--consumer`` included).

They travel as CreateAcls / DescribeAcls / DeleteAcls, so they work against
slog or Kafka (with an authorizer configured).
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from slog.cli.common import (
    DEFAULT_BOOTSTRAP,
    EXIT_USAGE,
    BootstrapOption,
    client_errors,
    fail,
)
from slog.cli.output import OutputFormat, OutputOption, emit

if TYPE_CHECKING:
    from slog.client.cluster import ClusterClient
    from slog.core.acls import AclBinding, AclFilter

app = typer.Typer(help="Add, list and remove ACLs (needs an authorizer on the brokers).",
                  no_args_is_help=True)


class OperationChoice(StrEnum):
    all = "all"
    read = "read"
    write = "write"
    create = "create"
    delete = "delete"
    alter = "alter"
    describe = "describe"
    cluster_action = "cluster-action"
    describe_configs = "describe-configs"
    alter_configs = "alter-configs"
    idempotent_write = "idempotent-write"


class PatternChoice(StrEnum):
    literal = "literal"
    prefixed = "prefixed"
    match = "match"
    any = "any"


TopicOption = Annotated[str | None, typer.Option("--topic", help="A topic (or * for all).")]
GroupOption = Annotated[str | None, typer.Option("--group", help="A group (or * for all).")]
ClusterOption = Annotated[bool, typer.Option("--cluster", help="The cluster itself.")]
TransactionalIdOption = Annotated[str | None, typer.Option(
    "--transactional-id", help="A transactional id (or * for all).")]
ProducerOption = Annotated[bool, typer.Option(
    "--producer", help="kafka-acls' producer set: WRITE, DESCRIBE and CREATE on --topic, "
                       "and WRITE and DESCRIBE on --transactional-id if given.")]
ConsumerOption = Annotated[bool, typer.Option(
    "--consumer", help="kafka-acls' consumer set: READ and DESCRIBE on --topic, READ on "
                       "--group (both needed).")]
AllowOption = Annotated[list[str] | None, typer.Option(
    "--allow-principal", help="User:NAME (or User:*) to allow (repeatable).")]
DenyOption = Annotated[list[str] | None, typer.Option(
    "--deny-principal", help="User:NAME (or User:*) to deny (repeatable).")]
OperationOption = Annotated[list[OperationChoice] | None, typer.Option(
    "--operation", help="Operation (repeatable).")]
HostOption = Annotated[str, typer.Option("--host", help="Client host the ACL applies to.")]

COLUMNS = ["principal", "permission", "operation", "host", "resource_type", "resource",
           "pattern"]


def _resource(topic: str | None, group: str | None, cluster: bool,
              transactional_id: str | None = None) -> tuple[Any, str | None]:
    from slog.core.acls import CLUSTER_NAME, ResourceType

    chosen = [(ResourceType.TOPIC, topic), (ResourceType.GROUP, group),
              (ResourceType.CLUSTER, CLUSTER_NAME if cluster else None),
              (ResourceType.TRANSACTIONAL_ID, transactional_id)]
    given = [(kind, name) for kind, name in chosen if name is not None]
    if len(given) > 1:
        fail("give one of --topic, --group, --transactional-id and --cluster",
             code=EXIT_USAGE)
    return given[0] if given else (ResourceType.ANY, None)


def _shortcut_grants(topic: str | None, group: str | None, transactional_id: str | None,
                     producer: bool, consumer: bool) -> list[tuple[Any, str, list[Any]]]:
    """(resource type, name, operations) that ``--producer``/``--consumer`` stand for,
    as kafka-acls expands them."""
    from slog.core.acls import Operation, ResourceType

    if topic is None or (consumer and group is None):
        fail("--producer needs --topic; --consumer needs --topic and --group",
             code=EXIT_USAGE)
    assert topic is not None
    grants: list[tuple[Any, str, list[Any]]] = []
    if producer:
        grants.append((ResourceType.TOPIC, topic,
                       [Operation.WRITE, Operation.DESCRIBE, Operation.CREATE]))
        if transactional_id is not None:
            grants.append((ResourceType.TRANSACTIONAL_ID, transactional_id,
                           [Operation.WRITE, Operation.DESCRIBE]))
    if consumer:
        assert group is not None
        grants.append((ResourceType.TOPIC, topic, [Operation.READ, Operation.DESCRIBE]))
        grants.append((ResourceType.GROUP, group, [Operation.READ]))
    # One set per resource, as kafka-acls makes it: DESCRIBE on a topic is in both.
    merged: dict[tuple[Any, str], list[Any]] = {}
    for kind, name, ops in grants:
        have = merged.setdefault((kind, name), [])
        have += [op for op in ops if op not in have]
    return [(kind, name, ops) for (kind, name), ops in merged.items()]


def _grants(topic: str | None, group: str | None, cluster: bool, transactional_id: str | None,
            operation: list[OperationChoice] | None, producer: bool,
            consumer: bool) -> list[tuple[Any, str, list[Any]]]:
    """What an add or remove names: one resource with its ``--operation``s, or the
    ``--producer``/``--consumer`` sets."""
    if producer or consumer:
        if operation or cluster:
            fail("--producer and --consumer take no --operation or --cluster",
                 code=EXIT_USAGE)
        return _shortcut_grants(topic, group, transactional_id, producer, consumer)
    kind, name = _resource(topic, group, cluster, transactional_id)
    if name is None:
        return []
    return [(kind, name, [_operation(op) for op in operation or []])]


def _principals(allow: list[str] | None, deny: list[str] | None) -> list[tuple[str, Any]]:
    from slog.core.acls import Permission

    return [(p, Permission.ALLOW) for p in allow or []] + \
        [(p, Permission.DENY) for p in deny or []]


def _operation(choice: OperationChoice) -> Any:
    from slog.core.acls import Operation

    return Operation[choice.value.replace("-", "_").upper()]


def _row(acl: AclBinding) -> dict[str, Any]:
    return {"principal": acl.principal, "permission": acl.permission.name,
            "operation": acl.operation.name, "host": acl.host,
            "resource_type": acl.resource_type.name, "resource": acl.resource_name,
            "pattern": acl.pattern_type.name}


def _check(results: Any) -> None:
    from slog.client.errors import KafkaError

    for result in results:
        if result.error_code:
            raise KafkaError.for_code(result.error_code, result.error_message)


def _to_controller(cluster: ClusterClient, api_key: int, body: dict[str, Any],
                   rows: str) -> Any:
    """Send to the controller, once more after NOT_CONTROLLER (it may just have moved)."""
    from slog.protocol.errors import ErrorCode

    response = cluster.controller_request(api_key, body)
    if any(r.error_code == ErrorCode.not_controller for r in getattr(response, rows)):
        response = cluster.controller_request(api_key, body)
    return response


def _filter_body(f: AclFilter) -> dict[str, Any]:
    return {"resource_type_filter": int(f.resource_type), "resource_name_filter": f.resource_name,
            "pattern_type_filter": int(f.pattern_type), "principal_filter": f.principal,
            "host_filter": f.host, "operation": int(f.operation),
            "permission_type": int(f.permission)}


@app.command("add")
def add(
    topic: TopicOption = None,
    group: GroupOption = None,
    cluster: ClusterOption = False,
    transactional_id: TransactionalIdOption = None,
    allow_principal: AllowOption = None,
    deny_principal: DenyOption = None,
    operation: OperationOption = None,
    producer: ProducerOption = False,
    consumer: ConsumerOption = False,
    host: HostOption = "*",
    resource_pattern_type: Annotated[PatternChoice, typer.Option(
        help="literal: this name (* for all); prefixed: names starting with it.")
    ] = PatternChoice.literal,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Allow or deny principals operations on a topic, group, transactional id or
    the cluster.

    Example: slog acl add --allow-principal User:alice --operation read --topic orders
    """
    from slog.core.acls import AclBinding, AclError, PatternType
    from slog.protocol.apis import ApiKey

    grants = _grants(topic, group, cluster, transactional_id, operation, producer, consumer)
    principals = _principals(allow_principal, deny_principal)
    if not grants or not principals or not all(ops for _, _, ops in grants):
        fail("give a resource (--topic, --group, --transactional-id or --cluster), a "
             "principal (--allow-principal/--deny-principal) and an --operation (or "
             "--producer/--consumer)", code=EXIT_USAGE)
    if resource_pattern_type not in (PatternChoice.literal, PatternChoice.prefixed):
        fail("ACLs are added with --resource-pattern-type literal or prefixed",
             code=EXIT_USAGE)
    pattern = PatternType[resource_pattern_type.name.upper()]
    try:
        bindings = [AclBinding(kind, name, pattern, principal, host, op, permission).validate()
                    for kind, name, ops in grants
                    for principal, permission in principals for op in ops]
    except AclError as exc:
        fail(str(exc), code=EXIT_USAGE)
    from slog.client.cluster import ClusterClient

    with client_errors(bootstrap), ClusterClient(bootstrap, client_id="slog-cli") as client:
        body = {"creations": [_creation_body(b) for b in bindings]}
        _check(_to_controller(client, ApiKey.CREATE_ACLS, body, "results").results)
    emit([_row(b) for b in bindings], COLUMNS, output)


def _creation_body(acl: AclBinding) -> dict[str, Any]:
    return {"resource_type": int(acl.resource_type), "resource_name": acl.resource_name,
            "resource_pattern_type": int(acl.pattern_type), "principal": acl.principal,
            "host": acl.host, "operation": int(acl.operation),
            "permission_type": int(acl.permission)}


@app.command("list")
def list_acls(
    topic: TopicOption = None,
    group: GroupOption = None,
    cluster: ClusterOption = False,
    transactional_id: TransactionalIdOption = None,
    principal: Annotated[str | None, typer.Option(help="Only this principal's ACLs.")] = None,
    resource_pattern_type: Annotated[PatternChoice, typer.Option(
        help="any: bindings named exactly so (any pattern); match: every binding that "
             "applies to the resource.")] = PatternChoice.any,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """List ACLs, all or those of one resource or principal.

    Example: slog acl list --topic orders
    """
    from slog.client.cluster import ClusterClient
    from slog.client.errors import KafkaError
    from slog.core.acls import AclBinding, AclFilter, PatternType
    from slog.protocol.apis import ApiKey

    kind, name = _resource(topic, group, cluster, transactional_id)
    wanted = AclFilter(kind, name, PatternType[resource_pattern_type.name.upper()], principal)
    with client_errors(bootstrap), ClusterClient(bootstrap, client_id="slog-cli") as client:
        response = client.request_any(ApiKey.DESCRIBE_ACLS, _filter_body(wanted))
        if response.error_code:
            raise KafkaError.for_code(response.error_code, response.error_message)
    rows = [_row(AclBinding.from_record({
        "resource_type": r.resource_type, "resource_name": r.resource_name,
        "pattern_type": r.pattern_type, "principal": a.principal, "host": a.host,
        "operation": a.operation, "permission": a.permission_type}))
        for r in response.resources for a in r.acls]
    emit(rows, COLUMNS, output)


@app.command("remove")
def remove(
    topic: TopicOption = None,
    group: GroupOption = None,
    cluster: ClusterOption = False,
    transactional_id: TransactionalIdOption = None,
    allow_principal: AllowOption = None,
    deny_principal: DenyOption = None,
    operation: OperationOption = None,
    producer: ProducerOption = False,
    consumer: ConsumerOption = False,
    host: Annotated[str | None, typer.Option(help="Only ACLs for this host.")] = None,
    resource_pattern_type: Annotated[PatternChoice, typer.Option(
        help="Which bindings of the resource: literal, prefixed or any.")
    ] = PatternChoice.any,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Remove the ACLs of a resource (only some principals/operations if given).

    Example: slog acl remove --topic orders --allow-principal User:alice
    """
    from slog.client.cluster import ClusterClient
    from slog.core.acls import AclBinding, AclFilter, Operation, PatternType, Permission
    from slog.protocol.apis import ApiKey

    grants = _grants(topic, group, cluster, transactional_id, operation, producer, consumer)
    if not grants:
        fail("give the resource: --topic, --group, --transactional-id or --cluster",
             code=EXIT_USAGE)
    pattern = PatternType[resource_pattern_type.name.upper()]
    who: list[tuple[str | None, Permission]] = list(
        _principals(allow_principal, deny_principal)) or [(None, Permission.ANY)]
    filters = [AclFilter(kind, name, pattern, p, host, op, perm)
               for kind, name, ops in grants for p, perm in who for op in ops or [Operation.ANY]]
    removed: list[dict[str, Any]] = []
    with client_errors(bootstrap), ClusterClient(bootstrap, client_id="slog-cli") as client:
        body = {"filters": [_filter_body(f) for f in filters]}
        results = _to_controller(client, ApiKey.DELETE_ACLS, body, "filter_results")
        _check(results.filter_results)
    for result in results.filter_results:
        removed += [_row(AclBinding.from_record({**_fields(m), "permission": m.permission_type}))
                    for m in result.matching_acls]
    emit(removed, COLUMNS, output)


def _fields(m: Any) -> dict[str, Any]:
    return {"resource_type": m.resource_type, "resource_name": m.resource_name,
            "pattern_type": m.pattern_type, "principal": m.principal, "host": m.host,
            "operation": m.operation}
