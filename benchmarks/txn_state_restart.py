"""Restart time of a broker holding one large transactional partition: main's code
against this tree's, in the same run, on the same data (issue 15, persisted
transaction state).

Fills one partition with committed and aborted transactions through librdkafka,
then restarts the broker (clean stop, and kill -9) alternately with the code of
``--before`` and ``--after`` (each a source tree put on the broker's PYTHONPATH),
timing start-up until ListOffsets read_committed answers the expected LSO.

    python -m benchmarks.txn_state_restart --before ../main --after . \\
        --data-dir /tmp/restart-data --port 19001 --gigabytes 1
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
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


def _stable_offset(bootstrap: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "restart",
                         "isolation.level": "read_committed"})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), 5)[1])
    finally:
        consumer.close()


def _restart(broker: BrokerProcess, tree: Path, kill: bool, expected: int) -> float:
    if kill:
        broker.kill()
    else:
        broker.stop()
    os.environ["PYTHONPATH"] = str(tree)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, required=True)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--gigabytes", type=float, default=1.0)
    parser.add_argument("--per-batch", type=int, default=16, help="records per batch")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    shutil.rmtree(args.data_dir, ignore_errors=True)
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    os.environ["PYTHONPATH"] = str(trees["after"])
    broker = BrokerProcess(1, args.data_dir, args.port, {"log.preallocate": "false"}).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        began = time.monotonic()
        records = _fill(broker.bootstrap, args.gigabytes, args.per_batch)
        expected = _stable_offset(broker.bootstrap)
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


if __name__ == "__main__":
    main()
