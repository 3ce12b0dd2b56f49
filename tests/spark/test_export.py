"""``slog spark-export`` end to end: produce with real clients, export, read back with pyarrow."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from slog.core.names import DataDirLayout
from tests.brokers import BrokerProcess
from tests.cluster.conftest import wait_until
from tests.spark.support import (
    as_produced,
    create_topic,
    export,
    export_ok,
    produce_confluent,
    read_back,
    unique,
)

CODECS = ("gzip", "lz4", "zstd", "snappy", "none")


@pytest.fixture(scope="module")
def mixed_topic(spark_broker: BrokerProcess) -> tuple[str, list[Any]]:
    """Two partitions, every codec, small segments (so several per partition)."""
    topic = unique("mixed")
    create_topic(spark_broker.bootstrap, topic, partitions=2, segment_bytes="4096")
    produced = []
    for n, codec in enumerate(CODECS):
        produced += produce_confluent(spark_broker.bootstrap, topic, 300, partitions=2,
                                      codec=codec, start=n * 300)
    return topic, sorted(produced, key=lambda p: (p.partition, p.offset))


def _files(data_dir: Path) -> dict[str, tuple[int, int]]:
    found = {}
    for directory, _dirs, names in os.walk(data_dir / "brokers"):
        for name in names:
            if not name.endswith((".log", ".index", ".timeindex")):
                continue
            stat = os.stat(os.path.join(directory, name))
            found[os.path.join(directory, name)] = (stat.st_size, stat.st_mtime_ns)
    return found


def test_export_matches_what_was_produced(spark: Any, spark_broker: BrokerProcess,
                                          mixed_topic: tuple[str, list[Any]],
                                          tmp_path: Path) -> None:
    topic, produced = mixed_topic
    layout = DataDirLayout(spark_broker.data_dir)
    for partition in (0, 1):
        segments = list(layout.partition_dir(1, topic, partition).glob("*.log"))
        assert len(segments) >= 3, segments
    before = _files(spark_broker.data_dir)
    summary = export_ok(topic, "--out", str(tmp_path / "out"), "--min-partitions", "7",
                        "--data-dir", str(spark_broker.data_dir))
    assert _files(spark_broker.data_dir) == before  # reading never touches the broker's files
    assert summary["records"] == len(produced) == 1500
    assert summary["files"] >= 1 and summary["output_bytes"] > 0
    assert summary["bytes"] == sum(len(p.key or b"") + len(p.value or b"") for p in produced)
    rows = read_back(tmp_path / "out")
    assert [as_produced(r) for r in rows] == produced
    assert {r["topic"] for r in rows} == {topic}
    assert {r["timestampType"] for r in rows} == {0}
    assert any(r["key"] is None for r in rows) and any(r["value"] is None for r in rows)
    manifest = json.loads(Path(summary["manifest"]).read_text())
    assert [(e["partition"], e["from_offset"], e["to_offset"], e["records"])
            for e in manifest["partitions"]] == [
        (p, 0, 750, 750) for p in (0, 1)]


def test_bootstrap_mode_export_to_json(spark: Any, spark_broker: BrokerProcess,
                                       mixed_topic: tuple[str, list[Any]],
                                       tmp_path: Path) -> None:
    topic, produced = mixed_topic
    export_ok(topic, "--out", str(tmp_path / "out"), "--format", "json",
              "--bootstrap", spark_broker.bootstrap, "--decode", "utf8", "--min-partitions", "4")
    rows = read_back(tmp_path / "out", "json")
    assert len(rows) == len(produced)
    for row, p in zip(rows, produced, strict=True):
        assert (int(row["partition"]), int(row["offset"])) == (p.partition, p.offset)
        assert row["key"] == (p.key.decode() if p.key is not None else None)
        assert row["value"] == (p.value.decode() if p.value is not None else None)
        assert [(h["key"], h.get("value")) for h in row.get("headers") or []] == \
            [(k, v.decode() if v is not None else None) for k, v in p.headers]


def test_decode_json_into_columns(spark: Any, spark_broker: BrokerProcess,
                                  mixed_topic: tuple[str, list[Any]], tmp_path: Path) -> None:
    topic, produced = mixed_topic
    export_ok(topic, "--out", str(tmp_path / "sampled"), "--decode", "json",
              "--data-dir", str(spark_broker.data_dir), "--partition-by", "partition")
    rows = read_back(tmp_path / "sampled")
    assert [(r["n"], r["text"]) for r in rows] == [
        (json.loads(p.value)["n"], json.loads(p.value)["text"]) if p.value else (None, None)
        for p in produced]
    assert sorted(os.listdir(tmp_path / "sampled" / f"topic={topic}")) == [
        "partition=0", "partition=1"]
    export_ok(topic, "--out", str(tmp_path / "given"), "--decode", "json", "--format", "csv",
              "--schema", "n INT", "--data-dir", str(spark_broker.data_dir))
    import pyarrow.csv as pacsv

    tables = [pacsv.read_csv(p) for p in (tmp_path / "given").glob("*.csv")]
    values = sorted(v for t in tables for v in t.column("n").to_pylist() if v is not None)
    assert values == sorted(json.loads(p.value)["n"] for p in produced if p.value)
    assert "text" not in tables[0].column_names


def test_ranges_by_offset_and_by_timestamp(spark: Any, spark_broker: BrokerProcess,
                                           tmp_path: Path) -> None:
    topic = unique("ranges")
    create_topic(spark_broker.bootstrap, topic, partitions=2)
    now = int(time.time() * 1000)
    day = 24 * 3600 * 1000  # both inside the default 7-day retention
    old = produce_confluent(spark_broker.bootstrap, topic, 100, partitions=2,
                            timestamp_ms=now - 2 * day)
    new = produce_confluent(spark_broker.bootstrap, topic, 60, partitions=2, start=100,
                            timestamp_ms=now - day // 2)
    middle = datetime.fromtimestamp((now - day) / 1000, UTC).isoformat()
    source = ("--data-dir", str(spark_broker.data_dir))
    export_ok(topic, "--out", str(tmp_path / "o"), *source,
              "--from", json.dumps({topic: {"0": 10, "1": 20}}),
              "--to", json.dumps({topic: {"0": 15, "1": 70}}))
    got = [(r["partition"], r["offset"]) for r in read_back(tmp_path / "o")]
    assert got == [(0, o) for o in range(10, 15)] + [(1, o) for o in range(20, 70)]
    export_ok(topic, "--out", str(tmp_path / "t"), *source, "--from", f"@{middle}")
    rows = [as_produced(r) for r in read_back(tmp_path / "t")]
    assert rows == new
    assert all(p.timestamp < now - day for p in old)
    export_ok(topic, "--out", str(tmp_path / "b"), "--bootstrap", spark_broker.bootstrap,
              "--from", f"@{now - day}")
    assert [as_produced(r) for r in read_back(tmp_path / "b")] == new


def test_resume_exports_each_record_once(spark: Any, spark_broker: BrokerProcess,
                                         tmp_path: Path) -> None:
    topic = unique("nightly")
    create_topic(spark_broker.bootstrap, topic, partitions=3)
    out = tmp_path / "nightly"
    produced: list[Any] = []
    for run in range(3):
        produced += produce_confluent(spark_broker.bootstrap, topic, 200, partitions=3,
                                      start=run * 200)
        summary = export_ok(topic, "--out", str(out), "--resume",
                            "--data-dir", str(spark_broker.data_dir))
        assert summary["records"] == 200
    rows = [as_produced(r) for r in read_back(out)]
    assert len(rows) == len({(r.partition, r.offset) for r in rows}) == 600
    assert rows == sorted(produced, key=lambda p: (p.partition, p.offset))
    assert len(os.listdir(out / "_slog_manifest")) == 3
    again = export_ok(topic, "--out", str(out), "--resume", "--data-dir",
                      str(spark_broker.data_dir))
    assert again["records"] == 0 and len(read_back(out)) == 600


def test_retention_deleted_offsets(spark: Any, spark_broker: BrokerProcess,
                                   tmp_path: Path) -> None:
    topic = unique("retained")
    create_topic(spark_broker.bootstrap, topic, segment_bytes="4096", retention_bytes="8192")
    produced = produce_confluent(spark_broker.bootstrap, topic, 400)
    directory = DataDirLayout(spark_broker.data_dir).partition_dir(1, topic, 0)
    wait_until(lambda: not (directory / f"{0:020d}.log").exists(), 30,
               "retention to delete the first segment")
    source = ("--data-dir", str(spark_broker.data_dir))
    from_zero = ("--from", json.dumps({topic: {"0": 0}}))
    for mode in (source, ("--bootstrap", spark_broker.bootstrap)):
        failed = export(topic, "--out", str(tmp_path / "fail"), *mode, *from_zero)
        assert failed.exit_code == 1
        assert "no longer available" in failed.stderr and "--no-fail-on-data-loss" in \
            failed.stderr
    skipped = export(topic, "--out", str(tmp_path / "skip"), *source, *from_zero,
                     "--no-fail-on-data-loss", "--output", "json")
    assert skipped.exit_code == 0, skipped.output
    assert "warning: offsets 0.." in skipped.stderr
    rows = [as_produced(r) for r in read_back(tmp_path / "skip")]
    assert rows and rows[0].offset > 0
    assert rows == [p for p in produced if p.offset >= rows[0].offset]
    earliest = export_ok(topic, "--out", str(tmp_path / "earliest"), *source)
    assert earliest["records"] >= len(rows)


@pytest.mark.parametrize(("args", "code", "message"), [
    (("--from", "{not json"), 2, "startingOffsets is neither"),
    (("--from", '{"T":{"0":5}}', "--to", '{"T":{"0":3}}'), 2, "before the starting offset"),
    (("--format", "csv"), 2, "csv cannot hold binary"),
    (("--format", "avro"), 2, "--format must be one of"),
    (("--resume", "--mode", "overwrite"), 2, "--resume adds to earlier exports"),
])
def test_bad_options_fail_before_spark(spark_broker: BrokerProcess, tmp_path: Path,
                                       args: tuple[str, ...], code: int, message: str) -> None:
    topic = "bad-options"
    if topic not in os.listdir(spark_broker.data_dir / "brokers" / "1" / "logs") and \
            not (spark_broker.data_dir / "brokers/1/logs/bad-options-0").exists():
        create_topic(spark_broker.bootstrap, topic)
    args = tuple(a.replace('"T"', f'"{topic}"') for a in args)
    result = export(topic, "--out", str(tmp_path / "o"), "--data-dir",
                    str(spark_broker.data_dir), *args)
    assert result.exit_code == code, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output
    assert not (tmp_path / "o").exists()


def test_missing_topic_and_unreachable_sources(spark_broker: BrokerProcess,
                                               tmp_path: Path) -> None:
    missing = export("no-such-topic", "--out", str(tmp_path / "o"),
                     "--data-dir", str(spark_broker.data_dir))
    assert missing.exit_code == 4
    assert "topic no-such-topic does not exist" in missing.stderr
    over_protocol = export("no-such-topic", "--out", str(tmp_path / "o"),
                           "--bootstrap", spark_broker.bootstrap)
    assert over_protocol.exit_code == 4, over_protocol.output
    nowhere = export("t", "--out", str(tmp_path / "o"), "--data-dir", str(tmp_path / "none"))
    assert nowhere.exit_code == 3
    assert "data dir" in nowhere.stderr and "does not exist" in nowhere.stderr
    not_slog = export("t", "--out", str(tmp_path / "o"), "--data-dir", str(tmp_path))
    assert not_slog.exit_code == 3 and "no slog cluster" in not_slog.stderr
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "part-0.parquet").write_bytes(b"earlier export")
    occupied = export("bad-options", "--out", str(tmp_path / "full"),
                      "--data-dir", str(spark_broker.data_dir))
    assert occupied.exit_code == 2 and "already holds files" in occupied.stderr
    assert (tmp_path / "full" / "part-0.parquet").read_bytes() == b"earlier export"
