"""Where a topic's partitions are and which offsets of them are committed.

Two catalogs answer the same questions for the planner:

* :class:`DataDirCatalog` reads a slog data dir: the metadata log (replayed
  into a ``MetadataImage``) names each partition's leader and ISR, and the
  replicas' segment files give the offsets. slog does not persist the high
  watermark (there is no replication-offset-checkpoint), so the committed end
  is bounded as ``min(LEO)`` over the ISR replicas' files: every record below
  it is on every in-sync replica and survives any clean leader election. It
  can trail the broker's HW for a moment, never lead it unsafely.
* :class:`ProtocolCatalog` asks any Kafka-protocol cluster (slog or Kafka):
  Metadata for partitions, ListOffsets for earliest / latest (the HW) / by
  timestamp.

With ``isolation.level=read_committed`` the end is the last stable offset
instead: ListOffsets read_committed over the protocol, a replay of the reader
replica's batch headers below the committed end in a data dir
(:mod:`slog.spark.transactions`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from slog.spark.options import OptionError, SourceOptions

TP = tuple[str, int]

DATA_DIR = "dataDir"
BOOTSTRAP = "bootstrap"


class TopicNotFoundError(OptionError):
    """A topic named in the options does not exist."""


class SourceUnavailableError(OptionError):
    """The data dir or the cluster cannot be reached."""


@dataclass(frozen=True)
class PartitionBounds:
    """A partition's readable offsets ``[start, end)`` and where to read them."""

    start: int
    end: int
    location: str  # a replica's log directory (dataDir) or the bootstrap list


class Catalog(Protocol):
    mode: str

    def partitions(self, options: SourceOptions) -> list[TP]: ...

    def bounds(self, tps: list[TP]) -> dict[TP, PartitionBounds]: ...

    def offsets_for_timestamp(self, tps: list[TP], timestamp_ms: int) -> dict[TP, int | None]: ...

    def close(self) -> None: ...


def _select(options: SourceOptions, existing: dict[str, int]) -> list[TP]:
    """The (topic, partition) pairs the options ask for, or TopicNotFoundError."""
    if options.topic_pattern is not None:
        names = sorted(n for n in existing if options.topic_matches(n))
    else:
        missing = [t for t in options.topics if t not in existing]
        if missing:
            raise TopicNotFoundError(f"topic {', '.join(missing)} does not exist")
        names = list(options.topics)
    return [(name, p) for name in names for p in range(existing[name])]


class DataDirCatalog:
    """Partitions and committed offsets from a slog data dir, without touching a broker."""

    mode = DATA_DIR

    def __init__(self, data_dir: str, read_committed: bool = False):
        from slog.core.metadata import MetadataImage
        from slog.core.metadata_log import MetadataLogReader
        from slog.core.names import DataDirLayout

        root = Path(data_dir).expanduser()
        self.layout = DataDirLayout(root)
        self.read_committed = read_committed
        if not self.layout.cluster_file.exists():
            raise SourceUnavailableError(f"no slog cluster in data dir {root}")
        self.image = MetadataImage()
        self.image.apply_all(MetadataLogReader(self.layout.metadata_dir).poll())

    def partitions(self, options: SourceOptions) -> list[TP]:
        existing = {name: len(t.partitions) for name, t in self.image.topics.items()}
        return _select(options, existing)

    def _log_start_checkpoint(self, broker_id: int) -> dict[TP, int]:
        from slog.core.checkpoint import OffsetCheckpointFile
        from slog.core.errors import StorageError
        from slog.core.log_manager import LOG_START_OFFSET_CHECKPOINT

        path = self.layout.broker_dir(broker_id) / LOG_START_OFFSET_CHECKPOINT
        try:
            return OffsetCheckpointFile(path).read()
        except StorageError:
            return {}  # half-written or foreign: the segment files still bound the log

    def bounds(self, tps: list[TP]) -> dict[TP, PartitionBounds]:
        from slog.spark.segments import LogBounds, log_bounds
        from slog.spark.transactions import last_stable_offset

        checkpoints: dict[int, dict[TP, int]] = {}
        result: dict[TP, PartitionBounds] = {}
        for tp in tps:
            state = self.image.partition(*tp)
            if state is None:
                raise TopicNotFoundError(f"partition {tp[0]}-{tp[1]} does not exist")
            replicas: dict[int, tuple[Path, LogBounds]] = {}
            for broker_id in state.isr:
                directory = self.layout.partition_dir(broker_id, *tp)
                if not directory.is_dir():
                    continue
                if broker_id not in checkpoints:
                    checkpoints[broker_id] = self._log_start_checkpoint(broker_id)
                replicas[broker_id] = (directory, log_bounds(directory,
                                                             checkpoints[broker_id].get(tp)))
            if not replicas:
                raise SourceUnavailableError(
                    f"no in-sync replica log of {tp[0]}-{tp[1]} in {self.layout.root}; "
                    "read it over the protocol with the bootstrap option")
            committed = min(b.end for _, b in replicas.values())
            reader = state.leader if state.leader in replicas else \
                max(replicas, key=lambda b: replicas[b][1].end)
            directory, own = replicas[reader]
            start = min(own.start, committed)
            end = last_stable_offset(directory, start, committed) if self.read_committed \
                else committed
            result[tp] = PartitionBounds(start, end, str(directory))
        return result

    def offsets_for_timestamp(self, tps: list[TP], timestamp_ms: int) -> dict[TP, int | None]:
        from slog.spark.segments import offset_for_timestamp

        bounds = self.bounds(tps)
        return {tp: offset_for_timestamp(Path(b.location), timestamp_ms, b.end)
                for tp, b in bounds.items()}

    def close(self) -> None:
        pass


class ProtocolCatalog:
    """Partitions and committed offsets from any cluster that speaks the Kafka protocol."""

    mode = BOOTSTRAP

    def __init__(self, bootstrap: str, request_timeout_ms: int = 15_000,
                 read_committed: bool = False):
        from slog.client import Admin
        from slog.client.errors import BrokerUnavailableError

        self.bootstrap = bootstrap
        self.isolation_level = 1 if read_committed else 0  # ListOffsets': 1 gives the LSO
        self.admin = Admin(bootstrap, request_timeout_ms=request_timeout_ms)
        try:
            self._topics = {t.name: t.partitions for t in
                            self.admin.list_topics(include_internal=True)}
        except (BrokerUnavailableError, ConnectionError, TimeoutError) as exc:
            self.admin.close()
            raise SourceUnavailableError(f"no broker reachable at {bootstrap}: {exc}") from None

    def partitions(self, options: SourceOptions) -> list[TP]:
        return _select(options, self._topics)

    def _offsets(self, tps: list[TP], spec: str | int) -> dict[TP, int]:
        from slog.client import TopicPartition

        answers = self.admin.list_offsets({TopicPartition(*tp): spec for tp in tps},
                                          isolation_level=self.isolation_level)
        return {(tp.topic, tp.partition): a.offset for tp, a in answers.items()}

    def bounds(self, tps: list[TP]) -> dict[TP, PartitionBounds]:
        if not tps:
            return {}
        starts, ends = self._offsets(tps, "earliest"), self._offsets(tps, "latest")
        return {tp: PartitionBounds(starts[tp], ends[tp], self.bootstrap) for tp in tps}

    def offsets_for_timestamp(self, tps: list[TP], timestamp_ms: int) -> dict[TP, int | None]:
        found = self._offsets(tps, timestamp_ms) if tps else {}
        return {tp: (None if offset < 0 else offset) for tp, offset in found.items()}

    def close(self) -> None:
        self.admin.close()


def open_catalog(options: SourceOptions) -> Catalog:
    """The data dir when one is given or the default one holds a cluster, else the protocol."""
    if options.data_dir is not None:
        if not Path(options.data_dir).expanduser().is_dir():
            raise SourceUnavailableError(f"data dir {options.data_dir} does not exist")
        return DataDirCatalog(options.data_dir, options.read_committed)
    if options.bootstrap is not None:
        return ProtocolCatalog(options.bootstrap, read_committed=options.read_committed)
    from slog.core.names import DEFAULT_BOOTSTRAP, DataDirLayout, default_data_dir

    default = default_data_dir()
    if DataDirLayout(default).cluster_file.exists():
        return DataDirCatalog(str(default), options.read_committed)
    return ProtocolCatalog(DEFAULT_BOOTSTRAP, read_committed=options.read_committed)
