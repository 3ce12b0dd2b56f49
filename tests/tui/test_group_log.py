"""tui/group_log.py: generation and leader from __consumer_offsets files in a data dir."""

from __future__ import annotations

from pathlib import Path

from slog.core.log import PartitionLog
from slog.core.log_config import LogConfig
from slog.core.names import DataDirLayout
from slog.core.offsets_records import GroupKey, GroupValue, OffsetKey, encode_group_value
from slog.core.records import build_batch
from slog.tui.group_log import OFFSETS_TOPIC, GroupMetadataLog

NOW_MS = 1_700_000_000_000


class OffsetsReplica:
    """One broker's replica of an offsets partition, written as the coordinator does."""

    def __init__(self, data_dir: Path, broker: int, partition: int):
        directory = DataDirLayout(data_dir).partition_dir(broker, OFFSETS_TOPIC, partition)
        self.log = PartitionLog.open(directory, LogConfig(segment_bytes=4096,
                                                          cleanup_policy="compact"))

    def group(self, group: str, generation: int | None, leader: str | None = None) -> None:
        """A group metadata record; ``generation`` None writes a tombstone."""
        value = None if generation is None else encode_group_value(
            GroupValue("consumer", generation, "range", leader, NOW_MS, ()))
        self.log.append(build_batch([(GroupKey(group).encode(), value, (), NOW_MS)]))

    def commit(self, group: str, count: int) -> None:
        """Offset commits: records the reader skips."""
        self.log.append(build_batch(
            (OffsetKey(group, "t", p).encode(), b"\x00\x03" + bytes(30), (), NOW_MS)
            for p in range(count)))


def heads(log: GroupMetadataLog, *groups: str) -> dict[str, tuple[int, str | None]]:
    return {g: (v.generation, v.leader) for g, v in log.groups(groups).items()}


def test_latest_record_per_group_wins_and_a_tombstone_removes_it(tmp_path: Path) -> None:
    p0, p1 = OffsetsReplica(tmp_path, 1, 0), OffsetsReplica(tmp_path, 1, 1)
    p0.group("billing", 1, "m-1")
    p0.commit("billing", 5)
    p0.group("billing", 2, "m-2")
    p1.group("reports", 4, None)  # an Empty group: no leader
    log = GroupMetadataLog(tmp_path)
    leaders = {0: (1, 0), 1: (1, 0)}
    log.poll(leaders)
    assert heads(log, "billing", "reports", "unknown") == \
        {"billing": (2, "m-2"), "reports": (4, None)}
    p0.group("billing", 3, "m-3")  # later records, read on the next poll
    p1.group("reports", None)
    log.poll(leaders)
    assert heads(log, "billing", "reports") == {"billing": (3, "m-3")}


def test_follows_the_leader_replica_of_each_partition(tmp_path: Path) -> None:
    on_1, on_2 = OffsetsReplica(tmp_path, 1, 0), OffsetsReplica(tmp_path, 2, 0)
    on_1.group("g", 7, "old-leader")
    on_2.group("g", 8, "new-leader")
    log = GroupMetadataLog(tmp_path)
    log.poll({0: (1, 3)})
    assert heads(log, "g") == {"g": (7, "old-leader")}
    log.poll({0: (2, 4)})  # broker 2 leads now: its files, from the start
    assert heads(log, "g") == {"g": (8, "new-leader")}
    log.poll({})  # the partition is gone
    assert heads(log, "g") == {}


def test_a_refresh_reads_only_new_batches(tmp_path: Path) -> None:
    replicas = [OffsetsReplica(tmp_path, 1, p) for p in range(6)]
    for p, replica in enumerate(replicas):
        for generation in range(1, 20):
            replica.group(f"g{p}", generation, f"m{generation}")
            replica.commit(f"g{p}", 10)
    log = GroupMetadataLog(tmp_path)
    leaders = {p: (1, 0) for p in range(6)}
    log.poll(leaders)
    tails = [state.tail for state in log._partitions.values()]
    before = [t.next_offset for t in tails]
    log.poll(leaders)
    assert [t.next_offset for t in tails] == before
    replicas[2].group("g2", 20, "m20")
    log.poll(leaders)
    assert heads(log, "g2", "g5") == {"g2": (20, "m20"), "g5": (19, "m19")}
    assert [t.next_offset for t in tails] == [b + (p == 2) for p, b in enumerate(before)]


def test_a_partition_without_files_yet_is_no_error(tmp_path: Path) -> None:
    log = GroupMetadataLog(tmp_path)
    log.poll({0: (1, 0), 1: (9, 0)})
    assert log.groups(["g"]) == {}
