"""The dashboard's cluster-changing actions, as plain functions over the admin client.

Each returns a one-line outcome for a notification and raises the client's
errors, which the app shows as notifications.
"""

from __future__ import annotations

from collections.abc import Iterable

from slog.client.admin import Admin
from slog.client.errors import ErrorCode, KafkaError
from slog.client.group_admin import GroupAdmin
from slog.client.types import TopicPartition


def elect_preferred(admin: Admin, partitions: Iterable[TopicPartition]) -> str:
    wanted = list(partitions)
    try:
        result = admin.elect_leaders("preferred", wanted)
    except KafkaError as exc:
        if exc.results is None or not getattr(exc.results, "elected", None):
            raise
        result = exc.results
    what = str(wanted[0]) if len(wanted) == 1 else f"{len(wanted)} partitions"
    return (f"preferred election for {what}: {len(result.elected)} moved, "
            f"{len(result.not_needed)} already on their preferred leader")


def add_partitions(admin: Admin, topic: str, total: int) -> str:
    admin.create_partitions(topic, total)
    return f"{topic} now has {total} partitions"


def delete_topic(admin: Admin, topic: str) -> str:
    admin.delete_topics([topic])
    return f"deleted topic {topic}"


def delete_group(admin: Admin, group_id: str) -> str:
    GroupAdmin(admin.cluster).delete_groups([group_id])
    return f"deleted group {group_id}"


def parse_reset_spec(spec: str) -> str | int:
    """earliest, latest, or an offset; ValueError otherwise."""
    spec = spec.strip().lower()
    if spec in ("earliest", "latest"):
        return spec
    try:
        offset = int(spec)
    except ValueError:
        raise ValueError(f"reset to earliest, latest or an offset, not {spec!r}") from None
    if offset < 0:
        raise ValueError("an offset cannot be negative")
    return offset


def reset_offsets(admin: Admin, group_id: str, partitions: Iterable[TopicPartition],
                  spec: str) -> str:
    """Move an inactive group's committed offsets to earliest, latest or one offset."""
    target = parse_reset_spec(spec)
    tps = [TopicPartition(*tp) for tp in partitions]
    if not tps:
        raise ValueError(f"group {group_id} has no partitions to reset")
    if isinstance(target, int):
        offsets = dict.fromkeys(tps, target)
    else:
        found = admin.list_offsets(dict.fromkeys(tps, target))
        offsets = {tp: found[tp].offset for tp in tps}
    try:
        GroupAdmin(admin.cluster).alter_offsets(group_id, offsets)
    except KafkaError as exc:
        if exc.code == ErrorCode.unknown_member_id:
            raise ValueError(f"group {group_id} has active members: stop them first") from exc
        raise
    return f"reset {group_id} on {len(tps)} partitions to {spec.strip().lower()}"
