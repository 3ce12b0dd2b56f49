"""Helpers for the Spark tests: produce known records, run the CLI in-process, read back."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from slog.cli.app import app
from slog.client import Admin, NewTopic


@dataclass(frozen=True)
class Produced:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, name: str, partitions: int = 1, replication: int = 1,
                 **configs: str) -> None:
    with Admin(bootstrap, request_timeout_ms=15_000) as admin:
        admin.create_topics([NewTopic(name, partitions, replication,
                                      {k.replace("_", "."): v for k, v in configs.items()})])


def produce_confluent(bootstrap: str, topic: str, count: int, *, partitions: int = 1,
                      codec: str = "none", start: int = 0,
                      timestamp_ms: int | None = None) -> list[Produced]:
    """``count`` records with librdkafka: some null keys, some null values, headers."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                         "linger.ms": 20, "batch.num.messages": 200, "acks": "all"})
    delivered: list[Produced] = []
    errors: list[Any] = []

    def reporter(headers: tuple[tuple[str, bytes | None], ...]) -> Any:
        # Delivery reports do not carry headers: remember what was sent.
        def report(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(err)
                return
            delivered.append(Produced(msg.partition(), msg.offset(), msg.key(), msg.value(),
                                      headers, msg.timestamp()[1]))
        return report

    for i in range(start, start + count):
        key = None if i % 7 == 0 else f"key-{i}".encode()
        value = None if i % 11 == 0 else json.dumps({"n": i, "text": f"value {i}"}).encode()
        headers = [("index", str(i).encode()), ("empty", None)] if i % 3 == 0 else None
        producer.produce(topic, value=value, key=key, headers=headers,
                         partition=i % partitions, on_delivery=reporter(tuple(headers or ())),
                         **({"timestamp": timestamp_ms} if timestamp_ms else {}))
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors
    return sorted(delivered, key=lambda p: (p.partition, p.offset))


def export(*args: str) -> Any:
    """``slog spark-export ...`` in this process (sharing the test SparkSession)."""
    result = CliRunner().invoke(app, ["spark-export", *args], catch_exceptions=False)
    return result


def export_ok(*args: str) -> dict[str, Any]:
    result = export(*args, "--output", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)[0]


def read_back(out: Path, fmt: str = "parquet") -> list[dict[str, Any]]:
    """Every exported row, read with pyarrow (not Spark), sorted by topic/partition/offset."""
    import pyarrow.dataset as ds

    table = ds.dataset(str(out), format=fmt, partitioning="hive").to_table()
    rows = table.to_pylist()
    return sorted(rows, key=lambda r: (r["topic"], int(r["partition"]), int(r["offset"])))


def as_produced(row: dict[str, Any]) -> Produced:
    headers = tuple((h["key"], h["value"]) for h in row.get("headers") or ())
    stamp = row["timestamp"]
    millis = int(stamp.timestamp() * 1000) if hasattr(stamp, "timestamp") else int(stamp)
    return Produced(int(row["partition"]), int(row["offset"]), row["key"], row["value"],
                    headers, millis)
