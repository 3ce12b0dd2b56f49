"""Slowloris and connection floods, with small limits so CI sees them bite.

The broker runs with max.connections=16 and connections.max.idle.ms=1500. A
well-behaved client connects first; then many more sockets than the limit
arrive: idle ones, ones that sent half a size prefix, a header without a body,
a size and then a trickle of bytes, and a churn of connect/close. Checked:

* at most max.connections sockets are held; the rest are closed at once;
* idle and half-sent connections are closed after the idle timeout, and a
  connection that keeps trickling bytes is still bounded by max.connections;
* the client that was already connected keeps getting produce/fetch round
  trips, and their latency during the flood is reported next to the latency
  before it (bounded generously for a loaded machine);
* once the flood is gone, new clients (slog and kcat) are served again;
* the broker's memory stays bounded and no descriptors leak.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from slog.client.connection import BrokerConnection
from slog.core.records import BatchBuilder
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from slog.protocol.headers import encode_request_header
from tests.brokers import BrokerProcess, running_broker
from tests.compat.clients import (
    RECENT_MS,
    Rec,
    Wire,
    assert_serving,
    create_topic,
    fetch_request,
    kcat_consume,
    kcat_produce,
    process_rss_kb,
    produce_request,
    slog_connection,
)

MAX_CONNECTIONS = 16
IDLE_MS = 1500
TOPIC = "flood"
ROUND_TRIPS = 20


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    limits = {"max.connections": str(MAX_CONNECTIONS),
              "connections.max.idle.ms": str(IDLE_MS)}
    with running_broker(tmp_path / "data", **limits) as process:
        create_topic(process.bootstrap, TOPIC)
        time.sleep(0.2)  # let the broker see the set-up connections close
        yield process


def _round_trip(conn: BrokerConnection, n: int) -> float:
    """Seconds for one acks=all produce and the fetch that reads it back."""
    builder = BatchBuilder()
    builder.append(b"k", b"value %d" % n, (), RECENT_MS + n)
    started = time.perf_counter()
    produced = conn.request(ApiKey.PRODUCE, produce_request(TOPIC, 0, builder.build()))
    [answer] = produced.responses[0].partition_responses
    assert answer.error_code == ErrorCode.none, answer
    fetched = conn.request(ApiKey.FETCH, fetch_request(TOPIC, 0, answer.base_offset, 10))
    [partition] = fetched.responses[0].partitions
    assert partition.error_code == ErrorCode.none and partition.records
    return time.perf_counter() - started


def _latencies(conn: BrokerConnection, first: int) -> list[float]:
    return [_round_trip(conn, first + i) for i in range(ROUND_TRIPS)]


def _flood(bootstrap: str, count: int) -> list[Wire]:
    """``count`` hostile sockets of five kinds (more than max.connections)."""
    kinds = [
        b"",  # connected and silent
        b"\x00\x00",  # half a size prefix
        struct.pack(">i", 64) + encode_request_header(3, 12, 1, "slow", flexible=True),  # header
        struct.pack(">i", 90 << 20) + b"\x00\x03",  # a 90 MB frame announced, 2 bytes sent
        struct.pack(">i", 40),  # a size, then a trickle (see _trickle)
    ]
    wires = []
    for i in range(count):
        wire = Wire(bootstrap, timeout_s=5)
        with contextlib.suppress(OSError):  # refused at max.connections: closed at once
            wire.send(kinds[i % len(kinds)])
        wires.append(wire)
    return wires


def _sockets(pid: int) -> int:
    """Open sockets of ``pid`` (segment files opened meanwhile are not a leak)."""
    fd_dir = f"/proc/{pid}/fd"
    links = []
    for fd in os.listdir(fd_dir):
        with contextlib.suppress(OSError):
            links.append(os.readlink(f"{fd_dir}/{fd}"))
    return sum(link.startswith("socket:") for link in links)


def _held(wires: list[Wire]) -> list[Wire]:
    return [w for w in wires if not w.closed_by_peer(timeout_s=0.05)]


def test_flood_is_bounded_and_the_connected_client_keeps_working(broker: BrokerProcess) -> None:
    assert broker.info is not None
    pid = broker.info.pid
    with slog_connection(broker.bootstrap) as conn:
        before = _latencies(conn, 0)  # also opens the segment files: counted in fds_before
        fds_before = _sockets(pid) - 1  # without this connection
        rss_before = process_rss_kb(pid)
        wires = _flood(broker.bootstrap, 5 * MAX_CONNECTIONS)
        time.sleep(0.3)
        held = _held(wires)
        # The well-behaved connection is one of the MAX_CONNECTIONS.
        assert 0 < len(held) <= MAX_CONNECTIONS - 1, len(held)
        during = _latencies(conn, ROUND_TRIPS)
        # Everything the flood holds is gone after the idle timeout (the client that
        # keeps making requests is not idle).
        deadline = time.monotonic() + IDLE_MS / 1000 + 5
        for wire in held:
            assert wire.closed_by_peer(timeout_s=max(0.1, deadline - time.monotonic())), \
                "a flood connection outlived connections.max.idle.ms"
        for wire in wires:
            wire.close()
        after = _latencies(conn, 2 * ROUND_TRIPS)
    median_before, median_during = statistics.median(before), statistics.median(during)
    print(f"\nround trip median: {median_before * 1000:.1f} ms before, "
          f"{median_during * 1000:.1f} ms during a flood of {len(wires)} sockets "
          f"({len(held)} held), {statistics.median(after) * 1000:.1f} ms after")
    assert median_during < max(10 * median_before, 0.5), (before, during)
    assert max(during) < 5, during
    # New clients are served once the flood is gone; nothing leaked.
    kcat_produce(broker.bootstrap, TOPIC, [Rec(b"kcat", b"after the flood", (), None)])
    assert kcat_consume(broker.bootstrap, TOPIC)[-1].value == b"after the flood"
    assert_serving(broker.bootstrap)
    deadline = time.monotonic() + 10
    while _sockets(pid) > fds_before:
        assert time.monotonic() < deadline, "flood connections still hold descriptors"
        time.sleep(0.05)
    grown_kb = process_rss_kb(pid) - rss_before
    assert grown_kb < 30 * 1024, f"broker RSS grew by {grown_kb} KiB"


def _trickle(wire: Wire, stop: threading.Event) -> None:
    """Send one byte of a 40-byte frame every 300 ms: never idle, never finished."""
    with contextlib.suppress(OSError):
        wire.send(struct.pack(">i", 40))
        while not stop.wait(0.3):
            wire.send(b"\x00")


def test_trickling_slowloris_is_bounded_by_max_connections(broker: BrokerProcess) -> None:
    """Kafka counts any bytes as activity, so a trickle is not idle; the limit still holds."""
    stop = threading.Event()
    wires = [Wire(broker.bootstrap) for _ in range(MAX_CONNECTIONS)]
    threads = [threading.Thread(target=_trickle, args=(w, stop), daemon=True) for w in wires]
    try:
        for thread in threads:
            thread.start()
        time.sleep(IDLE_MS / 1000 + 1)  # past the idle timeout: trickling ones stay
        assert len(_held(wires)) == MAX_CONNECTIONS
        with Wire(broker.bootstrap) as extra:  # the limit is reached: refused at once
            assert extra.closed_by_peer(timeout_s=2)
    finally:
        stop.set()
        for thread in threads:
            thread.join(5)
        for wire in wires:
            wire.close()
    # The trickle stopped: the half-sent frames count as idle and go; clients get in.
    deadline = time.monotonic() + IDLE_MS / 1000 + 10
    while True:
        try:
            assert_serving(broker.bootstrap)
            break
        except Exception:
            assert time.monotonic() < deadline, "the broker did not serve after the slowloris"
            time.sleep(0.2)


def test_connection_churn(broker: BrokerProcess) -> None:
    """Hundreds of connect/close cycles (some mid-frame) while a client works."""
    assert broker.info is not None
    with slog_connection(broker.bootstrap) as conn:
        _round_trip(conn, 0)  # opens the segment files before the descriptors are counted
    time.sleep(0.2)
    fds_before = _sockets(broker.info.pid)
    stop = threading.Event()
    cycles = [0]

    def churn() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError), Wire(broker.bootstrap, timeout_s=2) as wire:
                wire.send(struct.pack(">i", 30) + b"\x00\x12")
            cycles[0] += 1
            time.sleep(0.002)  # leave the (shared) CPU to the broker and the client

    thread = threading.Thread(target=churn, daemon=True)
    with slog_connection(broker.bootstrap) as conn:
        thread.start()
        try:
            latencies = _latencies(conn, 1)
            while cycles[0] < 300:
                time.sleep(0.05)
        finally:
            stop.set()
            thread.join(10)
    print(f"\nround trip median during churn: {statistics.median(latencies) * 1000:.1f} ms "
          f"over {cycles[0]} connect/close cycles")
    assert max(latencies) < 5, latencies
    deadline = time.monotonic() + 10
    while _sockets(broker.info.pid) > fds_before:
        assert time.monotonic() < deadline, "churned connections leaked descriptors"
        time.sleep(0.05)
    assert_serving(broker.bootstrap)
