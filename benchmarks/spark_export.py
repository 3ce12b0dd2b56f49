"""Spark export throughput: ``slog spark-export`` (dataDir) against Spark's own JSON path.

One broker gets ``--records`` records of 100 bytes (10-byte keys) on a topic
of two partitions, produced with librdkafka; the same records (topic,
partition, offset, timestamp, timestampType, key, value) go to a JSON-lines
file. The broker is stopped, then in one warm Spark session (``--master``,
default ``local[*]``), each run times:

* slog: the export job behind ``slog spark-export --data-dir ... --format
  parquet`` (plan_export + run_export, headers included as by default), which
  reads the replica's segment files through the ``slog`` data source;
* json: ``spark.read.schema(...).json(file).write.parquet(...)``. The schema
  is given (``--json-infer`` lets Spark infer it, which reads the file twice).

One untimed run of each path warms the JVM and the Python workers first.

Target (issue 8): slog takes <= 1.0x the time of the JSON path (median of
``--runs``). Exit status 1 when it does not. Usage::

    python benchmarks/spark_export.py [--records 5000000] [--runs 3] [--quick]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from slog.client import Admin, NewTopic  # noqa: E402
from tests.brokers import running_broker  # noqa: E402

TOPIC = "bench"
PARTITIONS = 2
VALUE = "x" * 100
BASE_TIMESTAMP_MS = 1_700_000_000_000
TARGET = 1.0
JSON_SCHEMA = ("topic string, partition int, offset long, timestamp long, timestampType int, "
               "key string, value string")


def produce(bootstrap: str, jsonl: Path, records: int) -> None:
    """The same records to the broker and to a JSON-lines file."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50,
                         "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
                         "acks": 1})
    value = VALUE.encode()
    with jsonl.open("w") as out:
        for i in range(records):
            key = f"k{i:09d}"
            partition, timestamp = i % PARTITIONS, BASE_TIMESTAMP_MS + i // 1000
            while True:
                try:
                    producer.produce(TOPIC, value=value, key=key.encode(), partition=partition,
                                     timestamp=timestamp)
                    break
                except BufferError:
                    producer.poll(0.1)
            out.write(f'{{"topic":"{TOPIC}","partition":{partition},'
                      f'"offset":{i // PARTITIONS},"timestamp":{timestamp},'
                      f'"timestampType":0,"key":"{key}","value":"{VALUE}"}}\n')
            if i % 10_000 == 0:
                producer.poll(0)
    if producer.flush(120):
        raise RuntimeError("records still unsent after 120 s")


def run_slog(spark: object, data_dir: Path, out: Path, records: int) -> float:
    from slog.spark.export import ExportRequest, plan_export, run_export

    started = time.perf_counter()
    plan = plan_export(ExportRequest([TOPIC], str(out), data_dir=str(data_dir)))
    result = run_export(spark, plan)
    elapsed = time.perf_counter() - started
    if result.records != records:
        raise RuntimeError(f"slog exported {result.records} records, expected {records}")
    return elapsed


def run_json(spark: object, jsonl: Path, out: Path, infer: bool) -> float:
    started = time.perf_counter()
    reader = spark.read if infer else spark.read.schema(JSON_SCHEMA)  # type: ignore[attr-defined]
    reader.json(str(jsonl)).write.parquet(str(out))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=None, help="default 5,000,000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="200,000 records, 1 run")
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--json-infer", action="store_true",
                        help="let Spark infer the JSON schema instead of giving it")
    args = parser.parse_args()
    records = args.records or (200_000 if args.quick else 5_000_000)
    runs = 1 if args.quick and args.runs == 3 else args.runs

    root = Path(tempfile.mkdtemp(prefix="slog-spark-bench-"))
    try:
        data_dir, jsonl = root / "data", root / "records.jsonl"
        started = time.perf_counter()
        with running_broker(data_dir) as broker:
            with Admin(broker.bootstrap) as admin:
                admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
            produce(broker.bootstrap, jsonl, records)
        print(f"produced {records:,} records of 100 bytes in "
              f"{time.perf_counter() - started:.1f} s", flush=True)

        from slog.spark.session import spark_session

        spark = spark_session(args.master, "slog-spark-bench")
        try:
            # Warm up the JVM (its JIT) and the Python workers: one untimed run of each path.
            run_slog(spark, data_dir, root / "warm-slog", records)
            run_json(spark, jsonl, root / "warm-json", args.json_infer)
            times: dict[str, list[float]] = {"slog": [], "json": []}
            for run in range(runs):
                times["slog"].append(run_slog(spark, data_dir, root / f"slog{run}", records))
                times["json"].append(run_json(spark, jsonl, root / f"json{run}",
                                              args.json_infer))
                print(f"  run {run + 1}: slog {times['slog'][-1]:.1f} s, "
                      f"json {times['json'][-1]:.1f} s", flush=True)
        finally:
            spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    ok = print_table(times, records, runs, args.master, args.json_infer)
    sys.exit(0 if ok else 1)


def print_table(times: dict[str, list[float]], records: int, runs: int, master: str,
                infer: bool) -> bool:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\n{records:,} records of 100 bytes to parquet, {master}, median of {runs} run(s); "
          f"load average {load}")
    header = f"{'path':<34} {'seconds':>8} {'records/s':>12}  runs"
    print(header)
    print("-" * len(header))
    labels = {"slog": "slog spark-export (dataDir)",
              "json": "Spark JSON lines" + (" (inferred)" if infer else " (schema)")}
    medians = {k: statistics.median(v) for k, v in times.items()}
    for key, label in labels.items():
        runs_text = ", ".join(f"{t:.1f}" for t in times[key])
        print(f"{label:<34} {medians[key]:8.2f} {records / medians[key]:12,.0f}  {runs_text}")
    ratio = medians["slog"] / medians["json"]
    ok = ratio <= TARGET
    paired = ", ".join(f"{s / j:.2f}" for s, j in zip(times["slog"], times["json"], strict=True))
    print(f"\nslog / json time = {ratio:.2f}x (target <= {TARGET:.1f}x): "
          f"{'PASS' if ok else 'FAIL'}   (per run: {paired})")
    return ok


if __name__ == "__main__":
    main()
