"""``slog topic create|delete|list|describe|alter|delete-records``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from slog.cli.common import (
    DEFAULT_BOOTSTRAP,
    EXIT_FAILURE,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    BootstrapOption,
    ChosenTopicsArgument,
    OptionalTopicArgument,
    OptionalTopicsArgument,
    RegexOption,
    TopicArgument,
    TopicsArgument,
    client_errors,
    fail,
    select_names,
)
from slog.cli.output import OutputFormat, OutputOption, emit

app = typer.Typer(help="Create, delete, list, describe and alter topics.", no_args_is_help=True)


def _parse_configs(pairs: list[str] | None) -> dict[str, str]:
    from slog.core.config import ConfigError, parse_key_values, validate_topic_configs

    try:
        parsed = parse_key_values(pairs or [])
        # Checked here with the broker's own table, so a typo is a usage error
        # before anything is sent (and nothing changes).
        validate_topic_configs(parsed)
    except ConfigError as exc:
        fail(str(exc), code=EXIT_USAGE)
    return parsed


def _admin(bootstrap: str) -> Any:
    from slog.client import Admin

    return Admin(bootstrap, client_id="slog-cli")


# Every row of `topic create` has the same fields, whatever happened to it.
_NOT_CREATED: dict[str, Any] = {"partitions": None, "replication_factor": None,
                                "topic_id": None, "error": None}


@app.command()
def create(
    names: TopicsArgument,
    partitions: Annotated[int, typer.Option("--partitions", "-p",
                                            help="Partitions (broker default: 1).")] = -1,
    replication_factor: Annotated[int, typer.Option(
        "--replication-factor", "-r", help="Replicas (default: min(3, brokers)).")] = -1,
    config: Annotated[list[str] | None, typer.Option(
        "--config", "-c", help="Topic config key=value (repeatable).")] = None,
    replica_assignment: Annotated[str | None, typer.Option(
        help="Manual placement, e.g. 1:2,2:3 (partition order).")] = None,
    if_not_exists: Annotated[bool, typer.Option(help="Succeed if it exists.")] = False,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Create topics.

    Example: slog topic create orders -p 6 -r 3 -c retention.ms=86400000
    """
    from slog.client import NewTopic
    from slog.client.errors import ErrorCode, KafkaError

    configs = _parse_configs(config)
    for flag, value in (("--partitions", partitions), ("--replication-factor", replication_factor)):
        if value == 0 or value < -1:
            fail(f"{flag} must be at least 1 (got {value})", code=EXIT_USAGE)
    assignment = None
    if replica_assignment:
        from slog.replication.placement import PlacementError, parse_replica_assignment

        try:
            assignment = parse_replica_assignment(replica_assignment)
        except PlacementError as exc:
            fail(str(exc), code=EXIT_USAGE)
        if partitions != -1 or replication_factor != -1:
            fail("--replica-assignment replaces --partitions and --replication-factor",
                 code=EXIT_USAGE)
    specs = [NewTopic(n, partitions, replication_factor, configs, assignment) for n in names]
    rows: list[dict[str, Any]] = []
    failed = 0
    with client_errors(bootstrap), _admin(bootstrap) as admin:
        created = {}
        try:
            created = admin.create_topics(specs)
        except KafkaError as exc:
            created = exc.results or {}
            errors = getattr(exc, "errors", {exc.item: exc})
            for name, error in errors.items():
                if if_not_exists and error.code == ErrorCode.topic_already_exists:
                    rows.append({**_NOT_CREATED, "topic": name, "status": "exists"})
                    continue
                failed += 1
                rows.append({**_NOT_CREATED, "topic": name, "status": "failed",
                             "error": str(error)})
        for name, topic in created.items():
            rows.append({"topic": name, "status": "created", "partitions": topic.partitions,
                         "replication_factor": topic.replication_factor,
                         "topic_id": topic.topic_id, "error": None})
    rows.sort(key=lambda r: names.index(r["topic"]) if r["topic"] in names else 0)
    emit(rows, ["topic", "status", "partitions", "replication_factor", "error"], output)
    if failed:
        raise typer.Exit(EXIT_FAILURE)


def _chosen_topics(admin: Any, names: list[str] | None, regex: str | None) -> list[str] | None:
    """Named topics plus those matching ``regex``; None for all. A regex never matches an
    internal topic (`-r '.*'` must not delete __consumer_offsets); name those explicitly."""
    if regex is None:
        return select_names(names, None, [])
    return select_names(names, regex, [t.name for t in admin.list_topics()])


@app.command()
def delete(
    names: ChosenTopicsArgument = None,
    regex: RegexOption = None,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Delete topics and all their data.

    Examples:
      slog topic delete orders payments
      slog topic delete -r 'test-.*'
    """
    from slog.client.errors import ErrorCode, KafkaError

    if not names and regex is None:
        fail("name the topics to delete, or pass --regex", code=EXIT_USAGE)
    rows = []
    failures: dict[str, Any] = {}
    with client_errors(bootstrap), _admin(bootstrap) as admin:
        names = _chosen_topics(admin, names, regex) or []
        if not names:
            fail(f"no topic matches {regex!r}", hint="list topics with `slog topic list`",
                 code=EXIT_NOT_FOUND)
        try:
            admin.delete_topics(names)
        except KafkaError as exc:
            failures = getattr(exc, "errors", {exc.item: exc})
    for name in names:
        error = failures.get(name)
        rows.append({"topic": name, "status": "failed" if error else "deleted",
                     "error": str(error) if error else None})
    emit(rows, ["topic", "status", "error"], output)
    if failures:
        all_missing = len(failures) == len(names) and all(
            e.code == ErrorCode.unknown_topic_or_partition for e in failures.values())
        raise typer.Exit(EXIT_NOT_FOUND if all_missing else EXIT_FAILURE)


@app.command("list")
def list_topics(
    internal: Annotated[bool, typer.Option("--internal", help="Include internal topics.")] = False,
    regex: RegexOption = None,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """List topics with their partition counts.

    Examples:
      slog topic list --output json
      slog topic list -r 'orders-.*'
    """
    with client_errors(bootstrap), _admin(bootstrap) as admin:
        topics = admin.list_topics(include_internal=internal)
    if regex is not None:
        keep = set(select_names(None, regex, [t.name for t in topics]) or [])
        topics = [t for t in topics if t.name in keep]
    rows = [{"topic": t.name, "partitions": t.partitions, "internal": t.is_internal,
             "topic_id": t.topic_id} for t in topics]
    emit(rows, ["topic", "partitions", "internal"], output)


# kafka-topics' --describe filters: (partition, the topic's min.insync.replicas) -> shown?
PARTITION_FILTERS: dict[str, Callable[[Any, int], bool]] = {
    "under_replicated": lambda p, min_isr: len(p.isr) < len(p.replicas),
    "unavailable": lambda p, min_isr: p.leader < 0,
    "under_min_isr": lambda p, min_isr: p.leader < 0 or len(p.isr) < min_isr,
    "at_min_isr": lambda p, min_isr: len(p.isr) == min_isr,
}


@app.command()
def describe(
    names: OptionalTopicsArgument = None,
    regex: RegexOption = None,
    under_replicated: Annotated[bool, typer.Option(
        "--under-replicated", help="Only partitions whose ISR is smaller than their replicas.")
    ] = False,
    unavailable: Annotated[bool, typer.Option(
        "--unavailable", help="Only partitions without a leader.")] = False,
    under_min_isr: Annotated[bool, typer.Option(
        "--under-min-isr", help="Only partitions without a leader or whose ISR is below "
                                "min.insync.replicas.")
    ] = False,
    at_min_isr: Annotated[bool, typer.Option(
        "--at-min-isr", help="Only partitions whose ISR is exactly min.insync.replicas.")
    ] = False,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Per partition: leader, replicas, ISR, log start, high watermark, last stable offset
    (where read_committed readers stop: before the oldest open transaction) and log end.

    Examples:
      slog topic describe orders --under-replicated
      slog topic describe -r 'orders.*' -o yaml
    """
    chosen = [name for name, on in (("under_replicated", under_replicated),
                                    ("unavailable", unavailable), ("under_min_isr", under_min_isr),
                                    ("at_min_isr", at_min_isr)) if on]
    if len(chosen) > 1:
        fail("--under-replicated, --unavailable, --under-min-isr and --at-min-isr are "
             "mutually exclusive", code=EXIT_USAGE)
    min_isr: dict[str, int] = {}
    with client_errors(bootstrap), _admin(bootstrap) as admin:
        wanted = _chosen_topics(admin, names, regex)
        if wanted == [] and regex is not None:
            fail(f"no topic matches {regex!r}", hint="list topics with `slog topic list`",
                 code=EXIT_NOT_FOUND)
        topics = admin.describe_topics(wanted)
        if chosen and chosen[0] in ("under_min_isr", "at_min_isr") and topics:
            configs = admin.describe_topic_configs([t.name for t in topics],
                                                   ["min.insync.replicas"])
            min_isr = {t: int(c["min.insync.replicas"].value or 1) for t, c in configs.items()}
    keep = PARTITION_FILTERS[chosen[0]] if chosen else None
    rows = [
        {"topic": t.name, "partition": p.partition, "leader": p.leader if p.leader >= 0 else None,
         "leader_epoch": p.leader_epoch, "replicas": list(p.replicas), "isr": list(p.isr),
         "offline_replicas": list(p.offline_replicas), "log_start_offset": p.log_start_offset,
         "high_watermark": p.high_watermark, "last_stable_offset": p.last_stable_offset,
         "log_end_offset": p.log_end_offset}
        for t in topics for p in t.partitions
        if keep is None or keep(p, min_isr.get(t.name, 1))
    ]
    emit(rows, ["topic", "partition", "leader", "replicas", "isr", "log_start_offset",
                "high_watermark", "last_stable_offset", "log_end_offset"], output)


@app.command()
def alter(
    name: TopicArgument,
    partitions: Annotated[int | None, typer.Option(
        "--partitions", "-p", help="New (larger) partition count.")] = None,
    config: Annotated[list[str] | None, typer.Option(
        "--config", "-c", help="Set a topic config key=value (repeatable).")] = None,
    delete_config: Annotated[list[str] | None, typer.Option(
        "--delete-config", help="Reset a topic config to the default (repeatable).")] = None,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Add partitions or change topic configs.

    Example: slog topic alter orders --partitions 12 -c retention.ms=3600000
    """
    changes = _parse_configs(config)
    if partitions is None and not changes and not delete_config:
        fail("nothing to change: pass --partitions, --config or --delete-config",
             code=EXIT_USAGE)
    with client_errors(bootstrap), _admin(bootstrap) as admin:
        if partitions is not None:
            admin.create_partitions(name, partitions)
        if changes or delete_config:
            admin.alter_configs(name, set=changes, delete=delete_config or [])
        [topic] = admin.describe_topics([name])
    emit([{"topic": name, "partitions": len(topic.partitions), "set": changes,
           "deleted": delete_config or []}], ["topic", "partitions"], output)


def _offsets_to_delete(topic: str | None, partitions: list[int] | None, before: int | None,
                       offsets_json: Path | None) -> dict[tuple[str, int], int]:
    """What to delete: TOPIC -p N --before OFFSET, or an offsets file (never both)."""
    from slog.cli.offsets_file import parse_offsets_json

    if offsets_json is not None:
        if topic is not None or partitions or before is not None:
            fail("--offsets-json replaces TOPIC, --partition and --before", code=EXIT_USAGE)
        try:
            return parse_offsets_json(offsets_json.read_text())
        except (OSError, UnicodeDecodeError) as exc:
            fail(f"cannot read {offsets_json}: {exc}", code=EXIT_USAGE)
        except ValueError as exc:
            fail(f"{offsets_json}: {exc}", code=EXIT_USAGE)
    if topic is None or not partitions or before is None:
        fail("name a TOPIC with --partition and --before, or pass --offsets-json",
             code=EXIT_USAGE)
    if before < -1:
        fail(f"--before must be -1 (the high watermark) or an offset, not {before}",
             code=EXIT_USAGE)
    if any(p < 0 for p in partitions):
        fail("--partition must be 0 or more", code=EXIT_USAGE)
    return {(topic, p): before for p in dict.fromkeys(partitions)}


@app.command("delete-records")
def delete_records(
    topic: OptionalTopicArgument = None,
    partition: Annotated[list[int] | None, typer.Option(
        "--partition", "-p", help="Partition number (repeatable).")] = None,
    before: Annotated[int | None, typer.Option(
        help="Delete every record below this offset; -1: below the high watermark "
             "(all readable records).")] = None,
    offsets_json: Annotated[Path | None, typer.Option(
        "--offsets-json", help='A file as kafka-delete-records takes: {"partitions": '
                               '[{"topic", "partition", "offset"}], "version": 1}.')] = None,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Delete the records below an offset (DeleteRecords): the partition's log start
    moves up to it on every replica, and consumers start there.

    Exit status: 0 when every partition is done, 4 when every failure is an unknown
    topic or partition, 1 for other failures.

    Examples:
      slog topic delete-records orders -p 0 -p 1 --before 1000
      slog topic delete-records orders -p 0 --before -1
      slog topic delete-records --offsets-json offsets.json
    """
    from slog.client import TopicPartition
    from slog.client.errors import ErrorCode, KafkaError

    wanted = _offsets_to_delete(topic, partition, before, offsets_json)
    failures: dict[str, KafkaError] = {}
    with client_errors(bootstrap), _admin(bootstrap) as admin:
        try:
            done = admin.delete_records({TopicPartition(*tp): o for tp, o in wanted.items()})
        except KafkaError as exc:
            done = exc.results or {}
            failures = getattr(exc, "errors", None) or {exc.item: exc}
    rows = []
    for (name, number), offset in wanted.items():
        tp = TopicPartition(name, number)
        error = failures.get(str(tp))
        rows.append({"topic": name, "partition": number, "before": offset,
                     "status": "failed" if error is not None else "deleted",
                     "low_watermark": done.get(tp), "error": str(error) if error else None})
    emit(rows, ["topic", "partition", "before", "status", "low_watermark", "error"], output)
    if failures:
        all_missing = len(failures) == len(wanted) and all(
            e.code == ErrorCode.unknown_topic_or_partition for e in failures.values())
        raise typer.Exit(EXIT_NOT_FOUND if all_missing else EXIT_FAILURE)
