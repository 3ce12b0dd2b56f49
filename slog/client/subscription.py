"""Which partitions a consumer reads and where it is in each (Kafka's SubscriptionState).

The consumer owns one :class:`SubscriptionState`. Today partitions come from
``Consumer.assign``; group membership will call :meth:`SubscriptionState.assign`
with what the group assigned, and supply committed offsets through the
consumer's ``committed_offsets`` hook, without the fetcher noticing.

Per partition there are two offsets:

* ``position``: the offset of the next record ``poll()`` will return;
* ``fetch_position``: the offset the next Fetch asks for. Prefetching runs it
  ahead of ``position``.

``generation`` changes whenever the position is moved from outside the
fetch path (seek, reset, re-assignment), so fetched data and responses that
were requested before the move can be recognised and dropped.
"""

from __future__ import annotations

from collections.abc import Iterable

from slog.client.errors import InvalidArgumentError
from slog.client.types import TopicPartition


class PartitionState:
    __slots__ = ("fetch_position", "generation", "high_watermark", "log_start_offset", "paused",
                 "position", "reset_strategy")

    def __init__(self) -> None:
        self.position: int | None = None
        self.fetch_position: int | None = None
        self.generation = 0
        self.paused = False
        self.reset_strategy: str | None = None  # "earliest" / "latest" when asked for
        self.high_watermark = -1
        self.log_start_offset = -1

    def __repr__(self) -> str:
        return (f"<PartitionState position={self.position} fetch={self.fetch_position} "
                f"gen={self.generation} paused={self.paused}>")


class SubscriptionState:
    def __init__(self) -> None:
        self._states: dict[TopicPartition, PartitionState] = {}

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Replace the assignment; partitions that stay keep their positions."""
        wanted = [TopicPartition(*tp) for tp in partitions]
        self._states = {tp: self._states.get(tp) or PartitionState() for tp in wanted}

    def assignment(self) -> set[TopicPartition]:
        return set(self._states)

    def state(self, tp: TopicPartition) -> PartitionState | None:
        return self._states.get(tp)

    def _required(self, tp: TopicPartition) -> PartitionState:
        state = self._states.get(TopicPartition(*tp))
        if state is None:
            raise InvalidArgumentError(f"partition {tp} is not assigned to this consumer")
        return state

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if offset < 0:
            raise InvalidArgumentError(f"cannot seek to negative offset {offset}")
        state = self._required(tp)
        state.position = state.fetch_position = offset
        state.reset_strategy = None
        state.generation += 1

    def request_reset(self, tp: TopicPartition, strategy: str) -> None:
        """Forget the position; the next poll looks one up with ``strategy``."""
        state = self._required(tp)
        state.position = state.fetch_position = None
        state.reset_strategy = strategy
        state.generation += 1

    def position(self, tp: TopicPartition) -> int | None:
        return self._required(tp).position

    def reset_strategy(self, tp: TopicPartition) -> str | None:
        """What request_reset asked for, if anything: None lets a committed offset count."""
        return self._required(tp).reset_strategy

    def missing_positions(self) -> list[TopicPartition]:
        return [tp for tp, s in self._states.items() if s.position is None]

    def pause(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self._required(tp).paused = True

    def resume(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self._required(tp).paused = False

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, s in self._states.items() if s.paused}

    def fetchable(self) -> list[tuple[TopicPartition, PartitionState]]:
        return [(tp, s) for tp, s in self._states.items()
                if s.fetch_position is not None and not s.paused]

    def items(self) -> list[tuple[TopicPartition, PartitionState]]:
        return list(self._states.items())
