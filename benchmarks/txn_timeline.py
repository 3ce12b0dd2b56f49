"""Where a transaction's time goes, as the producer sees it (issue 15).

One librdkafka transactional producer (confluent-kafka, linger 5 ms) writes
transactions of ``--records`` records of 100 B over 3 partitions of an RF 3
topic (3 brokers, ``slog cluster up``). Its protocol debug log (stderr, stamped
to the millisecond) gives, per transaction, when each request of the chain was
sent and answered relative to ``begin_transaction``: AddPartitionsToTxn (which
waits for the previous transaction's markers and CompleteCommit), the Produce
requests (acks=all), EndTxn (PrepareCommit written). Medians over the
transactions after the first five, once per ``--write-caching`` value.

    python benchmarks/txn_timeline.py [--records 1000] [--transactions 60]
"""

from __future__ import annotations

import collections
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_support as bench  # noqa: E402
from cluster import Cluster, running  # noqa: E402

from slog.client import Admin, NewTopic  # noqa: E402

TOPIC = "timeline"
PARTITIONS = 3
SKIPPED = 5  # the first transactions (connections, metadata, producer id)
_STAMPED = re.compile(r"%\d\|(\d+\.\d+)\|(\w+)\|(.*)")
_REQUEST = re.compile(r"(Sent|Received) (\w+)(?:Request|Response)")


def producer_process(bootstrap: str, records: int, transactions: int) -> None:
    """The producer (run in a child process so its stderr is the debug log)."""
    from confluent_kafka import Producer

    def mark(what: str) -> None:
        print(f"%7|{time.time():.3f}|MARK|{what}", file=sys.stderr, flush=True)

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "timeline",
                         "linger.ms": 5, "debug": "protocol,eos"})
    producer.init_transactions(30)
    for _ in range(transactions):
        mark("begin")
        producer.begin_transaction()
        for k in range(records):
            producer.produce(TOPIC, b"x" * 100, partition=k % PARTITIONS)
        mark("commit_transaction called")
        producer.commit_transaction(30)
        mark("commit_transaction returned")


def steps(log: str) -> list[list[tuple[float, str]]]:
    """Per transaction: (ms since begin, event), in log order."""
    transactions: list[list[tuple[float, str]]] = []
    for line in log.splitlines():
        stamped = _STAMPED.match(line)
        if not stamped:
            continue
        at, facility, text = float(stamped.group(1)) * 1000, stamped.group(2), stamped.group(3)
        if facility == "MARK" and text == "begin":
            transactions.append([(at, "begin")])
        elif transactions and facility == "MARK":
            transactions[-1].append((at, text))
        elif transactions and (request := _REQUEST.search(text)):
            transactions[-1].append((at, f"{request.group(1).lower()} {request.group(2)}"))
    return [[(at - txn[0][0], what) for at, what in txn] for txn in transactions]


def report(transactions: list[list[tuple[float, str]]]) -> None:
    steady = [t for t in transactions[SKIPPED:] if t[-1][1] == "commit_transaction returned"]
    at: dict[str, list[float]] = collections.defaultdict(list)
    for txn in steady:
        seen: collections.Counter[str] = collections.Counter()
        for ms, what in txn:
            seen[what] += 1
            request = what.startswith(("sent", "received"))
            at[f"{what} #{seen[what]}" if request else what].append(ms)
    print(f"  {len(steady)} transactions, median {statistics.median(t[-1][0] for t in steady):.0f} "
          "ms each; median ms after begin_transaction (1 ms stamps):")
    for what, times in sorted(at.items(), key=lambda kv: statistics.median(kv[1])):
        if len(times) >= len(steady) // 2:
            print(f"  {statistics.median(times):6.0f}  {what}")


def measure(write_caching: str, records: int, transactions: int, deadline: bench.Deadline,
            root: Path) -> None:
    cluster = Cluster(root / f"wc-{write_caching}")
    cluster.settings["write.caching.default"] = write_caching
    with running(cluster):
        cluster.up(deadline)
        with Admin(cluster.bootstrap) as admin:
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})])
        bench.wait_until(lambda: cluster.in_sync(TOPIC), deadline, f"topic {TOPIC}")
        child = subprocess.run(
            [sys.executable, __file__, "--producer", cluster.bootstrap, str(records),
             str(transactions)], capture_output=True, text=True, timeout=deadline.left(),
            env={**os.environ, "PYTHONPATH": str(REPO)}, check=False)
        if child.returncode:
            raise RuntimeError(f"the producer failed:\n{child.stderr[-2000:]}")
    print(f"write.caching={write_caching}, {records} records per transaction:")
    report(steps(child.stderr))


def main() -> int:
    if sys.argv[1:2] == ["--producer"]:
        producer_process(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return 0
    parser = bench.common_parser(__doc__ or "", "20 transactions", 600, 300)
    parser.add_argument("--records", type=int, default=1000, help="records per transaction")
    parser.add_argument("--transactions", type=int, default=60)
    parser.add_argument("--write-caching", default="false,true",
                        help="the brokers' write.caching.default values, comma separated")
    args = parser.parse_args()
    deadline, root = bench.start_run(args, "slog-txn-timeline-")
    transactions = 20 if args.quick else args.transactions
    for value in args.write_caching.split(","):
        measure(value, args.records, transactions, deadline, root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
