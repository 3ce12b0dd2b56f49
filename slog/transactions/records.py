"""``__transaction_state`` records, byte-compatible with Kafka's
TransactionLogKey v0 (the transactional id) and TransactionLogValue v0
(producer id and epoch, timeout, status, partitions, update and start times).
A tombstone (null value) removes an expired transactional id.
"""

from __future__ import annotations

from slog.core.wire import Reader, WireFormatError, Writer
from slog.transactions.metadata import NO_PRODUCER_ID, TransactionState, TxnTransit

KEY_VERSION = 0
VALUE_VERSION = 0

__all__ = ["WireFormatError", "decode_key", "decode_value", "encode_key", "encode_value"]


def encode_key(transactional_id: str) -> bytes:
    return Writer().int16(KEY_VERSION).string(transactional_id).getvalue()


def decode_key(data: bytes) -> str:
    reader = Reader(data)
    version = reader.int16()
    if version != KEY_VERSION:
        raise WireFormatError(f"TransactionLogKey version {version} is unknown")
    return reader.required_string()


def encode_value(transit: TxnTransit) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(transit.partitions):
        by_topic.setdefault(topic, []).append(partition)
    w = Writer().int16(VALUE_VERSION).int64(transit.producer_id).int16(transit.producer_epoch)
    w.int32(transit.timeout_ms).int8(int(transit.state))
    w.array(by_topic.items(), lambda out, item: out.string(item[0]).array(
        item[1], lambda o, p: o.int32(p)))
    return w.int64(transit.update_ms).int64(transit.start_ms).getvalue()


def decode_value(data: bytes) -> TxnTransit:
    reader = Reader(data)
    version = reader.int16()
    if version != VALUE_VERSION:
        raise WireFormatError(f"TransactionLogValue version {version} is not read by slog")
    producer_id = reader.int64()
    epoch = reader.int16()
    timeout_ms = reader.int32()
    status = reader.int8()
    try:
        state = TransactionState(status)
    except ValueError:
        raise WireFormatError(f"unknown transaction status {status}") from None
    partitions = frozenset(
        (topic, partition)
        for topic, ids in reader.array(lambda r: (r.required_string(), r.array(Reader.int32)))
        for partition in ids)
    update_ms = reader.int64()
    start_ms = reader.int64()
    if producer_id < 0 or timeout_ms < 0 or any(p < 0 for _, p in partitions):
        raise WireFormatError("negative producer id, timeout or partition")
    return TxnTransit(producer_id, NO_PRODUCER_ID, epoch, -1, timeout_ms, state, partitions,
                      start_ms, update_ms)
