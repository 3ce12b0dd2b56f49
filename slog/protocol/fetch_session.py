"""The fetcher's side of an incremental fetch session (KIP-227), one per broker.

Used by slog's consumer and by its replica fetchers alike. The first request
is full (every partition, session epoch 0) and opens a session; the broker
answers with the session's id. Later requests carry the next epoch and name
only partitions that are new or whose request entry changed (fetch offset,
leader epoch, size...), plus ``forgotten_topics_data`` for those dropped. Any
session error, a failed connection or a broker that keeps no session starts
over with a full request, which also closes the old session on the broker.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slog.protocol.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1
_SESSION_NOT_FOUND = int(ErrorCode.fetch_session_id_not_found)

TopicPartition = tuple[str, int]
# One partition's request entry (a FetchPartition body without its index).
Entry = Mapping[str, Any]


def _grouped(items: Mapping[TopicPartition, Any]) -> dict[str, list[tuple[int, Any]]]:
    topics: dict[str, list[tuple[int, Any]]] = {}
    for (topic, index), value in items.items():
        topics.setdefault(topic, []).append((index, value))
    return topics


class FetchSessionHandler:
    """What the next Fetch names, kept as changes so an idle request costs O(changes).

    A fetcher either keeps the handler told of each partition whose entry changed
    (``update``/``remove``: the replica fetcher, which follows thousands) or hands
    ``build`` the whole wanted map each time (the consumer, which reads a few).
    """

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH  # the epoch of the next request
        self._wanted: dict[TopicPartition, Entry] = {}  # what the next request fetches
        self._sent: dict[TopicPartition, Entry] = {}  # what the broker's session holds
        self._touched: set[TopicPartition] = set()  # wanted may differ from sent here
        # What the request in flight makes of the session if it succeeds (None: forgotten).
        self._pending: dict[TopicPartition, Entry | None] | None = None

    @property
    def full_next(self) -> bool:
        return self.epoch == INITIAL_EPOCH

    def update(self, key: TopicPartition, entry: Entry) -> None:
        """Fetch ``key`` with ``entry`` from the next request on."""
        self._wanted[key] = entry
        self._touched.add(key)

    def resend(self, key: TopicPartition) -> None:
        """Name ``key`` in the next request even if its entry did not change: the
        broker answered it with an error, and may have dropped it from the session."""
        self._sent.pop(key, None)
        self._touched.add(key)

    def remove(self, key: TopicPartition) -> None:
        """Stop fetching ``key`` (the next incremental request forgets it)."""
        if self._wanted.pop(key, None) is not None:
            self._touched.add(key)

    def build(self, wanted: Mapping[TopicPartition, Entry] | None = None) -> dict[str, Any]:
        """The session fields of the next Fetch body (session_id, session_epoch, topics,
        forgotten_topics_data); ``wanted``, if given, replaces what is fetched."""
        if wanted is not None:
            self._replace(wanted)
        touched, self._touched = self._touched, set()
        if self.full_next:
            named: Mapping[TopicPartition, Entry] = self._wanted
            forgotten: list[TopicPartition] = []
            self._pending = dict(self._wanted)
        else:
            named = {k: self._wanted[k] for k in touched
                     if k in self._wanted and self._sent.get(k) != self._wanted[k]}
            forgotten = [k for k in touched if k not in self._wanted and k in self._sent]
            self._pending = {**named, **dict.fromkeys(forgotten)}
        return {
            "session_id": self.session_id, "session_epoch": self.epoch,
            "topics": [{"topic": topic, "partitions": [{"partition": i, **e} for i, e in parts]}
                       for topic, parts in _grouped(named).items()],
            "forgotten_topics_data": [
                {"topic": topic, "partitions": [i for i, _ in parts]}
                for topic, parts in _grouped(dict.fromkeys(forgotten)).items()],
        }

    def _replace(self, wanted: Mapping[TopicPartition, Entry]) -> None:
        for key in [k for k in self._wanted if k not in wanted]:
            self.remove(key)
        for key, entry in wanted.items():
            if self._wanted.get(key) != entry:
                self.update(key, entry)

    def handle_response(self, error_code: int, session_id: int) -> bool:
        """Note the broker's answer; False when the request failed as a whole."""
        pending, self._pending = self._pending, None
        if error_code:
            if error_code == _SESSION_NOT_FOUND:
                self.reset(close=False)
            else:
                self.reset()  # close the broken session with the next full request
            return False
        if session_id == INVALID_SESSION_ID:
            self.reset(close=False)  # the broker keeps no session for us: full again
            return True
        was_full = self.full_next
        self.session_id = session_id
        self.epoch = 1 if self.epoch >= _MAX_EPOCH else self.epoch + 1
        if was_full:
            self._sent = {}
        for key, entry in (pending or {}).items():
            if entry is None:
                self._sent.pop(key, None)
            else:
                self._sent[key] = entry
        return True

    def reset(self, close: bool = True) -> None:
        """Start over with a full request (which closes the old session if ``close``)."""
        if not close:
            self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self._sent = {}
        self._pending = None
