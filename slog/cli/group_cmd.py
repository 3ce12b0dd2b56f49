"""``slog group list|describe|reset-offsets|delete|delete-offsets``, like
kafka-consumer-groups."""

from __future__ import annotations

import datetime
import re
import sys
from typing import Annotated, Any

import typer

from slog.cli.common import (
    DEFAULT_BOOTSTRAP,
    EXIT_FAILURE,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    ArgumentError,
    BootstrapOption,
    ChosenGroupsArgument,
    GroupArgument,
    OptionalGroupsArgument,
    RegexOption,
    client_errors,
    fail,
    select_names,
)
from slog.cli.output import OutputFormat, OutputOption, emit

app = typer.Typer(help="List, describe, reset offsets of and delete consumer groups.",
                  no_args_is_help=True)

INACTIVE = {"Empty", "Dead"}
_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?",
                       re.IGNORECASE)


class _Clients:
    """One cluster connection shared by the group admin and offset lookups."""

    def __init__(self, bootstrap: str):
        from slog.client.cluster import ClusterClient
        from slog.client.group_admin import GroupAdmin

        self.cluster = ClusterClient(bootstrap, client_id="slog-cli")
        self.groups = GroupAdmin(self.cluster)

    def offsets(self, partitions: list[Any], spec: str | int) -> dict[Any, int]:
        """``spec`` ("earliest", "latest" or a timestamp) for each partition; -1 if none."""
        from slog.client.offsets import found_offsets, list_offsets

        if not partitions:
            return {}
        return found_offsets(list_offsets(self.cluster, dict.fromkeys(partitions, spec)))

    def chosen_groups(self, groups: list[str] | None, regex: str | None) -> list[str] | None:
        """Named groups plus those matching ``regex``; None for all."""
        if regex is None:
            return select_names(groups, None, [])
        return select_names(groups, regex, [g.group_id for g in self.groups.list_groups()])

    def close(self) -> None:
        self.cluster.close()

    def __enter__(self) -> _Clients:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- list --------------------------------------------------------------------------------
@app.command("list")
def list_groups(
    state: Annotated[str | None, typer.Option(
        "--state", help="Only groups in these states, e.g. stable,empty.")] = None,
    group_type: Annotated[str | None, typer.Option(
        "--type", help="Only groups of these types: classic, consumer, share, streams.")
    ] = None,
    regex: RegexOption = None,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """List consumer groups with their state and type.

    Examples:
      slog group list --state stable,empty
      slog group list --type classic
      slog group list -r 'billing-.*' -o json
    """
    states = [s.strip() for s in (state or "").split(",") if s.strip()]
    types = [t.strip() for t in (group_type or "").split(",") if t.strip()]
    with client_errors(bootstrap), _Clients(bootstrap) as clients:
        groups = clients.groups.list_groups(states, types)
    if regex is not None:
        keep = set(select_names(None, regex, [g.group_id for g in groups]) or [])
        groups = [g for g in groups if g.group_id in keep]
    emit([{"group": g.group_id, "state": g.state, "type": g.group_type,
           "protocol_type": g.protocol_type, "coordinator": g.coordinator} for g in groups],
         ["group", "state", "type", "protocol_type"], output)


# -- describe ----------------------------------------------------------------------------
def _state_rows(descriptions: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"group": g, "coordinator": f"{d.coordinator.host}:{d.coordinator.port} "
                                        f"({d.coordinator.node_id})",
             "coordinator_id": d.coordinator.node_id, "assignor": d.assignor or None,
             "state": d.state, "members": len(d.members), "type": d.group_type,
             "group_epoch": d.group_epoch, "assignment_epoch": d.assignment_epoch}
            for g, d in descriptions.items()]


def _assignment_text(partitions: list[Any]) -> str:
    by_topic: dict[str, list[str]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(str(tp.partition))
    return " ".join(f"{t}({','.join(p)})" for t, p in by_topic.items()) or "-"


def _member_rows(descriptions: dict[str, Any], verbose: bool) -> list[dict[str, Any]]:
    rows = []
    for g, d in descriptions.items():
        for m in d.members:
            row = {"group": g, "consumer_id": m.member_id,
                   "group_instance_id": m.group_instance_id, "host": m.host,
                   "client_id": m.client_id, "partitions": len(m.assignment),
                   "member_epoch": m.member_epoch}
            if verbose:
                row["assignment"] = _assignment_text(m.assignment)
                row["assigned"] = [{"topic": tp.topic, "partition": tp.partition}
                                   for tp in m.assignment]
                target = m.target_assignment
                row["target"] = None if target is None else _assignment_text(target)
                row["target_assigned"] = None if target is None else [
                    {"topic": tp.topic, "partition": tp.partition} for tp in target]
            rows.append(row)
    return rows


def _offset_rows(clients: _Clients, descriptions: dict[str, Any]) -> list[dict[str, Any]]:
    committed = clients.groups.list_offsets(list(descriptions))
    owners: dict[tuple[str, Any], Any] = {}
    for g, d in descriptions.items():
        for m in d.members:
            for tp in m.assignment:
                owners[(g, tp)] = m
    wanted = {tp for (_, tp) in owners} | {tp for offs in committed.values() for tp in offs}
    ends = clients.offsets(sorted(wanted), "latest")
    rows = []
    for g in descriptions:
        partitions = {tp for (group, tp) in owners if group == g} | set(committed.get(g, {}))
        for tp in sorted(partitions):
            value = committed.get(g, {}).get(tp)
            end = ends.get(tp, -1)
            member = owners.get((g, tp))
            rows.append({
                "group": g, "topic": tp.topic, "partition": tp.partition,
                "current_offset": value.offset if value is not None else None,
                "log_end_offset": end if end >= 0 else None,
                "lag": max(end - value.offset, 0) if value is not None and end >= 0 else None,
                "consumer_id": member.member_id if member else None,
                "host": member.host if member else None,
                "client_id": member.client_id if member else None})
    return rows


@app.command()
def describe(
    groups: OptionalGroupsArgument = None,
    regex: RegexOption = None,
    members: Annotated[bool, typer.Option("--members", help="One row per member.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", help="With --members: the "
                                                            "partitions of each member.")] = False,
    state: Annotated[bool, typer.Option("--state", help="Coordinator, assignor, state and "
                                                        "member count.")] = False,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Describe groups: offsets and lag (default), --members or --state.

    Alias: slog describe-group GROUP...

    Examples:
      slog group describe billing --members --verbose
      slog group describe -r 'billing-.*' --state -o json
    """
    if members and state:
        fail("--members and --state are separate views; pick one", code=EXIT_USAGE)
    if verbose and not members:
        fail("--verbose goes with --members", code=EXIT_USAGE)
    with client_errors(bootstrap), _Clients(bootstrap) as clients:
        groups = clients.chosen_groups(groups, regex)
        if groups is None:
            groups = [g.group_id for g in clients.groups.list_groups()]
        if not groups:
            fail("no consumer group matches" + (f" {regex!r}" if regex else ""),
                 hint="list groups with `slog group list`", code=EXIT_NOT_FOUND)
        found = clients.groups.describe_groups(groups)
        missing = [g for g in groups if found[g].state == "Dead"]
        for g in missing:
            print(f"error: consumer group {g!r} does not exist", file=sys.stderr)
        if missing and len(missing) == len(set(groups)):
            raise typer.Exit(EXIT_NOT_FOUND)
        live = {g: d for g, d in found.items() if g not in missing}
        if state:
            emit(_state_rows(live), ["group", "type", "coordinator", "assignor", "state",
                                     "members", "group_epoch", "assignment_epoch"], output)
        elif members:
            columns = ["group", "consumer_id", "group_instance_id", "host", "client_id",
                       "partitions", "member_epoch"] + \
                (["assignment", "target"] if verbose else [])
            emit(_member_rows(live, verbose), columns, output)
        else:
            emit(_offset_rows(clients, live),
                 ["group", "topic", "partition", "current_offset", "log_end_offset", "lag",
                  "consumer_id", "host", "client_id"], output)


# -- reset-offsets -----------------------------------------------------------------------
def parse_duration(text: str) -> datetime.timedelta:
    """ISO-8601 ``PnDTnHnMnS`` (Kafka's --by-duration), e.g. PT30M or P1DT12H."""
    match = _DURATION.fullmatch(text.strip())
    if not match or text.strip().upper() in ("P", "PT"):
        raise ArgumentError(f"--by-duration takes an ISO-8601 duration like PT30M or P1DT2H, "
                            f"not {text!r}")
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    try:
        return datetime.timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    except OverflowError:
        raise ArgumentError(f"--by-duration {text!r} is out of range") from None


def parse_datetime_ms(text: str) -> int:
    """``YYYY-MM-DDTHH:MM:SS[.sss][zone]`` (local time without a zone) → epoch ms."""
    try:
        return int(datetime.datetime.fromisoformat(text.strip()).timestamp() * 1000)
    except (ValueError, OverflowError, OSError):  # unparsable, or beyond what time_t holds
        raise ArgumentError(f"--to-datetime takes YYYY-MM-DDTHH:MM:SS[.sss][+HH:MM], "
                            f"not {text!r}") from None


def parse_topic_scope(spec: str) -> tuple[str, list[int] | None]:
    """``T`` or ``T:0,2``."""
    topic, _, parts = spec.partition(":")
    if not topic:
        raise ArgumentError(f"--topic takes TOPIC or TOPIC:P,P, not {spec!r}")
    if not parts:
        return topic, None
    try:
        numbers = [int(p) for p in parts.split(",") if p.strip()]
    except ValueError:
        raise ArgumentError(f"partitions in {spec!r} must be numbers") from None
    if any(n < 0 for n in numbers):
        raise ArgumentError(f"partitions in {spec!r} must not be negative")
    return topic, numbers


def _scope(clients: _Clients, group: str, topics: list[str], all_topics: bool) -> list[Any]:
    from slog.client.types import TopicPartition

    if all_topics:
        return sorted(clients.groups.list_offsets([group])[group])
    partitions = []
    for spec in topics:
        topic, numbers = parse_topic_scope(spec)
        meta = clients.cluster.refresh_metadata([topic]).topics.get(topic)
        if meta is None or meta.error_code or not meta.partitions:
            fail(f"topic {topic!r} does not exist", code=EXIT_NOT_FOUND)
        for number in numbers if numbers is not None else sorted(meta.partitions):
            if number not in meta.partitions:
                fail(f"{topic} has no partition {number}", code=EXIT_NOT_FOUND)
            partitions.append(TopicPartition(topic, number))
    return partitions


def _targets(clients: _Clients, group: str, partitions: list[Any], target: tuple[str, Any]
             ) -> dict[Any, int]:
    kind, value = target
    earliest = clients.offsets(partitions, "earliest")
    latest = clients.offsets(partitions, "latest")
    if kind in ("earliest", "latest"):
        return earliest if kind == "earliest" else latest
    if kind in ("datetime", "duration"):
        found = clients.offsets(partitions, value)
        return {tp: found[tp] if found[tp] >= 0 else latest[tp] for tp in partitions}
    if kind == "offset":
        wanted = dict.fromkeys(partitions, value)
    else:  # shift
        current = clients.groups.list_offsets([group], partitions)[group]
        committed = {tp: c.offset for tp, c in current.items() if c is not None}
        lacking = [str(tp) for tp in partitions if tp not in committed]
        if lacking:
            raise ArgumentError(f"cannot shift {', '.join(lacking)}: nothing is committed there")
        wanted = {tp: committed[tp] + value for tp in partitions}
    return {tp: min(max(o, earliest[tp]), latest[tp]) for tp, o in wanted.items()}


@app.command("reset-offsets")
def reset_offsets(
    group: GroupArgument,
    topic: Annotated[list[str] | None, typer.Option(
        "--topic", "-t", help="TOPIC or TOPIC:P,P (repeatable).")] = None,
    all_topics: Annotated[bool, typer.Option(
        "--all-topics", help="Every partition the group has offsets for.")] = False,
    to_earliest: Annotated[bool, typer.Option("--to-earliest")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest")] = False,
    to_offset: Annotated[int | None, typer.Option("--to-offset")] = None,
    shift_by: Annotated[int | None, typer.Option("--shift-by", help="+N or -N from the "
                                                                    "committed offset.")] = None,
    to_datetime: Annotated[str | None, typer.Option(
        "--to-datetime", help="First offset at or after YYYY-MM-DDTHH:MM:SS.")] = None,
    by_duration: Annotated[str | None, typer.Option(
        "--by-duration", help="First offset at or after now minus PnDTnHnMnS.")] = None,
    execute: Annotated[bool, typer.Option("--execute", help="Apply (default: dry run).")
                       ] = False,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Move a group's committed offsets (a dry run unless --execute).

    The group must be inactive: no members.

    Example: slog group reset-offsets billing --topic orders:0,1 --shift-by -100 --execute
    """
    if not group.strip():
        fail("the group id must not be empty", code=EXIT_USAGE)
    if bool(topic) == all_topics:
        fail("give the scope: --topic TOPIC[:P,P] (repeatable) or --all-topics", code=EXIT_USAGE)
    targets = [("earliest", None) if to_earliest else None,
               ("latest", None) if to_latest else None,
               ("offset", to_offset) if to_offset is not None else None,
               ("shift", shift_by) if shift_by is not None else None,
               ("datetime", to_datetime) if to_datetime is not None else None,
               ("duration", by_duration) if by_duration is not None else None]
    chosen = [t for t in targets if t is not None]
    if len(chosen) != 1:
        fail("give exactly one of --to-earliest, --to-latest, --to-offset, --shift-by, "
             "--to-datetime, --by-duration", code=EXIT_USAGE)
    target = chosen[0]
    try:
        if to_datetime is not None:  # the one target chosen
            target = ("datetime", parse_datetime_ms(to_datetime))
        elif by_duration is not None:
            now = datetime.datetime.now(datetime.UTC)
            try:
                start = now - parse_duration(by_duration)
            except OverflowError:
                raise ArgumentError(f"--by-duration {by_duration!r} reaches back before year 1"
                                    ) from None
            target = ("duration", int(start.timestamp() * 1000))
    except ValueError as exc:
        fail(str(exc), code=EXIT_USAGE)
    with client_errors(bootstrap), _Clients(bootstrap) as clients:
        state = clients.groups.describe_groups([group])[group].state
        if state not in INACTIVE:
            fail(f"offsets of group {group!r} can only be reset while it is inactive; "
                 f"it is {state}", hint="stop its consumers first", code=EXIT_FAILURE)
        partitions = _scope(clients, group, topic or [], all_topics)
        new = _targets(clients, group, partitions, target)
        if execute and new:
            clients.groups.alter_offsets(group, new)
    emit([{"group": group, "topic": tp.topic, "partition": tp.partition, "new_offset": o}
          for tp, o in sorted(new.items())], ["group", "topic", "partition", "new_offset"],
         output)
    if not execute:
        print("dry run: nothing changed; add --execute to apply", file=sys.stderr)


# -- delete ------------------------------------------------------------------------------
@app.command()
def delete(
    groups: ChosenGroupsArgument = None,
    regex: RegexOption = None,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Delete inactive groups and their committed offsets.

    Examples:
      slog group delete billing audit
      slog group delete -r 'test-.*'
    """
    from slog.client.errors import ErrorCode, KafkaError

    if not groups and regex is None:
        fail("name the groups to delete, or pass --regex", code=EXIT_USAGE)
    failures: dict[str | None, KafkaError] = {}
    with client_errors(bootstrap), _Clients(bootstrap) as clients:
        groups = clients.chosen_groups(groups, regex) or []
        if not groups:
            fail(f"no consumer group matches {regex!r}",
                 hint="list groups with `slog group list`", code=EXIT_NOT_FOUND)
        try:
            clients.groups.delete_groups(groups)
        except KafkaError as exc:
            if exc.errors:
                failures.update(exc.errors)
            else:
                failures[exc.item] = exc
    emit([{"group": g, "status": "failed" if g in failures else "deleted",
           "error": str(failures[g]) if g in failures else None} for g in groups],
         ["group", "status", "error"], output)
    if failures:
        all_missing = len(failures) == len(set(groups)) and all(
            e.code == ErrorCode.group_id_not_found for e in failures.values())
        raise typer.Exit(EXIT_NOT_FOUND if all_missing else EXIT_FAILURE)


@app.command("delete-offsets")
def delete_offsets(
    group: GroupArgument,
    topic: Annotated[list[str], typer.Option(
        "--topic", "-t", help="TOPIC or TOPIC:P,P (repeatable).")],
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Delete a group's committed offsets of some partitions (OffsetDelete).

    The group must be inactive, or no longer subscribed to those topics: a
    partition of a topic its members still consume fails alone (exit 1).

    Example: slog group delete-offsets billing --topic old-orders
    """
    from slog.client.errors import KafkaError

    if not group.strip():
        fail("the group id must not be empty", code=EXIT_USAGE)
    failures: dict[str, KafkaError] = {}
    with client_errors(bootstrap), _Clients(bootstrap) as clients:
        partitions = list(dict.fromkeys(_scope(clients, group, topic, all_topics=False)))
        try:
            clients.groups.delete_offsets(group, partitions)
        except KafkaError as exc:
            if not exc.errors:  # the whole request (no such group): the CLI's error table
                raise
            failures.update(exc.errors)
    rows = []
    for tp in partitions:
        error = failures.get(f"{tp.topic}-{tp.partition}")
        rows.append({"group": group, "topic": tp.topic, "partition": tp.partition,
                     "status": "failed" if error else "deleted",
                     "error": str(error) if error else None})
    emit(rows, ["group", "topic", "partition", "status", "error"], output)
    if failures:
        raise typer.Exit(EXIT_FAILURE)
