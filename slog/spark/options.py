"""The ``slog`` data source's options, parsed and checked before Spark plans anything.

Names and meanings follow Spark's Kafka source, so a user who knows
``spark.read.format("kafka")`` knows these. Pure: no I/O, no pyspark.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from slog.core.errors import SlogError

EARLIEST = "earliest"
LATEST = "latest"
DEFAULT_MAX_RECORDS_PER_PARTITION = 1_000_000
READ_UNCOMMITTED, READ_COMMITTED = "read_uncommitted", "read_committed"
ISOLATION_LEVELS = (READ_UNCOMMITTED, READ_COMMITTED)

# Per-partition offsets as the Kafka source writes them: {"topic": {"0": 5, "1": -2}}.
# -2 means earliest and -1 latest, as in Kafka's JSON.
PartitionOffsets = dict[tuple[str, int], int]
EARLIEST_MARK, LATEST_MARK = -2, -1


class OptionError(SlogError, ValueError):
    """A data source option is missing, malformed or inconsistent."""


@dataclass(frozen=True)
class SourceOptions:
    topics: tuple[str, ...] = ()
    topic_pattern: str | None = None
    starting: str | PartitionOffsets = EARLIEST
    ending: str | PartitionOffsets = LATEST
    starting_timestamp: int | None = None
    min_partitions: int = 0
    max_records_per_partition: int = DEFAULT_MAX_RECORDS_PER_PARTITION
    include_headers: bool = False
    fail_on_data_loss: bool = True
    data_dir: str | None = None
    bootstrap: str | None = None
    batch_records: int = 65_536
    isolation_level: str = READ_UNCOMMITTED
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def read_committed(self) -> bool:
        """Only committed transactions' records, read below the last stable offset."""
        return self.isolation_level == READ_COMMITTED

    def topic_matches(self, name: str) -> bool:
        if self.topic_pattern is not None:
            return re.fullmatch(self.topic_pattern, name) is not None
        return name in self.topics


def _get(options: Mapping[str, str], *names: str) -> str | None:
    lowered = {k.lower(): v for k, v in options.items()}
    for name in names:
        value = lowered.get(name.lower())
        if value is not None and str(value).strip() != "":
            return str(value).strip()
    return None


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    value = _get(options, name)
    if value is None:
        return default
    if value.lower() in ("true", "1", "yes"):
        return True
    if value.lower() in ("false", "0", "no"):
        return False
    raise OptionError(f"option {name} must be true or false, not {value!r}")


def _int(options: Mapping[str, str], name: str, default: int, minimum: int = 0) -> int:
    value = _get(options, name)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise OptionError(f"option {name} must be an integer, not {value!r}") from None
    if number < minimum:
        raise OptionError(f"option {name} must be at least {minimum}, not {number}")
    return number


def _isolation_level(options: Mapping[str, str]) -> str:
    value = _get(options, "isolation.level", "kafka.isolation.level", "isolationLevel")
    if value is None:
        return READ_UNCOMMITTED
    if value.lower() not in ISOLATION_LEVELS:
        raise OptionError(f"option isolation.level must be {READ_UNCOMMITTED} or "
                          f"{READ_COMMITTED}, not {value!r}")
    return value.lower()


def parse_offsets(text: str, name: str, default: str) -> str | PartitionOffsets:
    """``earliest`` / ``latest``, or Kafka's JSON ``{"topic": {"partition": offset}}``."""
    word = text.strip().lower()
    if word in (EARLIEST, LATEST):
        if name == "endingOffsets" and word == EARLIEST:
            raise OptionError("endingOffsets cannot be earliest")
        return word
    try:
        parsed: Any = json.loads(text)
    except ValueError as exc:
        raise OptionError(f"{name} is neither {default!r} nor valid JSON: {exc}") from None
    if not isinstance(parsed, dict) or not parsed:
        raise OptionError(f'{name} JSON must look like {{"topic": {{"0": 23}}}}, not {text!r}')
    result: PartitionOffsets = {}
    for topic, partitions in parsed.items():
        if not isinstance(partitions, dict):
            raise OptionError(f"{name}: partitions of {topic!r} must be an object")
        for partition, offset in partitions.items():
            try:
                number = int(partition)
            except ValueError:
                raise OptionError(f"{name}: {partition!r} is not a partition number") from None
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < -2:
                raise OptionError(f"{name}: offset of {topic}-{partition} must be an integer "
                                  f"≥ -2, not {offset!r}")
            result[(str(topic), number)] = offset
    return result


def parse_options(options: Mapping[str, str]) -> SourceOptions:
    """Check every option; raises OptionError with a message meant for the user."""
    topic = _get(options, "topic")
    topics_text = _get(options, "topics", "subscribe")
    pattern = _get(options, "topicPattern", "subscribePattern")
    chosen = [o for o in (topic, topics_text, pattern) if o is not None]
    if len(chosen) != 1:
        raise OptionError("give exactly one of the options topic, topics (subscribe) or "
                          "topicPattern (subscribePattern)")
    topics: tuple[str, ...] = ()
    if topic is not None:
        topics = (topic,)
    elif topics_text is not None:
        topics = tuple(t.strip() for t in topics_text.split(",") if t.strip())
        if not topics:
            raise OptionError("option topics names no topic")
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise OptionError(f"topicPattern is not a valid regular expression: {exc}") from None
    starting_timestamp = _get(options, "startingTimestamp")
    starting_text = _get(options, "startingOffsets")
    if starting_timestamp is not None and starting_text is not None:
        raise OptionError("give startingOffsets or startingTimestamp, not both")
    timestamp: int | None = None
    if starting_timestamp is not None:
        try:
            timestamp = int(starting_timestamp)
        except ValueError:
            raise OptionError("startingTimestamp must be milliseconds since the epoch, "
                              f"not {starting_timestamp!r}") from None
    data_dir = _get(options, "dataDir")
    bootstrap = _get(options, "bootstrap", "kafka.bootstrap.servers", "bootstrap.servers")
    if data_dir is not None and bootstrap is not None:
        raise OptionError("give dataDir or bootstrap, not both")
    return SourceOptions(
        topics=topics,
        topic_pattern=pattern,
        starting=parse_offsets(starting_text, "startingOffsets", EARLIEST)
        if starting_text else EARLIEST,
        ending=parse_offsets(_get(options, "endingOffsets") or LATEST, "endingOffsets", LATEST),
        starting_timestamp=timestamp,
        min_partitions=_int(options, "minPartitions", 0),
        max_records_per_partition=_int(options, "maxRecordsPerPartition",
                                       DEFAULT_MAX_RECORDS_PER_PARTITION, minimum=1),
        include_headers=_bool(options, "includeHeaders", False),
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        data_dir=data_dir,
        bootstrap=bootstrap,
        batch_records=_int(options, "batchRecords", 65_536, minimum=1),
        isolation_level=_isolation_level(options),
    )


def offsets_json(offsets: Mapping[tuple[str, int], int]) -> str:
    """Kafka's per-partition offsets JSON for ``offsets``."""
    nested: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        nested.setdefault(topic, {})[str(partition)] = offset
    return json.dumps(nested, separators=(",", ":"))
