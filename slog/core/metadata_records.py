"""The records of the metadata log: one frozen dataclass per record type, and their codec.

Each class is named after KRaft's record where KRaft has one; ``TYPE`` is the
record's ``type`` on disk:

==================================  ================  ==========================================
class                               type              meaning
==================================  ================  ==========================================
ControllerRecord                    controller        a broker won the controller lock
RegisterBrokerRecord                broker            a broker (re)registered (its registration)
FenceBrokerRecord                   broker_fence      a broker's liveness changed
TopicRecord                         topic             a topic was created, with its configs
PartitionRecord                     partition         the full state of one partition
TopicConfigRecord                   topic_config      topic configs changed (None deletes)
BrokerConfigRecord                  broker_config     dynamic broker configs changed (KRaft's
                                                      ConfigRecord for BROKER; broker None: the
                                                      cluster-wide default)
GroupConfigRecord                   group_config      a group's config overrides changed (KRaft's
                                                      ConfigRecord for GROUP; None deletes)
RemoveTopicRecord                   remove_topic      a topic was deleted
ProducerIdsRecord                   producer_ids      the next unallocated producer id block
AccessControlEntryRecord            acl               an ACL binding was created
RemoveAccessControlEntryRecord      remove_acl        an ACL binding was deleted
ClientQuotaRecord                   client_quota      a client quota entity's values changed
                                                      (None deletes a key; KIP-546)
==================================  ================  ==========================================

Every record also carries ``controller_epoch`` (records of a replaced controller
are ignored) and ``ts`` (milliseconds), which the controller stamps when it writes.

On disk a record is one JSON object: ``type``, its fields flat (the registration,
partition state or ACL binding a record carries is written inline), then
``controller_epoch`` and ``ts``. That format predates these classes and
:func:`encode_record` keeps it byte for byte, so every data dir loads as it is.
:func:`decode_record` validates what it reads: each field must have its declared
type, and ids, ports, epochs and offsets their range. A field an older slog did not
write takes its default; one a newer slog added is ignored; a ``type`` this slog does
not know raises :class:`UnknownRecordTypeError`, for the reader to skip with a warning.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, ClassVar

from slog.core import health
from slog.core.acls import AclBinding
from slog.core.errors import SlogError

# Defined with the health rules; the records and the image compare leaders with it.
from slog.core.health import NO_LEADER as NO_LEADER
from slog.core.listeners import Endpoint

Json = dict[str, Any]


# -- the values records carry ------------------------------------------------------------

@dataclass(frozen=True)
class BrokerRegistration:
    broker_id: int
    host: str
    port: int
    incarnation: str = ""
    fenced: bool = False
    rack: str | None = None  # broker.rack
    # Every listener's advertised endpoint; host/port are the inter-broker listener's.
    # Empty in records of older versions: then host/port serve every listener.
    endpoints: tuple[Endpoint, ...] = ()

    def endpoint(self, listener: str | None) -> tuple[str, int] | None:
        """Where a client of ``listener`` reaches this broker; None if it has no such
        listener (Kafka leaves the broker out of that listener's Metadata)."""
        if not self.endpoints or listener is None:
            return self.host, self.port
        for endpoint in self.endpoints:
            if endpoint.name == listener:
                return endpoint.host, endpoint.port
        return None


@dataclass(frozen=True)
class PartitionState:
    """One partition as the image holds it; a :class:`PartitionRecord` carries it whole."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def preferred_leader(self) -> int:
        return self.replicas[0] if self.replicas else NO_LEADER

    @property
    def is_offline(self) -> bool:
        return health.is_offline(self.leader)

    @property
    def is_under_replicated(self) -> bool:
        return health.is_under_replicated(self.replicas, self.isr)

    def to_record(self) -> PartitionRecord:
        return PartitionRecord(self)


# -- the records ---------------------------------------------------------------------------

@dataclass(frozen=True)
class MetadataRecord:
    TYPE: ClassVar[str]
    _: KW_ONLY
    controller_epoch: int = 0
    ts: int = 0  # when the controller wrote it, in milliseconds


@dataclass(frozen=True)
class ControllerRecord(MetadataRecord):
    TYPE = "controller"
    controller_id: int  # the broker that took the lease; controller_epoch is its new epoch


@dataclass(frozen=True)
class RegisterBrokerRecord(MetadataRecord):
    TYPE = "broker"
    registration: BrokerRegistration  # inline: broker_id, host, port, ... at the top level


@dataclass(frozen=True)
class FenceBrokerRecord(MetadataRecord):
    TYPE = "broker_fence"
    broker_id: int
    fenced: bool  # False lifts a fence: one record type for KRaft's Fence/UnfenceBrokerRecord


@dataclass(frozen=True)
class TopicRecord(MetadataRecord):
    TYPE = "topic"
    name: str
    topic_id: str
    configs: dict[str, str] = field(default_factory=dict)  # KRaft writes ConfigRecords apart


@dataclass(frozen=True)
class PartitionRecord(MetadataRecord):
    # slog writes whole states, never KRaft's PartitionChangeRecord deltas.
    TYPE = "partition"
    state: PartitionState  # inline


@dataclass(frozen=True)
class TopicConfigRecord(MetadataRecord):
    TYPE = "topic_config"
    topic: str
    configs: dict[str, str | None]  # None deletes the override


@dataclass(frozen=True)
class BrokerConfigRecord(MetadataRecord):
    TYPE = "broker_config"
    broker_id: int | None  # None: the cluster-wide default
    configs: dict[str, str | None]  # None deletes


@dataclass(frozen=True)
class GroupConfigRecord(MetadataRecord):
    TYPE = "group_config"
    group: str
    configs: dict[str, str | None]  # None deletes


@dataclass(frozen=True)
class RemoveTopicRecord(MetadataRecord):
    TYPE = "remove_topic"
    name: str  # slog's topics are removed by name (KRaft's by topic id)


@dataclass(frozen=True)
class ProducerIdsRecord(MetadataRecord):
    TYPE = "producer_ids"
    next_producer_id: int  # the first id of the next block to hand out


@dataclass(frozen=True)
class AccessControlEntryRecord(MetadataRecord):
    TYPE = "acl"
    binding: AclBinding  # inline, its enums as their Kafka numbers


@dataclass(frozen=True)
class RemoveAccessControlEntryRecord(MetadataRecord):
    TYPE = "remove_acl"
    binding: AclBinding  # the binding to delete, as it was created


@dataclass(frozen=True)
class ClientQuotaRecord(MetadataRecord):
    # One record per entity and change (KRaft writes one per key).
    TYPE = "client_quota"
    entity: dict[str, str | None]  # entity type -> name; None is the default entity
    values: dict[str, float | None]  # quota key -> value; None deletes


RECORD_TYPES: dict[str, type[MetadataRecord]] = {cls.TYPE: cls for cls in (
    ControllerRecord, RegisterBrokerRecord, FenceBrokerRecord, TopicRecord, PartitionRecord,
    TopicConfigRecord, BrokerConfigRecord, GroupConfigRecord, RemoveTopicRecord,
    ProducerIdsRecord, AccessControlEntryRecord, RemoveAccessControlEntryRecord,
    ClientQuotaRecord)}


# -- the codec -----------------------------------------------------------------------------

class InvalidRecordError(SlogError):
    """A metadata record whose fields do not have their declared types or ranges."""


class UnknownRecordTypeError(InvalidRecordError):
    """A record type this slog does not know: written by a newer version."""

    def __init__(self, kind: str):
        super().__init__(f"unknown metadata record type {kind!r}")
        self.kind = kind


# Ranges by field name, the same in every record (list fields: each element).
_MINIMUM = {"controller_id": 0, "broker_id": 0, "port": 0, "partition": 0,
            "leader": NO_LEADER, "leader_epoch": 0, "partition_epoch": 0, "replicas": 0,
            "isr": 0, "adding": 0, "removing": 0, "next_producer_id": 0,
            "controller_epoch": 0, "ts": 0}
_MAXIMUM = {"port": 65535}
_OMITTED_WHEN_EMPTY = {"endpoints"}  # records of older versions do not have them
_STAMP = ("controller_epoch", "ts")  # written last, after the record's own fields


def encode_record(record: MetadataRecord) -> Json:
    """The JSON object of ``record``, in the log's format (see the module docstring)."""
    out: Json = {"type": record.TYPE}
    _encoder(type(record))(record, out)
    out["controller_epoch"] = record.controller_epoch
    out["ts"] = record.ts
    return out


def decode_record(data: object) -> MetadataRecord:
    """The typed record of one JSON object of the log; raises InvalidRecordError."""
    if not isinstance(data, dict):
        raise InvalidRecordError(f"a metadata record is a JSON object, not {data!r}")
    kind = data.get("type")
    if not isinstance(kind, str):
        raise InvalidRecordError(f"a metadata record's type is a string, not {kind!r}")
    cls = RECORD_TYPES.get(kind)
    if cls is None:
        raise UnknownRecordTypeError(kind)
    return typing.cast(MetadataRecord, _plan(cls)(data, kind))


# An encoder adds a dataclass's fields to a JSON object (a carried value's inline).
Encoder = Callable[[Any, Json], None]
_encoders: dict[type, Encoder] = {}


def _encoder(cls: type) -> Encoder:
    """The encoder of a dataclass, built once from its fields' declared types."""
    encoder = _encoders.get(cls)
    if encoder is not None:
        return encoder
    hints = typing.get_type_hints(cls)
    steps: list[tuple[str, Encoder | None, Callable[[Any], Any] | None]] = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        if f.name in _STAMP:
            continue  # encode_record writes them last
        if dataclasses.is_dataclass(hint) and hint is not Endpoint:
            steps.append((f.name, _encoder(typing.cast(type, hint)), None))
        else:
            steps.append((f.name, None, _to_json(hint)))

    def encode(value: Any, out: Json) -> None:
        for name, inline, convert in steps:
            item = getattr(value, name)
            if inline is not None:
                inline(item, out)
            elif convert is None:
                out[name] = item
            elif item or name not in _OMITTED_WHEN_EMPTY:
                out[name] = convert(item)

    _encoders[cls] = encode
    return encode


def _to_json(hint: Any) -> Callable[[Any], Any] | None:
    """How a value of a declared type becomes JSON; None: as it is."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple and args[0] is Endpoint:
        return lambda v: [e.to_record() for e in v]
    if origin is tuple:
        return list
    if origin is dict:
        return dict
    if isinstance(hint, type) and issubclass(hint, enum.IntEnum):
        return int
    return None


# A decoder takes the whole JSON object (a carried value is inline) and the record type.
Decoder = Callable[[Json, str], Any]
Check = Callable[[Any], Any]  # one JSON value -> its declared type; raises _Wrong
_plans: dict[type, Decoder] = {}


class _Wrong(Exception):
    """A value that is not what its field declares (the decoder adds where it is)."""


def _plan(cls: type) -> Decoder:
    """The decoder of a dataclass, built once from its fields' declared types."""
    plan = _plans.get(cls)
    if plan is not None:
        return plan
    hints = typing.get_type_hints(cls)
    inline: list[tuple[str, Decoder]] = []
    checked: list[tuple[str, Check, bool]] = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        if dataclasses.is_dataclass(hint) and hint is not Endpoint:
            inline.append((f.name, _plan(typing.cast(type, hint))))
        else:
            optional = f.default is not dataclasses.MISSING or \
                f.default_factory is not dataclasses.MISSING
            checked.append((f.name, _checker(hint, f.name), optional))

    def decode(data: Json, kind: str) -> Any:
        kwargs = {name: decoder(data, kind) for name, decoder in inline}
        for name, check, optional in checked:
            if name in data:
                try:
                    kwargs[name] = check(data[name])
                except _Wrong as exc:
                    raise InvalidRecordError(f"{kind} record: {name} {exc}") from None
            elif not optional:
                raise InvalidRecordError(f"{kind} record has no {name!r}")
        return cls(**kwargs)

    _plans[cls] = decode
    return decode


def _checker(hint: Any, name: str) -> Check:
    """The check of one JSON value against a declared type."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):  # X | None
        inner = _checker(next(a for a in args if a is not type(None)), name)
        return lambda v: None if v is None else inner(v)
    if origin is tuple and args[0] is int:  # broker ids: the bulk of every partition record
        low = _MINIMUM.get(name)
        return lambda v: _ints(v, low)
    if origin is tuple:
        each = _checker(args[0], name)
        return lambda v: tuple(each(i) for i in _of(v, list))
    if origin is dict:
        value = _checker(args[1], name)
        return lambda v: {_of(k, str): value(i) for k, i in _of(v, dict).items()}
    if hint is Endpoint:
        return _endpoint
    if isinstance(hint, type) and issubclass(hint, enum.IntEnum):
        return lambda v: _enum(hint, v)
    if hint is int:
        low, high = _MINIMUM.get(name), _MAXIMUM.get(name)
        return lambda v: _int(v, low, high)
    if hint in (str, bool):
        return lambda v: _of(v, hint)
    if hint is float:
        return _float
    raise TypeError(f"no metadata codec for {hint!r}")


def _of(value: Any, kind: type) -> Any:
    if type(value) is not kind:  # exactly: a bool is no int here
        raise _Wrong(f"is {value!r}, not a {kind.__name__}")
    return value


def _int(value: Any, low: int | None, high: int | None) -> int:
    if type(value) is not int:
        raise _Wrong(f"is {value!r}, not an integer")
    if (low is not None and value < low) or (high is not None and value > high):
        raise _Wrong(f"is {value}, out of range")
    return value


def _float(value: Any) -> float:
    # JSON writes 1048576.0 back as it was, but a hand-edited 1048576 is a number too.
    if type(value) not in (int, float) or value != value:
        raise _Wrong(f"is {value!r}, not a number")
    return float(value)


def _ints(value: Any, low: int | None) -> tuple[int, ...]:
    if type(value) is list and all(type(i) is int for i in value) and \
            (low is None or not value or min(value) >= low):
        return tuple(value)
    return tuple(_int(i, low, None) for i in _of(value, list))


def _enum(kind: type[enum.IntEnum], value: Any) -> enum.IntEnum:
    try:
        return kind(_int(value, None, None))
    except ValueError:
        raise _Wrong(f"is {value}, not a known {kind.__name__}") from None


def _endpoint(value: Any) -> Endpoint:
    try:
        endpoint = Endpoint.from_record(_of(value, dict))
    except (KeyError, TypeError, ValueError) as exc:
        raise _Wrong(f"has an endpoint that is not one: {exc!r}") from None
    return Endpoint(endpoint.name, endpoint.host,
                    _int(endpoint.port, _MINIMUM["port"], _MAXIMUM["port"]), endpoint.protocol)
