"""One partition replica on this broker: its log plus Kafka's replica state.

The leader owns the high watermark. HW = min LEO over the ISR, where the
leader's own LEO counts and followers report theirs through their fetch
offsets. With a single replica the ISR is the leader alone, so the HW follows
the LEO on every append.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from slog.core import batch
from slog.core.log import FetchSlice, PartitionLog
from slog.core.metadata import NO_LEADER, PartitionState
from slog.core.producer_state import ProducerStateManager, SequenceCheck


class ReplicaError(Exception):
    """A request this replica cannot serve; ``code`` is the Kafka error name."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


@dataclass
class FollowerState:
    log_end_offset: int = 0
    last_caught_up_ms: float = field(default_factory=lambda: time.monotonic() * 1000)


@dataclass(frozen=True)
class AppendResult:
    base_offset: int
    log_append_time: int
    log_start_offset: int
    duplicate: bool = False


class Partition:
    def __init__(self, topic: str, partition: int, log: PartitionLog, broker_id: int):
        self.topic = topic
        self.partition = partition
        self.log = log
        self.broker_id = broker_id
        self.state: PartitionState | None = None
        self.high_watermark = 0
        self.producers = ProducerStateManager()
        self.followers: dict[int, FollowerState] = {}
        self._rebuild_producer_state()

    # -- role ---------------------------------------------------------------
    @property
    def leader_id(self) -> int:
        return self.state.leader if self.state else NO_LEADER

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch if self.state else -1

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    @property
    def isr(self) -> tuple[int, ...]:
        return self.state.isr if self.state else ()

    def become_leader(self, state: PartitionState) -> None:
        """Take leadership at ``state.leader_epoch``; new epochs start at our LEO."""
        newly = not self.is_leader or self.leader_epoch != state.leader_epoch
        self.state = state
        if newly:
            self.log.leader_epoch_cache.assign(state.leader_epoch, self.log.log_end_offset)
            now = time.monotonic() * 1000
            self.followers = {
                r: FollowerState(log_end_offset=0, last_caught_up_ms=now)
                for r in state.replicas
                if r != self.broker_id
            }
        self._maybe_advance_high_watermark()

    def become_follower(self, state: PartitionState) -> None:
        self.state = state
        self.followers = {}

    # -- leader data path ----------------------------------------------------
    def append_as_leader(
        self, records: bytes | memoryview, *, required_acks: int, min_insync_replicas: int
    ) -> AppendResult:
        if not self.is_leader:
            raise ReplicaError("not_leader_or_follower",
                               f"{self.topic}-{self.partition}: this broker is not the leader")
        if required_acks == -1 and len(self.isr) < min_insync_replicas:
            raise ReplicaError(
                "not_enough_replicas",
                f"ISR {list(self.isr)} is smaller than min.insync.replicas={min_insync_replicas}",
            )
        # Idempotence is decided on the (cheap, unvalidated) header; the log
        # validates length, magic and CRC once, inside append.
        header = batch.parse_header(records, 0)
        verdict, previous = self.producers.check(header)
        if verdict is SequenceCheck.DUPLICATE and previous is not None:
            return AppendResult(previous.first_offset, -1, self.log.log_start_offset, True)
        if verdict is SequenceCheck.OUT_OF_ORDER:
            raise ReplicaError("out_of_order_sequence_number",
                               f"sequence {header.base_sequence} is out of order")
        if verdict is SequenceCheck.FENCED_EPOCH:
            raise ReplicaError("invalid_producer_epoch",
                               f"producer epoch {header.producer_epoch} is stale")
        info = self.log.append(records, assign_offsets=True, leader_epoch=self.leader_epoch)
        for base_offset, appended in info.batches:
            self.producers.update(appended, base_offset)
        self._maybe_advance_high_watermark()
        return AppendResult(info.first_offset, info.log_append_time, self.log.log_start_offset)

    def read(
        self, offset: int, max_bytes: int, *, committed_only: bool
    ) -> FetchSlice:
        limit = self.high_watermark if committed_only else None
        return self.log.read(offset, max_bytes, max_offset=limit)

    def update_follower(self, replica_id: int, fetch_offset: int) -> None:
        """A follower fetching at ``fetch_offset`` has everything below it."""
        follower = self.followers.get(replica_id)
        if follower is None:
            return
        follower.log_end_offset = fetch_offset
        if fetch_offset >= self.log.log_end_offset:
            follower.last_caught_up_ms = time.monotonic() * 1000
        self._maybe_advance_high_watermark()

    def _maybe_advance_high_watermark(self) -> bool:
        if not self.is_leader:
            return False
        leos = [self.log.log_end_offset]
        leos += [f.log_end_offset for r, f in self.followers.items() if r in self.isr]
        candidate = min(leos)
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    def set_high_watermark(self, offset: int) -> None:
        """Followers learn the HW from the leader; never beyond their own LEO."""
        self.high_watermark = min(offset, self.log.log_end_offset)

    # -- recovery -------------------------------------------------------------
    def _rebuild_producer_state(self) -> None:
        """Replay batch headers (no record decoding) to restore idempotence state."""
        self.producers.truncate()
        position = self.log.log_start_offset
        end = self.log.log_end_offset
        while position < end:
            fetched = self.log.read(position, 16 * 1024 * 1024)
            if not fetched.views:
                break
            for view in fetched.views:
                for _, header in iter_headers(view):
                    self.producers.update(header, header.base_offset)
                    position = header.next_offset
        self.high_watermark = min(self.high_watermark, end)

    def on_truncated(self) -> None:
        self._rebuild_producer_state()


def iter_headers(view: memoryview) -> list[tuple[int, batch.BatchHeader]]:
    """Headers of the whole batches in a log view, without CRC checks (already stored)."""
    found = []
    pos = 0
    size = len(view)
    while pos + batch.HEADER_SIZE <= size:
        header = batch.parse_header(view, pos)
        if pos + header.size > size:
            break
        found.append((pos, header))
        pos += header.size
    return found

