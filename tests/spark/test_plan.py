"""The pure parts: option parsing, range resolution and splitting, manifests."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

import pytest

from slog.spark.catalog import TP, PartitionBounds, TopicNotFoundError, _select
from slog.spark.manifest import PartitionEntry, resume_offsets, write_manifest
from slog.spark.options import OptionError, offsets_json, parse_options
from slog.spark.plan import DataLossError, OffsetRange, resolve_ranges, split_ranges


@dataclass
class FixedCatalog:
    """Answers from a table: the planner's only input besides the options."""

    table: dict[TP, tuple[int, int]]
    mode: str = "dataDir"

    def partitions(self, options: object) -> list[TP]:
        return _select(options, {t: 1 + max(p for tt, p in self.table if tt == t)
                                 for t, _ in self.table})

    def bounds(self, tps: list[TP]) -> dict[TP, PartitionBounds]:
        return {tp: PartitionBounds(*self.table[tp], "loc") for tp in tps}

    def offsets_for_timestamp(self, tps: list[TP], timestamp_ms: int) -> dict[TP, int | None]:
        return {tp: (self.table[tp][0] + 3 if timestamp_ms < 100 else None) for tp in tps}

    def close(self) -> None:
        pass


CATALOG = FixedCatalog({("a", 0): (10, 100), ("a", 1): (0, 50), ("b", 0): (0, 0)})


def test_resolve_defaults_and_json() -> None:
    ranges, warnings = resolve_ranges(parse_options({"topics": "a,b"}), CATALOG)
    assert [(r.topic, r.partition, r.start, r.end) for r in ranges] == [
        ("a", 0, 10, 100), ("a", 1, 0, 50), ("b", 0, 0, 0)]
    assert warnings == []
    opts = parse_options({"topic": "a", "startingOffsets": '{"a":{"0":20,"1":-2}}',
                          "endingOffsets": '{"a":{"0":30,"1":-1}}'})
    assert [(r.start, r.end) for r in resolve_ranges(opts, CATALOG)[0]] == [(20, 30), (0, 50)]
    by_time = parse_options({"topicPattern": "a", "startingTimestamp": "5"})
    assert [(r.start, r.end) for r in resolve_ranges(by_time, CATALOG)[0]] == [(13, 100),
                                                                              (3, 50)]
    later = parse_options({"topicPattern": "a", "startingTimestamp": "500"})
    assert [(r.start, r.end) for r in resolve_ranges(later, CATALOG)[0]] == [(100, 100),
                                                                            (50, 50)]


def test_data_loss_fails_or_warns() -> None:
    lost = {"topic": "a", "startingOffsets": '{"a":{"0":5}}'}
    with pytest.raises(DataLossError, match=r"offsets 5\.\.9 of a-0"):
        resolve_ranges(parse_options(lost), CATALOG)
    ranges, warnings = resolve_ranges(parse_options({**lost, "failOnDataLoss": "false"}),
                                      CATALOG)
    assert (ranges[0].start, ranges[0].end) == (10, 100)
    assert warnings and "a-0" in warnings[0]


@pytest.mark.parametrize(("options", "message"), [
    ({}, "exactly one of"),
    ({"topic": "a", "topics": "a"}, "exactly one of"),
    ({"topic": "a", "startingOffsets": "[1]"}, "must look like"),
    ({"topic": "a", "startingOffsets": '{"a":{"x":1}}'}, "not a partition number"),
    ({"topic": "a", "endingOffsets": "earliest"}, "cannot be earliest"),
    ({"topic": "a", "minPartitions": "many"}, "must be an integer"),
    ({"topic": "a", "includeHeaders": "perhaps"}, "true or false"),
    ({"topicPattern": "("}, "not a valid regular expression"),
    ({"topic": "a", "dataDir": "/x", "bootstrap": "h:1"}, "not both"),
    ({"topic": "a", "isolation.level": "committed"}, "read_uncommitted or read_committed"),
])
def test_bad_options(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        parse_options(options)


def test_isolation_level_under_both_names() -> None:
    assert not parse_options({"topic": "a"}).read_committed  # Kafka's default
    assert parse_options({"topic": "a", "isolation.level": "read_committed"}).read_committed
    spark_name = parse_options({"topic": "a", "kafka.isolation.level": "READ_COMMITTED"})
    assert spark_name.isolation_level == "read_committed"
    assert not parse_options({"topic": "a",
                              "kafka.isolation.level": "read_uncommitted"}).read_committed


def test_inconsistent_ranges_and_missing_topics() -> None:
    with pytest.raises(OptionError, match="before the starting offset"):
        resolve_ranges(parse_options({"topic": "a", "startingOffsets": '{"a":{"0":40}}',
                                      "endingOffsets": '{"a":{"0":30}}'}), CATALOG)
    with pytest.raises(OptionError, match="not read"):
        resolve_ranges(parse_options({"topic": "a", "startingOffsets": '{"z":{"0":4}}'}),
                       CATALOG)
    with pytest.raises(TopicNotFoundError, match="topic nope does not exist"):
        resolve_ranges(parse_options({"topics": "a,nope"}), CATALOG)


def test_split_ranges_caps_and_min_partitions() -> None:
    ranges = [OffsetRange("a", 0, 0, 1000), OffsetRange("a", 1, 0, 10), OffsetRange("b", 0, 5, 5)]
    tasks = split_ranges(ranges, 0, 300)
    assert [(t.partition, t.start, t.end) for t in tasks if t.topic == "a"] == [
        (0, 0, 250), (0, 250, 500), (0, 500, 750), (0, 750, 1000), (1, 0, 10)]
    many = split_ranges(ranges, 20, 10_000)
    assert len(many) >= 20
    for tp in (("a", 0), ("a", 1)):
        pieces = [t for t in many if (t.topic, t.partition) == tp]
        assert pieces[0].start == 0 and all(x.end == y.start for x, y in itertools.pairwise(pieces))
    assert sum(t.size for t in many) == 1010


def test_manifests_resume_from_the_furthest_end(tmp_path: Path) -> None:
    out = str(tmp_path)
    write_manifest(out, "1", [PartitionEntry("a", 0, 0, 10, 10)], {})
    write_manifest(out, "2", [PartitionEntry("a", 0, 10, 25, 15),
                              PartitionEntry("a", 1, 0, 4, 4)], {})
    assert resume_offsets(out) == {("a", 0): 25, ("a", 1): 4}
    assert offsets_json({("a", 1): 4, ("a", 0): 25}) == '{"a":{"0":25,"1":4}}'
