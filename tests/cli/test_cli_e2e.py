"""The topic/produce/consume commands as a user runs them: real processes, real broker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.brokers import BrokerProcess, run_cli


@pytest.fixture(scope="module")
def bootstrap(shared_broker: BrokerProcess) -> str:
    return shared_broker.bootstrap


def slog(bootstrap: str, *args: str, input_text: str | None = None):
    return run_cli(*args, "-b", bootstrap, input_text=input_text)


def test_topic_lifecycle(bootstrap: str) -> None:
    created = slog(bootstrap, "topic", "create", "life", "-p", "3", "-c", "retention.ms=60000",
                   "-o", "json")
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)[0] == {
        "topic": "life", "status": "created", "partitions": 3, "replication_factor": 1,
        "topic_id": json.loads(created.stdout)[0]["topic_id"], "error": None}
    again = slog(bootstrap, "topic", "create", "life")
    assert again.returncode == 1 and "TOPIC_ALREADY_EXISTS" in again.stdout
    assert slog(bootstrap, "topic", "create", "life", "--if-not-exists").returncode == 0
    listed = json.loads(slog(bootstrap, "topic", "list", "-o", "json").stdout)
    assert {"topic": "life", "partitions": 3} .items() <= next(
        t for t in listed if t["topic"] == "life").items()
    altered = slog(bootstrap, "topic", "alter", "life", "--partitions", "5")
    assert altered.returncode == 0, altered.stderr
    described = json.loads(slog(bootstrap, "topic", "describe", "life", "-o", "json").stdout)
    assert [p["partition"] for p in described] == [0, 1, 2, 3, 4]
    assert all(p["leader"] == 1 and p["isr"] == [1] for p in described)
    table = slog(bootstrap, "topic", "describe", "life").stdout.splitlines()
    assert table[0].split() == ["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR",
                                "LOG-START-OFFSET", "HIGH-WATERMARK", "LAST-STABLE-OFFSET",
                                "LOG-END-OFFSET"]
    deleted = slog(bootstrap, "topic", "delete", "life")
    assert deleted.returncode == 0
    assert slog(bootstrap, "topic", "describe", "life").returncode == 4
    assert slog(bootstrap, "topic", "delete", "life").returncode == 4


def test_illegal_name_is_refused_with_a_hint(bootstrap: str) -> None:
    result = slog(bootstrap, "topic", "create", "../escape")
    assert result.returncode == 1
    assert "INVALID_TOPIC_EXCEPTION" in result.stdout


def test_produce_keys_headers_and_consume_formats(bootstrap: str, tmp_path: Path) -> None:
    assert slog(bootstrap, "topic", "create", "fmt", "-p", "2").returncode == 0
    data = tmp_path / "in.txt"
    data.write_text("alice:one\nbob:two\nno-key-here\nalice:three\n")
    produced = slog(bootstrap, "produce", "fmt", "--file", str(data), "-K", ":", "-H", "src=test")
    assert produced.returncode == 0, produced.stderr
    assert "produced 4 of 4 records" in produced.stderr
    out = slog(bootstrap, "consume", "fmt", "-e", "-f", "%k|%v|%h\\n").stdout.splitlines()
    assert sorted(out) == sorted(["alice|one|src=test", "bob|two|src=test",
                                  "|no-key-here|src=test", "alice|three|src=test"])
    records = [json.loads(line) for line in
               slog(bootstrap, "consume", "fmt", "-e", "--output", "json").stdout.splitlines()]
    alice = [r for r in records if r["key"] == "alice"]
    assert [r["value"] for r in alice] == ["one", "three"]  # same key, same partition, in order
    assert len({r["partition"] for r in alice}) == 1
    assert next(r for r in records if r["value"] == "no-key-here")["key"] is None
    assert alice[0]["headers"] == [{"key": "src", "value": "test"}]


def test_consume_offsets_and_limits(bootstrap: str) -> None:
    lines = "".join(f"v{i}\n" for i in range(10))
    assert slog(bootstrap, "produce", "e2e-offs", "-p", "0", input_text=lines).returncode == 0

    def values(*args: str) -> list[str]:
        return slog(bootstrap, "consume", "e2e-offs", "-e", *args).stdout.split()
    assert values() == [f"v{i}" for i in range(10)]
    assert values("-o", "7") == ["v7", "v8", "v9"]
    assert values("-o", "-2") == ["v8", "v9"]
    assert values("-o", "end") == []
    assert values("-n", "3") == ["v0", "v1", "v2"]
    stamps = [json.loads(x)["timestamp"] for x in
              slog(bootstrap, "consume", "e2e-offs", "-e", "--output", "json").stdout.splitlines()]
    assert values("-o", f"@{stamps[0]}")[0] == "v0"
    assert values("-o", f"@{stamps[-1] + 60_000}") == []


def test_produce_failures_exit_nonzero_with_the_reason(bootstrap: str) -> None:
    assert slog(bootstrap, "topic", "create", "tiny", "-c", "max.message.bytes=100"
                ).returncode == 0
    result = slog(bootstrap, "produce", "tiny", "--linger-ms", "0", input_text="x" * 500 + "\n")
    assert result.returncode == 1
    assert "1 records failed" in result.stderr
    assert "MESSAGE_TOO_LARGE" in result.stderr


def test_consume_unknown_topic_is_not_found(bootstrap: str) -> None:
    result = slog(bootstrap, "consume", "never-created", "-e")
    assert result.returncode == 4
    assert "does not exist" in result.stderr


def test_crlf_input_and_a_missing_final_newline(bootstrap: str) -> None:
    result = slog(bootstrap, "produce", "crlf", "-K", ":", input_text="a:1\r\nb:2\r\nc:3")
    assert result.returncode == 0, result.stderr
    out = slog(bootstrap, "consume", "crlf", "-e", "-f", "[%k][%v]\\n").stdout.splitlines()
    assert sorted(out) == ["[a][1]", "[b][2]", "[c][3]"]
