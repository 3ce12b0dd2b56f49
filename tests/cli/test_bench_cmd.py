"""``slog bench produce|consume|e2e`` against a real broker, and the arithmetic behind them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from slog.cli.latency import Throttle, latency_summary, percentile, rates
from slog.cli.schema import SCHEMAS
from slog.client import Admin, TopicPartition
from tests.brokers import BrokerProcess, run_cli

LATENCY_FIELDS = [f"latency_{n}_ms" for n in ("min", "avg", "p50", "p95", "p99", "p999", "max")]
COMMON_FIELDS = {"mode", "topic", "records", "errors", "bytes", "elapsed_s", "records_per_s",
                 "mb_per_s", "partitions", *LATENCY_FIELDS}


@pytest.fixture(scope="module")
def bootstrap(shared_broker: BrokerProcess) -> str:
    return shared_broker.bootstrap


def bench(bootstrap: str, *args: str) -> tuple[int, dict[str, Any], str]:
    result = run_cli("bench", *args, "-b", bootstrap, "-o", "json", timeout=120)
    assert "Traceback" not in result.stderr
    rows = json.loads(result.stdout) if result.stdout.strip() else [{}]
    assert len(rows) == 1
    if rows[0]:
        assert SCHEMAS[f"bench {args[0]}"].check(rows[0]) == []  # documented fields only
    return result.returncode, rows[0], result.stderr


def assert_ordered_latencies(row: dict[str, Any]) -> None:
    values = [row[f] for f in LATENCY_FIELDS if f != "latency_avg_ms"]
    assert all(isinstance(v, float | int) for v in values), row
    assert values == sorted(values) and values[0] >= 0
    assert row["latency_min_ms"] <= row["latency_avg_ms"] <= row["latency_max_ms"]


def end_offsets(bootstrap: str, topic: str, partitions: int) -> int:
    with Admin(bootstrap) as admin:
        found = admin.list_offsets({TopicPartition(topic, p): "latest"
                                    for p in range(partitions)})
    return sum(r.offset for r in found.values())


def test_produce_to_a_temporary_topic(bootstrap: str) -> None:
    code, row, _ = bench(bootstrap, "produce", "--records", "3000", "--record-size", "200")
    assert code == 0
    assert set(row) == COMMON_FIELDS | {"record_size", "acks", "compression"}
    assert row["mode"] == "produce" and row["records"] == 3000 and row["errors"] == 0
    assert row["bytes"] == 3000 * 200 and row["partitions"] == 3
    assert row["records_per_s"] > 0 and row["mb_per_s"] > 0
    # elapsed_s is rounded to the millisecond, so the rate lies within that rounding of it.
    elapsed = row["elapsed_s"]
    assert 3000 / (elapsed + 0.0005) <= row["records_per_s"] <= 3000 / max(elapsed - 0.0005, 1e-9)
    assert_ordered_latencies(row)
    with Admin(bootstrap) as admin:  # deleted afterwards
        assert row["topic"] not in {t.name for t in admin.list_topics()}


def test_produce_options_then_consume(bootstrap: str) -> None:
    code, row, _ = bench(bootstrap, "produce", "--topic", "bench-named", "--partitions", "2",
                         "-n", "1000", "-s", "50", "--acks", "1", "--compression", "lz4",
                         "--batch-size", "4096", "--linger-ms", "1", "--throughput", "2000")
    assert code == 0, row
    assert row["topic"] == "bench-named" and row["acks"] == "1" and row["compression"] == "lz4"
    # 1000 records at 2000/s take at least half a second.
    assert row["elapsed_s"] >= 0.45 and row["records_per_s"] <= 2200
    assert end_offsets(bootstrap, "bench-named", 2) == 1000  # kept, with every record
    code, row, _ = bench(bootstrap, "consume", "--topic", "bench-named", "-n", "1000")
    assert code == 0
    assert row["mode"] == "consume" and row["records"] == 1000 and row["bytes"] == 1000 * 50
    assert row["partitions"] == 2 and row["latency_p50_ms"] is None
    # Asking for more than the topic holds: what there was, then exit 1.
    code, row, stderr = bench(bootstrap, "consume", "-t", "bench-named", "-n", "1500",
                              "--timeout", "1")
    assert code == 1 and row["records"] == 1000 and "only 1000 of 1500" in stderr


def test_consume_fills_a_temporary_topic(bootstrap: str) -> None:
    code, row, _ = bench(bootstrap, "consume", "-n", "2000", "-s", "10")
    assert code == 0
    assert row["records"] == 2000 and row["bytes"] == 2000 * 10


def test_e2e(bootstrap: str) -> None:
    code, row, _ = bench(bootstrap, "e2e", "-n", "600", "--throughput", "1000", "-s", "64")
    assert code == 0, row
    assert set(row) == COMMON_FIELDS | {"record_size", "acks", "throughput"}
    assert row["mode"] == "e2e" and row["records"] == 600 and row["errors"] == 0
    assert_ordered_latencies(row)
    assert row["latency_max_ms"] < 30_000


def test_table_output_and_errors(bootstrap: str) -> None:
    table = run_cli("bench", "produce", "-n", "200", "-b", bootstrap)
    assert table.returncode == 0, table.stderr
    header, line = table.stdout.splitlines()[:2]
    assert header.split()[:3] == ["MODE", "TOPIC", "RECORDS"]
    assert "LATENCY-P99-MS" in header and line.split()[0] == "produce"
    bad_acks = run_cli("bench", "produce", "--acks", "2", "-b", bootstrap)
    assert bad_acks.returncode == 2 and "--acks" in bad_acks.stderr
    bad_codec = run_cli("bench", "e2e", "--compression", "brotli", "-b", bootstrap)
    assert bad_codec.returncode == 2
    nobody = run_cli("bench", "produce", "-n", "10", "-b", "127.0.0.1:1")
    assert nobody.returncode == 3 and "Traceback" not in nobody.stderr


# -- slog.cli.latency ----------------------------------------------------------------------

def test_percentiles_are_nearest_rank() -> None:
    samples = [float(n) for n in range(1, 101)]
    assert percentile(samples, 0.5) == 50 and percentile(samples, 0.99) == 99
    assert percentile(samples, 0.999) == 100 and percentile([7.0], 0.5) == 7
    summary = latency_summary([0.001 * n for n in range(100, 0, -1)])  # seconds, unsorted
    assert summary == {"min": 1.0, "avg": 50.5, "p50": 50.0, "p95": 95.0, "p99": 99.0,
                       "p999": 100.0, "max": 100.0}
    assert set(latency_summary([]).values()) == {None}


def test_rates_count_mib() -> None:
    assert rates(1000, 2 * 1024 * 1024, 2.0) == (500.0, 1.0)


def test_throttle_sleeps_only_when_ahead() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    throttle = Throttle(100, lambda: now[0], sleep)
    throttle.wait(1)  # due at 0.01
    assert slept == [pytest.approx(0.01)]
    now[0] = 1.0  # a stall: 100 records are due, only 2 sent, so no sleeping
    throttle.wait(2)
    assert len(slept) == 1
    unlimited = Throttle(-1, lambda: now[0], sleep)
    unlimited.wait(10**9)
    assert len(slept) == 1
