"""``slog quota set|list|remove``: client quotas (KIP-546), like kafka-configs' quotas.

An entity is a user, a client id, or both (``--user``, ``--client-id``); ``--default
user`` or ``--default client-id`` names the default entity of that type instead,
which applies to every user (or client id) without a quota of its own. They travel
as Describe/AlterClientQuotas, so they work against slog or Kafka.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from slog.cli.common import DEFAULT_BOOTSTRAP, EXIT_USAGE, BootstrapOption, client_errors, fail
from slog.cli.output import OutputFormat, OutputOption, emit

if TYPE_CHECKING:
    from slog.core.quotas import QuotaEntity

app = typer.Typer(help="Set, list and remove client quotas (byte rates, request time).",
                  no_args_is_help=True)


class DefaultChoice(StrEnum):
    user = "user"
    client_id = "client-id"


UserOption = Annotated[str | None, typer.Option("--user", help="A user (the principal's name).")]
ClientIdOption = Annotated[str | None, typer.Option("--client-id", help="A client id.")]
DefaultOption = Annotated[list[DefaultChoice] | None, typer.Option(
    "--default", help="The default entity of this type: user or client-id (repeatable).")]
COLUMNS = ["user", "client_id", "key", "value"]
DEFAULT_NAME = "<default>"


def _components(user: str | None, client_id: str | None,
                default: list[DefaultChoice] | None) -> list[tuple[str, str | None]]:
    from slog.core.quotas import CLIENT_ID, USER

    defaults = {d.value for d in default or []}
    components: list[tuple[str, str | None]] = []
    for kind, name in ((USER, user), (CLIENT_ID, client_id)):
        if name is not None and kind in defaults:
            fail(f"give --{kind} NAME or --default {kind}, not both", code=EXIT_USAGE)
        if name is not None:
            components.append((kind, name))
        elif kind in defaults:
            components.append((kind, None))
    return components


def _entity(user: str | None, client_id: str | None,
            default: list[DefaultChoice] | None) -> QuotaEntity:
    from slog.core.quotas import QuotaError, quota_entity

    try:
        return quota_entity(_components(user, client_id, default))
    except QuotaError as exc:
        fail(str(exc), hint="name --user, --client-id, --default user or --default client-id",
             code=EXIT_USAGE)


def _rows(quotas: dict[QuotaEntity, dict[str, float]]) -> list[dict[str, Any]]:
    from slog.core.quotas import CLIENT_ID, QUOTA_KEYS, USER

    rows = []
    for entity, values in quotas.items():
        parts = dict(entity)
        names = {kind: (DEFAULT_NAME if parts[kind] is None else parts[kind])
                 if kind in parts else None for kind in (USER, CLIENT_ID)}
        for key, value in sorted(values.items()):
            shown: float | int = int(value) if QUOTA_KEYS.get(key) else value
            rows.append({"user": names[USER], "client_id": names[CLIENT_ID], "key": key,
                         "value": shown})
    return sorted(rows, key=lambda r: (r["user"] or "", r["client_id"] or "", r["key"]))


def _parse_values(pairs: list[str]) -> dict[str, float]:
    from slog.core.quotas import QuotaError, check_value

    values: dict[str, float] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        try:
            number = float(raw)
        except ValueError:
            number = float("nan")
        if not sep or number != number:
            fail(f"{pair!r} is not KEY=NUMBER", hint="e.g. producer_byte_rate=1048576",
                 code=EXIT_USAGE)
        try:
            values[key.strip()] = check_value(key.strip(), number)
        except QuotaError as exc:
            fail(str(exc), code=EXIT_USAGE)
    return values


def _admin(bootstrap: str) -> Any:
    from slog.client import Admin

    return Admin(bootstrap, client_id="slog-cli")


@app.command("set")
def set_quotas(
    values: Annotated[list[str], typer.Argument(
        help="KEY=VALUE: producer_byte_rate, consumer_byte_rate (bytes/s), "
             "request_percentage (% of one thread).", show_default=False)],
    user: UserOption = None,
    client_id: ClientIdOption = None,
    default: DefaultOption = None,
    validate_only: Annotated[bool, typer.Option(
        "--validate-only", help="Check with the controller, change nothing.")] = False,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Set quotas of a user, a client id, or both (other keys are kept).

    Examples:
      slog quota set --user alice producer_byte_rate=1048576
      slog quota set --default client-id consumer_byte_rate=2097152
    """
    entity = _entity(user, client_id, default)
    changes = _parse_values(values)
    with client_errors(bootstrap), _admin(bootstrap) as admin:
        admin.alter_client_quotas({entity: changes}, validate_only=validate_only)
    emit(_rows({entity: changes}), COLUMNS, output)


@app.command("list")
def list_quotas(
    user: UserOption = None,
    client_id: ClientIdOption = None,
    default: DefaultOption = None,
    strict: Annotated[bool, typer.Option(
        "--strict", help="Only entities with exactly the given types.")] = False,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """List quotas: all, or those of entities matching the given user/client id.

    Example: slog quota list --user alice
    """
    from slog.core.quotas import MATCH_DEFAULT, MATCH_EXACT, ComponentFilter

    wanted = [ComponentFilter(kind, MATCH_EXACT if name is not None else MATCH_DEFAULT, name)
              for kind, name in _components(user, client_id, default)]
    with client_errors(bootstrap), _admin(bootstrap) as admin:
        quotas = admin.describe_client_quotas(wanted, strict=strict)
    emit(_rows(quotas), COLUMNS, output)


@app.command("remove")
def remove(
    keys: Annotated[list[str] | None, typer.Argument(
        help="The keys to remove [default: every key of the entity].",
        show_default=False)] = None,
    user: UserOption = None,
    client_id: ClientIdOption = None,
    default: DefaultOption = None,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Remove quotas of one entity: the keys given, or all of them.

    Example: slog quota remove --user alice producer_byte_rate
    """
    from slog.core.quotas import MATCH_DEFAULT, MATCH_EXACT, QUOTA_KEYS, ComponentFilter

    entity = _entity(user, client_id, default)
    unknown = [k for k in keys or [] if k not in QUOTA_KEYS]
    if unknown:
        fail(f"unknown quota key {unknown[0]!r}", hint=f"keys: {', '.join(QUOTA_KEYS)}",
             code=EXIT_USAGE)
    with client_errors(bootstrap), _admin(bootstrap) as admin:
        exact = [ComponentFilter(kind, MATCH_EXACT if name is not None else MATCH_DEFAULT, name)
                 for kind, name in entity]
        current = admin.describe_client_quotas(exact, strict=True).get(entity, {})
        doomed = {k: v for k, v in current.items() if not keys or k in keys}
        if doomed:
            admin.alter_client_quotas({entity: dict.fromkeys(doomed)})
    emit(_rows({entity: doomed} if doomed else {}), COLUMNS, output)
