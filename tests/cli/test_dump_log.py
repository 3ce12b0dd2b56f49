"""``slog dump-log``: segments written by a real broker, dumped offline after it stopped."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from slog.cli.schema import SCHEMAS
from slog.client import Admin, NewTopic, Producer
from tests.brokers import run_cli, running_broker

TOPIC = "dumped"
BATCHES = 4
PER_BATCH = 3


@pytest.fixture(scope="module")
def segment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first .log of TOPIC-0: 4 batches of 3 keyed records (the last gzip), then a
    clean stop. index.interval.bytes=0 makes every batch get index entries."""
    data_dir = tmp_path_factory.mktemp("dump") / "data"
    with running_broker(data_dir, **{"log.index.interval.bytes": "0"}) as broker:
        with Admin(broker.bootstrap) as admin:
            admin.create_topics([NewTopic(TOPIC, 1, 1)])
        for batch in range(BATCHES):
            compression = "gzip" if batch == BATCHES - 1 else "none"
            with Producer(broker.bootstrap, linger_ms=60_000, compression=compression) as producer:
                futures = [producer.send(TOPIC, f"value {batch}.{i}\n", key=f"key-{i}",
                                         headers=[("h", b"\x00\xff")] if i == 0 else [],
                                         timestamp_ms=1_000_000 + batch * 10 + i)
                           for i in range(PER_BATCH)]
                producer.flush(30)
                for future in futures:
                    future.result(timeout=30)
    found = sorted(data_dir.glob(f"brokers/1/logs/{TOPIC}-0/*.log"))
    assert found, list(data_dir.rglob("*"))
    return found[0]


def dump(*args: str) -> tuple[int, object, str]:
    result = run_cli("dump-log", *args, "-o", "json")
    assert "Traceback" not in result.stderr
    reports = json.loads(result.stdout) if result.stdout else None
    for report in reports or []:
        assert SCHEMAS["dump-log"].check(report) == []  # documented fields only
    return result.returncode, reports, result.stderr


def test_batches(segment: Path) -> None:
    code, reports, _ = dump(str(segment))
    assert code == 0
    [report] = reports  # type: ignore[misc]
    assert report["type"] == "log" and report["base_offset"] == 0 and report["error"] is None
    batches = report["batches"]
    assert len(batches) == BATCHES
    assert [(b["base_offset"], b["last_offset"], b["count"]) for b in batches] == [
        (n * PER_BATCH, n * PER_BATCH + PER_BATCH - 1, PER_BATCH) for n in range(BATCHES)]
    assert [b["compression"] for b in batches] == ["none"] * (BATCHES - 1) + ["gzip"]
    assert all(b["crc_valid"] and b["magic"] == 2 for b in batches)
    assert batches[0]["position"] == 0
    assert batches[1]["position"] == batches[0]["size"]
    assert sum(b["size"] for b in batches) == segment.stat().st_size
    assert batches[0]["create_time"] == 1_000_002
    # acks=all producers are idempotent: a producer id and sequence 0 per new producer.
    assert all(b["producer_id"] >= 0 and b["base_sequence"] == 0 for b in batches)
    assert not any(b["is_transactional"] or b["is_control"] for b in batches)
    assert "records" not in batches[0]


def test_deep_records(segment: Path) -> None:
    code, reports, _ = dump(str(segment), "--deep")
    assert code == 0
    records = [r for b in reports[0]["batches"] for r in b["records"]]  # type: ignore[index]
    assert [r["offset"] for r in records] == list(range(BATCHES * PER_BATCH))
    first = records[0]
    assert first["key"] == "key-0"
    assert first["value"] == "value 0.0\\n"  # non-printable text comes out escaped
    assert first["headers"] == [{"key": "h", "value": "\\x00\\xff"}]
    assert first["timestamp"] == 1_000_000
    assert records[-1]["value"] == "value 3.2\\n"  # decompressed from gzip
    text = run_cli("dump-log", str(segment), "--deep")
    assert text.returncode == 0
    lines = text.stdout.splitlines()
    assert lines[0] == f"Dumping {segment}"
    assert lines[2].startswith("baseOffset: 0 lastOffset: 2 count: 3")
    assert "isvalid: true" in lines[2] and "compresscodec: none" in lines[2]
    assert lines[3].startswith("| offset: 0 CreateTime: 1000000 keySize: 5 valueSize: 10")
    assert "key: key-0 payload: value 0.0\\n" in lines[3]


def test_verify_index_and_index_files(segment: Path) -> None:
    code, reports, _ = dump(str(segment), "--verify-index")
    assert code == 0
    check = reports[0]["index_check"]  # type: ignore[index]
    assert check["index"]["entries"] >= BATCHES - 1 and check["index"]["mismatches"] == []
    assert check["timeindex"]["entries"] >= 1 and check["timeindex"]["mismatches"] == []
    code, reports, _ = dump(str(segment.with_suffix(".index")), "--verify-index")
    assert code == 0
    entries = reports[0]["entries"]  # type: ignore[index]
    assert entries and all(set(e) == {"offset", "position"} for e in entries)
    assert reports[0]["mismatches"] == []  # type: ignore[index]
    code, reports, _ = dump(str(segment.with_suffix(".timeindex")))
    assert code == 0 and all(set(e) == {"timestamp", "offset"}
                             for e in reports[0]["entries"])  # type: ignore[index]


def test_bad_index_entry_is_reported(segment: Path, tmp_path: Path) -> None:
    copy = tmp_path / segment.name
    shutil.copy(segment, copy)
    index = bytearray(segment.with_suffix(".index").read_bytes())
    index[4:8] = (int.from_bytes(index[4:8], "big") + 1).to_bytes(4, "big")  # position of entry 0
    copy.with_suffix(".index").write_bytes(bytes(index))
    copy.with_suffix(".timeindex").write_bytes(segment.with_suffix(".timeindex").read_bytes())
    code, reports, _ = dump(str(copy), "--verify-index")
    assert code == 1
    mismatches = reports[0]["index_check"]["index"]["mismatches"]  # type: ignore[index]
    assert [m["entry"] for m in mismatches] == [0]
    text = run_cli("dump-log", str(copy), "--verify-index")
    assert text.returncode == 1 and "mismatch in entry 0" in text.stdout


def test_corrupt_crc_is_flagged(segment: Path, tmp_path: Path) -> None:
    data = bytearray(segment.read_bytes())
    second = json.loads(run_cli("dump-log", str(segment), "-o", "json").stdout)[0]["batches"][1]
    data[second["position"] + second["size"] - 1] ^= 0xFF  # last byte of the second batch
    copy = tmp_path / segment.name
    copy.write_bytes(bytes(data))
    code, reports, stderr = dump(str(copy), "--deep")
    assert code == 1
    batches = reports[0]["batches"]  # type: ignore[index]
    assert [b["crc_valid"] for b in batches] == [True, False, True, True]
    assert batches[1]["computed_crc"] != batches[1]["crc"]
    assert len(batches[3]["records"]) == PER_BATCH  # the walk goes on past a bad CRC
    assert "1 batch(es) fail their CRC" in stderr
    text = run_cli("dump-log", str(copy))
    assert text.returncode == 1 and "isvalid: false" in text.stdout


def test_truncated_and_garbage_files(segment: Path, tmp_path: Path) -> None:
    data = segment.read_bytes()
    truncated = tmp_path / segment.name
    truncated.write_bytes(data[:-7])
    result = run_cli("dump-log", str(truncated))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "truncated" in result.stderr
    assert result.stdout.count("baseOffset:") == BATCHES - 1  # what precedes is still shown
    # Zero padding (an active segment's preallocated tail) is not an error.
    padded = tmp_path / "00000000000000000000.log"
    padded.write_bytes(data + bytes(4096))
    code, reports, _ = dump(str(padded))
    assert code == 0 and reports[0]["zero_padding_bytes"] == 4096  # type: ignore[index]
    garbage = tmp_path / "00000000000000000007.log"
    garbage.write_bytes(b"this is not a kafka log segment at all, not even close to one!!")
    result = run_cli("dump-log", str(garbage))
    assert result.returncode == 1 and "error:" in result.stderr
    assert "Traceback" not in result.stderr


def test_yaml_output(segment: Path) -> None:
    import yaml

    result = run_cli("dump-log", str(segment), "-o", "yaml")
    assert result.returncode == 0
    [report] = yaml.safe_load(result.stdout)
    assert len(report["batches"]) == BATCHES


def test_missing_and_wrong_files(tmp_path: Path) -> None:
    missing = run_cli("dump-log", str(tmp_path / "00000000000000000000.log"))
    assert missing.returncode == 4 and "no such file" in missing.stderr
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    wrong = run_cli("dump-log", str(other))
    assert wrong.returncode == 2 and "not a segment file" in wrong.stderr
    half = tmp_path / "00000000000000000000.index"
    half.write_bytes(bytes(12))
    result = run_cli("dump-log", str(half))
    assert result.returncode == 1 and "trailing bytes" in result.stderr
