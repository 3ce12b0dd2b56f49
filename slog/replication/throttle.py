"""Replication throttle for reassignments (``slog reassign execute --throttle``).

The rate lives in the topic's configs as ``leader.replication.throttled.rate``
(bytes per second; Kafka's name, which Kafka keeps per broker). The controller
accepts it through IncrementalAlterConfigs like any topic config, and
``slog reassign verify`` deletes it once the reassignment is complete.

On the leader, only fetches by *adding* replicas of a partition being
reassigned are throttled, so the ISR keeps replicating at full speed. Every
throttled fetch served with the same rate draws from one token bucket (a
burst of one second), so the limit holds for the broker as a whole, as in
Kafka. A fetch that finds the bucket empty gets no records and the follower
asks again; one that goes over leaves a debt later fetches wait out.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from slog.core.config import ConfigError
from slog.core.log import FetchSlice
from slog.core.metadata import MetadataImage

if TYPE_CHECKING:
    from slog.replication.partition import Partition

THROTTLE_CONFIG = "leader.replication.throttled.rate"
Clock = Callable[[], float]


def split_throttle_configs(changes: Mapping[str, str | None]
                           ) -> tuple[dict[str, str | None], dict[str, str | None]]:
    """(throttle changes, validated; every other change) of a topic config update."""
    throttle: dict[str, str | None] = {}
    others: dict[str, str | None] = {}
    for key, value in changes.items():
        if key != THROTTLE_CONFIG:
            others[key] = value
            continue
        if value is not None:
            try:
                rate = int(value)
            except ValueError:
                raise ConfigError(f"invalid value for {key}: {value!r} is not an integer"
                                  ) from None
            if rate < 1:
                raise ConfigError(f"invalid value for {key}: the rate must be at least "
                                  "1 byte/s")
            value = str(rate)
        throttle[key] = value
    return throttle, others


def throttle_rate(configs: Mapping[str, str]) -> int | None:
    value = configs.get(THROTTLE_CONFIG)
    return int(value) if value else None


class TokenBucket:
    """``rate`` tokens (bytes) per second, at most one second's worth saved up."""

    def __init__(self, rate: int, clock: Clock = time.monotonic):
        self.rate = rate
        self._clock = clock
        self._tokens = float(rate)
        self._last = clock()

    def available(self) -> float:
        now = self._clock()
        self._tokens = min(float(self.rate), self._tokens + (now - self._last) * self.rate)
        self._last = now
        return self._tokens

    def consume(self, amount: int) -> None:
        self.available()
        self._tokens -= amount


class ReplicationThrottle:
    """The leader side of the throttle: one bucket per configured rate."""

    def __init__(self, clock: Clock = time.monotonic):
        self._clock = clock
        self._buckets: dict[int, TokenBucket] = {}

    def bucket_for(self, image: MetadataImage, partition: Partition, follower: int
                   ) -> TokenBucket | None:
        """The bucket a fetch by replica ``follower`` draws from, None when unthrottled."""
        state = partition.state
        if follower < 0 or state is None or follower not in state.adding:
            return None
        topic = image.topics.get(partition.topic)
        rate = throttle_rate(topic.configs) if topic is not None else None
        if rate is None:
            return None
        bucket = self._buckets.get(rate)
        if bucket is None:
            bucket = self._buckets[rate] = TokenBucket(rate, self._clock)
        return bucket

    def read(self, image: MetadataImage, partition: Partition, follower: int, offset: int,
             max_bytes: int, min_one: bool = True, read_committed: bool = False
             ) -> FetchSlice:
        """``Partition.read`` for a fetch by ``follower`` (-1: a consumer), throttled."""
        bucket = self.bucket_for(image, partition, follower)
        if bucket is None:
            return partition.read(offset, max_bytes, committed_only=follower < 0,
                                  min_one=min_one, read_committed=read_committed)
        allowed = int(bucket.available())
        if allowed <= 0:
            return FetchSlice(first_offset=offset, next_offset=offset)
        fetched = partition.read(offset, min(max_bytes, allowed), committed_only=False,
                                 min_one=min_one)
        bucket.consume(fetched.size)
        return fetched
