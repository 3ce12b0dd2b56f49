"""``slog transactions list|describe|describe-producers|abort``: kafka-transactions.sh
(KIP-664) against slog or Kafka.

``abort`` writes an ABORT marker at the partition's leader for a hanging transaction
(one its coordinator no longer knows, so the last stable offset is stuck): name the
producer with ``--producer-id``/``--producer-epoch``, or the transaction with
``--start-offset`` (the producer is found with DescribeProducers).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from slog.cli.common import (
    DEFAULT_BOOTSTRAP,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    BootstrapOption,
    TopicArgument,
    client_errors,
    fail,
)
from slog.cli.output import OutputFormat, OutputOption, emit

app = typer.Typer(help="List, describe and abort transactions (kafka-transactions.sh).",
                  no_args_is_help=True)

LIST_COLUMNS = ["transactional_id", "producer_id", "state", "coordinator"]
DESCRIBE_COLUMNS = ["transactional_id", "coordinator", "state", "producer_id",
                    "producer_epoch", "timeout_ms", "start_ms", "partitions"]
PRODUCER_COLUMNS = ["topic", "partition", "producer_id", "producer_epoch", "last_sequence",
                    "last_timestamp", "current_txn_start_offset"]
PartitionOption = Annotated[int, typer.Option("--partition", "-p", min=0,
                                              help="Partition number.")]


class _Clients:
    def __init__(self, bootstrap: str):
        from slog.client.cluster import ClusterClient
        from slog.client.transaction_admin import TransactionAdmin

        self.cluster = ClusterClient(bootstrap, client_id="slog-cli")
        self.transactions = TransactionAdmin(self.cluster)

    def __enter__(self) -> _Clients:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cluster.close()


@app.command("list")
def list_transactions(
    state: Annotated[list[str] | None, typer.Option(
        "--state", help="Only this state (repeatable): Empty, Ongoing, PrepareCommit, "
        "PrepareAbort, CompleteCommit, CompleteAbort, PrepareEpochFence.")] = None,
    producer_id: Annotated[list[int] | None, typer.Option(
        "--producer-id", help="Only this producer id (repeatable).")] = None,
    min_duration_ms: Annotated[int, typer.Option(
        "--min-duration-ms", help="Only transactions open longer than this (-1: all).")
    ] = -1,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """List the transactional ids of every coordinator.

    Example: slog transactions list --state Ongoing --min-duration-ms 60000
    """
    with client_errors(bootstrap), _Clients(bootstrap) as clients:
        found = clients.transactions.list_transactions(state or (), producer_id or (),
                                                       min_duration_ms)
    emit([{"transactional_id": t.transactional_id, "producer_id": t.producer_id,
           "state": t.state, "coordinator": t.coordinator} for t in found],
         LIST_COLUMNS, output)


@app.command("describe")
def describe(
    transactional_ids: Annotated[list[str], typer.Argument(
        help="Transactional ids.", show_default=False)],
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """State, producer and partitions of transactional ids, from their coordinators.

    Example: slog transactions describe payments-tx
    """
    with client_errors(bootstrap), _Clients(bootstrap) as clients:
        found = clients.transactions.describe_transactions(transactional_ids)
    emit([{"transactional_id": d.transactional_id, "coordinator": d.coordinator,
           "state": d.state, "producer_id": d.producer_id,
           "producer_epoch": d.producer_epoch, "timeout_ms": d.timeout_ms,
           "start_ms": d.start_ms,
           "partitions": [f"{tp.topic}-{tp.partition}" for tp in d.partitions]}
          for d in found.values()], DESCRIBE_COLUMNS, output)


def _producer_rows(topic: str, partition: int, producers: list[Any]) -> list[dict[str, Any]]:
    return [{"topic": topic, "partition": partition, "producer_id": p.producer_id,
             "producer_epoch": p.producer_epoch, "last_sequence": p.last_sequence,
             "last_timestamp": p.last_timestamp,
             "current_txn_start_offset": p.current_txn_start_offset} for p in producers]


@app.command("describe-producers")
def describe_producers(
    topic: TopicArgument,
    partition: PartitionOption,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """The producers a partition's leader knows, and where their open transactions start.

    Example: slog transactions describe-producers orders -p 0
    """
    from slog.client.types import TopicPartition

    tp = TopicPartition(topic, partition)
    with client_errors(bootstrap), _Clients(bootstrap) as clients:
        producers = clients.transactions.describe_producers([tp])[tp]
    emit(_producer_rows(topic, partition, producers), PRODUCER_COLUMNS, output)


@app.command("abort")
def abort(
    topic: TopicArgument,
    partition: PartitionOption,
    start_offset: Annotated[int | None, typer.Option(
        "--start-offset", help="The first offset of the transaction to abort.")] = None,
    producer_id: Annotated[int | None, typer.Option(
        "--producer-id", help="The producer whose transaction to abort.")] = None,
    producer_epoch: Annotated[int | None, typer.Option(
        "--producer-epoch", help="Its epoch (with --producer-id).")] = None,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Abort a hanging transaction on one partition (writes its ABORT marker).

    Examples:
      slog transactions abort orders -p 0 --start-offset 1200
      slog transactions abort orders -p 0 --producer-id 4000 --producer-epoch 3
    """
    from slog.client.types import TopicPartition

    by_producer = producer_id is not None and producer_epoch is not None
    if by_producer == (start_offset is not None) or \
            (producer_id is None) != (producer_epoch is None):
        fail("name the transaction with --start-offset, or with --producer-id and "
             "--producer-epoch", code=EXIT_USAGE)
    tp = TopicPartition(topic, partition)
    with client_errors(bootstrap), _Clients(bootstrap) as clients:
        if start_offset is not None:
            found = [p for p in clients.transactions.describe_producers([tp])[tp]
                     if p.current_txn_start_offset == start_offset]
            if not found:
                fail(f"no open transaction of {topic}-{partition} starts at {start_offset}",
                     hint=f"see `slog transactions describe-producers {topic} -p "
                          f"{partition}`", code=EXIT_NOT_FOUND)
            producer_id, producer_epoch = found[0].producer_id, found[0].producer_epoch
        assert producer_id is not None and producer_epoch is not None
        clients.transactions.abort_transaction(tp, producer_id, producer_epoch)
    emit([{"topic": topic, "partition": partition, "producer_id": producer_id,
           "producer_epoch": producer_epoch, "status": "aborted"}],
         ["topic", "partition", "producer_id", "producer_epoch", "status"], output)
