"""The export job behind ``slog spark-export``: plan without Spark, then write with it.

:func:`plan_export` resolves topics and offset ranges on the driver, from
the data dir or the cluster, so every bad option fails before a JVM starts.
:func:`run_export` reads the planned ranges through the ``slog`` data source
(exact per-partition offsets, so the manifest says what was written), decodes
as asked, writes the files and then the manifest.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from slog.spark.catalog import open_catalog
from slog.spark.manifest import PartitionEntry, new_run_id, resume_offsets, write_manifest
from slog.spark.options import OptionError, SourceOptions, offsets_json, parse_options
from slog.spark.plan import OffsetRange, resolve_ranges

FORMATS = ("parquet", "json", "csv", "orc")
DECODES = ("none", "utf8", "json")
PARTITION_BY = ("none", "partition", "date")
MODES = ("overwrite", "append", "error")
JSON_SAMPLE_RECORDS = 1000
_METADATA_COLUMNS = ("topic", "partition", "offset", "timestamp", "timestampType")


@dataclass
class ExportRequest:
    topics: list[str]
    out: str
    format: str = "parquet"
    start: str = "earliest"  # earliest, Kafka offsets JSON, or @timestamp
    end: str = "latest"
    decode: str = "none"
    json_schema: str | None = None
    partition_by: str = "none"
    mode: str | None = None  # default: error, or append with resume
    resume: bool = False
    include_headers: bool = True
    fail_on_data_loss: bool = True
    data_dir: str | None = None
    bootstrap: str | None = None
    min_partitions: int = 0
    isolation_level: str = "read_uncommitted"  # or read_committed


@dataclass
class ExportPlan:
    request: ExportRequest
    options: SourceOptions
    write_mode: str  # overwrite, append or error
    source: str  # dataDir or bootstrap
    ranges: list[OffsetRange]
    warnings: list[str] = field(default_factory=list)
    run_id: str = field(default_factory=new_run_id)

    @property
    def expected_records(self) -> int:
        return sum(r.size for r in self.ranges)


@dataclass
class ExportResult:
    run_id: str
    records: int
    bytes: int  # key and value bytes read
    files: int
    output_bytes: int
    seconds: float
    manifest: str
    partitions: list[PartitionEntry]

    @property
    def records_per_second(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0


def parse_timestamp(text: str) -> int:
    """``@<ms since the epoch>`` or ``@<ISO-8601 date/time, UTC unless it says>``."""
    from datetime import UTC, datetime

    body = text[1:].strip()
    if body.lstrip("-").isdigit():
        return int(body)
    try:
        moment = datetime.fromisoformat(body.replace("Z", "+00:00"))
    except ValueError:
        raise OptionError(f"--from {text!r}: expected @<milliseconds> or @<ISO-8601 time>"
                          ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def _check_request(request: ExportRequest) -> str:
    for value, allowed, name in ((request.format, FORMATS, "--format"),
                                 (request.decode, DECODES, "--decode"),
                                 (request.partition_by, PARTITION_BY, "--partition-by")):
        if value not in allowed:
            raise OptionError(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
    mode = request.mode or ("append" if request.resume else "error")
    if mode not in MODES:
        raise OptionError(f"--mode must be one of {', '.join(MODES)}, not {mode!r}")
    if request.resume and mode == "overwrite":
        raise OptionError("--resume adds to earlier exports; it cannot use --mode overwrite")
    if request.resume and request.start != "earliest" and not request.start.startswith("@"):
        raise OptionError("--resume takes the offsets from the manifests; drop --from offsets")
    if request.format == "csv" and request.decode == "none":
        raise OptionError("csv cannot hold binary keys and values; add --decode utf8 or json")
    if mode == "error" and Path(request.out).exists() and any(Path(request.out).iterdir()):
        raise OptionError(f"--out {request.out} already holds files; choose --mode overwrite "
                          "or append, or --resume to continue an earlier export")
    if request.json_schema and request.decode != "json":
        raise OptionError("--schema only applies with --decode json")
    return mode


def plan_export(request: ExportRequest) -> ExportPlan:
    """Check the request and resolve offset ranges; raises OptionError (and subclasses)."""
    mode = _check_request(request)
    raw: dict[str, str] = {"topics": ",".join(request.topics),
                           "failOnDataLoss": str(request.fail_on_data_loss).lower(),
                           "includeHeaders": str(request.include_headers).lower(),
                           "minPartitions": str(request.min_partitions),
                           "endingOffsets": request.end,
                           "isolation.level": request.isolation_level}
    if request.start.startswith("@"):
        raw["startingTimestamp"] = str(parse_timestamp(request.start))
    else:
        raw["startingOffsets"] = request.start
    if request.data_dir:
        raw["dataDir"] = request.data_dir
    if request.bootstrap:
        raw["bootstrap"] = request.bootstrap
    options = parse_options(raw)
    catalog = open_catalog(options)
    try:
        tps = catalog.partitions(options)
        if request.resume:
            done = {tp: o for tp, o in resume_offsets(request.out).items() if tp in tps}
            if done:
                # Partitions exported before continue where they ended; new ones use --from.
                fresh = [tp for tp in tps if tp not in done]
                ranges, warnings = resolve_ranges(options, catalog, fresh) if fresh else ([], [])
                resumed, more = resolve_ranges(replace(options, starting=done,
                                                       starting_timestamp=None),
                                               catalog, sorted(done))
                ranges, warnings = sorted(ranges + resumed,
                                          key=lambda r: (r.topic, r.partition)), warnings + more
            else:
                ranges, warnings = resolve_ranges(options, catalog, tps)
        else:
            ranges, warnings = resolve_ranges(options, catalog, tps)
    finally:
        catalog.close()
    return ExportPlan(request, options, mode, catalog.mode, ranges, warnings)


def _source_frame(spark: Any, plan: ExportPlan) -> Any:
    """The planned ranges, exactly, through the ``slog`` data source."""
    positions = {(r.topic, r.partition): r for r in plan.ranges}
    options = plan.options
    reader = (spark.read.format("slog")
              .option("topics", ",".join(sorted({r.topic for r in plan.ranges})))
              .option("startingOffsets", offsets_json({k: r.start for k, r in positions.items()}))
              .option("endingOffsets", offsets_json({k: r.end for k, r in positions.items()}))
              .option("includeHeaders", str(options.include_headers).lower())
              .option("failOnDataLoss", str(options.fail_on_data_loss).lower())
              .option("minPartitions", str(options.min_partitions))
              .option("maxRecordsPerPartition", str(options.max_records_per_partition))
              .option("isolation.level", options.isolation_level))
    if plan.source == "dataDir":
        reader = reader.option("dataDir", str(options.data_dir or _default_data_dir()))
    else:
        reader = reader.option("bootstrap", plan.ranges[0].location)
    return reader.load()


def _default_data_dir() -> str:
    from slog.core.names import default_data_dir

    return str(default_data_dir())


def _observe(frame: Any, ranges: list[OffsetRange]) -> tuple[Any, Any]:
    """Count records (in total and per partition) and bytes while the write runs."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    observation = Observation("slog_export")
    size = F.coalesce(F.length("key"), F.lit(0)) + F.coalesce(F.length("value"), F.lit(0))
    per_partition = [
        F.sum(F.when((F.col("topic") == r.topic) & (F.col("partition") == r.partition), 1)
              .otherwise(0)).alias(f"p{i}")
        for i, r in enumerate(ranges)
    ]
    observed = frame.observe(observation, F.count(F.lit(1)).alias("records"),
                             F.sum(size).alias("bytes"), *per_partition)
    return observed, observation


def _json_schema(spark: Any, frame: Any, given: str | None) -> Any:
    from pyspark.sql import functions as F

    if given:
        try:
            from pyspark.sql.types import _parse_datatype_string

            return _parse_datatype_string(given)
        except Exception as exc:
            raise OptionError(f"--schema is not a valid DDL schema: {exc}") from None
    sample = [row[0] for row in frame.select(F.col("value").cast("string"))
              .where(F.col("value").isNotNull()).limit(JSON_SAMPLE_RECORDS).collect()]
    if not sample:
        raise OptionError("--decode json found no values to sample; give --schema")
    return spark.read.json(spark.sparkContext.parallelize(sample, 1)).schema


def _decoded(spark: Any, frame: Any, request: ExportRequest) -> Any:
    from pyspark.sql import functions as F

    if request.format == "csv" and "headers" in frame.columns:
        frame = frame.drop("headers")  # csv has no arrays
    if request.decode == "none":
        return frame
    frame = frame.withColumn("key", F.col("key").cast("string"))
    if "headers" in frame.columns:
        frame = frame.withColumn("headers", F.transform(
            "headers", lambda h: F.struct(h["key"].alias("key"),
                                          h["value"].cast("string").alias("value"))))
    if request.decode == "utf8":
        return frame.withColumn("value", F.col("value").cast("string"))
    schema = _json_schema(spark, frame, request.json_schema)
    parsed = frame.withColumn("value", F.from_json(F.col("value").cast("string"), schema))
    taken = set(parsed.columns) - {"value"}
    fields = [F.col(f"value.`{f.name}`").alias(f"value_{f.name}" if f.name in taken else f.name)
              for f in schema.fields]
    return parsed.select(*[c for c in parsed.columns if c != "value"], *fields)


def _data_files(out: str) -> dict[str, tuple[int, int]]:
    """Data files under a local ``out`` (not ``_``/``.`` ones): path → (size, mtime_ns)."""
    root = Path(out)
    found: dict[str, tuple[int, int]] = {}
    if not root.is_dir():
        return found
    for directory, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        for name in files:
            if not name.startswith(("_", ".")):
                stat = os.stat(os.path.join(directory, name))
                found[os.path.join(directory, name)] = (stat.st_size, stat.st_mtime_ns)
    return found


def _watch_progress(spark: Any, group: str, on_progress: Callable[[float], None],
                    stop: threading.Event) -> None:
    """Report the fraction of finished tasks of the export's jobs until ``stop``."""
    tracker = spark.sparkContext.statusTracker()
    while not stop.wait(0.25):
        done = total = 0
        for job_id in tracker.getJobIdsForGroup(group):
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job else ():
                stage = tracker.getStageInfo(stage_id)
                if stage:
                    done += stage.numCompletedTasks
                    total += stage.numTasks
        if total:
            on_progress(done / total)


def run_export(spark: Any, plan: ExportPlan,
               on_progress: Callable[[float], None] | None = None) -> ExportResult:
    request = plan.request
    started = time.monotonic()
    run_ranges = [r for r in plan.ranges if r.size > 0]
    before = _data_files(request.out)
    counts: dict[int, int] = {}
    records = size = 0
    if run_ranges:
        frame = _source_frame(spark, replace(plan, ranges=run_ranges))
        frame, observation = _observe(frame, run_ranges)
        frame = _decoded(spark, frame, request)
        columns = {"partition": ["topic", "partition"], "date": ["topic", "date"]}
        if request.partition_by == "date":
            from pyspark.sql import functions as F

            frame = frame.withColumn("date", F.to_date("timestamp"))
        writer = frame.write.format(request.format).mode(plan.write_mode)
        if request.partition_by != "none":
            writer = writer.partitionBy(*columns[request.partition_by])
        if request.format == "csv":
            writer = writer.option("header", "true")
        group = f"slog-export-{plan.run_id}"
        spark.sparkContext.setJobGroup(group, f"slog spark-export {plan.run_id}")
        stop = threading.Event()
        watcher = None
        if on_progress is not None:
            watcher = threading.Thread(target=_watch_progress,
                                       args=(spark, group, on_progress, stop), daemon=True)
            watcher.start()
        try:
            writer.save(request.out)
        finally:
            stop.set()
            if watcher is not None:
                watcher.join()
            spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
        metrics = observation.get
        records, size = int(metrics["records"]), int(metrics["bytes"] or 0)
        counts = {i: int(metrics[f"p{i}"] or 0) for i in range(len(run_ranges))}
    elif not Path(request.out).exists():
        Path(request.out).mkdir(parents=True, exist_ok=True)
    after = _data_files(request.out)
    written = [p for p, stat in after.items() if before.get(p) != stat]
    by_tp = {(r.topic, r.partition): counts[i] for i, r in enumerate(run_ranges)}
    entries = [PartitionEntry(r.topic, r.partition, r.start, r.end,
                              by_tp.get((r.topic, r.partition), 0)) for r in plan.ranges]
    manifest = write_manifest(request.out, plan.run_id, entries, {
        "topics": request.topics, "format": request.format, "decode": request.decode,
        "isolation_level": request.isolation_level,
        "source": plan.options.data_dir or (plan.ranges[0].location if plan.ranges else ""),
        "records": records,
    })
    return ExportResult(plan.run_id, records, size, len(written),
                        sum(after[p][0] for p in written), time.monotonic() - started,
                        str(manifest), entries)
