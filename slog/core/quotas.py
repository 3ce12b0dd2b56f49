"""Client quotas (KIP-546): entities, keys, validation, and Kafka's resolution order.

Pure: no sockets, no clocks. A quota entity names a user, a client id, or both;
either part may be the *default* entity (``None`` as its name), which stands for
every user (or client id) without a quota of its own. A client's quota for one
key is the value of the most specific entity that sets that key, in Kafka's order:

    user + client-id, user + default client-id, user,
    default user + client-id, default user + default client-id, default user,
    client-id, default client-id.

Each key is resolved on its own, so a user's produce rate and its client's
fetch rate may come from different entities.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from slog.core.errors import SlogError

USER: Final = "user"
CLIENT_ID: Final = "client-id"
ENTITY_TYPES: Final = (USER, CLIENT_ID)

PRODUCER_BYTE_RATE: Final = "producer_byte_rate"
CONSUMER_BYTE_RATE: Final = "consumer_byte_rate"
REQUEST_PERCENTAGE: Final = "request_percentage"
# Kafka types the byte rates as LONG (whole numbers) and the percentage as DOUBLE.
QUOTA_KEYS: Final = {PRODUCER_BYTE_RATE: True, CONSUMER_BYTE_RATE: True,
                     REQUEST_PERCENTAGE: False}

# DescribeClientQuotas match types.
MATCH_EXACT: Final = 0
MATCH_DEFAULT: Final = 1
MATCH_SPECIFIED: Final = 2  # any entity with this component, default or named

# A quota entity: its components as (entity type, name or None for the default),
# sorted by type, so equal entities are equal tuples.
QuotaEntity = tuple[tuple[str, str | None], ...]


class QuotaError(SlogError):
    """A quota entity, key, value or filter Kafka would refuse (INVALID_REQUEST)."""


def quota_entity(components: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    """The entity of ``components``; QuotaError for an unknown, repeated or empty one."""
    seen: dict[str, str | None] = {}
    for kind, name in components:
        if kind not in ENTITY_TYPES:
            raise QuotaError(f"unknown quota entity type {kind!r} "
                             f"(slog has {', '.join(ENTITY_TYPES)})")
        if kind in seen:
            raise QuotaError(f"the entity type {kind!r} appears twice")
        if name is not None and not name:
            raise QuotaError(f"an empty {kind} name (use the default entity instead)")
        seen[kind] = name
    if not seen:
        raise QuotaError("a quota entity needs a user, a client id or both")
    return tuple(sorted(seen.items()))


def describe_entity(entity: QuotaEntity) -> str:
    """``user=alice,client-id=<default>``: how the CLI and logs name an entity."""
    return ",".join(f"{kind}={'<default>' if name is None else name}" for kind, name in entity)


def check_value(key: str, value: float) -> float:
    """The value to store for ``key``; QuotaError if Kafka would refuse it."""
    whole = QUOTA_KEYS.get(key)
    if whole is None:
        raise QuotaError(f"unknown quota key {key!r} (slog has {', '.join(QUOTA_KEYS)})")
    if value != value or value in (float("inf"), float("-inf")):
        raise QuotaError(f"{key} must be a finite number")
    if whole and value != int(value):
        raise QuotaError(f"{key} must be a whole number, not {value}")
    if value <= 0:
        raise QuotaError(f"{key} must be positive, not {value:g}")
    return float(value)


@dataclass(frozen=True)
class ComponentFilter:
    """One component of a DescribeClientQuotas filter."""

    entity_type: str
    match_type: int
    match: str | None = None

    def matches(self, entity: Mapping[str, str | None]) -> bool:
        if self.entity_type not in entity:
            return False
        name = entity[self.entity_type]
        if self.match_type == MATCH_EXACT:
            return name is not None and name == self.match
        if self.match_type == MATCH_DEFAULT:
            return name is None
        return True


def check_filter(components: Iterable[ComponentFilter]) -> list[ComponentFilter]:
    """The filter's components; QuotaError for one Kafka refuses."""
    checked: list[ComponentFilter] = []
    for c in components:
        if c.entity_type not in ENTITY_TYPES:
            raise QuotaError(f"unknown quota entity type {c.entity_type!r}")
        if any(other.entity_type == c.entity_type for other in checked):
            raise QuotaError(f"the entity type {c.entity_type!r} appears twice in the filter")
        if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            raise QuotaError(f"unknown match type {c.match_type}")
        if c.match_type == MATCH_EXACT and c.match is None:
            raise QuotaError(f"an exact match of {c.entity_type} needs a name")
        checked.append(c)
    return checked


def filter_matches(components: Iterable[ComponentFilter], strict: bool,
                   entity: QuotaEntity) -> bool:
    """Whether ``entity`` passes a DescribeClientQuotas filter: every component matches,
    and, when strict, the entity has no other component."""
    parts = dict(entity)
    wanted = list(components)
    if strict and len(parts) != len(wanted):
        return False
    return all(c.matches(parts) for c in wanted)


def resolution_order(user: str, client_id: str) -> tuple[QuotaEntity, ...]:
    """The entities a client's quota may come from, most specific first."""
    u, c = (USER, user), (CLIENT_ID, client_id)
    du, dc = (USER, None), (CLIENT_ID, None)
    return ((c, u), (dc, u), (u,), (c, du), (dc, du), (du,), (c,), (dc,))


@dataclass(frozen=True)
class ResolvedQuota:
    """A client's quota for one key, and the entity it is shared by."""

    limit: float
    # Clients resolving to the same (user, client id) here share one rate: the
    # entity's named parts; a default part counts each user (or client id) apart.
    sensor: tuple[str, str]


def resolve(quotas: Mapping[QuotaEntity, Mapping[str, float]], user: str, client_id: str,
            key: str) -> ResolvedQuota | None:
    """The quota ``key`` that applies to ``user`` with ``client_id``; None: unlimited."""
    for entity in resolution_order(user, client_id):
        values = quotas.get(entity)
        if values is not None and key in values:
            parts = dict(entity)
            return ResolvedQuota(values[key], (user if USER in parts else "",
                                               client_id if CLIENT_ID in parts else ""))
    return None
