"""Cluster-unique producer ids, handed out in blocks through a locked counter file.

Brokers share the data dir, so a counter file under an exclusive lock gives
every broker disjoint blocks without a round trip to the controller (Kafka's
AllocateProducerIds does the same job over the network).
"""

from __future__ import annotations

import os
from pathlib import Path

import portalocker

from slog.core.checkpoint import write_atomically

BLOCK_SIZE = 1000


class ProducerIdAllocator:
    def __init__(self, counter_file: Path, block_size: int = BLOCK_SIZE):
        self._file = counter_file
        self._lock_file = counter_file.with_suffix(".lock")
        self._block_size = block_size
        self._next = 0
        self._end = 0

    def next_id(self) -> int:
        if self._next >= self._end:
            self._next, self._end = self._claim_block()
        value = self._next
        self._next += 1
        return value

    def _claim_block(self) -> tuple[int, int]:
        with portalocker.Lock(str(self._lock_file), mode="a", flags=portalocker.LOCK_EX):
            try:
                start = int(self._file.read_text().strip() or 0)
            except FileNotFoundError:
                start = 0
            end = start + self._block_size
            write_atomically(self._file, str(end).encode())
            os.chmod(self._file, 0o600)
        return start, end
