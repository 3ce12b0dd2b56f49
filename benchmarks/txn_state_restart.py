"""Restart time of a broker holding one large transactional partition: main's code
against this tree's, in the same run, on the same data (issue 15, persisted
transaction state).

Fills one partition with committed and aborted transactions through librdkafka,
then restarts the broker (clean stop, and kill -9) alternately with the code of
``--before`` and ``--after`` (each a source tree put on the broker's PYTHONPATH),
timing start-up until ListOffsets read_committed answers the expected LSO. Then
the partition's own share: opening its log and building its producer state in a
fresh process per tree (``--load-only`` repeats just that on existing data).

    python -m benchmarks.txn_state_restart --before ../main --after . \\
        --data-dir /tmp/restart-data --port 19001 --gigabytes 1
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.brokers import BrokerProcess

TOPIC = "restart"
RECORD = b"x" * 1000


def _fill(bootstrap: str, gigabytes: float, per_batch: int) -> int:
    """Transactions of 1,000 records of 1 kB, every tenth aborted; the records written."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "restart-fill",
                         "linger.ms": 5, "batch.num.messages": per_batch})
    producer.init_transactions(60)
    records = int(gigabytes * 1e9 / len(RECORD))
    for transaction in range(0, records // 1000):
        producer.begin_transaction()
        for _ in range(1000):
            while True:
                try:
                    producer.produce(TOPIC, RECORD, partition=0)
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.flush(120)  # every record sent: the partition is in the transaction
        if transaction % 10 == 9:
            producer.abort_transaction(120)
        else:
            producer.commit_transaction(120)
    return records


def _stable_offset(bootstrap: str, isolation: str = "read_committed") -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "restart",
                         "isolation.level": isolation})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), 5)[1])
    finally:
        consumer.close()


def _settled(bootstrap: str) -> int:
    """The LSO once the last COMMIT marker is in (EndTxn is answered before it lands)."""
    while (stable := _stable_offset(bootstrap)) != _stable_offset(bootstrap, "read_uncommitted"):
        time.sleep(0.1)
    return stable


def _restart(broker: BrokerProcess, tree: Path, kill: bool, expected: int) -> float:
    if kill:
        broker.kill()
    else:
        broker.stop()
    os.environ["PYTHONPATH"] = str(tree)
    os.chdir(tree)  # `python -m` puts the working directory first on sys.path
    began = time.monotonic()
    broker.info = None
    from slog.broker.daemon import start_daemon
    broker.info = start_daemon(broker.broker_id, broker.data_dir, broker.bootstrap,
                               broker.overrides, timeout_s=600)
    while True:
        try:
            if _stable_offset(broker.bootstrap) == expected:
                return time.monotonic() - began
        except Exception:  # not loaded yet
            pass
        time.sleep(0.05)


_LOAD = """
import sys, time
from pathlib import Path
from slog.core.log import PartitionLog
from slog.core.log_config import LogConfig
from slog.replication.partition import Partition
directory, clean, end = Path(sys.argv[1]), sys.argv[2] == "clean", int(sys.argv[3])
began = time.perf_counter()
plog = PartitionLog.open(directory, LogConfig(), clean_shutdown=clean, recovery_point=end)
partition = Partition("restart", 0, plog, 1)
print(time.perf_counter() - began)
plog.abandon()
"""


def _load_times(data_dir: Path, trees: dict[str, Path], rounds: int) -> None:
    """The partition's own share of a restart, without the broker around it: open
    the log and build its producer state, in a fresh process per tree (clean, and
    as after a crash with the recovery point at the log end)."""
    directory = next(data_dir.rglob(f"{TOPIC}-0"))
    end = max(int(p.stem) for p in directory.glob("*.log"))  # the active segment's base
    for clean in (True, False):
        times: dict[str, list[float]] = {name: [] for name in trees}
        for _ in range(rounds):
            for name, tree in trees.items():
                env = {**os.environ, "PYTHONPATH": str(tree)}
                # cwd: sys.path starts with it, and must not bring the other tree in
                out = subprocess.run([sys.executable, "-c", _LOAD, str(directory),
                                      "clean" if clean else "crash", str(end)], cwd=tree,
                                     env=env, capture_output=True, text=True, check=True)
                times[name].append(float(out.stdout.split()[-1]))
        before, after = (statistics.median(times[n]) for n in trees)
        print(f"partition load ({'clean' if clean else 'after a crash'}), median of {rounds}: "
              f"before {before * 1000:.0f} ms, after {after * 1000:.0f} ms, "
              f"ratio {before / after:.1f}x", flush=True)


def _generate(directory: Path, records: int) -> None:
    """Write ``records`` single-record batches straight into a partition log, the
    worst case for a replay: transactions of 100 records of 3 producers, every
    tenth aborted, rolling 64 MB segments (each roll writes a snapshot)."""
    from slog.core.log import PartitionLog
    from slog.core.log_config import LogConfig
    from slog.core.metadata import PartitionState
    from slog.core.records import BatchBuilder
    from slog.core.transaction_index import build_marker
    from slog.replication.partition import Partition

    config = LogConfig(write_caching=True)  # no fsync per append: this is a fill
    partition = Partition(TOPIC, 0, PartitionLog.open(directory, config), 1)
    partition.become_leader(PartitionState(TOPIC, 0, (1,), (1,), leader=1, leader_epoch=1,
                                           partition_epoch=1))
    sequences = [0, 0, 0]
    for written in range(records):
        producer = written % 3
        builder = BatchBuilder(producer_id=producer, producer_epoch=0,
                               base_sequence=sequences[producer], is_transactional=True)
        builder.append(None, RECORD)
        partition.append_as_leader(builder.build(), required_acks=1, min_insync_replicas=1)
        sequences[producer] += 1
        if written % 300 == 299:
            for pid in range(3):
                marker = build_marker(pid, 0, written % 3000 != 2999, 0, 0)
                partition.append_as_leader(marker, required_acks=1, min_insync_replicas=1)
    partition.log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, required=True)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--gigabytes", type=float, default=1.0)
    parser.add_argument("--per-batch", type=int, default=16, help="records per batch")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--small-batches", type=int, default=0, metavar="N",
                        help="fill the partition with N single-record batches written "
                             "straight into its log (while the broker is down)")
    parser.add_argument("--load-only", action="store_true",
                        help="only time the partition load, on the data of an earlier run")
    args = parser.parse_args()
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    if args.load_only:
        _load_times(args.data_dir, trees, args.rounds)
        return
    shutil.rmtree(args.data_dir, ignore_errors=True)
    os.environ["PYTHONPATH"] = str(trees["after"])
    broker = BrokerProcess(1, args.data_dir, args.port, {"log.preallocate": "false"}).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        began = time.monotonic()
        if args.small_batches:  # the broker's log of the topic is replaced while it is down
            broker.stop()
            directory = next(args.data_dir.rglob(f"{TOPIC}-0"))
            for path in directory.iterdir():
                if path.name != "partition.metadata":
                    path.unlink()
            _generate(directory, args.small_batches)
            broker.start()
            records = args.small_batches
        else:
            records = _fill(broker.bootstrap, args.gigabytes, args.per_batch)
        expected = _settled(broker.bootstrap)
        size = sum(p.stat().st_size for p in args.data_dir.rglob(f"{TOPIC}-0/*.log"))
        print(f"filled {records} records, {size / 1e9:.2f} GB, LSO {expected} "
              f"in {time.monotonic() - began:.0f} s")
        times: dict[tuple[str, bool], list[float]] = {}
        for _ in range(args.rounds):
            for kill in (False, True):
                for name, tree in trees.items():
                    seconds = _restart(broker, tree, kill, expected)
                    times.setdefault((name, kill), []).append(seconds)
                    print(f"{name:6} {'kill -9' if kill else 'clean  '} {seconds:6.2f} s",
                          flush=True)
        for kill in (False, True):
            before = statistics.median(times[("before", kill)])
            after = statistics.median(times[("after", kill)])
            print(f"{'kill -9' if kill else 'clean'} restart, median of {args.rounds}: "
                  f"before {before:.2f} s, after {after:.2f} s, ratio {before / after:.1f}x")
    finally:
        broker.stop()
    _load_times(args.data_dir, trees, args.rounds)


if __name__ == "__main__":
    main()
