"""``slog chaos run``: faults against a local cluster under load, and a Jepsen-style verdict."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from slog.cli.common import EXIT_FAILURE, EXIT_USAGE, fail
from slog.cli.output import OutputFormat, OutputOption, print_data

if TYPE_CHECKING:
    from slog.chaos.runner import RunResult
    from slog.chaos.txn_runner import TxnRunResult

app = typer.Typer(help="Fault injection: kill, pause, restart, tear and fill brokers under load.",
                  no_args_is_help=True)

_SPAN = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h)?")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_span(text: str) -> float:
    """``90``, ``90s``, ``30m``, ``1.5h`` or ``500ms`` -> seconds."""
    match = _SPAN.fullmatch(text.strip().lower())
    if not match:
        raise ValueError(f"a duration looks like 90s, 30m or 1h, not {text!r}")
    return float(match.group(1)) * _UNIT_S[match.group(2)]


@app.command()
def run(
    duration: Annotated[str, typer.Option(help="Whole run, warm-up included (90s, 30m, 1h).")
                        ] = "5m",
    warmup: Annotated[str, typer.Option(help="Fault-free load first, for the baseline rate.")
                      ] = "15s",
    seed: Annotated[int, typer.Option(help="Seeds the fault schedule (reproducible).")] = 1,
    faults: Annotated[str, typer.Option(
        help="Comma-separated: kill, pause, restart, torn, disk, power.")
                      ] = "kill,pause,restart,torn",
    rf: Annotated[int, typer.Option("--rf", min=1, help="Replication factor = brokers.")] = 3,
    min_insync: Annotated[int, typer.Option(min=1, help="min.insync.replicas")] = 2,
    partitions: Annotated[int, typer.Option(min=1)] = 6,
    rate: Annotated[float, typer.Option(min=0, help="Records/s per producer (0: no limit).")
                    ] = 0,
    consumers: Annotated[int, typer.Option(min=0, help="Group members verifying reads.")] = 2,
    retries: Annotated[int, typer.Option(
        min=0, help="Producer retries (Kafka's default: 2147483647).")] = 2_147_483_647,
    idempotence: Annotated[bool, typer.Option(
        help="Idempotent producer; without it duplicates are counted but do not fail the run.")
                           ] = True,
    max_ops: Annotated[int | None, typer.Option(min=0, help="Stop injecting after N ops.")
                       ] = None,
    data_dir: Annotated[Path | None, typer.Option(
        help="Where the cluster lives (default: a temporary directory, removed after a clean "
        "verdict).")] = None,
    history: Annotated[Path | None, typer.Option(
        help="Write every ack, read, assignment and fault here as JSON lines.")] = None,
    power_cut_command: Annotated[str | None, typer.Option(
        help="For the power fault: a command that makes the file system under --data-dir "
        "forget what was not fsynced (e.g. 'python -m tests.powerfs cut STATE_DIR').")
                                 ] = None,
    base_port: Annotated[int, typer.Option(
        min=0, max=65000, help="The brokers listen on this port and the next ones (0: a free "
        "range).")] = 0,
    write_caching: Annotated[bool, typer.Option(
        help="The brokers' write.caching.default: acknowledge before the fsync (Kafka's "
        "behaviour).")] = False,
    workload: Annotated[str, typer.Option(
        help="log: producers and a verifying group; txn: a transactional read-process-write "
        "pipeline checked for exactly-once output.")] = "log",
    output: OutputOption = OutputFormat.table,
) -> None:
    """Start an RF-broker cluster, load it (acks=all), inject seeded faults,
    heal, read everything back and check it; exit 1 when the verdict finds anomalies.

    Example (the soak): slog chaos run --duration 30m --seed 7 --faults kill,pause,restart,torn,disk
    """
    from slog.chaos.runner import RunConfig
    from slog.chaos.runner import run as run_chaos
    from slog.chaos.schedule import parse_faults

    try:
        config = RunConfig(duration_s=parse_span(duration), warmup_s=parse_span(warmup),
                           seed=seed, faults=parse_faults(faults), brokers=rf,
                           replication_factor=rf, min_insync=min_insync, partitions=partitions,
                           rate=rate, consumers=consumers, retries=retries,
                           idempotent=idempotence, max_ops=max_ops, data_dir=data_dir,
                           history_path=history, power_cut_command=power_cut_command,
                           write_caching=write_caching, base_port=base_port)
    except ValueError as exc:
        fail(str(exc), code=EXIT_USAGE)
    if idempotence and retries == 0:
        fail("--retries 0 with idempotence: an idempotent producer must retry (Kafka's rule); "
             "add --no-idempotence or retry", code=EXIT_USAGE)
    if min_insync > rf:
        fail(f"--min-insync {min_insync} is more than --rf {rf}", code=EXIT_USAGE)
    if workload not in ("log", "txn"):
        fail(f"--workload is log or txn, not {workload!r}", code=EXIT_USAGE)
    structured = output.structured

    def progress(line: str) -> None:
        print(line, file=sys.stderr if structured else sys.stdout, flush=True)

    if workload == "txn":
        from slog.chaos.txn_runner import run_txn
        result: RunResult | TxnRunResult = run_txn(config, log=progress)
    else:
        result = run_chaos(config, log=progress)
    if structured:
        print_data(result.to_json(), output)
    else:
        _print_summary(result)
    if not result.ok:
        raise typer.Exit(EXIT_FAILURE)


def _print_summary(result: RunResult | TxnRunResult) -> None:
    data = result.to_json()
    if data.get("workload") == "txn":
        typer.echo(f"fault events {data['fault_events']} in {data['ops']} ops; "
                   f"pipeline restarts {data['pipeline_restarts']}")
        _print_findings(data)
        return
    typer.echo(f"fault events {data['fault_events']} in {data['ops']} ops; recovery median "
               f"{data['recovery_median_s']}s, max {data['recovery_max_s']}s")
    typer.echo(f"acknowledged records/s: {data['records_per_s_without_faults']} without faults, "
               f"{data['records_per_s_with_faults']} during faults; "
               f"{data['failed_sends']} sends failed (indefinite, not acknowledged)")
    stalls = ", ".join(f"{kind} {s}s" for kind, s in sorted(data["longest_ack_stall_s"].items()))
    typer.echo(f"longest time a partition acknowledged nothing, by fault: {stalls or '-'}")
    for regression in data["committed_offsets_went_back"]:
        typer.echo(f"committed offsets went back: {regression}")
    _print_findings(data)


def _print_findings(data: dict[str, Any]) -> None:
    for problem in data["problems"]:
        typer.echo(f"problem: {problem}")
    for kind, examples in data["examples"].items():
        for example in examples:
            typer.echo(f"{kind}: {example}")
    typer.echo(data["verdict"])
