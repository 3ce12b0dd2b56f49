"""``slog reassign generate|execute|verify|cancel|list``: move partitions between brokers.

The plan files are Kafka's (``kafka-reassign-partitions``):
``{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [2, 3, 4]}]}``.
A plan is checked completely before anything changes; ``execute`` saves the
current assignment as a rollback plan first.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from slog.cli.common import (
    DEFAULT_BOOTSTRAP,
    EXIT_FAILURE,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    BootstrapOption,
    client_errors,
    fail,
)
from slog.cli.output import OutputFormat, OutputOption, emit, print_data, progress_bar

if TYPE_CHECKING:
    from slog.client import Admin
    from slog.client.admin import PartitionReassignment
    from slog.client.types import TopicPartition
    from slog.replication.reassignment import Assignment

app = typer.Typer(help="Move partition replicas between brokers (Kafka's plan files).",
                  no_args_is_help=True)

PlanOption = Annotated[Path, typer.Option(
    "--plan", help="Reassignment plan (JSON, Kafka's format).", show_default=False)]
POLL_S = 0.5


def _admin(bootstrap: str) -> Admin:
    from slog.client import Admin

    return Admin(bootstrap, client_id="slog-cli")


def _ids(text: str, what: str) -> list[int]:
    try:
        ids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        fail(f"--{what} takes comma-separated broker ids, e.g. 1,2,3 (got {text!r})",
             code=EXIT_USAGE)
    if not ids:
        fail(f"--{what} is empty", code=EXIT_USAGE)
    return ids


def _read_plan(path: Path) -> Assignment:
    from slog.replication.reassignment import PlanError, parse_plan

    try:
        text = path.read_text()
    except OSError as exc:
        fail(f"cannot read the plan {path}: {exc.strerror or exc}", code=EXIT_USAGE)
    except UnicodeDecodeError as exc:
        fail(f"{path}: the plan is not UTF-8 JSON ({exc.reason} at byte {exc.start})",
             code=EXIT_USAGE)
    try:
        return parse_plan(text)
    except PlanError as exc:
        fail(f"{path}: {exc}", hint="generate one with `slog reassign generate`",
             code=EXIT_USAGE)


class ClusterAssignment:
    """Replica lists as the cluster has them, with reassignments in progress."""

    def __init__(self, admin: Admin):
        # Moving partitions first: one that finishes before the metadata is read keeps
        # the replicas this answer gave (below), so the view stays consistent.
        self.ongoing: dict[TopicPartition, PartitionReassignment] = \
            admin.list_partition_reassignments()
        meta = admin.cluster.refresh_metadata(None)
        self.brokers = sorted(meta.brokers)
        self.racks = {b.node_id: b.rack for b in meta.brokers.values()}
        self.replicas: dict[tuple[str, int], tuple[int, ...]] = {
            (name, number): p.replicas
            for name, topic in meta.topics.items() if not topic.error_code
            for number, p in topic.partitions.items()}
        # A moving partition's replicas come from the answer that says it moves: the
        # metadata may already show it finished, which would look like a changed count.
        for tp, running in self.ongoing.items():
            if (tp.topic, tp.partition) in self.replicas:
                self.replicas[tp.topic, tp.partition] = running.replicas
        # What each partition had before a running reassignment: the rollback target.
        self.original = {
            key: tuple(r for r in replicas if r not in self._adding(key))
            for key, replicas in self.replicas.items()}

    def _adding(self, key: tuple[str, int]) -> tuple[int, ...]:
        from slog.client.types import TopicPartition

        running = self.ongoing.get(TopicPartition(*key))
        return running.adding_replicas if running else ()

    def topics(self) -> set[str]:
        return {topic for topic, _ in self.replicas}


def _plan_json(assignment: Assignment) -> dict[str, Any]:
    from slog.replication.reassignment import plan_to_json

    return plan_to_json(assignment)


def _write_plan(path: Path, assignment: Assignment) -> None:
    from slog.core.checkpoint import write_atomically

    text = json.dumps(_plan_json(assignment), indent=2) + "\n"
    try:
        write_atomically(path, text.encode())
    except OSError as exc:
        fail(f"cannot write {path}: {exc.strerror or exc}")


def _set_throttle(admin: Admin, topics: Iterable[str], rate: int | None) -> None:
    """Set (a rate) or remove (None) the reassignment throttle of ``topics``."""
    from slog.replication.throttle import THROTTLE_CONFIG

    for topic in sorted(set(topics)):
        if rate is None:
            admin.alter_configs(topic, delete=[THROTTLE_CONFIG])
        else:
            admin.alter_configs(topic, set={THROTTLE_CONFIG: str(rate)})


def _note(message: str, output: OutputFormat) -> None:
    """A line for people, on stderr, never mixed into JSON."""
    if output is OutputFormat.table:
        print(message, file=sys.stderr)


# -- generate ----------------------------------------------------------------------------
@app.command()
def generate(
    topics: Annotated[str, typer.Option(help="Topics to move, comma-separated.",
                                        show_default=False)],
    brokers: Annotated[str, typer.Option(help="Broker ids to place them on, e.g. 1,2,3.",
                                         show_default=False)],
    save: Annotated[Path | None, typer.Option(
        help="Also write the proposed plan to this file.")] = None,
    disable_rack_aware: Annotated[bool, typer.Option(
        "--disable-rack-aware",
        help="Ignore broker racks (by default each partition's replicas span racks when "
             "every broker has one).")] = False,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Print the current assignment of topics and a proposed one over the given brokers.

    Example: slog reassign generate --topics orders --brokers 2,3,4 --save plan.json
    """
    from slog.replication.placement import RackAwareMode
    from slog.replication.reassignment import PlanError, propose

    names = list(dict.fromkeys(t.strip() for t in topics.split(",") if t.strip()))
    if not names:
        fail("--topics is empty", code=EXIT_USAGE)
    broker_ids = _ids(brokers, "brokers")
    with client_errors(bootstrap), _admin(bootstrap) as admin:
        cluster = ClusterAssignment(admin)
    missing = [t for t in names if t not in cluster.topics()]
    if missing:
        fail(f"unknown topic(s): {', '.join(missing)}", hint="list topics with `slog topic list`",
             code=EXIT_NOT_FOUND)
    unknown = [b for b in broker_ids if b not in cluster.brokers]
    if unknown:
        fail(f"unknown broker(s) {unknown}; the cluster has {cluster.brokers}", code=EXIT_USAGE)
    current = {k: v for k, v in cluster.original.items() if k[0] in names}
    try:
        proposed = propose(current, names, broker_ids, racks=cluster.racks,
                           rack_mode=RackAwareMode.DISABLED if disable_rack_aware
                           else RackAwareMode.ENFORCED)
    except PlanError as exc:
        fail(str(exc), code=EXIT_USAGE, hint="--disable-rack-aware places replicas ignoring "
             "racks" if "rack" in str(exc) else None)
    if save is not None:
        _write_plan(save, proposed)
    if output.structured or not sys.stdout.isatty():
        print_data({"current": _plan_json(current), "proposed": _plan_json(proposed)},
                   output if output.structured else OutputFormat.json)
    else:
        print("Current partition replica assignment")
        print(json.dumps(_plan_json(current)))
        print()
        print("Proposed partition reassignment configuration")
        print(json.dumps(_plan_json(proposed)))
    if save is not None:
        _note(f"proposed plan saved to {save}; run it with "
              f"`slog reassign execute --plan {save}`", output)


# -- execute -----------------------------------------------------------------------------
def _check_against_cluster(plan: Assignment, cluster: ClusterAssignment, path: Path, *,
                           same_replica_count: bool) -> None:
    from slog.replication.reassignment import PlanError, check_plan

    try:
        check_plan(plan, cluster.original, cluster.brokers,
                   same_replica_count=same_replica_count)
    except PlanError as exc:
        fail(f"{path}: {exc}", hint="nothing was changed", code=EXIT_USAGE)


def _wait_until_done(admin: Admin, partitions: list[TopicPartition], timeout_s: float | None
                     ) -> bool | None:
    """Poll until none of ``partitions`` is moving (True), the timeout passes (False) or
    Ctrl-C (None: the reassignment goes on). A progress bar on a terminal only."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    total = len(partitions)
    try:
        with progress_bar("reassigning", total, "partitions") as bar:
            while True:
                moving = admin.list_partition_reassignments(partitions)
                bar.update(completed=total - len(moving))
                if not moving:
                    return True
                if deadline is not None and time.monotonic() > deadline:
                    return False
                time.sleep(POLL_S)
    except KeyboardInterrupt:
        return None


@app.command()
def execute(
    plan: PlanOption,
    throttle: Annotated[int | None, typer.Option(
        min=1, help="Limit replication to the new replicas to BYTES/s.")] = None,
    rollback_file: Annotated[Path | None, typer.Option(
        help="Where to save the current assignment (default: PLAN.rollback.json).")] = None,
    additional: Annotated[bool, typer.Option(
        help="Allow replacing reassignments already in progress.")] = False,
    disallow_replication_factor_change: Annotated[bool, typer.Option(
        "--disallow-replication-factor-change",
        help="Refuse a plan that changes a partition's replica count.")] = False,
    wait: Annotated[bool | None, typer.Option(
        help="Wait until done (default: only on a terminal).", show_default=False)] = None,
    timeout: Annotated[float | None, typer.Option(
        min=0, help="With --wait: give up waiting after this many seconds.")] = None,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Start moving partitions to the replicas a plan lists.

    The plan is checked first (unknown topics or brokers, repeated partitions;
    with --disallow-replication-factor-change, a changed replica count: exit 2
    and nothing changes). A plan with more or fewer replicas than a partition
    has changes its replication factor, as in Kafka. The current assignment is
    saved as a rollback plan, then the reassignment starts and runs in the
    background; check it with `slog reassign verify`.

    Example: slog reassign execute --plan plan.json --throttle 10000000
    """
    from slog.client.errors import KafkaError
    from slog.client.types import TopicPartition

    wanted = _read_plan(plan)
    rollback = rollback_file or plan.with_name(f"{plan.stem}.rollback.json")
    if rollback.resolve() == plan.resolve():
        fail("--rollback-file must not be the plan itself", code=EXIT_USAGE)
    rows: list[dict[str, Any]] = []
    failures: dict[str, KafkaError] = {}
    with client_errors(bootstrap), _admin(bootstrap) as admin:
        cluster = ClusterAssignment(admin)
        _check_against_cluster(wanted, cluster, plan,
                               same_replica_count=disallow_replication_factor_change)
        busy = sorted(f"{t}-{p}" for t, p in wanted if TopicPartition(t, p) in cluster.ongoing)
        if busy and not additional:
            fail(f"already being reassigned: {', '.join(busy)}",
                 hint="wait for `slog reassign verify`, `slog reassign cancel`, or pass "
                      "--additional to replace them; nothing was changed")
        _write_plan(rollback, {key: cluster.original[key] for key in wanted})
        if throttle is not None:
            _set_throttle(admin, {t for t, _ in wanted}, throttle)
        try:
            admin.alter_partition_reassignments(
                {TopicPartition(*key): replicas for key, replicas in wanted.items()},
                allow_replication_factor_change=not disallow_replication_factor_change)
        except KafkaError as exc:
            failures = exc.errors or {exc.item or "": exc}
        for key, target in sorted(wanted.items()):
            error = failures.get(f"{key[0]}-{key[1]}")
            status = "failed" if error else \
                "no change" if target == cluster.replicas[key] else "started"
            rows.append({"topic": key[0], "partition": key[1],
                         "current": list(cluster.original[key]), "target": list(target),
                         "status": status, "error": str(error) if error else None})
        if output is OutputFormat.table:
            emit(rows, ["topic", "partition", "current", "target", "status", "error"], output)
            _note(f"rollback plan saved to {rollback}", output)
        done = None
        if not failures and (wait if wait is not None else sys.stdout.isatty()):
            done = _wait_until_done(admin, [TopicPartition(*k) for k in wanted], timeout)
    if output.structured:
        print_data({"rollback_file": str(rollback), "throttle": throttle, "complete": done,
                    "partitions": rows}, output)
    elif done:
        _note("reassignment complete" + (f"; `slog reassign verify --plan {plan}` removes "
                                         "the throttle" if throttle else ""), output)
    else:
        _note(f"check progress with `slog reassign verify --plan {plan}`", output)
    if failures or done is False:
        raise typer.Exit(EXIT_FAILURE)


# -- verify ------------------------------------------------------------------------------
@app.command()
def verify(
    plan: PlanOption,
    preserve_throttle: Annotated[bool, typer.Option(
        help="Keep the throttle even when everything is done.")] = False,
    wait: Annotated[bool, typer.Option(
        "--wait", help="First wait until no partition of the plan is moving (a progress "
                       "bar on a terminal).")] = False,
    timeout: Annotated[float | None, typer.Option(
        min=0, help="With --wait: give up waiting after this many seconds.")] = None,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Report each partition of a plan as complete or in progress.

    Exit 0 only when all are complete; the throttle is then removed.

    Examples:
      slog reassign verify --plan plan.json
      slog reassign verify --plan plan.json --wait --timeout 600
    """
    from slog.client.types import TopicPartition

    wanted = _read_plan(plan)
    rows = []
    with client_errors(bootstrap), _admin(bootstrap) as admin:
        if wait:
            _wait_until_done(admin, [TopicPartition(*k) for k in wanted], timeout)
        cluster = ClusterAssignment(admin)
        for key, target in sorted(wanted.items()):
            running = cluster.ongoing.get(TopicPartition(*key))
            current = cluster.replicas.get(key)
            if running is not None:
                status = "in progress"
            elif current is None:
                status = "missing"
            else:
                status = "complete" if current == target else "failed"
            rows.append({"topic": key[0], "partition": key[1], "status": status,
                         "replicas": list(current or ()), "target": list(target),
                         "adding": list(running.adding_replicas) if running else [],
                         "removing": list(running.removing_replicas) if running else []})
        complete = all(r["status"] == "complete" for r in rows)
        removed = complete and not preserve_throttle
        if removed:
            _set_throttle(admin, {t for t, _ in wanted}, None)
    if output.structured:
        print_data({"complete": complete, "throttle_removed": removed, "partitions": rows},
                   output)
    else:
        emit(rows, ["topic", "partition", "status", "replicas", "target", "adding",
                    "removing"], output)
        if removed:
            _note("all partitions reassigned; throttle removed", output)
        elif any(r["status"] in ("failed", "missing") for r in rows):
            _note("some partitions have neither the target replicas nor a reassignment in "
                  "progress (cancelled or replaced?)", output)
    if not complete:
        raise typer.Exit(EXIT_FAILURE)


# -- cancel and list ---------------------------------------------------------------------
@app.command()
def cancel(
    plan: Annotated[Path | None, typer.Option(
        "--plan", help="Cancel the partitions of this plan.")] = None,
    all_partitions: Annotated[bool, typer.Option(
        "--all", help="Cancel every reassignment in progress.")] = False,
    preserve_throttle: Annotated[bool, typer.Option(
        help="Keep the throttle of the cancelled topics.")] = False,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Stop reassignments: added replicas are dropped, the original ones stay.

    Example: slog reassign cancel --plan plan.json
    """
    from slog.client.errors import KafkaError
    from slog.client.types import TopicPartition

    if (plan is None) == (not all_partitions):
        fail("pass exactly one of --plan FILE and --all", code=EXIT_USAGE)
    wanted = None if plan is None else [TopicPartition(*k) for k in _read_plan(plan)]
    failures: dict[str, KafkaError] = {}
    with client_errors(bootstrap), _admin(bootstrap) as admin:
        ongoing = admin.list_partition_reassignments(wanted)
        if ongoing:
            try:
                admin.alter_partition_reassignments(dict.fromkeys(ongoing))
            except KafkaError as exc:
                failures = exc.errors or {exc.item or "": exc}
        if not preserve_throttle:
            _set_throttle(admin, {tp.topic for tp in (wanted or ongoing)}, None)
    rows = []
    for tp in sorted(set(wanted or ()) | set(ongoing)):
        running = ongoing.get(tp)
        error = failures.get(str(tp))
        status = "not in progress" if running is None else "failed" if error else "cancelled"
        replicas = [] if running is None else \
            [r for r in running.replicas if r not in running.adding_replicas]
        rows.append({"topic": tp.topic, "partition": tp.partition, "status": status,
                     "replicas": replicas if status == "cancelled" else None,
                     "error": str(error) if error else None})
    emit(rows, ["topic", "partition", "status", "replicas", "error"], output)
    if not rows:
        _note("no reassignment is in progress", output)
    if failures:
        raise typer.Exit(EXIT_FAILURE)


@app.command("list")
def list_reassignments(
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Reassignments in progress: full replica list, replicas being added and removed.

    Example: slog reassign list -o json
    """
    with client_errors(bootstrap), _admin(bootstrap) as admin:
        ongoing = admin.list_partition_reassignments()
    rows = [{"topic": tp.topic, "partition": tp.partition, "replicas": list(r.replicas),
             "adding": list(r.adding_replicas), "removing": list(r.removing_replicas)}
            for tp, r in sorted(ongoing.items())]
    emit(rows, ["topic", "partition", "replicas", "adding", "removing"], output)
    if not rows:
        _note("no reassignment is in progress", output)
