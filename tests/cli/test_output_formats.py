"""Every data command in table, json and yaml against a real broker: documented fields
(slog/cli/schema.py, the source of docs/cli.md), table conventions and exit codes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from slog.cli.app import app
from slog.cli.schema import SCHEMAS
from tests.brokers import BrokerProcess, run_cli

runner = CliRunner()


@pytest.fixture(scope="module")
def bootstrap(shared_broker: BrokerProcess) -> Iterator[str]:
    """Topics fmt-a, fmt-b (2 partitions), other-c, some records, and group fmt-g."""
    address = shared_broker.bootstrap
    assert invoke(address, "topic", "create", "fmt-a", "fmt-b", "other-c", "-p", "2").exit_code \
        == 0
    produced = invoke(address, "produce", "fmt-a", "-K:", stdin="k1:v1\nk2:v2\nk3:v3\n")
    assert produced.exit_code == 0, produced.output
    consumed = invoke(address, "consume", "fmt-a", "-e", "-g", "fmt-g")
    assert consumed.exit_code == 0, consumed.output
    yield address


def invoke(bootstrap: str, *args: str, stdin: str | None = None) -> Any:
    return runner.invoke(app, [*args, "-b", bootstrap], input=stdin)


def check_documented(key: str, data: Any) -> None:
    shape = SCHEMAS[key]
    items = data if shape.kind in ("list", "stream") else [data]
    assert isinstance(items, list)
    for item in items:
        assert shape.check(item) == [], (key, item)


# (schema key, command arguments): each must print at least one item.
DATA_COMMANDS = [
    ("topic list", ["topic", "list"]),
    ("topic list", ["topic", "list", "-r", "fmt-.*"]),
    ("topic describe", ["topic", "describe", "fmt-a", "fmt-b"]),
    ("topic describe", ["topic", "describe", "-r", "fmt-.*"]),
    ("group list", ["group", "list"]),
    ("group describe", ["group", "describe", "fmt-g"]),
    ("group describe", ["group", "describe", "fmt-g", "--members"]),
    ("group describe", ["group", "describe", "-r", "fmt-.*", "--state"]),
    ("describe-group", ["describe-group", "fmt-g"]),
    ("elect-leaders", ["elect-leaders", "--type", "preferred", "--topic", "fmt-a"]),
    ("elect-leaders", ["elect-leaders", "--type", "preferred", "fmt-a", "-r", "fmt-b"]),
    ("get-offsets", ["get-offsets", "fmt-a"]),
    # --before 0 deletes nothing, so the three runs print the same.
    ("topic delete-records", ["topic", "delete-records", "fmt-a", "-p", "0", "--before", "0"]),
    ("reassign list", ["reassign", "list"]),
    ("config show", ["config", "show"]),
    ("config describe", ["config", "describe", "--broker", "1"]),
    ("config describe", ["config", "describe", "--topic", "fmt-a"]),
    ("cluster status", ["cluster", "status"]),
]


@pytest.mark.parametrize(("key", "args"), DATA_COMMANDS, ids=[" ".join(a) for _, a in
                                                               DATA_COMMANDS])
def test_json_yaml_and_table_agree(bootstrap: str, key: str, args: list[str]) -> None:
    as_json = invoke(bootstrap, *args, "-o", "json")
    assert as_json.exit_code == 0, as_json.output
    data = json.loads(as_json.stdout)
    check_documented(key, data)
    as_yaml = invoke(bootstrap, *args, "-o", "yaml")
    assert as_yaml.exit_code == 0, as_yaml.output
    assert yaml.safe_load(as_yaml.stdout) == data
    table = invoke(bootstrap, *args)
    assert table.exit_code == 0, table.output
    if data and SCHEMAS[key].kind == "list":
        header = table.stdout.splitlines()[0]
        assert header == header.upper() and "_" not in header, header
        assert "\x1b[" not in table.stdout  # no colour when not on a terminal


def test_regex_selects_topics_and_groups(bootstrap: str) -> None:
    listed = json.loads(invoke(bootstrap, "topic", "list", "-r", "fmt-.*", "-o", "json").stdout)
    assert [r["topic"] for r in listed] == ["fmt-a", "fmt-b"]
    described = json.loads(invoke(bootstrap, "topic", "describe", "other-c", "-r", "fmt-b",
                                  "-o", "json").stdout)
    assert {r["topic"] for r in described} == {"other-c", "fmt-b"}
    groups = json.loads(invoke(bootstrap, "group", "list", "-r", "fmt-.*", "-o", "json").stdout)
    assert [g["group"] for g in groups] == ["fmt-g"]
    everything = json.loads(invoke(bootstrap, "topic", "describe", "-r", ".*", "-o",
                                   "json").stdout)
    assert "__consumer_offsets" not in {r["topic"] for r in everything}  # never by regex
    bad = invoke(bootstrap, "topic", "list", "-r", "(")
    assert bad.exit_code == 2 and "regular expression" in bad.output


def test_not_applicable_values_are_dashes(bootstrap: str) -> None:
    table = invoke(bootstrap, "topic", "create", "fmt-a", "--if-not-exists")
    assert table.exit_code == 0, table.output
    row = table.stdout.splitlines()[1].split()
    assert row[:2] == ["fmt-a", "exists"] and row[2:] == ["-", "-", "-"]
    data = json.loads(invoke(bootstrap, "topic", "create", "fmt-a", "--if-not-exists",
                             "-o", "json").stdout)
    check_documented("topic create", data)


def test_consume_streams_json_lines_and_yaml_documents(bootstrap: str) -> None:
    lines = invoke(bootstrap, "consume", "fmt-a", "-e", "--output", "json").stdout.splitlines()
    records = [json.loads(line) for line in lines]
    assert sorted(r["key"] for r in records) == ["k1", "k2", "k3"]
    check_documented("consume", records)
    documents = list(yaml.safe_load_all(invoke(bootstrap, "consume", "fmt-a", "-e",
                                               "--output", "yaml").stdout))
    assert documents == records


def test_produce_prints_its_summary_as_one_document(bootstrap: str) -> None:
    as_json = invoke(bootstrap, "produce", "other-c", "-K:", "-o", "json", stdin="a:1\nb:22\n")
    assert as_json.exit_code == 0, as_json.output
    data = json.loads(as_json.stdout)
    check_documented("produce", data)
    assert {k: data[k] for k in ("topic", "records", "errors", "bytes", "error")} == \
        {"topic": "other-c", "records": 2, "errors": 0, "bytes": 5, "error": None}
    assert data["elapsed_s"] >= 0 and data["records_per_s"] > 0
    assert "produced" not in as_json.stderr  # the document replaces the summary line
    as_yaml = invoke(bootstrap, "produce", "other-c", "--output", "yaml", stdin="x\n")
    assert as_yaml.exit_code == 0, as_yaml.output
    document = yaml.safe_load(as_yaml.stdout)
    check_documented("produce", document)
    assert (document["records"], document["bytes"]) == (1, 1)
    table = invoke(bootstrap, "produce", "other-c", stdin="y\n")
    assert table.exit_code == 0, table.output
    assert table.stdout == "" and "produced 1 of 1 records" in table.stderr


@pytest.mark.parametrize(("args", "code"), [
    (["topic", "describe", "no-such-topic"], 4),
    (["topic", "describe", "-r", "nothing-.*"], 4),
    (["topic", "delete", "no-such-topic"], 4),
    (["topic", "delete", "-r", "nothing-.*"], 4),
    (["topic", "delete"], 2),
    (["group", "describe", "no-such-group"], 4),
    (["group", "delete", "no-such-group"], 4),
    (["group", "delete"], 2),
    (["consume", "no-such-topic", "-e"], 4),
    (["topic", "create", "fmt-a"], 1),
    (["topic", "list", "-o", "xml"], 2),
])
def test_exit_codes(bootstrap: str, args: list[str], code: int) -> None:
    result = invoke(bootstrap, *args)
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output


def test_errors_go_to_stderr_with_a_hint_and_no_traceback(bootstrap: str) -> None:
    result = run_cli("topic", "describe", "no-such-topic", "-b", bootstrap, "-o", "json")
    assert result.returncode == 4
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0].startswith("error: ") and lines[1].startswith("hint: ")
    assert "Traceback" not in result.stderr


def test_broker_start_and_stop_print_json(tmp_path: Path) -> None:
    from tests.brokers import free_port

    data_dir = str(tmp_path / "data")
    started = run_cli("broker", "start", "--id", "7", "--data-dir", data_dir,
                      "--listen", f"127.0.0.1:{free_port()}", "-o", "json")
    try:
        assert started.returncode == 0, started.stderr
        check_documented("broker start", json.loads(started.stdout))
    finally:
        stopped = run_cli("broker", "stop", "--id", "7", "--data-dir", data_dir, "-o", "yaml")
    assert stopped.returncode == 0, stopped.stderr
    check_documented("broker stop", yaml.safe_load(stopped.stdout))
    again = run_cli("broker", "stop", "--id", "7", "--data-dir", data_dir)
    assert again.returncode == 4 and again.stderr.startswith("error: ")
