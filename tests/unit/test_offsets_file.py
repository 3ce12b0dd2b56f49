"""`slog topic delete-records --offsets-json`: kafka-delete-records' file format."""

from __future__ import annotations

import json

import pytest

from slog.cli.offsets_file import parse_offsets_json


def test_kafka_delete_records_format() -> None:
    text = json.dumps({"partitions": [{"topic": "a", "partition": 0, "offset": 10},
                                      {"topic": "a", "partition": 1, "offset": -1},
                                      {"topic": "b", "partition": 0, "offset": 0}],
                       "version": 1})
    assert parse_offsets_json(text) == {("a", 0): 10, ("a", 1): -1, ("b", 0): 0}
    # "version" may be left out (kafka-delete-records defaults it to 1).
    assert parse_offsets_json('{"partitions": [{"topic": "a", "partition": 2, '
                              '"offset": 3}]}') == {("a", 2): 3}


@pytest.mark.parametrize(("text", "says"), [
    ("{", "not valid JSON"),
    ("[]", "expected an object"),
    ('{"partitions": [], "version": 1}', "non-empty"),
    ('{"partitions": [{"topic": "a", "partition": 0, "offset": 1}], "version": 2}',
     "unsupported version"),
    ('{"partitions": [{"topic": "a", "partition": "0", "offset": 1}]}', "'partition'"),
    ('{"partitions": [{"topic": "a", "partition": 0, "offset": true}]}', "'offset'"),
    ('{"partitions": [{"partition": 0, "offset": 1}]}', "'topic'"),
    ('{"partitions": [{"topic": "a", "partition": -1, "offset": 1}]}', "0 or more"),
    ('{"partitions": [{"topic": "a", "partition": 0, "offset": -2}]}', "high watermark"),
    ('{"partitions": [{"topic": "a", "partition": 0, "offset": 1}, '
     '{"topic": "a", "partition": 0, "offset": 2}]}', "more than once"),
    ('{"partitions": [7]}', "expected an object"),
])
def test_bad_files_say_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_offsets_json(text)
