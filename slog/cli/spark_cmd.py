"""``slog spark-export TOPIC... --out PATH``: write topics to files with PySpark.

Everything that can be checked without Spark (topics, offsets, options, the
data dir or cluster) is checked first, so mistakes fail in a second with a
clear message. PySpark is imported only once the export really runs.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from slog.cli.common import (
    EXIT_FAILURE,
    EXIT_NOT_FOUND,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    IsolationLevel,
    TopicsArgument,
    fail,
)
from slog.cli.output import OutputFormat, OutputOption, emit, progress_bar

SUMMARY_COLUMNS = ("run", "records", "bytes", "files", "output_bytes", "seconds",
                   "records_per_s", "manifest")


@contextlib.contextmanager
def _jvm_output_to(log_path: Path) -> Iterator[None]:
    """Send what the JVM (started inside this block) prints to ``log_path``.

    The JVM and the Python workers it forks inherit file descriptors 1 and 2
    when they start, so pointing those at a log file for the launch keeps
    Spark's banner and warnings off the terminal for the whole run, while
    this process gets its own descriptors back at once.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(log_path, "ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)


def _start_spark(master: str, log_path: Path) -> tuple[Any, bool]:
    """The running SparkSession (tests share one) or a new quiet one; and whether it is ours."""
    from slog.spark.session import SparkUnavailableError, check_spark_available, spark_session

    try:
        check_spark_available()
    except SparkUnavailableError as exc:
        fail(str(exc), code=EXIT_FAILURE)
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        from slog.spark import register

        register(active)
        return active, False
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with _jvm_output_to(log_path):
        spark = spark_session(master, app_name="slog spark-export")
    return spark, True


def _plan(request: Any) -> Any:
    from slog.spark.catalog import SourceUnavailableError, TopicNotFoundError
    from slog.spark.export import plan_export
    from slog.spark.options import OptionError
    from slog.spark.plan import DataLossError

    try:
        return plan_export(request)
    except TopicNotFoundError as exc:
        fail(str(exc), hint="list topics with `slog topic list`", code=EXIT_NOT_FOUND)
    except SourceUnavailableError as exc:
        fail(str(exc), hint="pass --data-dir or --bootstrap", code=EXIT_UNREACHABLE)
    except DataLossError as exc:
        fail(str(exc).replace("failOnDataLoss=false", "--no-fail-on-data-loss"))
    except OptionError as exc:
        fail(str(exc), code=EXIT_USAGE)
    except ValueError as exc:  # e.g. an unreadable manifest
        fail(str(exc), code=EXIT_USAGE)


def spark_export(
    topics: TopicsArgument,
    out: Annotated[str, typer.Option("--out", help="Output directory.")],
    format: Annotated[str, typer.Option(
        "--format", help="parquet, json, csv or orc.")] = "parquet",
    start: Annotated[str, typer.Option(
        "--from", help='earliest, Kafka offsets JSON {"topic":{"0":42}}, or @timestamp '
                       "(milliseconds or ISO-8601).")] = "earliest",
    end: Annotated[str, typer.Option(
        "--to", help="latest (the high watermark) or offsets JSON; exclusive.")] = "latest",
    decode: Annotated[str, typer.Option(
        "--decode", help="none (binary), utf8 (strings) or json (value into columns).")
    ] = "none",
    schema: Annotated[str | None, typer.Option(
        "--schema", help="DDL schema of the JSON values (default: sampled).")] = None,
    partition_by: Annotated[str, typer.Option(
        "--partition-by", help="none, partition (topic/partition dirs) or date (topic/date).")
    ] = "none",
    master: Annotated[str, typer.Option("--master", help="Spark master URL.")] = "local[*]",
    mode: Annotated[str | None, typer.Option(
        "--mode", help="overwrite, append or error [default: error; append with --resume].")
    ] = None,
    resume: Annotated[bool, typer.Option(
        "--resume", help="Continue where the previous exports' manifests end.")] = False,
    headers: Annotated[bool, typer.Option(
        "--headers/--no-headers", help="Include record headers (not in csv).")] = True,
    fail_on_data_loss: Annotated[bool, typer.Option(
        "--fail-on-data-loss/--no-fail-on-data-loss",
        help="Fail when offsets asked for were deleted by retention, or warn and skip.")
    ] = True,
    min_partitions: Annotated[int, typer.Option(
        "--min-partitions", help="At least this many Spark tasks.")] = 0,
    data_dir: Annotated[Path | None, typer.Option(
        "--data-dir", help="Read segment files from this slog data dir (the default when "
                           "the default data dir holds a cluster).")] = None,
    bootstrap: Annotated[str | None, typer.Option(
        "--bootstrap", "-b", help="Read over the Kafka protocol from this cluster.")] = None,
    isolation_level: Annotated[IsolationLevel, typer.Option(
        "--isolation-level", help="read_committed: only committed transactions' records, up "
                                  "to the last stable offset.")
    ] = IsolationLevel.read_uncommitted,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Export topics to parquet/json/csv/orc files with PySpark, incrementally with --resume.

    Example: slog spark-export orders --out /data/orders --format parquet --resume
    """
    from slog.spark.export import ExportRequest

    if data_dir is not None and bootstrap is not None:
        fail("give --data-dir or --bootstrap, not both", code=EXIT_USAGE)
    request = ExportRequest(
        topics=list(topics), out=out, format=format, start=start, end=end, decode=decode,
        json_schema=schema, partition_by=partition_by, mode=mode, resume=resume,
        include_headers=headers, fail_on_data_loss=fail_on_data_loss,
        data_dir=str(data_dir) if data_dir is not None else None, bootstrap=bootstrap,
        min_partitions=min_partitions, isolation_level=isolation_level.value)
    plan = _plan(request)
    for warning in plan.warnings:
        print(f"warning: {warning}; skipping them", file=sys.stderr)
    result = _run(plan, master, output)
    emit([{
        "run": result.run_id, "records": result.records, "bytes": result.bytes,
        "files": result.files, "output_bytes": result.output_bytes,
        "seconds": round(result.seconds, 2), "records_per_s": round(result.records_per_second),
        "manifest": result.manifest,
    }], SUMMARY_COLUMNS, output, title=f"exported to {out}")


def _run(plan: Any, master: str, output: OutputFormat) -> Any:
    from slog.spark.export import run_export

    log = Path(tempfile.gettempdir()) / f"slog-spark-export-{os.getpid()}.log"
    spark, owned = _start_spark(master, log)
    try:
        with progress_bar(f"exporting {plan.expected_records:,} records", 100, "%",
                          output) as bar:
            result = run_export(spark, plan, lambda f: bar.update(completed=100 * f))
    except Exception as exc:
        if os.environ.get("SLOG_DEBUG"):
            raise
        detail = _spark_error(exc)
        fail(f"the export failed: {detail}",
             hint=f"Spark's log: {log}" if owned else None, code=EXIT_FAILURE)
    finally:
        if owned:
            with _jvm_output_to(log):
                spark.stop()
    if owned:
        with contextlib.suppress(OSError):
            log.unlink()
    return result


def _spark_error(exc: Exception) -> str:
    """The useful line of a (Python or JVM) Spark error: the Python exception raised in
    a task if there was one, else the first line."""
    text = str(exc)
    for line in reversed(text.splitlines()):
        stripped = line.strip()
        if stripped.startswith(("slog.", "DataLossError", "TimeoutError")) or \
                ("Error: " in stripped and not stripped.startswith(("at ", "File "))):
            return stripped
    return text.splitlines()[0] if text else type(exc).__name__
