"""``slog get-offsets TOPIC...``: partition offsets by time, like ``kafka-get-offsets.sh``."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from slog.cli.common import (
    DEFAULT_BOOTSTRAP,
    EXIT_FAILURE,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    BootstrapOption,
    OptionalTopicsArgument,
    RegexOption,
    client_errors,
    fail,
    topics_by_name_or_regex,
)
from slog.cli.output import OutputFormat, OutputOption, emit

COLUMNS = ["topic", "partition", "offset", "timestamp"]
NAMED_TIMES = ("earliest", "latest", "max-timestamp")


def parse_time(text: str) -> str | int:
    """``earliest``, ``latest``, ``max-timestamp`` (also Kafka's -2/-1/-3) or a time in ms."""
    by_number = {"-2": "earliest", "-1": "latest", "-3": "max_timestamp"}
    lowered = text.strip().lower()
    if lowered in NAMED_TIMES:
        return lowered.replace("-", "_")
    if lowered in by_number:
        return by_number[lowered]
    if lowered.isdigit():
        return int(lowered)
    fail(f"--time must be earliest, latest, max-timestamp or a timestamp in ms, not {text!r}",
         code=EXIT_USAGE)


def get_offsets(
    topics: OptionalTopicsArgument = None,
    regex: RegexOption = None,
    time: Annotated[str, typer.Option(
        "--time", "-t",
        help="earliest, latest, max-timestamp, or a timestamp in ms (the first offset at or "
             "after it; -1 when there is none).")] = "latest",
    partition: Annotated[list[int] | None, typer.Option(
        "--partition", "-p", min=0, help="Only this partition (repeatable).")] = None,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Offsets of topic partitions: the log start, the end, or the first at a time.

    Without topic names or --regex: every topic. Exit 4 when no topic
    exists, 1 when only some do or a partition fails.

    Examples:
      slog get-offsets orders
      slog get-offsets orders payments --time earliest -o json
      slog get-offsets orders --time 1700000000000 --partition 0
      slog get-offsets -r 'orders-.*' --time earliest
    """
    from slog.client import Admin, TopicPartition
    from slog.client.errors import KafkaError

    spec = parse_time(time)
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    with client_errors(bootstrap), Admin(bootstrap, client_id="slog-cli") as admin:
        topics = topics_by_name_or_regex(admin, topics, regex)
        meta = admin.cluster.refresh_metadata(topics) if topics else None
        wanted: list[Any] = []
        missing = []
        for name in topics:
            topic = meta.topics.get(name) if meta else None
            if topic is None or topic.error_code:
                missing.append(name)
                continue
            chosen = sorted(topic.partitions) if not partition else \
                [p for p in dict.fromkeys(partition) if p in topic.partitions]
            for p in (partition or []):
                if p not in topic.partitions:
                    problems.append(f"topic {name!r} has no partition {p}")
            wanted += [TopicPartition(name, p) for p in chosen]
        for name in missing:
            print(f"error: topic {name!r} does not exist", file=sys.stderr)
        results: dict[Any, Any] = {}
        if wanted:
            try:
                results = admin.list_offsets(dict.fromkeys(wanted, spec))
            except KafkaError as exc:
                results = exc.results or {}
                problems += [str(e) for e in getattr(exc, "errors", {exc.item: exc}).values()]
    for tp in wanted:
        found = results.get(tp)
        if found is None:
            continue
        rows.append({"topic": tp.topic, "partition": tp.partition, "offset": found.offset,
                     "timestamp": found.timestamp if found.timestamp >= 0 else None,
                     "leader_epoch": found.leader_epoch if found.leader_epoch >= 0 else None})
    emit(rows, COLUMNS, output)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if not topics and regex is not None:
        print(f"error: no topic matches {regex!r}", file=sys.stderr)
        raise typer.Exit(EXIT_NOT_FOUND)
    if missing and len(missing) == len(topics):
        if output is OutputFormat.table:
            print("hint: list topics with `slog topic list`", file=sys.stderr)
        raise typer.Exit(EXIT_NOT_FOUND)
    if missing or problems:
        raise typer.Exit(EXIT_FAILURE)
