"""Per-topic Metadata response entries, kept until the metadata delta touches them.

A client asking for every topic of a cluster with thousands of partitions would
otherwise have each partition's entry rebuilt and fitted to its version's kio
class on every request. Entries are cached per (topic, response version) and
dropped when a metadata delta names the topic or one of its partitions; a broker
change drops them all (``offline_replicas`` depends on which brokers are live).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from slog.core.metadata import MetadataDelta, MetadataImage
from slog.protocol.apis import ApiKey, response_class
from slog.protocol.shapes import nested_class, shape

TopicEntryBuilder = Callable[[MetadataImage, str, frozenset[int]], dict[str, Any]]


class MetadataResponseCache:
    def __init__(self, build: TopicEntryBuilder):
        self._build = build
        self._entries: dict[str, dict[int, Any]] = {}  # topic -> version -> entry

    def topic(self, image: MetadataImage, name: str, version: int,
              live: frozenset[int]) -> Any:
        """The shaped topic entry of a Metadata response at ``version``."""
        versions = self._entries.setdefault(name, {})
        entry = versions.get(version)
        if entry is None:
            cls = nested_class(response_class(ApiKey.METADATA, version), "topics")
            entry = versions[version] = shape(cls, self._build(image, name, live))
        return entry

    def invalidate(self, delta: MetadataDelta) -> None:
        if not self._entries:
            return
        if delta.brokers:
            self._entries.clear()
            return
        for topic in delta.topics:
            self._entries.pop(topic, None)
        for topic, _ in delta.partitions:
            self._entries.pop(topic, None)
