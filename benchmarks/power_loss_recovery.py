"""Power-loss recovery benchmark: from a power cut to serving again, with about 1 GB of data.

Three brokers on one data dir that lives on ``tests/powerfs`` (the FUSE file system
that drops every unsynced write on a cut), default settings (``write.caching=false``).
One topic, RF 3, ``min.insync.replicas`` 2, ``--partitions`` partitions, is loaded
with ``--gb`` of 1 KiB records by librdkafka at acks=all (every record is checked to
be there: the sum of the high watermarks), and the cluster waits for full ISRs.

Then, ``--cuts`` times: ``kill -9`` of every broker at once, the cut (unsynced data
dropped), every broker restarted in parallel (``slog.broker.daemon``, as ``slog cluster
up`` does). Timed from the restart (power back) and from the kill:

* **started**: every broker's daemon reports it serving;
* **leaders**: every partition of the topic has a live leader (the data dir's view,
  what ``slog cluster status`` shows);
* **serving**: one record produced at acks=all to every partition is acknowledged and
  read back at its offset by a consumer (librdkafka both): the figure;
* **full ISR**: every replica back in sync (the cluster healthy).

Between cuts the cluster is healthy again, and the records are all still there.
Prints each cut and the median. Needs ``/dev/fuse`` (the powerfs fixture says why not
otherwise). Everything it started is stopped and the temp dir removed, also on errors.

Usage::

    python benchmarks/power_loss_recovery.py [--quick] [--gb G] [--partitions N]
        [--cuts N] [--timeout S] [--dir PARENT] [--base-port PORT]
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_support as bench  # noqa: E402
from cluster import PRODUCER_CONFIG  # noqa: E402
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from slog.broker.daemon import in_parallel  # noqa: E402
from slog.chaos.cluster import ChaosCluster  # noqa: E402
from slog.core.names import fsync_dir  # noqa: E402
from tests.brokers import free_port_range  # noqa: E402
from tests.powerfs import PowerFS, available  # noqa: E402

BROKERS = 3
TOPIC = "bulk"
VALUE_SIZE = 1024
RECOVERY_TIMEOUT_S = 300.0


@dataclass
class Cut:
    dropped: dict[str, Any]
    kill_to_restart_s: float  # kill -9, waiting for the locks, the cut itself
    started_s: float  # from the restart
    leaders_s: float
    serving_s: float
    full_isr_s: float

    def line(self) -> str:
        return (f"dropped {self.dropped.get('bytes_dropped', 0):,} B in "
                f"{self.dropped.get('files_reverted', 0)} files; from power back: started "
                f"{self.started_s:.1f} s, leaders {self.leaders_s:.1f} s, serving "
                f"{self.serving_s:.1f} s, full ISR {self.full_isr_s:.1f} s (serving "
                f"{self.kill_to_restart_s + self.serving_s:.1f} s after the kill)")


def load(cluster: ChaosCluster, partitions: int, records: int, deadline: bench.Deadline
         ) -> float:
    """Create the topic and fill it at acks=all; returns the records/s."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = NewTopic(TOPIC, partitions, BROKERS, config={"min.insync.replicas": "2"})
    admin.create_topics([topic])[TOPIC].result(timeout=60)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "enable.idempotence": True, **PRODUCER_CONFIG})
    failures: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    value = b"x" * VALUE_SIZE
    started = time.monotonic()
    for i in range(records):
        while True:
            try:
                producer.produce(TOPIC, value, partition=i % partitions, on_delivery=delivered)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.1)
        if i % 10_000 == 0:
            producer.poll(0)
            deadline.check()
    while producer.flush(1.0):
        deadline.check()
    elapsed = time.monotonic() - started
    if failures:
        raise RuntimeError(f"{len(failures)} records failed while loading: {failures[0]}")
    return records / elapsed


def end_offsets(bootstrap: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "power-loss-bench",
                         "enable.auto.commit": False})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1]
                for p in range(partitions)]
    finally:
        consumer.close()


def leaders_elected(cluster: ChaosCluster, partitions: int) -> bool:
    view = cluster.view()
    ours = [p for p in view.partitions if p.topic == TOPIC]
    return len(ours) == partitions and not any(p.offline for p in ours)


def produce_and_consume(bootstrap: str, partitions: int, tag: str) -> None:
    """One record per partition at acks=all, each read back at its offset; raises if not."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "message.timeout.ms": 20_000})
    acked: dict[int, int] = {}
    errors: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked[msg.partition()] = msg.offset()

    for p in range(partitions):
        producer.produce(TOPIC, f"{tag}-{p}".encode(), partition=p, on_delivery=delivered)
    producer.flush(25)
    if errors or len(acked) != partitions:
        raise RuntimeError(f"produce: {len(acked)}/{partitions} acked, {errors[:1]}")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "power-loss-bench",
                         "enable.auto.commit": False, "enable.partition.eof": False})
    try:
        consumer.assign([TopicPartition(TOPIC, p, o) for p, o in acked.items()])
        missing = set(acked)
        until = time.monotonic() + 20
        while missing and time.monotonic() < until:
            msg = consumer.poll(1.0)
            partition = None if msg is None or msg.error() else msg.partition()
            if msg is None or partition is None:
                continue
            if acked.get(partition) == msg.offset():
                if msg.value() != f"{tag}-{partition}".encode():
                    raise RuntimeError(f"partition {partition} offset {msg.offset()} "
                                       f"holds another value")
                missing.discard(partition)
        if missing:
            raise RuntimeError(f"consume: partitions {sorted(missing)} not read back")
    finally:
        consumer.close()


def until(condition: Any, since: float, what: str) -> float:
    """Seconds from ``since`` until ``condition()`` is true (retrying what raises)."""
    deadline = since + RECOVERY_TIMEOUT_S
    last = ""
    while True:
        try:
            if condition():
                return time.monotonic() - since
        except (KafkaException, RuntimeError) as exc:
            last = f": {exc}"
        if time.monotonic() > deadline:
            raise RuntimeError(f"no {what} {RECOVERY_TIMEOUT_S:g} s after power back{last}")
        time.sleep(0.1)


def power_cut(cluster: ChaosCluster, fs: PowerFS, partitions: int, number: int) -> Cut:
    killed = time.monotonic()
    cluster.kill_every()
    dropped = fs.cut()
    back = time.monotonic()
    failures = [r for r in in_parallel(cluster.restart, cluster.ids).values()
                if isinstance(r, Exception)]
    if failures:
        raise RuntimeError(f"restart after the cut: {failures[0]}")
    started = time.monotonic() - back
    leaders = until(lambda: leaders_elected(cluster, partitions), back, "leaders")

    def serves() -> bool:
        produce_and_consume(cluster.bootstrap, partitions, f"cut{number}")
        return True

    serving = until(serves, back, "produce + consume")
    cluster.wait_healthy(RECOVERY_TIMEOUT_S)
    return Cut(dropped, back - killed, started, leaders, serving, time.monotonic() - back)


def main(argv: list[str] | None = None) -> int:
    parser = bench.common_parser(__doc__, "50 MB instead of 1 GB, one cut", 3600, 600)
    parser.add_argument("--gb", type=float, default=None, help="data to load (default 1)")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--cuts", type=int, default=None, help="power cuts (default 3)")
    parser.add_argument("--base-port", type=int, default=None,
                        help="first of the brokers' 3 ports (default: any free ones)")
    args = parser.parse_args(argv)
    if (why := available()) is not None:
        print(f"power-loss recovery benchmark skipped: {why}")
        return 0
    gb = args.gb or (0.05 if args.quick else 1.0)
    cuts = args.cuts or (1 if args.quick else 3)
    records = int(gb * (1 << 30)) // VALUE_SIZE
    deadline, root = bench.start_run(args, "slog-power-loss-bench-")
    results: list[Cut] = []
    print(f"power-loss recovery benchmark: {BROKERS} brokers on powerfs, {records:,} records "
          f"of {VALUE_SIZE} B in {args.partitions} partitions (RF 3), {cuts} cuts; "
          f"temp dir {root}", flush=True)

    def measure() -> None:
        with PowerFS(root / "powerfs") as fs:
            data = fs.mount / "data"
            data.mkdir()
            fsync_dir(fs.mount)  # the data dir itself is ours to make durable
            cluster = ChaosCluster(data, BROKERS, args.base_port or free_port_range(BROKERS), {})
            try:
                cluster.start()
                rate = load(cluster, args.partitions, records, deadline)
                cluster.wait_healthy(RECOVERY_TIMEOUT_S)
                expected = sum(end_offsets(cluster.bootstrap, args.partitions))
                print(f"loaded {expected:,} records ({expected * VALUE_SIZE / (1 << 30):.2f} "
                      f"GiB per replica) at {rate:,.0f} records/s", flush=True)
                for number in range(1, cuts + 1):
                    deadline.check()
                    cut = power_cut(cluster, fs, args.partitions, number)
                    results.append(cut)
                    expected += args.partitions  # the probe records
                    now = sum(end_offsets(cluster.bootstrap, args.partitions))
                    if now != expected:
                        raise RuntimeError(f"after cut {number}: {now:,} records, "
                                           f"expected {expected:,}")
                    print(f"cut {number}: {cut.line()}", flush=True)
            finally:
                cluster.kill_all()

    def report() -> bool:
        if not results:
            return False
        serving = [c.serving_s for c in results]
        print(f"power loss to serving again, {gb:g} GB, RF 3: median "
              f"{statistics.median(serving):.1f} s from power back "
              f"(min {min(serving):.1f}, max {max(serving):.1f}; {len(results)} cuts), "
              f"median {statistics.median(c.kill_to_restart_s + c.serving_s for c in results):.1f}"
              f" s from the kill")
        return True

    return bench.measure_and_report(measure, report, root,
                                    stops=(bench.BenchTimeout, RuntimeError))


if __name__ == "__main__":
    sys.exit(main())
