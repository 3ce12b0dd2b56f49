"""``slog elect-leaders`` (and its alias ``slog preferred-leader-election``).

Preferred elections move leadership back to each partition's first replica
when it is alive and in sync; unclean elections give an offline partition any
live replica as leader, losing what only the old in-sync replicas had.
"""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from slog.cli.common import (
    DEFAULT_BOOTSTRAP,
    EXIT_FAILURE,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    BootstrapOption,
    RegexOption,
    client_errors,
    complete_topics,
    fail,
    select_names,
    topic_argument,
)
from slog.cli.output import OutputFormat, OutputOption, emit

if TYPE_CHECKING:
    from slog.client import Admin
    from slog.client.types import TopicPartition


class ElectionType(StrEnum):
    preferred = "preferred"
    unclean = "unclean"


AllOption = Annotated[bool, typer.Option(
    "--all", help="Every partition of every topic.")]
TopicsArgument = Annotated[list[str] | None, topic_argument(
    "Topic names (all their partitions unless --partition).")]
TopicOption = Annotated[list[str] | None, typer.Option(
    "--topic", "-t", help="A topic, like the TOPIC arguments (repeatable; kept for "
                          "kafka-leader-election compatibility).",
    autocompletion=complete_topics, show_default=False)]
PartitionOption = Annotated[int | None, typer.Option(
    "--partition", "-p", min=0, help="Only this partition of each topic named or matched.")]
PlanOption = Annotated[Path | None, typer.Option(
    "--plan", help='JSON file: {"partitions": [{"topic": "t", "partition": 0}, ...]} '
                   "(a reassignment plan works too).")]
NOT_NEEDED = "NOT NEEDED"


def _partitions_from_file(path: Path) -> list[TopicPartition]:
    from slog.client.types import TopicPartition

    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror or exc}", code=EXIT_USAGE)
    except json.JSONDecodeError as exc:
        fail(f"{path} is not valid JSON: {exc}", code=EXIT_USAGE)
    entries = data.get("partitions") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        fail(f'{path}: expected {{"partitions": [{{"topic": ..., "partition": ...}}, ...]}}',
             code=EXIT_USAGE)
    found: list[TopicPartition] = []
    for index, entry in enumerate(entries):
        topic = entry.get("topic") if isinstance(entry, dict) else None
        number = entry.get("partition") if isinstance(entry, dict) else None
        if not isinstance(topic, str) or not isinstance(number, int) or isinstance(number, bool):
            fail(f"{path}: partitions[{index}] needs a string topic and an integer partition",
                 code=EXIT_USAGE)
        tp = TopicPartition(topic, number)
        if tp in found:
            fail(f"{path}: {tp} appears more than once", code=EXIT_USAGE)
        found.append(tp)
    return found


def _topic_partitions(admin: Admin, topics: list[str]) -> list[TopicPartition]:
    """Every partition of ``topics``; an unknown topic is an UNKNOWN_TOPIC_OR_PARTITION error."""
    from slog.client.errors import UnknownTopicOrPartitionError
    from slog.client.types import TopicPartition

    metadata = admin.cluster.refresh_metadata(topics).topics
    wanted = []
    for topic in topics:
        found = metadata.get(topic)
        if found is None or found.error_code or not found.partitions:
            raise UnknownTopicOrPartitionError(item=topic)
        wanted += [TopicPartition(topic, p) for p in sorted(found.partitions)]
    return wanted


def _chosen_topics(admin: Admin, names: list[str], regex: str | None) -> list[str]:
    """``names`` plus the (non-internal) topics ``regex`` matches; exit 4 if that is none."""
    if regex is None:
        return list(dict.fromkeys(names))
    chosen = select_names(names, regex, [t.name for t in admin.list_topics()]) or []
    if not chosen:
        fail(f"no topic matches {regex!r}", hint="list topics with `slog topic list`",
             code=EXIT_NOT_FOUND)
    return chosen


def run_election(election: ElectionType, all_partitions: bool, topics: list[str],
                 regex: str | None, partition: int | None, plan: Path | None, bootstrap: str,
                 output: OutputFormat) -> None:
    """Elect for ``--all``, the ``topics`` and ``regex`` matches (optionally one
    ``partition`` of each), or the partitions of a ``plan`` file."""
    from slog.client import Admin
    from slog.client.admin import ElectionResult
    from slog.client.errors import ErrorCode, KafkaError
    from slog.client.types import TopicPartition

    by_topic = bool(topics) or regex is not None
    if sum((all_partitions, by_topic, plan is not None)) != 1:
        fail("pass exactly one of --all, topic names (or --topic/--regex) and --plan",
             code=EXIT_USAGE)
    if partition is not None and not by_topic:
        fail("--partition needs topic names (or --topic/--regex)", code=EXIT_USAGE)
    if regex is not None:
        select_names(None, regex, [])  # a bad --regex is a usage error before connecting
    listed = _partitions_from_file(plan) if plan is not None else None
    failures: dict[str, KafkaError] = {}
    with client_errors(bootstrap), Admin(bootstrap, client_id="slog-cli") as admin:
        wanted = listed
        if by_topic:
            chosen = _chosen_topics(admin, topics, regex)
            wanted = [TopicPartition(t, partition) for t in chosen] if partition is not None \
                else _topic_partitions(admin, chosen)
        try:
            result = admin.elect_leaders(election.value, wanted)
        except KafkaError as exc:
            if not isinstance(exc.results, ElectionResult):
                raise
            result, failures = exc.results, exc.errors
    rows: list[dict[str, Any]] = [
        {"topic": tp.topic, "partition": tp.partition, "result": outcome, "error": None}
        for outcome, tps in (("ELECTED", result.elected), (NOT_NEEDED, result.not_needed))
        for tp in tps]
    rows += [{"topic": topic_name, "partition": int(number), "result": error.name,
              "error": error.message or None}
             for item, error in failures.items()
             for topic_name, number in [item.rsplit("-", 1)]]
    rows.sort(key=lambda r: (r["topic"], r["partition"]))
    emit(rows, ["topic", "partition", "result", "error"], output)
    if not rows and output is OutputFormat.table:
        print("no partition needed a leader election", file=sys.stderr)
    if failures:
        unknown = all(e.code == ErrorCode.unknown_topic_or_partition for e in failures.values())
        raise typer.Exit(EXIT_NOT_FOUND if unknown and len(failures) == len(rows)
                         else EXIT_FAILURE)


def elect_leaders(
    election: Annotated[ElectionType, typer.Option(
        "--type", help="preferred: back to the first replica; unclean: any live replica "
                       "of an offline partition (may lose data).", show_default=False)],
    names: TopicsArgument = None,
    all_partitions: AllOption = False,
    topic: TopicOption = None,
    regex: RegexOption = None,
    partition: PartitionOption = None,
    plan: PlanOption = None,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Elect partition leaders; reports ELECTED, NOT NEEDED or the error per partition.

    Choose the partitions with exactly one of: --all, topic names (and/or --regex),
    or --plan. Exit 1 if any partition failed for another reason than NOT NEEDED.

    Alias: slog preferred-leader-election (= --type preferred)

    Examples:
      slog elect-leaders --type preferred --all
      slog elect-leaders --type preferred orders payments
      slog elect-leaders --type unclean -r 'orders-.*' -p 0
    """
    run_election(election, all_partitions, [*(names or []), *(topic or [])], regex, partition,
                 plan, bootstrap, output)


def preferred_leader_election(
    names: TopicsArgument = None,
    all_partitions: AllOption = False,
    topic: TopicOption = None,
    regex: RegexOption = None,
    partition: PartitionOption = None,
    plan: PlanOption = None,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Alias of `slog elect-leaders --type preferred`.

    Examples:
      slog preferred-leader-election orders
      slog preferred-leader-election -r 'orders-.*'
    """
    run_election(ElectionType.preferred, all_partitions, [*(names or []), *(topic or [])],
                 regex, partition, plan, bootstrap, output)
