"""Transactions benchmark: what exactly-once costs a librdkafka producer and consumer.

Three brokers on this machine sharing one temp data dir (``slog cluster up``,
default settings, so ``write.caching=false``: acknowledged once the ISR fsynced).
Topics of 3 partitions, RF 3, ``min.insync.replicas`` 2; 100 B records, acks=all,
the producer settings of ``benchmarks/cluster.py`` (linger 5 ms, 1 MB batches).
The clients are ``rdkafka_perf.c`` (librdkafka from C, built here against
confluent-kafka's librdkafka) so the client's own loop is not the limit.

* **produce**: in the same run, interleaved (``--runs`` rounds, a fresh topic for
  each case): idempotent non-transactional produce, and transactional produce at
  1,000 and at 100 records per transaction (each transaction committed before the
  next begins, as a read-process-write loop does). records/s from the first record
  produced to the last acknowledgement (``init_transactions`` excluded), median
  of the rounds, and the ratio transactional / idempotent of the medians. Goal:
  >= 0.8x at 1,000 records per transaction. The 100-record case produces a
  tenth of the records (its rate is bound by commits, not records). Also shown:
  AddPartitionsToTxn requests per transaction (the brokers' SIGUSR1 request
  counters): above 1 when the producer's next transaction is answered
  CONCURRENT_TRANSACTIONS while the previous one's markers are still written.
* **concurrent producers** (``--producers 1,2,4``): the idempotent and the
  txn-1000 cases again with N ``rdkafka_perf`` processes at once (distinct
  transactional ids, the same topic, the records split between them), so each
  ratio compares like with like at its N. They start together, once all are set
  up (``init_transactions`` done); records/s: all records over the span from the
  first producer's first record to the last one's last acknowledgement.
  One producer's transactions are a serial chain of replicated writes (latency,
  not work), so several producers' chains overlap. N=1 is the figure above.
* **commit latency**: a confluent-kafka transactional producer writes 10 records
  to each of the 3 partitions (their leaders are printed: placement spreads them
  over the brokers, so the markers go to all three), waits until they are
  acknowledged, and commits. The figure runs from
  ``commit_transaction()``'s start until ListOffsets read_committed (slog's
  client, one request per partition leader, polled) gives a last stable offset
  beyond the transaction's records on all three partitions: EndTxn, the
  PrepareCommit record replicated, the COMMIT markers appended and replicated
  by every leader. ``commit_transaction()``'s own return (the EndTxn answer)
  is reported beside it. Median and p99 of ``--commits``. Goal: median < 20 ms.
* **consume**: a topic of committed transactions (1,000 records each, COMMIT
  markers between them) is read from offset 0 by ``rdkafka_perf consume`` with
  ``isolation.level=read_committed`` and with ``read_uncommitted``, alternately,
  ``--consume-runs`` times each (a run takes well under a second); records/s
  (assignment to the last record), medians, and their ratio. Goal: read_committed
  >= 0.9x read_uncommitted.

* **write caching**: everything above except consume runs once per
  ``--write-caching`` value (default ``false,true``: a second cluster whose
  brokers have ``write.caching.default=true``, so neither the records nor
  ``__transaction_state`` nor the markers wait for an fsync), interleaved round by
  round, so the same run shows how much of a transaction's cost is the fsyncs.
* **lone write**: the floor a transaction's chain is made of: one 100 B record
  produced alone (acks=all, linger 0, RF 3, the partitions in turn) and
  ``flush()``-ed before the next, ``--lone-writes`` of them per variant
  (interleaved in blocks); median and p99.

The load average is printed at the start and the end: on two cores other work
moves these figures. ``--json FILE`` writes the figures as JSON as well.
The whole benchmark stops after ``--timeout`` seconds; every broker it started is
stopped and the temp dir removed, also on errors and Ctrl-C.

Usage::

    python benchmarks/transactions.py [--quick] [--runs N] [--records N] [--commits N]
        [--consume-runs N] [--lone-writes N] [--write-caching false,true]
        [--producers 1[,N...]]
        [--base-port PORT] [--timeout S] [--dir PARENT] [--json FILE]
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_support as bench  # noqa: E402
import cluster as bench_cluster  # noqa: E402
from broker import CONSUMER_CONFIG, build_rdkafka_perf, key_values  # noqa: E402
from cluster import BROKERS, PRODUCER_CONFIG, Cluster, percentile, running  # noqa: E402

from slog.client import Admin, NewTopic, TopicPartition  # noqa: E402

PARTITIONS = 3
VALUE_SIZE = 100
PRODUCE_GOAL = 0.8  # transactional at 1,000 per transaction / idempotent
COMMIT_GOAL_MS = 20.0  # median commit latency
CONSUME_GOAL = 0.9  # read_committed / read_uncommitted
RECORDS_PER_COMMIT = 10  # per partition, in the commit-latency transactions
PRODUCE_CASES = {"idempotent": 0, "txn-1000": 1000, "txn-100": 100}
ISOLATION = ("read_committed", "read_uncommitted")
ADD_PARTITIONS = "AddPartitionsToTxn"  # its name in the brokers' stats
IDEMPOTENT = {**PRODUCER_CONFIG, "acks": "all", "enable.idempotence": "true"}
BLOCK = 50  # commits / lone writes per variant before switching to the other
PORTS_APART = 10  # between the variants' clusters with --base-port


@dataclass
class Results:
    load_start: tuple[float, ...] = ()
    load_end: tuple[float, ...] = ()
    records: int = 0
    # Keyed by write caching ("false" / "true"), then as said. A case run by N > 1
    # producers at once is named with " xN" (see ``case_name``).
    produce: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # case -> rec/s
    add_partitions: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # per txn
    commit_ms: dict[str, list[float]] = field(default_factory=dict)  # commit() -> LSO passed
    end_txn_ms: dict[str, list[float]] = field(default_factory=dict)  # commit() -> its return
    lone_write_ms: dict[str, list[float]] = field(default_factory=dict)  # produce -> acked
    consume: dict[str, list[float]] = field(default_factory=dict)  # isolation -> records/s (false)


# ------------------------------------------------------------------ clients


def run_perfs(cmds: list[list[str]], deadline: bench.Deadline) -> list[dict[str, str]]:
    """Run ``rdkafka_perf`` processes at once, each to completion; their ``key=value``
    summary lines. Several start producing together, once all are set up."""
    together = len(cmds) > 1
    env = {**os.environ, "RDKAFKA_PERF_BARRIER": "1"} if together else None
    procs = [subprocess.Popen(cmd, stdin=subprocess.PIPE if together else None,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env)
             for cmd in cmds]
    outs = []
    try:
        if together:
            start_together(procs, deadline)
        for cmd, proc in zip(cmds, procs, strict=True):
            try:
                stdout, stderr = proc.communicate(timeout=deadline.left())
            except subprocess.TimeoutExpired:
                raise bench.BenchTimeout(f"rdkafka_perf {cmd[1]} did not finish in time"
                                         ) from None
            if proc.returncode != 0:
                raise RuntimeError(f"rdkafka_perf {cmd[1]} failed ({proc.returncode}): "
                                   f"{stderr[-2000:]}")
            outs.append(dict(item.split("=", 1) for item in stdout.split()))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return outs


def start_together(procs: list[subprocess.Popen[str]], deadline: bench.Deadline) -> None:
    """Wait until every process said "ready", then let them all go."""
    for proc in procs:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":  # an early exit: its error follows
            return
        deadline.check()
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()  # communicate() closes it


def run_perf(cmd: list[str], deadline: bench.Deadline) -> dict[str, str]:
    return run_perfs([cmd], deadline)[0]


def create_topic(cluster: Cluster, topic: str, deadline: bench.Deadline) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS, BROKERS,
                                      {"min.insync.replicas": "2"})])
    bench.wait_until(lambda: cluster.in_sync(topic), deadline, f"topic {topic}")


def delete_topic(cluster: Cluster, topic: str) -> None:
    """Its dirty pages must not slow the next case."""
    with Admin(cluster.bootstrap) as admin:
        admin.delete_topics([topic])


def produce_command(perf: Path, cluster: Cluster, topic: str, records: int, per_txn: int,
                    transactional_id: str) -> list[str]:
    if per_txn:
        config = {**IDEMPOTENT, "transactional.id": transactional_id}
        return [str(perf), "txn-produce", cluster.bootstrap, topic, str(PARTITIONS),
                str(records), str(VALUE_SIZE), str(per_txn), *key_values(config)]
    return [str(perf), "produce", cluster.bootstrap, topic, str(PARTITIONS), str(records),
            str(VALUE_SIZE), *key_values(IDEMPOTENT)]


def produce(perf: Path, cluster: Cluster, topic: str, records: int, per_txn: int,
            deadline: bench.Deadline) -> dict[str, str]:
    return run_perf(produce_command(perf, cluster, topic, records, per_txn, f"bench-{topic}"),
                    deadline)


def produce_concurrently(perf: Path, cluster: Cluster, topic: str, records: int,
                         per_txn: int, producers: int, deadline: bench.Deadline
                         ) -> tuple[float, int]:
    """``producers`` processes share ``records``: records/s over their combined span
    (first start to last end) and the transactions committed."""
    cmds = [produce_command(perf, cluster, topic, records // producers, per_txn,
                            f"bench-{topic}-{n}") for n in range(producers)]
    outs = run_perfs(cmds, deadline)
    started = min(float(out["started"]) for out in outs)
    ended = max(float(out["started"]) + float(out["seconds"]) for out in outs)
    return (sum(int(out["records"]) for out in outs) / (ended - started),
            sum(int(out.get("transactions", 0)) for out in outs))


def case_name(case: str, producers: int) -> str:
    return case if producers == 1 else f"{case} x{producers}"


def cases(producers: list[int]) -> list[tuple[str, int, int]]:
    """(name, records per transaction, producers): every case with one producer; the
    idempotent and txn-1000 ones again with each larger number."""
    one = [(case, per_txn, 1) for case, per_txn in PRODUCE_CASES.items()]
    return one + [(case_name(case, n), PRODUCE_CASES[case], n) for n in producers if n > 1
                  for case in ("idempotent", "txn-1000")]


# ------------------------------------------------------------------ measurements


def measure_produce(perf: Path, clusters: dict[str, Cluster], records: int, runs: int,
                    producers: list[int], results: Results, deadline: bench.Deadline) -> None:
    print(f"produce: {records:,} records of {VALUE_SIZE} B ({records // 10:,} at 100 per "
          f"transaction), {PARTITIONS} partitions, RF {BROKERS}, acks=all; {runs} rounds; "
          f"producers at once: {', '.join(map(str, producers))}", flush=True)
    for run in range(runs):
        for caching, cluster in clusters.items():
            for case, per_txn, n in cases(producers):
                topic = f"produce-{case.replace(' ', '-')}-{run}"
                create_topic(cluster, topic, deadline)
                count = records // 10 if per_txn == 100 else records
                requests = cluster.counters().get(ADD_PARTITIONS, 0)
                rate, transactions = produce_concurrently(perf, cluster, topic, count, per_txn,
                                                          n, deadline)
                results.produce.setdefault(caching, {}).setdefault(case, []).append(rate)
                line = (f"  round {run + 1} write.caching={caching:<5} {case:>13}: "
                        f"{rate:>9,.0f} records/s")
                if per_txn:
                    per = (cluster.counters().get(ADD_PARTITIONS, 0) - requests) / transactions
                    results.add_partitions.setdefault(caching, {}).setdefault(case, []).append(
                        per)
                    line += f"  ({transactions} transactions, {per:.2f} AddPartitionsToTxn each)"
                print(line, flush=True)
                delete_topic(cluster, topic)


def last_stable_offsets(admin: Admin, partitions: list[TopicPartition]
                        ) -> dict[TopicPartition, int]:
    found = admin.list_offsets(dict.fromkeys(partitions, "latest"), isolation_level=1)
    return {tp: result.offset for tp, result in found.items()}


class Committer:
    """Timed transactions on one cluster (see the module doc: commit latency)."""

    def __init__(self, cluster: Cluster, caching: str, stack: contextlib.ExitStack,
                 deadline: bench.Deadline):
        from confluent_kafka import Producer

        self.caching, self.deadline = caching, deadline
        topic = "commit-latency"
        create_topic(cluster, topic, deadline)
        leaders = [p.leader for _, p in sorted(cluster.image().topics[topic].partitions.items())]
        print(f"  write.caching={caching}: leaders on brokers {', '.join(map(str, leaders))}",
              flush=True)
        self.producer = Producer({**IDEMPOTENT, "bootstrap.servers": cluster.bootstrap,
                                  "linger.ms": "0", "log_level": 3,
                                  "transactional.id": f"bench-commit-latency-{caching}"})
        self.producer.init_transactions(60)
        self.partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        self.admin = stack.enter_context(Admin(cluster.bootstrap))
        last_stable_offsets(self.admin, self.partitions)  # connections and metadata
        self.last: dict[int, int] = {}
        self.commit(None)  # the first one warms up, off the record

    def _delivered(self, error: Any, message: Any) -> None:
        if error is not None:
            raise RuntimeError(f"delivery failed: {error}")
        self.last[message.partition()] = max(self.last.get(message.partition(), -1),
                                             message.offset())

    def commit(self, results: Results | None) -> None:
        self.deadline.check()
        producer = self.producer
        producer.begin_transaction()
        for i in range(RECORDS_PER_COMMIT * PARTITIONS):
            producer.produce(self.partitions[0].topic, b"c" * VALUE_SIZE,
                             partition=i % PARTITIONS, on_delivery=self._delivered)
        producer.flush(self.deadline.left())
        started = time.perf_counter()
        producer.commit_transaction(self.deadline.left())
        answered = time.perf_counter()
        waiting = {tp: self.last[tp.partition] for tp in self.partitions}  # its last records
        while waiting:
            lso = last_stable_offsets(self.admin, list(waiting))
            waiting = {tp: end for tp, end in waiting.items() if lso[tp] <= end}
            if time.perf_counter() - started > 30:
                raise RuntimeError(f"the LSO did not pass the transaction: {waiting}")
        stable = time.perf_counter()
        if results is not None:
            results.end_txn_ms.setdefault(self.caching, []).append((answered - started) * 1000)
            results.commit_ms.setdefault(self.caching, []).append((stable - started) * 1000)


class LoneWriter:
    """One record at a time, each acknowledged (acks=all) before the next is sent."""

    def __init__(self, cluster: Cluster, caching: str, deadline: bench.Deadline):
        from confluent_kafka import Producer

        self.caching, self.deadline, self.sent = caching, deadline, 0
        self.topic = "lone-writes"
        create_topic(cluster, self.topic, deadline)
        self.producer = Producer({**IDEMPOTENT, "bootstrap.servers": cluster.bootstrap,
                                  "linger.ms": "0", "log_level": 3})
        self.write(None)  # connections and metadata, off the record

    def write(self, results: Results | None) -> None:
        self.deadline.check()
        started = time.perf_counter()
        self.producer.produce(self.topic, b"w" * VALUE_SIZE, partition=self.sent % PARTITIONS)
        if self.producer.flush(self.deadline.left()):
            raise RuntimeError("a lone write was not acknowledged")
        self.sent += 1
        if results is not None:
            results.lone_write_ms.setdefault(self.caching, []).append(
                (time.perf_counter() - started) * 1000)


def measure_latencies(clusters: dict[str, Cluster], commits: int, lone_writes: int,
                      results: Results, stack: contextlib.ExitStack,
                      deadline: bench.Deadline) -> None:
    print(f"commit latency: {commits} transactions of {RECORDS_PER_COMMIT} records on each of "
          f"{PARTITIONS} partitions; lone writes: {lone_writes} records of {VALUE_SIZE} B, "
          f"acks=all; per write.caching value, in blocks of {BLOCK}", flush=True)
    committers = [Committer(c, caching, stack, deadline) for caching, c in clusters.items()]
    writers = [LoneWriter(c, caching, deadline) for caching, c in clusters.items()]
    for done in range(0, max(commits, lone_writes), BLOCK):
        for committer, writer in zip(committers, writers, strict=True):
            for _ in range(min(BLOCK, max(0, commits - done))):
                committer.commit(results)
            for _ in range(min(BLOCK, max(0, lone_writes - done))):
                writer.write(results)
    for caching in clusters:
        print(f"  write.caching={caching}: {describe_latency(results, caching)}", flush=True)


def measure_consume(perf: Path, cluster: Cluster, records: int, runs: int, results: Results,
                    deadline: bench.Deadline) -> None:
    topic = "consume-committed"
    create_topic(cluster, topic, deadline)
    produce(perf, cluster, topic, records, 1000, deadline)
    print(f"consume: {records:,} committed records ({records // 1000:,} transactions) from "
          f"offset 0, {runs} runs each, alternating", flush=True)
    for run in range(runs):
        for isolation in ISOLATION:
            config = {**CONSUMER_CONFIG, "isolation.level": isolation}
            out = run_perf([str(perf), "consume", cluster.bootstrap, topic, str(PARTITIONS),
                            str(records), *key_values(config)], deadline)
            rate = int(out["records"]) / float(out["seconds"])
            results.consume.setdefault(isolation, []).append(rate)
            print(f"  run {run + 1} {isolation:>16}: {rate:>10,.0f} records/s", flush=True)


# ------------------------------------------------------------------ report


def median_p99(samples: list[float]) -> str:
    return f"median {statistics.median(samples):.1f} ms, p99 {percentile(samples, 0.99):.1f} ms"


def describe_latency(results: Results, caching: str) -> str:
    parts = []
    if commit_ms := results.commit_ms.get(caching):
        parts.append(f"commit to LSO passed: {median_p99(commit_ms)}; EndTxn answered: "
                     f"{median_p99(results.end_txn_ms[caching])} ({len(commit_ms)} commits)")
    if lone := results.lone_write_ms.get(caching):
        parts.append(f"lone acks=all write: {median_p99(lone)} ({len(lone)} writes)")
    return "; ".join(parts) or "no latencies measured"


def idempotent_peer(case: str) -> str:
    """The idempotent case run by as many producers as ``case``."""
    return " ".join(["idempotent", *case.split(" ")[1:]])


def figures(results: Results) -> dict[str, object]:
    def medians(samples: dict[str, list[float]]) -> dict[str, float]:
        return {k: statistics.median(v) for k, v in samples.items() if v}

    produce = {caching: medians(cases) for caching, cases in results.produce.items()}
    consume = medians(results.consume)
    out: dict[str, object] = {**asdict(results), "produce_median": produce,
                              "consume_median": consume}
    out["produce_ratio"] = {
        caching: {case: rate / rates[peer] for case, rate in rates.items()
                  if not case.startswith("idempotent")
                  and (peer := idempotent_peer(case)) in rates}
        for caching, rates in produce.items()}
    if len(consume) == 2:
        out["consume_ratio"] = consume["read_committed"] / consume["read_uncommitted"]
    for name, samples in (("commit_ms", results.commit_ms),
                          ("lone_write_ms", results.lone_write_ms)):
        out[f"{name}_median"] = {c: statistics.median(v) for c, v in samples.items() if v}
        out[f"{name}_p99"] = {c: percentile(v, 0.99) for c, v in samples.items() if v}
    return out


def report(results: Results, json_path: Path | None) -> bool:
    results.load_end = os.getloadavg()
    found = figures(results)
    if json_path is not None:
        json_path.write_text(json.dumps(found, indent=2) + "\n")
    print(f"\nresults (load average {results.load_start[0]:.2f} at the start, "
          f"{results.load_end[0]:.2f} at the end)")
    checks: list[bool] = []
    produce, ratios = found["produce_median"], found["produce_ratio"]
    assert isinstance(produce, dict) and isinstance(ratios, dict)
    for caching in dict.fromkeys([*results.produce, *results.commit_ms,
                                  *results.lone_write_ms]):
        print(f"  write.caching={caching}:")
        for case, rate in produce.get(caching, {}).items():
            print(f"    produce {case:>13}: {rate:>10,.0f} records/s (median)")
        for case, ratio in ratios.get(caching, {}).items():
            print(f"    {case} / {idempotent_peer(case)}: {ratio:.2f}x")
        print(f"    {describe_latency(results, caching)}")
    # The goals hold for slog's defaults (write.caching=false).
    if "txn-1000" in ratios.get("false", {}):
        checks.append(ok := ratios["false"]["txn-1000"] >= PRODUCE_GOAL)
        print(f"  goal txn-1000 >= {PRODUCE_GOAL}x idempotent (write.caching=false): "
              f"{'ok' if ok else 'MISSED'}")
    if commit_ms := results.commit_ms.get("false"):
        checks.append(ok := statistics.median(commit_ms) < COMMIT_GOAL_MS)
        print(f"  goal commit median < {COMMIT_GOAL_MS:g} ms (write.caching=false): "
              f"{'ok' if ok else 'MISSED'}")
    consume = found["consume_median"]
    assert isinstance(consume, dict)
    for isolation, rate in consume.items():
        print(f"  consume {isolation:>16}: {rate:>10,.0f} records/s (median)")
    if "consume_ratio" in found:
        ratio = found["consume_ratio"]
        assert isinstance(ratio, float)
        checks.append(ok := ratio >= CONSUME_GOAL)
        print(f"  read_committed / read_uncommitted: {ratio:.2f}x (goal >= {CONSUME_GOAL}x): "
              f"{'ok' if ok else 'MISSED'}")
    return len(checks) == 3 and all(checks)


def main(argv: list[str] | None = None) -> int:
    parser = bench.common_parser(__doc__, "a tenth of the records, 2 rounds, 50 commits",
                                 1800, 300)
    parser.add_argument("--runs", type=int, default=None,
                        help="produce rounds and consume runs per mode (default 3; quick 2)")
    parser.add_argument("--records", type=int, default=None,
                        help="records per produce case and consumed (default 200,000; "
                             "quick 20,000)")
    parser.add_argument("--commits", type=int, default=None,
                        help="transactions timed for the commit latency (default 300; quick 50)")
    parser.add_argument("--consume-runs", type=int, default=None,
                        help="consume runs per isolation level (default 15; quick 3)")
    parser.add_argument("--lone-writes", type=int, default=None,
                        help="lone acks=all writes timed per variant (default 500; quick 100)")
    parser.add_argument("--write-caching", default="false,true",
                        help="the brokers' write.caching.default values to compare, "
                             "comma-separated (default false,true); consume runs on the first")
    parser.add_argument("--producers", default="1",
                        help="numbers of producers at once for the idempotent and txn-1000 "
                             "cases, comma-separated (default 1; e.g. 1,2,4)")
    bench_cluster.add_base_port_option(parser)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    runs = args.runs or (2 if args.quick else 3)
    records = args.records or (20_000 if args.quick else 200_000)
    commits = args.commits or (50 if args.quick else 300)
    consume_runs = args.consume_runs or (3 if args.quick else 15)
    lone_writes = args.lone_writes or (100 if args.quick else 500)
    variants = list(dict.fromkeys(v.strip().lower() for v in args.write_caching.split(",")))
    if not variants or not set(variants) <= {"false", "true"}:
        parser.error("--write-caching takes false, true or false,true")
    try:
        producers = sorted({int(n) for n in args.producers.split(",")} | {1})
    except ValueError:
        parser.error("--producers takes numbers, comma-separated")
    if producers[0] < 1 or records // producers[-1] < 1000:
        parser.error("--producers: each producer needs at least 1 and 1,000 records")
    deadline, root = bench.start_run(args, "slog-transactions-bench-")
    results = Results(load_start=os.getloadavg(), records=records)
    print(f"transactions benchmark: {BROKERS} brokers, load average "
          f"{results.load_start[0]:.2f}; temp dir {root}", flush=True)

    def measure() -> None:
        perf, library = build_rdkafka_perf(root)
        print(f"rdkafka_perf.c with {library}", flush=True)
        clusters: dict[str, Cluster] = {}
        with contextlib.ExitStack() as stack:
            for n, caching in enumerate(variants):
                port = None if args.base_port is None else args.base_port + n * PORTS_APART
                cluster = bench_cluster.cluster_in(root / f"cluster-{caching}", port)
                cluster.settings["write.caching.default"] = caching
                stack.enter_context(running(cluster))
                cluster.up(deadline)
                clusters[caching] = cluster
            measure_produce(perf, clusters, records, runs, producers, results, deadline)
            measure_latencies(clusters, commits, lone_writes, results, stack, deadline)
            measure_consume(perf, clusters[variants[0]], records, consume_runs, results,
                            deadline)

    return bench.measure_and_report(measure, lambda: report(results, args.json), root,
                                    stops=(bench.BenchTimeout, RuntimeError))


if __name__ == "__main__":
    sys.exit(main())
