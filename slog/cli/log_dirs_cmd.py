"""``slog log-dirs [TOPIC...]``: each replica's size on disk, like ``kafka-log-dirs.sh
--describe`` (DescribeLogDirs, sent to every broker at once)."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from slog.cli.common import (
    DEFAULT_BOOTSTRAP,
    EXIT_FAILURE,
    EXIT_NOT_FOUND,
    BootstrapOption,
    OptionalTopicsArgument,
    RegexOption,
    client_errors,
    fail,
    topics_by_name_or_regex,
)
from slog.cli.output import OutputFormat, OutputOption, emit

COLUMNS = ["broker", "log_dir", "topic", "partition", "size", "offset_lag"]


def log_dirs(
    topics: OptionalTopicsArgument = None,
    regex: RegexOption = None,
    broker: Annotated[list[int] | None, typer.Option(
        "--broker", min=0, help="Only this broker's replicas (repeatable).")] = None,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Each replica's size in bytes and its offset lag (how far its log end is behind
    the high watermark its broker knows), per broker and log directory.

    Without topic names or --regex: every topic but the internal ones. Exit 4 when a named topic or
    broker does not exist, 1 when a broker could not answer (the others' rows
    are still printed).

    Examples:
      slog log-dirs
      slog log-dirs orders --broker 2 -o json
    """
    from slog.client import Admin
    from slog.client.errors import KafkaError

    failures: dict[str, KafkaError] = {}
    with client_errors(bootstrap), Admin(bootstrap, client_id="slog-cli") as admin:
        chosen = set(topics_by_name_or_regex(admin, topics, regex))
        meta = admin.cluster.refresh_metadata(chosen)
        missing = sorted(n for n in chosen if (t := meta.topics.get(n)) is None or t.error_code)
        if missing or (regex is not None and not chosen):
            fail(f"no such topic: {', '.join(missing)}" if missing
                 else f"no topic matches {regex!r}",
                 hint="list topics with `slog topic list`", code=EXIT_NOT_FOUND)
        known = sorted(meta.brokers)
        unknown = sorted(set(broker or []) - set(known))
        if unknown:
            fail(f"no such broker: {', '.join(map(str, unknown))} (brokers: "
                 f"{', '.join(map(str, known))})", code=EXIT_NOT_FOUND)
        try:
            found = admin.describe_log_dirs(sorted(set(broker)) if broker else known)
        except KafkaError as exc:
            found = exc.results or {}
            failures = exc.errors or {exc.item or "": exc}
    rows: list[dict[str, Any]] = [
        {"broker": broker_id, "log_dir": replica.log_dir, "topic": tp.topic,
         "partition": tp.partition, "size": replica.size, "offset_lag": replica.offset_lag}
        for broker_id, replicas in sorted(found.items())
        for tp, replica in sorted(replicas.items()) if tp.topic in chosen]
    emit(rows, COLUMNS, output)
    for item, error in failures.items():
        print(f"{item}: {error}", file=sys.stderr)
    if failures:
        raise typer.Exit(EXIT_FAILURE)
