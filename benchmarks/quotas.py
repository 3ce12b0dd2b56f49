"""Client quota enforcement accuracy: what a capped real client gets next to its quota.

One broker is started here (``slog.broker.daemon``, temp data dir). A confluent-kafka
(librdkafka) producer with ``producer_byte_rate`` set for its client id produces
10 kB records as fast as it may; a confluent-kafka consumer with
``consumer_byte_rate`` reads a backlog as fast as it may. The figure is the rate
the client saw (bytes acked, or bytes delivered to the application) over a
measurement window after a warm-up, as a percentage of the quota. Goal: within
20 %.

Measured with Kafka's default window (``quota.window.num`` 11 samples of
``quota.window.size.seconds`` 1) over 10 s and over 30 s, and with a 2 s window
(2 samples) over 10 s, each after a 2 s warm-up (a new client may send one
sample's worth at once).

Usage::

    python benchmarks/quotas.py [--quick] [--rate BYTES_PER_S]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from confluent_kafka import Consumer, Producer  # noqa: E402

from slog.broker.daemon import start_daemon, stop_daemon  # noqa: E402
from slog.client import Admin, NewTopic  # noqa: E402
from tests.brokers import free_port  # noqa: E402

RECORD = 10_000


def _rate(stamps: list[tuple[float, int]], start: float, warm_up_s: float,
          measure_s: float) -> float:
    begin = start + warm_up_s
    return sum(n for t, n in stamps if begin <= t < begin + measure_s) / measure_s


def produce_rate(bootstrap: str, topic: str, warm_up_s: float, measure_s: float) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": "capped-producer",
                         "linger.ms": 5, "acks": "all"})
    acked: list[tuple[float, int]] = []

    def delivered(err: object, msg: object) -> None:
        if err is None:
            acked.append((time.monotonic(), RECORD))

    payload = b"p" * RECORD
    start = time.monotonic()
    while time.monotonic() - start < warm_up_s + measure_s + 0.5:
        try:
            producer.produce(topic, payload, on_delivery=delivered)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    producer.purge()
    producer.flush(10)
    return _rate(acked, start, warm_up_s, measure_s)


def consume_rate(bootstrap: str, topic: str, warm_up_s: float, measure_s: float) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": "capped-consumer",
                         "group.id": f"capped-{time.time()}", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: list[tuple[float, int]] = []
    start = 0.0
    try:
        while not start or time.monotonic() - start < warm_up_s + measure_s + 0.5:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                start = start or time.monotonic()
                got.append((time.monotonic(), len(msg.value() or b"")))
    finally:
        consumer.close()
    return _rate(got, start, warm_up_s, measure_s)


def measure(window_num: int, rate: int, warm_up_s: float, measure_s: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data_dir, port = Path(tmp) / "data", free_port()
        bootstrap = f"127.0.0.1:{port}"
        start_daemon(1, data_dir, bootstrap, {"quota.window.num": str(window_num)})
        try:
            with Admin(bootstrap) as admin:
                admin.create_topics([NewTopic("capped", 1, 1), NewTopic("backlog", 1, 1)])
                admin.alter_client_quotas({
                    (("client-id", "capped-producer"),): {"producer_byte_rate": rate},
                    (("client-id", "capped-consumer"),): {"consumer_byte_rate": rate}})
            backlog = int(rate * (warm_up_s + measure_s) * 2.5 / RECORD)
            filler = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
            for i in range(backlog):
                filler.produce("backlog", b"b" * RECORD)
                if i % 500 == 0:
                    filler.flush(60)
            filler.flush(60)
            label = f"window {window_num} x 1 s, measured {measure_s:.0f} s after {warm_up_s:.0f} s"
            for kind, fn, topic in (("producer", produce_rate, "capped"),
                                    ("consumer", consume_rate, "backlog")):
                got = fn(bootstrap, topic, warm_up_s, measure_s)
                print(f"  {kind:8s} {label}: {got / 1e6:6.3f} MB/s = "
                      f"{got / rate * 100:5.1f} % of the quota", flush=True)
        finally:
            stop_daemon(1, data_dir)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="only the default window, 10 s")
    parser.add_argument("--rate", type=int, default=1024 * 1024, help="quota, bytes/s")
    args = parser.parse_args()
    print(f"quota enforcement accuracy, quota {args.rate / 1e6:.3f} MB/s "
          "(confluent-kafka clients, one broker)")
    measure(11, args.rate, warm_up_s=2, measure_s=10)
    if not args.quick:
        measure(11, args.rate, warm_up_s=2, measure_s=30)
        measure(2, args.rate, warm_up_s=2, measure_s=10)


if __name__ == "__main__":
    main()
