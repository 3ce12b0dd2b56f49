"""Each group's generation and leader, from the ``__consumer_offsets`` files of a slog
data dir: the classic DescribeGroups does not carry them, the group metadata record
(GroupMetadataValue) does.

Every offsets partition is read from its leader replica's directory
(``brokers/<leader>/logs/__consumer_offsets-<n>``), read-only, with core's
:class:`~slog.core.segment_reader.LogTail`: a refresh reads only the bytes
appended since the last one. The key names the group, so no partitioning rule
is needed; the latest group metadata record per group wins, and a tombstone
means the group is gone. A new leader or leader epoch (the log may have been
truncated) reads that partition again from its start.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from pathlib import Path

from slog.core.batch import CONTROL_BIT
from slog.core.errors import CorruptRecordError, SlogError
from slog.core.names import OFFSETS_TOPIC, DataDirLayout
from slog.core.offsets_records import (
    GROUP_KEY_PREFIX,
    GroupKey,
    GroupValue,
    decode_group_value,
    decode_key,
)
from slog.core.records import decode_records_as
from slog.core.segment_reader import LogTail
from slog.core.wire import WireFormatError

KEY, VALUE = 5, 6  # in decode_records_as's (topic, partition, offset, ..., key, value, headers)


class _Partition:
    """One offsets partition as its leader replica holds it: group → latest value bytes
    (None: tombstone)."""

    def __init__(self, directory: Path, leader: tuple[int, int]):
        self.leader = leader  # (broker id, leader epoch) the files are read for
        self.tail = LogTail(directory)
        self.values: dict[str, bytes | None] = {}

    def read(self) -> None:
        for chunk, pos, header in self.tail.poll():
            if header.attributes & CONTROL_BIT:
                continue
            for record in decode_records_as(chunk, pos, header, tuple, "", 0):
                key = record[KEY]
                if key is None or key[:2] != GROUP_KEY_PREFIX:
                    continue  # offset commits, and records of other coordinators
                try:
                    decoded = decode_key(key)
                except WireFormatError:
                    continue
                if isinstance(decoded, GroupKey):
                    self.values[decoded.group] = record[VALUE]


class GroupMetadataLog:
    """Follows the group metadata records of every offsets partition of a data dir."""

    def __init__(self, data_dir: Path):
        self._layout = DataDirLayout(data_dir)
        self._partitions: dict[int, _Partition] = {}
        self._decoded: dict[str, tuple[bytes, GroupValue | None]] = {}

    def poll(self, leaders: Mapping[int, tuple[int, int]]) -> None:
        """Read what is new; ``leaders``: offsets partition → (leader, leader epoch)."""
        for partition in self._partitions.keys() - leaders.keys():
            del self._partitions[partition]
        for partition, leader in leaders.items():
            state = self._partitions.get(partition)
            if state is None or state.leader != leader:
                try:
                    directory = self._layout.partition_dir(leader[0], OFFSETS_TOPIC, partition)
                except SlogError:
                    continue
                state = self._partitions[partition] = _Partition(directory, leader)
            with contextlib.suppress(OSError, CorruptRecordError):
                state.read()  # on an error what was read stays; the next poll goes on

    def groups(self, group_ids: Iterable[str]) -> dict[str, GroupValue]:
        """The latest metadata of each of ``group_ids`` that has a live record."""
        found: dict[str, GroupValue] = {}
        wanted = set(group_ids)
        for state in self._partitions.values():
            for group_id in wanted & state.values.keys():
                value = self._decode(group_id, state.values[group_id])
                if value is not None:
                    found[group_id] = value
        return found

    def _decode(self, group_id: str, raw: bytes | None) -> GroupValue | None:
        if raw is None:
            return None
        cached = self._decoded.get(group_id)
        if cached is not None and cached[0] is raw:
            return cached[1]
        try:
            value: GroupValue | None = decode_group_value(raw)
        except WireFormatError:
            value = None  # a version slog does not know
        self._decoded[group_id] = (raw, value)
        return value
