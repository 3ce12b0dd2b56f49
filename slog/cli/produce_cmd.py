"""``slog produce TOPIC``: one record per input line, like ``kcat -P``."""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, BinaryIO

import typer

from slog.cli.common import (
    DEFAULT_BOOTSTRAP,
    EXIT_FAILURE,
    EXIT_USAGE,
    BootstrapOption,
    client_errors,
    fail,
)

ACKS = {"0": 0, "1": 1, "all": -1, "-1": -1}


def _parse_headers(pairs: list[str]) -> tuple[tuple[str, bytes], ...]:
    headers = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            fail(f"header {pair!r} is not key=value", code=EXIT_USAGE)
        headers.append((key, value.encode()))
    return tuple(headers)


def _records(stream: BinaryIO) -> Iterator[bytes]:
    """Lines as they arrive (binary-safe), without the newline or a CRLF's CR."""
    for line in stream:
        if line.endswith(b"\n"):
            line = line[:-1]
        if line.endswith(b"\r"):
            line = line[:-1]
        yield line


def produce(
    topic: Annotated[str, typer.Argument(help="Topic to write to.", show_default=False)],
    file: Annotated[Path | None, typer.Option(
        "--file", "-f", help="Read records from this file instead of stdin.")] = None,
    key_separator: Annotated[str | None, typer.Option(
        "--key-separator", "-K", help="Split each line into key and value at this string.")
    ] = None,
    partition: Annotated[int | None, typer.Option("--partition", "-p",
                                                  help="Write to this partition only.")] = None,
    acks: Annotated[str, typer.Option(help="0, 1 or all.")] = "all",
    header: Annotated[list[str] | None, typer.Option(
        "--header", "-H", help="Header key=value added to every record (repeatable).")] = None,
    compression: Annotated[str, typer.Option(
        help="none, gzip, snappy, lz4 or zstd.")] = "none",
    linger_ms: Annotated[float, typer.Option(help="Wait this long to fill batches.")] = 5,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
) -> None:
    """Produce one record per line of stdin (or --file); a summary goes to stderr.

    Example: printf 'alice:hi\\nbob:yo\\n' | slog produce chat -K:
    """
    from slog.client import Producer
    from slog.core.compression import codec_from_name

    if acks not in ACKS:
        fail(f"--acks must be 0, 1 or all, not {acks!r}", code=EXIT_USAGE)
    try:
        codec_from_name(compression)
    except ValueError as exc:
        fail(str(exc), code=EXIT_USAGE)
    if key_separator == "":
        fail("--key-separator cannot be empty", code=EXIT_USAGE)
    headers = _parse_headers(header or [])
    if file is not None:
        try:
            handle: BinaryIO = open(file, "rb")  # noqa: SIM115 - closed below
        except OSError as exc:
            fail(f"cannot read {file}: {exc.strerror}", code=EXIT_USAGE)
    else:
        handle = sys.stdin.buffer
    separator = key_separator.encode() if key_separator else None
    errors: Counter[str] = Counter()
    lock = threading.Lock()

    def on_delivery(_metadata: object, error: Exception | None) -> None:
        if error is not None:
            with lock:
                errors[str(error)] += 1

    started = time.monotonic()
    sent_bytes = count = 0
    with client_errors(bootstrap), handle:
        producer = Producer(bootstrap, acks=ACKS[acks], compression=compression,
                            linger_ms=linger_ms, client_id="slog-cli")
        try:
            for line in _records(handle):
                count += 1
                key = None
                if separator is not None:
                    key, sep, value = line.partition(separator)
                    if not sep:
                        key, value = None, line
                else:
                    value = line
                sent_bytes += len(value) + (len(key) if key else 0)
                producer.send(topic, value, key, partition=partition, headers=headers,
                              on_delivery=on_delivery)
        finally:
            producer.close()
    elapsed = max(time.monotonic() - started, 1e-9)
    failed = sum(errors.values())
    print(f"produced {count - failed} of {count} records ({sent_bytes} bytes) to {topic} "
          f"in {elapsed:.2f}s, {count / elapsed:,.0f} records/s", file=sys.stderr)
    if failed:
        reason, times = errors.most_common(1)[0]
        print(f"error: {failed} records failed; most often ({times}x): {reason}",
              file=sys.stderr)
        raise typer.Exit(EXIT_FAILURE)
