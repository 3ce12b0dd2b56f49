"""``slog consume TOPIC...``: print records, like ``kcat -C``."""

from __future__ import annotations

import re
import sys
from enum import StrEnum
from typing import Annotated, Any

import typer

from slog.cli.common import (
    DEFAULT_BOOTSTRAP,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    BootstrapOption,
    IsolationLevel,
    TopicsArgument,
    client_errors,
    fail,
)
from slog.cli.output import LongOutputOption, OutputFormat, print_record, until_stdout_closes

IsolationOption = Annotated[IsolationLevel, typer.Option(
    "--isolation-level", help="read_committed: only committed transactions, up to the "
    "last stable offset (the end -e waits for).")]

# kcat's tokens; %v is slog's name for the value and %s kcat's.
_TOKEN = re.compile(r"%[kvsptoThKS%]|\\[nt\\]")


def _text(data: bytes | None) -> str:
    return "" if data is None else data.decode("utf-8", errors="replace")


def render(fmt: str, record: Any) -> str:
    """Expand kcat-style tokens for one record."""

    def expand(match: re.Match[str]) -> str:
        token = match.group(0)
        values = {
            "%k": lambda: _text(record.key), "%v": lambda: _text(record.value),
            "%s": lambda: _text(record.value), "%p": lambda: str(record.partition),
            "%t": lambda: record.topic, "%o": lambda: str(record.offset),
            "%T": lambda: str(record.timestamp),
            "%h": lambda: ",".join(f"{k}={_text(v)}" for k, v in record.headers),
            "%K": lambda: str(len(record.key) if record.key is not None else -1),
            "%S": lambda: str(len(record.value) if record.value is not None else -1),
            "%%": lambda: "%", "\\n": lambda: "\n", "\\t": lambda: "\t", "\\\\": lambda: "\\",
        }
        return values[token]()

    return _TOKEN.sub(expand, fmt)


def as_json(record: Any) -> dict[str, Any]:
    return {
        "topic": record.topic, "partition": record.partition, "offset": record.offset,
        "timestamp": record.timestamp,
        "key": None if record.key is None else _text(record.key),
        "value": None if record.value is None else _text(record.value),
        "headers": [{"key": k, "value": None if v is None else _text(v)}
                    for k, v in record.headers],
    }


def parse_offset(text: str) -> tuple[str, int]:
    """``beginning``, ``end``, ``N``, ``-N`` (N before the end) or ``@timestamp_ms``."""
    if text in ("beginning", "end"):
        return text, 0
    if text.startswith("@") and text[1:].isdigit():
        return "timestamp", int(text[1:])
    if text.lstrip("-").isdigit():
        number = int(text)
        return ("relative", -number) if number < 0 else ("absolute", number)
    raise ValueError(f"--offset must be beginning, end, N, -N or @timestamp, not {text!r}")


def _start_positions(consumer: Any, tps: list[Any], mode: str, value: int,
                     ends: dict[Any, int], starts: dict[Any, int]) -> dict[Any, int]:
    from slog.client.offsets import list_offsets
    from slog.client.types import OffsetAndTimestamp

    if mode == "beginning":
        return dict(starts)
    if mode == "end":
        return dict(ends)
    if mode == "absolute":
        return {tp: min(max(value, starts[tp]), ends[tp]) for tp in tps}
    if mode == "relative":
        return {tp: max(ends[tp] - value, starts[tp]) for tp in tps}
    found = list_offsets(consumer.cluster, dict.fromkeys(tps, value))
    return {tp: r.offset if isinstance(r := found[tp], OffsetAndTimestamp) and r.offset >= 0
            else ends[tp] for tp in tps}


class GroupProtocol(StrEnum):
    classic = "classic"
    consumer = "consumer"


def consume(
    topics: TopicsArgument,
    offset: Annotated[str, typer.Option(
        "--offset", "-o", help="beginning, end, N, -N (from the end) or @timestamp_ms.")
    ] = "beginning",
    partition: Annotated[list[int] | None, typer.Option(
        "--partition", "-p", min=0, help="Only these partitions (repeatable).")] = None,
    max_messages: Annotated[int | None, typer.Option(
        "--max-messages", "-n", help="Stop after this many records.")] = None,
    exit_at_end: Annotated[bool, typer.Option(
        "--exit-at-end", "-e", help="Stop at the end of every partition.")] = False,
    fmt: Annotated[str, typer.Option(
        "--format", "-f", help="kcat-style: %k key, %v value, %p partition, %o offset, "
        "%t topic, %T timestamp, %h headers.")] = "%v\\n",
    group: Annotated[str | None, typer.Option(
        "--group", "-g", "-G", help="Consume as a member of this consumer group: the group assigns "
        "partitions and offsets are committed; --offset only applies where the group has "
        "none.")] = None,
    group_protocol: Annotated[GroupProtocol, typer.Option(
        "--group-protocol", help="With --group: classic (JoinGroup/SyncGroup, the members "
        "assign) or consumer (KIP-848: the broker assigns).")] = GroupProtocol.classic,
    isolation_level: IsolationOption = IsolationLevel.read_uncommitted,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: LongOutputOption = OutputFormat.table,
) -> None:
    """Print records from topics; --output json prints one object per line.

    Example: slog consume orders -o beginning -e -f '%k %v %p %o\\n'
    """
    from slog.client import Consumer, TopicPartition
    from slog.client.offsets import found_offsets, list_offsets

    try:
        mode, value = parse_offset(offset)
    except ValueError as exc:
        fail(str(exc), code=EXIT_USAGE)
    if max_messages is not None and max_messages < 0:
        fail("--max-messages cannot be negative", code=EXIT_USAGE)
    seen = 0
    if max_messages == 0:
        return
    if group is not None:
        if partition:
            fail("--partition and --group exclude each other: the group assigns partitions",
                 code=EXIT_USAGE)
        if mode not in ("beginning", "end"):
            fail("with --group, --offset is beginning or end (where the group has no offset)",
                 code=EXIT_USAGE)
        _consume_group(topics, group, mode, max_messages, exit_at_end, fmt, bootstrap, output,
                       group_protocol.value, isolation_level)
        return
    with client_errors(bootstrap):
        consumer = Consumer(bootstrap, auto_offset_reset="earliest", client_id="slog-cli",
                            isolation_level=isolation_level.value)
        try:
            meta = consumer.cluster.refresh_metadata(topics)
            tps = []
            for topic in topics:
                entry = meta.topics.get(topic)
                if entry is None or entry.error_code or not entry.partitions:
                    fail(f"topic {topic!r} does not exist", hint="list topics with "
                         "`slog topic list`", code=EXIT_NOT_FOUND)
                numbers = sorted(entry.partitions)
                for number in partition or numbers:
                    if number not in entry.partitions:
                        fail(f"{topic} has no partition {number}", code=EXIT_NOT_FOUND)
                    tps.append(TopicPartition(topic, number))
            ends = found_offsets(list_offsets(consumer.cluster, dict.fromkeys(tps, "latest"),
                                              isolation_level=_LEVELS[isolation_level]))
            starts = found_offsets(list_offsets(consumer.cluster, dict.fromkeys(tps, "earliest")))
            consumer.assign(tps)
            for tp, position in _start_positions(consumer, tps, mode, value, ends,
                                                 starts).items():
                consumer.seek(tp, position)
            pending = {tp for tp in tps if consumer.position(tp) < ends[tp]}
            with until_stdout_closes():
                while not (exit_at_end and not pending):
                    for record in consumer.poll(timeout_ms=200):
                        _print(record, fmt, output)
                        seen += 1
                        if max_messages is not None and seen >= max_messages:
                            return
                    sys.stdout.flush()
                    if exit_at_end:
                        pending = {tp for tp in pending if consumer.position(tp) < ends[tp]}
        except KeyboardInterrupt:
            pass
        finally:
            sys.stdout.flush()
            consumer.close()


_LEVELS = {IsolationLevel.read_uncommitted: 0, IsolationLevel.read_committed: 1}


def _print(record: Any, fmt: str, output: OutputFormat) -> None:
    if output.structured:
        print_record(as_json(record), output)
    else:
        sys.stdout.write(render(fmt, record))


class _Printed:
    """Offsets after the last printed record per partition: what the CLI commits,
    rather than what poll() fetched ahead."""

    def __init__(self) -> None:
        self.next: dict[Any, int] = {}
        self.consumer: Any = None

    def commit(self, partitions: Any = None, *, asynchronous: bool = False) -> None:
        wanted = {tp: o for tp, o in self.next.items()
                  if partitions is None or tp in partitions}
        if wanted:
            self.consumer.commit(wanted, asynchronous=asynchronous)

    # The group's rebalance listener: settle a partition before it goes.
    def on_partitions_revoked(self, partitions: set[Any]) -> None:
        self.commit(partitions)
        self.on_partitions_lost(partitions)

    def on_partitions_lost(self, partitions: set[Any]) -> None:
        for tp in partitions:
            self.next.pop(tp, None)

    def on_partitions_assigned(self, partitions: set[Any]) -> None:
        pass


def _consume_group(topics: list[str], group: str, mode: str, max_messages: int | None,
                   exit_at_end: bool, fmt: str, bootstrap: str, output: OutputFormat,
                   group_protocol: str, isolation_level: IsolationLevel) -> None:
    """As a group member: commit what was printed; -e stops once every assigned
    partition is at its end."""
    from slog.client import Consumer, TopicPartition
    from slog.client.offsets import found_offsets, list_offsets

    seen = 0
    printed = _Printed()
    with client_errors(bootstrap):
        consumer = Consumer(bootstrap, group_id=group, client_id="slog-cli",
                            enable_auto_commit=False, group_protocol=group_protocol,
                            isolation_level=isolation_level.value,
                            auto_offset_reset="earliest" if mode == "beginning" else "latest")
        printed.consumer = consumer
        try:
            meta = consumer.cluster.refresh_metadata(topics)
            for topic in topics:
                entry = meta.topics.get(topic)
                if entry is None or entry.error_code or not entry.partitions:
                    fail(f"topic {topic!r} does not exist",
                         hint="list topics with `slog topic list`", code=EXIT_NOT_FOUND)
            # _Printed has RebalanceListener's three methods without importing the client early.
            consumer.subscribe(topics, listener=printed)  # type: ignore[arg-type]
            ends: dict[Any, int] = {}
            with until_stdout_closes():
                while max_messages is None or seen < max_messages:
                    for record in consumer.poll(timeout_ms=200):
                        _print(record, fmt, output)
                        printed.next[TopicPartition(record.topic, record.partition)] = \
                            record.offset + 1
                        seen += 1
                        if max_messages is not None and seen >= max_messages:
                            break
                    sys.stdout.flush()
                    printed.commit(asynchronous=True)
                    assigned = consumer.assignment()
                    if exit_at_end and assigned:
                        if set(ends) != assigned:
                            ends = found_offsets(list_offsets(
                                consumer.cluster, dict.fromkeys(assigned, "latest"),
                                isolation_level=_LEVELS[isolation_level]))
                        if all(printed.next.get(tp, consumer.position(tp)) >= ends[tp]
                               for tp in assigned):
                            break
            printed.commit()
        except KeyboardInterrupt:
            printed.commit()
        finally:
            sys.stdout.flush()
            consumer.close()  # leaves the group
