"""``slog produce TOPIC``: one record per input line, like ``kcat -P``."""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, BinaryIO, Protocol

import typer

from slog.cli.common import (
    DEFAULT_BOOTSTRAP,
    EXIT_FAILURE,
    EXIT_USAGE,
    BootstrapOption,
    TopicArgument,
    client_errors,
    fail,
)
from slog.cli.output import OutputFormat, OutputOption, Progress, print_data, progress_bar

ACKS = {"0": 0, "1": 1, "all": -1, "-1": -1}


class PartitionerChoice(StrEnum):
    """The key hashes of slog.client.partitioner (names kept in step by a test)."""

    murmur3 = "murmur3"
    murmur2 = "murmur2"
    crc32 = "crc32"


def _parse_headers(pairs: list[str]) -> tuple[tuple[str, bytes], ...]:
    headers = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            fail(f"header {pair!r} is not key=value", code=EXIT_USAGE)
        headers.append((key, value.encode()))
    return tuple(headers)


READ_SIZE = 1 << 20


class _ByteStream(Protocol):
    def read(self, size: int, /) -> bytes: ...


def _line_blocks(stream: _ByteStream, read_size: int = READ_SIZE) -> Iterator[list[bytes]]:
    """Lines as they arrive (binary-safe), a read at a time, without the newline or a CRLF's CR.

    Each read takes what the stream has, up to ``read_size`` bytes, without
    waiting for more (``read1``), so lines typed or piped in slowly still go
    out as they come; splitting a whole read at once keeps the per-line cost
    out of Python. A final line without a newline counts too.
    """
    read = getattr(stream, "read1", stream.read)
    partial: list[bytes] = []  # the start of a line that a read cut off
    while chunk := read(read_size):
        lines = chunk.split(b"\n")
        if len(lines) == 1:
            partial.append(chunk)
            continue
        if partial:
            partial.append(lines[0])
            lines[0] = b"".join(partial)
            partial = []
        tail = lines.pop()
        if tail:
            partial.append(tail)
        if b"\r" in chunk:
            lines = [line[:-1] if line.endswith(b"\r") else line for line in lines]
        elif lines[0].endswith(b"\r"):  # a CR from an earlier read
            lines[0] = lines[0][:-1]
        yield lines
    if partial:
        last = b"".join(partial)
        yield [last[:-1] if last.endswith(b"\r") else last]


class _CountingReader:
    """Passes reads through and reports their sizes: the progress of a file being produced."""

    def __init__(self, stream: BinaryIO, progress: Progress):
        self._stream = stream
        self._progress = progress

    def read1(self, size: int) -> bytes:
        chunk = self._stream.read1(size)  # type: ignore[attr-defined]  # a file opened 'rb'
        self._progress.advance(len(chunk))
        return chunk

    read = read1


class _Transactions:
    """--transactional-id: the records in transactions of --transaction-size records
    (0: the whole input in one), each committed when full and the last at the end."""

    def __init__(self, producer: Any, size: int):
        self._producer = producer
        self._size = size
        self._open = False
        self._records = 0
        self.committed = 0
        producer.init_transactions()

    def send(self, *args: Any, **kwargs: Any) -> Any:
        if not self._open:
            self._producer.begin_transaction()
            self._open = True
        future = self._producer.send(*args, **kwargs)
        self._records += 1
        if self._size and self._records >= self._size:
            self.commit()
        return future

    def commit(self) -> None:
        if self._open:
            self._producer.commit_transaction()
            self._open, self._records = False, 0
            self.committed += 1

    def abort(self) -> None:
        if self._open:
            self._producer.abort_transaction()
            self._open = False


def produce(
    topic: TopicArgument,
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
    partitioner: Annotated[PartitionerChoice, typer.Option(
        help="Key hash: murmur3 (slog), murmur2 (Java, kafka-python) or crc32 "
             "(librdkafka's consistent).")] = PartitionerChoice.murmur3,
    transactional_id: Annotated[str | None, typer.Option(
        "--transactional-id", help="Produce in transactions of this transactional id "
        "(read_committed readers see all of each or none).")] = None,
    transaction_size: Annotated[int, typer.Option(
        "--transaction-size", min=0, help="Records per transaction with --transactional-id "
        "(0: the whole input is one).")] = 0,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Produce one record per line of stdin (or --file); a summary goes to stderr.

    With -o json or yaml the summary is one document on stdout instead. A progress
    bar shows on a terminal while producing a --file.

    Examples:
      printf 'alice:hi\\nbob:yo\\n' | slog produce chat -K:
      slog produce orders -f orders.txt -K, --acks all
      slog produce orders -f orders.txt -o json
      slog produce orders -K: --partitioner murmur2   # keys land where Java's would
      slog produce orders -f orders.txt --transactional-id loader --transaction-size 1000
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
    if transactional_id is not None and acks != "all":
        fail("--transactional-id needs --acks all (transactions are idempotent)",
             code=EXIT_USAGE)
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
    size = file.stat().st_size if file is not None and file.is_file() else None
    with client_errors(bootstrap), handle, \
            progress_bar(f"producing {file}", size, output=output, in_bytes=True) as bar:
        producer = Producer(bootstrap, acks=ACKS[acks], compression=compression,
                            linger_ms=linger_ms, partitioner=partitioner.value,
                            client_id="slog-cli", transactional_id=transactional_id)
        transactions = None if transactional_id is None else \
            _Transactions(producer, transaction_size)
        send = producer.send if transactions is None else transactions.send
        source = _CountingReader(handle, bar) if file is not None else handle
        key: bytes | None
        finished = False
        try:
            for lines in _line_blocks(source):
                if separator is None:
                    for value in lines:
                        send(topic, value, None, partition=partition, headers=headers,
                             on_delivery=on_delivery)
                    count += len(lines)
                    sent_bytes += sum(map(len, lines))
                    continue
                for line in lines:
                    key, sep, value = line.partition(separator)
                    if sep:
                        sent_bytes += len(key)
                    else:
                        key, value = None, line
                    sent_bytes += len(value)
                    send(topic, value, key, partition=partition, headers=headers,
                         on_delivery=on_delivery)
                    count += 1
            if transactions is not None:
                transactions.commit()
            finished = True
        finally:
            if transactions is not None and not finished:
                transactions.abort()  # interrupted: nothing half-visible
            producer.close()
    elapsed = max(time.monotonic() - started, 1e-9)
    failed = sum(errors.values())
    reason, times = errors.most_common(1)[0] if failed else (None, 0)
    if output.structured:
        print_data({"topic": topic, "records": count - failed, "errors": failed,
                    "bytes": sent_bytes, "elapsed_s": round(elapsed, 3),
                    "records_per_s": round(count / elapsed, 1), "error": reason,
                    "partitioner": partitioner.value,
                    **({} if transactions is None
                       else {"transactions": transactions.committed})}, output)
    else:
        print(f"produced {count - failed} of {count} records ({sent_bytes} bytes) to {topic} "
              f"in {elapsed:.2f}s, {count / elapsed:,.0f} records/s", file=sys.stderr)
    if failed:
        print(f"error: {failed} records failed; most often ({times}x): {reason}",
              file=sys.stderr)
        raise typer.Exit(EXIT_FAILURE)
