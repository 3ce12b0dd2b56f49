"""KIP-392: which replica a consumer in a given rack should fetch from.

The leader asks this on every consumer fetch that names a rack (Fetch v11+
``rack_id``) when ``replica.selector.class`` is Kafka's RackAwareReplicaSelector.
The answer goes back as ``preferred_read_replica``; the consumer then fetches
from that follower, which serves it up to the follower's own high watermark.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

NO_PREFERRED_REPLICA = -1


@dataclass(frozen=True)
class ReplicaView:
    """What the leader knows of one replica when a consumer fetch arrives."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    last_caught_up_ms: float


def preferred_read_replica(client_rack: str, leader: ReplicaView,
                           followers: Iterable[ReplicaView], fetch_offset: int) -> int:
    """The follower to send the consumer to, or NO_PREFERRED_REPLICA (the leader serves).

    ``followers``: in-sync, live followers only. One qualifies when it is in the
    client's rack and already has ``fetch_offset``; the leader keeps the consumer
    when it is in that rack itself. Among several, the most caught-up wins.
    """
    if not client_rack or leader.rack == client_rack:
        return NO_PREFERRED_REPLICA
    candidates = [f for f in followers
                  if f.rack == client_rack and f.log_end_offset >= fetch_offset]
    if not candidates:
        return NO_PREFERRED_REPLICA
    best = max(candidates, key=lambda f: (f.log_end_offset, f.last_caught_up_ms, -f.broker_id))
    return best.broker_id
