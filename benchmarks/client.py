"""Python client throughput: slog's Producer/Consumer against redis-py on Redis Streams.

Workload (``--quick``: 100,000 records): 1,000,000 records of 100 bytes.

* **slog**: one broker started here (``slog.broker.daemon``, temp data dir,
  default settings), a 1-partition topic created with ``Admin``. Produce:
  ``Producer(acks=1)`` (so not idempotent, as Kafka does for acks=1) calling
  ``send(topic, value)`` in a loop, then ``flush()``. Consume:
  ``Consumer(auto_offset_reset="earliest")``, ``assign`` the partition, then
  ``poll()`` until every record arrived.
* **redis**: ``redis-server --appendonly yes --appendfsync everysec --save ''``
  on a free port in a temp dir, driven by redis-py in the same process.
  Produce: ``XADD stream * v <value>`` in a non-transactional pipeline,
  executed every 1,000 commands. Consume: ``XREADGROUP ... COUNT 10000
  NOACK`` in a loop until every entry arrived (NOACK skips the pending-entries
  list; a Kafka consumer with ``assign()`` keeps no such state either, and it
  is the faster option for Redis, so the ratio is conservative).
* **slog CLI** (skipped with ``--no-cli``): a file of as many lines of the same
  100-byte value, written once before the runs, then the real command
  ``python -m slog.cli produce TOPIC --file F --acks 1 -b BOOTSTRAP`` as a
  subprocess into its own fresh 1-partition topic per run. Its figure is the
  wall time of the whole command: interpreter start-up, imports, reading and
  splitting the file, producing, closing. It is compared with the Producer
  phase (same acks), not with Redis.

Each figure is the wall time of the whole client phase, client construction,
connection and metadata included, on both sides; records/s are medians of
``--runs`` runs (default 3), each on a fresh topic / stream. Both servers run
for the whole benchmark but are only ever busy one at a time. The redis-py
reply parser in use (pure Python or hiredis) is printed, since it dominates
redis-py's read speed.

Targets: producer >= 3x redis-py XADD records/s, consumer >= 2x redis-py
XREADGROUP records/s.

Usage::

    python benchmarks/client.py [--quick] [--runs N] [--records N] [--no-cli]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# Runnable from a checkout without installing slog.
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

VALUE = b"v" * 100
REDIS_PIPELINE = 1000
REDIS_COUNT = 10_000
TARGETS = {"produce": 3.0, "consume": 2.0}


def free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def timed(run: Callable[..., int], *args: object, expected: int) -> float:
    """Records/s of ``run(*args)`` (which returns how many records it handled)."""
    start = time.perf_counter()
    count = run(*args)
    elapsed = time.perf_counter() - start
    if count != expected:
        raise RuntimeError(f"handled {count} records, expected {expected}")
    return count / elapsed


# ------------------------------------------------------------------ slog


@contextlib.contextmanager
def slog_broker(root: Path) -> Iterator[str]:
    from slog.broker.daemon import start_daemon, stop_daemon

    data = root / "slog"
    info = start_daemon(1, data, f"127.0.0.1:{free_port()}")
    try:
        yield f"{info.host}:{info.port}"
    finally:
        stop_daemon(1, data)


def slog_produce(bootstrap: str, topic: str, records: int) -> int:
    from slog.client import Producer

    with Producer(bootstrap, acks=1) as producer:
        send = producer.send
        for _ in range(records):
            send(topic, VALUE)
        producer.flush()
        last = send(topic, VALUE)  # one more, to read back the offset it got
        producer.flush()
    offset = last.result(10).offset
    if offset != records:
        raise RuntimeError(f"the extra record got offset {offset}, expected {records}")
    return records


def slog_consume(bootstrap: str, topic: str, records: int) -> int:
    from slog.client import Consumer, TopicPartition

    seen = 0
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        while seen < records:
            batch = consumer.poll(timeout_ms=5000)
            if not batch:
                raise RuntimeError(f"no records after {seen}")
            seen += len(batch)
            if batch[-1].value != VALUE:
                raise RuntimeError("wrong value read back")
    return min(seen, records)


def write_lines(path: Path, records: int) -> None:
    """``records`` lines of VALUE, the input of the CLI phase."""
    chunk = (VALUE + b"\n") * 10_000
    with open(path, "wb") as out:
        for _ in range(records // 10_000):
            out.write(chunk)
        out.write((VALUE + b"\n") * (records % 10_000))


def slog_cli_produce(bootstrap: str, topic: str, records: int, lines: Path) -> int:
    """``slog produce`` as a user runs it, from this checkout; returns the records it reported."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    result = subprocess.run(
        [sys.executable, "-m", "slog.cli", "produce", topic, "--file", str(lines),
         "--acks", "1", "-b", bootstrap],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=1800)
    if result.returncode != 0:
        raise RuntimeError(f"slog produce exited with {result.returncode}: {result.stderr}")
    found = re.search(r"produced (\d+) of (\d+) records", result.stderr)
    if found is None or found[1] != found[2]:
        raise RuntimeError(f"unexpected slog produce summary: {result.stderr!r}")
    return int(found[1])


# ------------------------------------------------------------------ redis


@contextlib.contextmanager
def redis_server(root: Path) -> Iterator[int]:
    import redis

    port = free_port()
    workdir = root / "redis"
    workdir.mkdir()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(workdir),
         "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
         "--logfile", str(workdir / "redis.log")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        client = redis.Redis(port=port)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.02)
        client.close()
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def redis_produce(port: int, stream: str, records: int) -> int:
    import redis

    client = redis.Redis(port=port)
    pipe = client.pipeline(transaction=False)
    xadd = pipe.xadd
    fields: dict[Any, Any] = {"v": VALUE}
    for i in range(1, records + 1):
        xadd(stream, fields)
        if i % REDIS_PIPELINE == 0:
            pipe.execute()
    pipe.execute()
    stored = client.xlen(stream)
    client.close()
    if stored != records:
        raise RuntimeError(f"redis holds {stored} entries, expected {records}")
    return records


def redis_consume(port: int, stream: str, records: int) -> int:
    import redis

    client = redis.Redis(port=port)
    client.xgroup_create(stream, "g", id="0")
    seen = 0
    while seen < records:
        reply: Any = client.xreadgroup("g", "c", {stream: ">"}, count=REDIS_COUNT, noack=True)
        if not reply:
            raise RuntimeError(f"no entries after {seen}")
        entries = reply[0][1]
        seen += len(entries)
        if entries[-1][1][b"v"] != VALUE:
            raise RuntimeError("wrong value read back")
    client.close()
    return seen


def redis_parser() -> str:
    try:
        import hiredis  # noqa: F401
    except ImportError:
        return "pure-Python parser (hiredis not installed)"
    return "hiredis parser"


# ------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="100,000 records instead of 1M")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--records", type=int, default=None)
    parser.add_argument("--no-cli", action="store_true", help="skip the `slog produce` phase")
    args = parser.parse_args(argv)
    records = args.records or (100_000 if args.quick else 1_000_000)
    if shutil.which("redis-server") is None:
        parser.error("redis-server is not installed")

    from slog.client import Admin, NewTopic

    rates: dict[tuple[str, str], list[float]] = {}
    root = Path(tempfile.mkdtemp(prefix="slog-client-bench-"))
    lines = root / "lines.txt"
    try:
        if not args.no_cli:
            write_lines(lines, records)
        with slog_broker(root) as bootstrap, redis_server(root) as port, \
                Admin(bootstrap) as admin:
            for run in range(args.runs):
                topic = f"bench-{run}"
                admin.create_topics([NewTopic(topic, partitions=1)])
                phases: list[tuple[str, str, Callable[..., int], tuple[object, ...]]] = [
                    ("slog", "produce", slog_produce, (bootstrap, topic)),
                    ("slog", "consume", slog_consume, (bootstrap, topic)),
                    ("redis", "produce", redis_produce, (port, topic)),
                    ("redis", "consume", redis_consume, (port, topic)),
                ]
                if not args.no_cli:
                    cli_topic = f"bench-cli-{run}"
                    admin.create_topics([NewTopic(cli_topic, partitions=1)])
                    phases.append(("slog", "cli produce", _cli_phase(lines),
                                   (bootstrap, cli_topic)))
                for peer, phase, fn, where in phases:
                    rate = timed(fn, *where, records, expected=records)
                    rates.setdefault((peer, phase), []).append(rate)
                print(f"run {run + 1}/{args.runs}: " + ", ".join(
                    f"{peer} {phase} {values[-1]:,.0f}/s"
                    for (peer, phase), values in rates.items()), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    print(f"\n{records:,} records of {len(VALUE)} B, median of {args.runs} run(s); "
          f"redis-py uses the {redis_parser()}")
    print(f"{'phase':<9}{'slog records/s':>16}{'redis-py records/s':>20}{'ratio':>8}"
          f"{'target':>8}  ok")
    ok = True
    for phase in ("produce", "consume"):
        mine = statistics.median(rates[("slog", phase)])
        theirs = statistics.median(rates[("redis", phase)])
        ratio = mine / theirs
        met = ratio >= TARGETS[phase]
        ok &= met
        print(f"{phase:<9}{mine:>16,.0f}{theirs:>20,.0f}{ratio:>7.2f}x"
              f"{TARGETS[phase]:>7.1f}x  {'yes' if met else 'NO'}")
    if ("slog", "cli produce") in rates:
        cli = statistics.median(rates[("slog", "cli produce")])
        producer = statistics.median(rates[("slog", "produce")])
        print(f"\n`slog produce --file --acks 1` (whole command): {cli:,.0f} records/s, "
              f"{cli / producer:.2f}x the Producer phase")
    return 0 if ok else 1


def _cli_phase(lines: Path) -> Callable[[str, str, int], int]:
    def run(bootstrap: str, topic: str, records: int) -> int:
        return slog_cli_produce(bootstrap, topic, records, lines)

    return run


if __name__ == "__main__":
    sys.exit(main())
