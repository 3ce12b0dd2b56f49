"""A Quix Streams app as its quickstart writes one: a per-key running count.

Reads JSON records ``{"seq": n}`` keyed by a word from the input topic, keeps the
count of each key in the library's state (RocksDB, backed by its changelog topic)
and writes ``{"key", "seq", "count"}`` to the output topic. Run as its own process:

    python -m tests.integration.quix_apps.count_app BOOTSTRAP INPUT OUTPUT GROUP \
        STATE_DIR at-least-once|exactly-once
"""

from __future__ import annotations

import os
import sys
from typing import Any

from quixstreams import Application, State


def count(value: dict[str, Any], key: bytes, timestamp: int, headers: Any,
          state: State) -> dict[str, Any]:
    total = int(state.get("count", 0)) + 1
    state.set("count", total)
    return {"key": key.decode(), "seq": value["seq"], "count": total}


def main(argv: list[str]) -> None:
    bootstrap, input_name, output_name, group, state_dir, guarantee = argv
    # librdkafka's debug contexts (e.g. "eos,msg,protocol") when investigating a failure.
    debug = {"debug": os.environ["QUIX_APP_RDKAFKA_DEBUG"]} \
        if os.environ.get("QUIX_APP_RDKAFKA_DEBUG") else {}
    app = Application(
        broker_address=bootstrap,
        consumer_group=group,
        auto_offset_reset="earliest",
        processing_guarantee=guarantee,  # type: ignore[arg-type] - checked by the library
        state_dir=state_dir,
        # Short checkpoints, so a kill lands between many transactions.
        commit_interval=0.5,
        # A crashed app leaves its transaction open until the coordinator times it
        # out (its transactional.id is random per run): 6 s rather than 60 s.
        producer_extra_config={"transaction.timeout.ms": 6000, **debug},
        # ...and its group member until its session times out: 6 s (Kafka's minimum
        # by default) rather than librdkafka's 45 s, before the restarted app is assigned.
        consumer_extra_config={"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000},
        loglevel="DEBUG",
    )
    input_topic = app.topic(input_name, value_deserializer="json", key_deserializer="bytes")
    output_topic = app.topic(output_name, value_serializer="json", key_serializer="bytes")
    sdf = app.dataframe(input_topic)
    sdf = sdf.apply(count, stateful=True, metadata=True)
    sdf.to_topic(output_topic)
    app.run()


if __name__ == "__main__":
    main(sys.argv[1:])
