"""``slog config show``: the CLI's own settings and where each one came from;
``slog config describe|alter``: the cluster's broker, topic and group configs.

A target is one broker (``--broker ID``, its dynamic and static settings), the
cluster-wide dynamic default of every broker (``--broker-default``), a topic
(``--topic NAME``) or a group (``--group ID``), Kafka's BROKER, TOPIC and GROUP
config resources.
"""

from __future__ import annotations

import os
from typing import Annotated, Any

import typer

from slog.cli.common import (
    DEFAULT_BOOTSTRAP,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    BootstrapOption,
    DataDirOption,
    client_errors,
    complete_topics,
    default_data_dir,
    fail,
)
from slog.cli.output import OutputFormat, OutputOption, emit

app = typer.Typer(help="The CLI's settings (show) and the cluster's broker, topic and group "
                       "configs (describe, alter).", no_args_is_help=True)

BrokerOption = Annotated[int | None, typer.Option(
    "--broker", min=0, help="This broker's configs (dynamic, static and defaults).")]
BrokerDefaultOption = Annotated[bool, typer.Option(
    "--broker-default", help="The cluster-wide dynamic default of every broker.")]
TopicOption = Annotated[str | None, typer.Option(
    "--topic", "-t", help="A topic's configs.", autocompletion=complete_topics)]
GroupOption = Annotated[str | None, typer.Option(
    "--group", "-g", help="A consumer group's configs (its session timeout and heartbeat "
    "interval; the group need not exist yet).")]


def _source(ctx: typer.Context, name: str, profile_source: str) -> str:
    from slog.cli.config import SETTINGS

    found = ctx.get_parameter_source(name)
    if found is None or found.name == "COMMANDLINE":
        return "flag"
    if found.name == "ENVIRONMENT":
        return f"env {SETTINGS[name]}"
    if found.name == "DEFAULT_MAP":
        return profile_source
    return "default"


@app.command()
def show(
    ctx: typer.Context,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    data_dir: DataDirOption = None,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Print each setting, its value and its source: flag, env, profile, or default.

    Precedence: flag > environment (SLOG_BOOTSTRAP, SLOG_DATA_DIR) > the
    profile of the config file > default. The config file is $SLOG_CONFIG,
    else ./slog.toml, else $XDG_CONFIG_HOME/slog/config.toml
    (~/.config/slog/config.toml). Its format:

    profile = "local"            # the default profile (optional)

    [profiles.local]

    bootstrap = "127.0.0.1:9092"

    data_dir = "~/slog-data"

    Examples:
      slog config show
      slog --profile staging config show -o json
    """
    from slog.cli.config import PROFILE_ENV, Profile, config_candidates

    loaded: Profile = ctx.find_root().meta.get("slog.profile") or Profile()
    root_source = ctx.find_root().get_parameter_source("profile")
    profile_from = "flag" if root_source is None or \
        root_source.name == "COMMANDLINE" else \
        f"env {PROFILE_ENV}" if root_source.name == "ENVIRONMENT" else \
        f"config ({loaded.path})"
    rows: list[dict[str, str | None]] = [
        {"setting": "config_file",
         "value": str(loaded.path) if loaded.path else None,
         "source": "found" if loaded.path else
         "none of " + ", ".join(str(p) for p in config_candidates())},
        {"setting": "profile", "value": loaded.name,
         "source": profile_from if loaded.name else "default"},
        {"setting": "bootstrap", "value": bootstrap,
         "source": _source(ctx, "bootstrap", loaded.source())},
        {"setting": "data_dir",
         "value": str((data_dir or default_data_dir()).expanduser()),
         "source": _source(ctx, "data_dir", loaded.source()) if data_dir is not None else
         "env XDG_DATA_HOME" if os.environ.get("XDG_DATA_HOME") else "default"},
    ]
    emit(rows, ["setting", "value", "source"], output)


# -- cluster configs (Kafka's BROKER, TOPIC and GROUP resources) --------------------------
def _target(broker: int | None, broker_default: bool, topic: str | None,
            group: str | None) -> tuple[str, int | str | None]:
    """("broker", id) | ("broker", None) for the default | ("topic", name) |
    ("group", id); exactly one."""
    chosen = [(kind, value) for kind, value, given in (
        ("broker", broker, broker is not None), ("broker", None, broker_default),
        ("topic", topic, topic is not None), ("group", group, group is not None)) if given]
    if len(chosen) != 1:
        fail("name one target: --broker ID, --broker-default, --topic NAME or --group ID",
             code=EXIT_USAGE)
    return chosen[0]


def _admin(bootstrap: str) -> Any:
    from slog.client import Admin

    return Admin(bootstrap, client_id="slog-cli")


def _check_broker_known(admin: Any, broker_id: int) -> None:
    brokers = admin.cluster.refresh_metadata([]).brokers
    if broker_id not in brokers:
        fail(f"broker {broker_id} is not in the cluster",
             hint=f"live brokers: {', '.join(map(str, sorted(brokers))) or 'none'}",
             code=EXIT_NOT_FOUND)


@app.command()
def describe(
    broker: BrokerOption = None,
    broker_default: BrokerDefaultOption = False,
    topic: TopicOption = None,
    group: GroupOption = None,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Print the configs of a broker, of the cluster-wide broker default, of a topic or of
    a group, with the source of each value.

    Sources, highest precedence first: DYNAMIC_TOPIC_CONFIG or GROUP_CONFIG (the topic's
    or group's own), DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
    STATIC_BROKER_CONFIG (--config at start-up), DEFAULT_CONFIG. read_only: only a
    restart can change it.

    Examples:
      slog config describe --broker 1
      slog config describe --broker-default -o json
      slog config describe --topic orders
      slog config describe --group billing
    """
    kind, name = _target(broker, broker_default, topic, group)
    with client_errors(bootstrap), _admin(bootstrap) as admin:
        if kind == "topic":
            entries = admin.describe_configs(str(name))
        elif kind == "group":
            entries = admin.describe_group_configs(str(name))
        else:
            if name is not None:
                _check_broker_known(admin, int(name))
            entries = admin.describe_broker_configs(None if name is None else int(name))
    rows = [{"name": e.name, "value": e.value, "source": e.source, "read_only": e.read_only}
            for _, e in sorted(entries.items())]
    emit(rows, ["name", "value", "source"], output)


@app.command()
def alter(
    broker: BrokerOption = None,
    broker_default: BrokerDefaultOption = False,
    topic: TopicOption = None,
    group: GroupOption = None,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="Set a config key=value (repeatable).")] = None,
    delete: Annotated[list[str] | None, typer.Option(
        "--delete", help="Remove a config, back to the next source down (repeatable).")
    ] = None,
    validate_only: Annotated[bool, typer.Option(
        "--validate-only", help="Only check the change with the controller.")] = False,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Change configs of a broker, of the cluster-wide broker default, of a topic or of a
    group, without a restart.

    Broker targets take only the settings Kafka lets you change at runtime
    (the log.* topic defaults, message.max.bytes, min.insync.replicas,
    unclean.leader.election.enable, compression.type, max.connections,
    log.cleaner.backoff.ms); the rest need --config at start-up. A group takes
    consumer.session.timeout.ms and consumer.heartbeat.interval.ms, within the
    brokers' group.consumer.min/max.* bounds (consumer-protocol groups only).

    Examples:
      slog config alter --broker-default --set log.retention.ms=86400000
      slog config alter --broker 2 --set max.connections=500 --delete log.segment.bytes
      slog config alter --topic orders --set cleanup.policy=compact
      slog config alter --group billing --set consumer.session.timeout.ms=50000
    """
    from slog.core.config import (
        ConfigError,
        parse_key_values,
        validate_dynamic_broker_config,
        validate_topic_configs,
    )
    from slog.core.group_config import GROUP_CONFIGS

    kind, name = _target(broker, broker_default, topic, group)
    deletes = list(dict.fromkeys(delete or []))
    try:
        changes = parse_key_values(set_ or [])
        # Checked here with the broker's own tables: a typo is a usage error and
        # nothing is sent.
        if kind == "topic":
            validate_topic_configs({**changes, **dict.fromkeys(deletes)})
        elif kind == "group":
            unknown = sorted((set(changes) | set(deletes)) - GROUP_CONFIGS.keys())
            if unknown:  # the bounds are the brokers' to check
                raise ConfigError(f"unknown group config {unknown[0]!r}: a group takes "
                                  + ", ".join(sorted(GROUP_CONFIGS)))
        else:
            for key, value in changes.items():
                validate_dynamic_broker_config(key, value, per_broker=name is not None)
    except ConfigError as exc:
        fail(str(exc), code=EXIT_USAGE)
    if not changes and not deletes:
        fail("nothing to change: pass --set key=value or --delete key", code=EXIT_USAGE)
    if set(changes) & set(deletes):
        fail(f"both set and deleted: {', '.join(sorted(set(changes) & set(deletes)))}",
             code=EXIT_USAGE)
    with client_errors(bootstrap), _admin(bootstrap) as admin:
        if kind == "topic":
            admin.alter_configs(str(name), set=changes, delete=deletes,
                                validate_only=validate_only)
        elif kind == "group":
            admin.alter_group_configs(str(name), set=changes, delete=deletes,
                                      validate_only=validate_only)
        else:
            if name is not None:
                _check_broker_known(admin, int(name))
            admin.alter_broker_configs(None if name is None else int(name), set=changes,
                                       delete=deletes, validate_only=validate_only)
    status = "valid" if validate_only else None
    rows: list[dict[str, str | None]] = [
        {"name": k, "value": v, "action": status or "set"} for k, v in changes.items()]
    rows += [{"name": k, "value": None, "action": status or "deleted"} for k in deletes]
    emit(rows, ["name", "value", "action"], output)
