"""An OffsetsLog over real PartitionLogs in a directory: the coordinator without a broker."""

from __future__ import annotations

from pathlib import Path

from slog.core.kafka_errors import ErrorCode
from slog.core.log import PartitionLog
from slog.core.log_config import LogConfig
from slog.groups.manager import StoreError


class LocalOffsetsLog:
    def __init__(self, root: Path, partitions: int = 1):
        config = LogConfig(segment_bytes=1024 * 1024, preallocate=False)
        self.logs = {p: PartitionLog.open(root / f"__consumer_offsets-{p}", config)
                     for p in range(partitions)}
        self.leading = set(self.logs)
        self.becoming: set[int] = set()  # named leader by the metadata, role not taken yet
        self.epoch = 0  # the leader epoch of every partition

    def partition_count(self) -> int | None:
        return len(self.logs)

    def is_leader(self, partition: int) -> bool:
        return partition in self.leading

    def becoming_leader(self, partition: int) -> bool:
        return partition in self.becoming

    def append(self, partition: int, batch: bytes) -> int:
        if partition not in self.leading:
            raise StoreError(ErrorCode.not_coordinator)
        return self.logs[partition].append(batch).last_offset

    def leader_epoch(self, partition: int) -> int:
        return self.epoch

    def is_committed(self, partition: int, offset: int) -> bool:
        return True

    async def wait_committed(self, partition: int, offset: int) -> None:
        return None

    def read(self, partition: int, offset: int) -> tuple[bytes, int]:
        found = self.logs[partition].read(offset, 1024 * 1024)
        return found.tobytes(), found.next_offset

    def close(self) -> None:
        for log in self.logs.values():
            log.close()
