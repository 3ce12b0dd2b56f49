"""``slog demo``: what slog is, in seven steps on a real three-broker cluster.

It brings the cluster up with ``slog cluster up``'s own code, creates a
replicated topic, produces keyed records, consumes them with a two-member
group, SIGKILLs a partition leader to show failover and the ISR shrinking,
restarts it to show the ISR recover, and ends with the ``describe`` views.
The cluster keeps running unless ``--cleanup``.

A data dir whose cluster the demo created carries a marker file, so a second
``slog demo`` reuses that cluster (replacing the demo topic and group) and
``--cleanup`` knows it may remove the whole directory.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from slog.cli.common import DataDirOption, default_data_dir, fail

if TYPE_CHECKING:
    from slog.core.cluster_view import ClusterView, DataDirWatcher, PartitionHealth

DEMO_TOPIC = "slog-demo"
DEMO_GROUP = "slog-demo-group"
MARKER = "slog-demo.json"
BROKERS = 3
PARTITIONS = 3
KEYS = ("alice", "bob", "carol", "dave", "erin", "frank")
RECORDS = 18
WAIT_S = 20.0
POLL_S = 0.05
STEPS = 7
# Settings of a cluster the demo creates, to keep it well under 30 s: without
# preallocation a segment after a SIGKILL holds no long zero tail for recovery to scan,
# and 10 __consumer_offsets partitions instead of 50 are quicker to create (step 2) and
# to recover (step 6). Plenty for a local cluster.
DEMO_BROKER_CONFIG = ["log.preallocate=false", "offsets.topic.num.partitions=10"]


class Narrator:
    """Step headers, short explanations and per-step timing; rich on a terminal."""

    def __init__(self) -> None:
        from slog.cli.output import console

        self.console = console()
        self.timings: list[tuple[str, float]] = []
        self.started = time.monotonic()

    @contextmanager
    def step(self, number: int, title: str) -> Iterator[None]:
        self.console.print()
        self.console.rule(f"[bold cyan]Step {number}/{STEPS}[/] [bold]{title}[/]", align="left")
        begun = time.monotonic()
        yield
        elapsed = time.monotonic() - begun
        self.timings.append((title, elapsed))
        self.console.print(f"[dim]step {number} took {elapsed:.2f}s[/]")

    def say(self, text: str) -> None:
        self.console.print(text)

    def command(self, text: str) -> None:
        self.console.print(f"[bold green]$[/] [bold]{text}[/]", soft_wrap=True)

    def summary(self) -> float:
        from slog.cli.output import print_table

        total = time.monotonic() - self.started
        self.console.print()
        self.console.rule("[bold]Summary[/]", align="left")
        rows = [{"step": f"{n}. {title}", "seconds": f"{s:.2f}"}
                for n, (title, s) in enumerate(self.timings, 1)]
        print_table(rows, ["step", "seconds"])
        self.console.print(f"[bold]demo finished in {total:.2f}s[/]")
        return total


def _wait_for(what: str, check: Callable[[], Any], timeout_s: float = WAIT_S) -> Any:
    """Poll ``check`` until it returns something truthy; fail with ``what`` on timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            fail(f"timed out after {timeout_s:.0f}s waiting for {what}",
                 hint="see the broker logs under <data dir>/brokers/<id>/broker.log")
        time.sleep(POLL_S)


def _demo_partitions(view: ClusterView) -> list[PartitionHealth]:
    return [p for p in view.partitions if p.topic == DEMO_TOPIC]


def _ids(brokers: tuple[int, ...] | list[int]) -> str:
    return ",".join(map(str, brokers)) or "-"


# -- steps ---------------------------------------------------------------------------------

def _demo_config(root: Path) -> list[str] | None:
    """The demo's broker settings, for its own cluster only: brokers of a cluster that
    was there before keep theirs."""
    from slog.core.names import DataDirLayout

    own = not DataDirLayout(root).cluster_file.exists() or (root / MARKER).exists()
    return DEMO_BROKER_CONFIG if own else None


def _bring_up(root: Path, base_port: int, say: Narrator) -> str:
    from slog.cli import cluster_cmd
    from slog.cli.output import OutputFormat
    from slog.core.cluster_view import DataDirWatcher
    from slog.core.names import DataDirLayout

    fresh = not DataDirLayout(root).cluster_file.exists()
    config = _demo_config(root)
    flags = "".join(f" -c {c}" for c in config or [])
    say.command(f"slog cluster up --brokers {BROKERS} --data-dir {root}{flags}")
    cluster_cmd.up(brokers=BROKERS, data_dir=root, base_port=base_port, host="127.0.0.1",
                   config=config, timeout=WAIT_S, output=OutputFormat.table)
    if fresh:
        (root / MARKER).write_text('{"created_by": "slog demo"}\n')
    view = DataDirWatcher(root).view()
    addresses = [b.address for b in view.brokers if b.serving and b.address]
    say.say(f"{len(addresses)} brokers serve from one data dir; the controller "
            f"(broker {view.controller_id}) keeps the cluster's metadata log.")
    return ",".join(addresses)


def _create_topic(admin: Any, say: Narrator) -> None:
    from slog.client import NewTopic
    from slog.client.errors import ErrorCode, KafkaError

    try:
        admin.delete_topics([DEMO_TOPIC])
        say.say(f"(replaced the {DEMO_TOPIC} topic left by an earlier demo)")
        _wait_for("the old demo topic to go", lambda: DEMO_TOPIC not in {
            t.name for t in admin.list_topics()})
    except KafkaError as exc:
        if exc.code != ErrorCode.unknown_topic_or_partition:
            raise
    say.command(f"slog topic create {DEMO_TOPIC} --partitions {PARTITIONS} "
                f"--replication-factor {BROKERS} -c min.insync.replicas=2")

    def create() -> bool:
        try:
            admin.create_topics([NewTopic(DEMO_TOPIC, PARTITIONS, BROKERS,
                                          {"min.insync.replicas": "2"})])
        except KafkaError as exc:
            if exc.code == ErrorCode.topic_already_exists:  # the deletion is still settling
                return False
            raise
        return True

    _wait_for(f"{DEMO_TOPIC} to be created", create)

    def described() -> list[Any]:
        try:
            [topic] = admin.describe_topics([DEMO_TOPIC])
        except KafkaError as exc:
            # The broker that answers may not have applied the new topic yet.
            if exc.code == ErrorCode.unknown_topic_or_partition:
                return []
            raise
        ready = all(p.leader >= 0 and len(p.isr) == BROKERS for p in topic.partitions)
        return topic.partitions if ready else []

    partitions = _wait_for("leaders and a full ISR", described)
    _print_partitions([{"partition": p.partition, "leader": p.leader,
                        "replicas": list(p.replicas), "isr": list(p.isr)} for p in partitions],
                      ["partition", "leader", "replicas", "isr"])
    say.say(f"{PARTITIONS} partitions, each on all {BROKERS} brokers; a write with acks=all "
            "needs at least 2 in-sync replicas (min.insync.replicas=2).")


def _print_partitions(rows: list[dict[str, Any]], columns: list[str]) -> None:
    from slog.cli.output import print_table

    print_table(rows, columns)


def _produce(bootstrap: str, say: Narrator) -> dict[str, tuple[int, list[int]]]:
    from slog.client import Producer

    say.command(f"slog produce {DEMO_TOPIC} -K: --acks all   # key:value lines")
    with Producer(bootstrap, acks="all", linger_ms=5, client_id="slog-demo") as producer:
        futures = [(KEYS[i % len(KEYS)], producer.send(
            DEMO_TOPIC, f"order #{i + 1:02d} for {KEYS[i % len(KEYS)]}",
            key=KEYS[i % len(KEYS)], headers=[("source", b"slog-demo")]))
            for i in range(RECORDS)]
        producer.flush(WAIT_S)
        placed: dict[str, tuple[int, list[int]]] = {}
        for key, future in futures:
            metadata = future.result(timeout=WAIT_S)
            placed.setdefault(key, (metadata.partition, []))[1].append(metadata.offset)
    _print_partitions([{"key": k, "partition": p, "offsets": offs}
                       for k, (p, offs) in sorted(placed.items(), key=lambda kv: kv[1][0])],
                      ["key", "partition", "offsets"])
    say.say(f"{RECORDS} records, acknowledged by all in-sync replicas; the key's hash picks "
            "the partition, so each key keeps its order.")
    return placed


def _consume(bootstrap: str, say: Narrator) -> None:
    from slog.client import Consumer, RebalanceListener

    class HoldUntilBothJoined(RebalanceListener):
        """Pause new partitions until both members have theirs, so no member reads a
        partition it is about to hand over."""

        def __init__(self, consumer: Any):
            self.consumer = consumer

        def on_partitions_assigned(self, partitions: set[Any]) -> None:
            if holding:
                self.consumer.pause(partitions)

    say.command(f"slog consume {DEMO_TOPIC} --group {DEMO_GROUP}   # twice, in two terminals")
    holding = True
    members = {name: Consumer(bootstrap, group_id=DEMO_GROUP, auto_offset_reset="earliest",
                              client_id=name, session_timeout_ms=6000,
                              heartbeat_interval_ms=1000)
               for name in ("consumer-a", "consumer-b")}
    got: dict[str, list[Any]] = {name: [] for name in members}
    try:
        for consumer in members.values():
            consumer.subscribe([DEMO_TOPIC], listener=HoldUntilBothJoined(consumer))

        def both_joined() -> bool:
            for consumer in members.values():
                consumer.poll(timeout_ms=20)
            owned = [c.assignment() for c in members.values()]
            return all(owned) and len(set().union(*owned)) == PARTITIONS

        _wait_for("both consumers to join the group", both_joined)
        holding = False
        for consumer in members.values():
            consumer.resume(consumer.assignment())

        def all_read() -> bool:
            for name, consumer in members.items():
                got[name] += consumer.poll(timeout_ms=20)
            return sum(map(len, got.values())) >= RECORDS

        _wait_for(f"all {RECORDS} records to be consumed", all_read)
        assignments = {name: sorted(tp.partition for tp in c.assignment())
                       for name, c in members.items()}
        for consumer in members.values():
            consumer.commit()
    finally:
        for consumer in members.values():
            consumer.close()
    rows = [{"consumer": name, "partitions": assignments[name], "records": len(records),
             "keys": sorted({(r.key or b"").decode() for r in records})}
            for name, records in got.items()]
    _print_partitions(rows, ["consumer", "partitions", "records", "keys"])
    say.say(f"The group {DEMO_GROUP!r} split the {PARTITIONS} partitions between its two "
            "members; every key went to exactly one of them, and offsets were committed.")


def _pick_victim(view: ClusterView) -> int:
    """A broker leading a demo partition, the controller only if nothing else leads."""
    leaders = sorted({p.leader for p in _demo_partitions(view) if p.leader >= 0})
    others = [b for b in leaders if b != view.controller_id]
    if not leaders:
        fail(f"no partition of {DEMO_TOPIC} has a leader")
    return (others or leaders)[0]


def _kill_leader(watcher: DataDirWatcher, bootstrap: str, say: Narrator) -> tuple[int, int]:
    """SIGKILL a leader; returns it and the partition then written to while it was down."""
    from slog.broker.daemon import is_running

    before = watcher.view()
    victim = _pick_victim(before)
    state = before.broker(victim)
    assert state is not None and state.pid is not None
    led = [p.partition for p in _demo_partitions(before) if p.leader == victim]
    say.command(f"kill -9 {state.pid}   # broker {victim}, leader of partition(s) {_ids(led)}")
    os.kill(state.pid, signal.SIGKILL)
    _wait_for(f"broker {victim} to die", lambda: not is_running(watcher.layout, victim))

    def failed_over() -> ClusterView | None:
        view = watcher.view()
        parts = _demo_partitions(view)
        done = parts and all(p.leader >= 0 and p.leader != victim and victim not in p.isr
                             for p in parts)
        return view if done else None

    after = _wait_for(f"new leaders without broker {victim}", failed_over)
    _print_changes(before, after)
    say.say(f"The controller fenced broker {victim}, elected new leaders from the ISR and "
            f"dropped {victim} from every ISR. Nothing acknowledged is lost.")
    return victim, _produce_one(bootstrap, say)


def _print_changes(before: ClusterView, after: ClusterView) -> None:
    old = {p.partition: p for p in _demo_partitions(before)}
    rows = []
    for p in _demo_partitions(after):
        was = old.get(p.partition)
        rows.append({
            "partition": p.partition,
            "leader": f"{was.leader} -> {p.leader}" if was and was.leader != p.leader
            else p.leader,
            "isr": f"{_ids(was.isr)} -> {_ids(p.isr)}" if was and was.isr != p.isr
            else _ids(p.isr),
            "replicas": list(p.replicas)})
    _print_partitions(rows, ["partition", "leader", "isr", "replicas"])


def _produce_one(bootstrap: str, say: Narrator) -> int:
    from slog.client import Producer

    with Producer(bootstrap, acks="all", linger_ms=0, client_id="slog-demo") as producer:
        metadata = producer.send(DEMO_TOPIC, "written while a broker is down",
                                 key="alice").result(timeout=WAIT_S)
    say.say(f"Still writable: an acks=all record landed at partition {metadata.partition} "
            f"offset {metadata.offset}, as 2 in-sync replicas meet min.insync.replicas=2.")
    return metadata.partition


def _restart(root: Path, base_port: int, watcher: DataDirWatcher, victim: int,
             say: Narrator) -> None:
    from slog.cli import cluster_cmd
    from slog.cli.output import OutputFormat

    before = watcher.view()
    say.command(f"slog cluster up --brokers {BROKERS}   # starts what is not running")
    cluster_cmd.up(brokers=BROKERS, data_dir=root, base_port=base_port, host="127.0.0.1",
                   config=_demo_config(root), timeout=WAIT_S, output=OutputFormat.table)

    def recovered() -> ClusterView | None:
        view = watcher.view()
        parts = _demo_partitions(view)
        return view if parts and all(victim in p.isr for p in parts) else None

    after = _wait_for(f"broker {victim} to rejoin every ISR", recovered)
    _print_changes(before, after)
    say.say(f"Broker {victim} recovered its log, fetched what it missed from the leaders and "
            "is back in every ISR. `slog elect-leaders --type preferred` hands leadership back.")


def _describe_views(bootstrap: str, written_during_failover: int, say: Narrator) -> None:
    from slog.cli import group_cmd, topic_cmd
    from slog.cli.output import OutputFormat

    say.command(f"slog topic describe {DEMO_TOPIC}")
    topic_cmd.describe([DEMO_TOPIC], bootstrap=bootstrap, output=OutputFormat.table)
    say.say("")
    say.command(f"slog group describe {DEMO_GROUP}")
    group_cmd.describe([DEMO_GROUP], bootstrap=bootstrap, output=OutputFormat.table)
    say.say(f"LAG 1 on partition {written_during_failover}: the record written during the "
            "failover came after the group's last commit.")


def _clean_up(root: Path, bootstrap: str, say: Narrator) -> None:
    from slog.cli import cluster_cmd
    from slog.cli.output import OutputFormat

    if (root / MARKER).exists():
        say.command("slog cluster down")
        cluster_cmd.down(data_dir=root, timeout=30.0, output=OutputFormat.table)
        shutil.rmtree(root, ignore_errors=True)
        say.say(f"removed the demo's data dir {root}")
        return
    # The cluster was there before the demo: leave it, take only what the demo made.
    from slog.client import Admin, GroupAdmin

    with Admin(bootstrap, client_id="slog-demo") as admin:
        admin.delete_topics([DEMO_TOPIC])
        GroupAdmin(admin.cluster).delete_groups([DEMO_GROUP])
    say.say(f"deleted {DEMO_TOPIC} and {DEMO_GROUP}; the cluster predates the demo and "
            "keeps running")


def _forget_old_group(admin: Any) -> None:
    from slog.client import GroupAdmin
    from slog.client.errors import ErrorCode, KafkaError

    def deleted() -> bool:
        try:
            GroupAdmin(admin.cluster).delete_groups([DEMO_GROUP])
        except KafkaError as exc:
            if exc.code == ErrorCode.group_id_not_found:  # no earlier demo: the usual case
                return True
            if exc.retriable or exc.code == ErrorCode.non_empty_group:
                return False  # coordinator moving, or old members not yet expired
            raise
        return True

    # An earlier run's committed offsets would make the new group skip the
    # records of the recreated topic, so the group must really be gone.
    _wait_for(f"the old {DEMO_GROUP} group to go", deleted)


def demo(
    data_dir: DataDirOption = None,
    base_port: Annotated[int, typer.Option(
        "--base-port", min=1, max=65533, help="Broker N listens on base-port + N - 1.")
    ] = 9092,
    cleanup: Annotated[bool, typer.Option(
        "--cleanup", help="Stop the brokers and remove the demo's data at the end.")] = False,
) -> None:
    """Show slog in seven steps: a 3-broker cluster, a topic, keys, a group, a failover.

    Starts 3 brokers on the data dir (reusing them if running), creates the
    topic slog-demo (3 partitions, 3 replicas, min.insync.replicas=2),
    produces keyed records, consumes them with a group of two, SIGKILLs a
    leader, restarts it, and prints the describe views. The cluster keeps
    running afterwards unless --cleanup.

    Examples:
      slog demo
      slog demo --cleanup
      SLOG_DATA_DIR=/tmp/slog-demo slog demo --base-port 19092
    """
    from slog.cli.common import client_errors
    from slog.client import Admin
    from slog.core.cluster_view import DataDirWatcher

    root = (data_dir or default_data_dir()).expanduser().resolve()
    say = Narrator()
    say.say(f"[bold]slog demo[/]: a Kafka-compatible commit log, on {BROKERS} local brokers "
            f"in {root}")
    with say.step(1, f"bring up {BROKERS} brokers"):
        bootstrap = _bring_up(root, base_port, say)
    watcher = DataDirWatcher(root)
    with client_errors(bootstrap):
        with Admin(bootstrap, client_id="slog-demo") as admin, \
                say.step(2, "create a replicated topic"):
            _forget_old_group(admin)
            _create_topic(admin, say)
        with say.step(3, "produce records with keys"):
            _produce(bootstrap, say)
        with say.step(4, "consume with a group of two consumers"):
            _consume(bootstrap, say)
        with say.step(5, "kill a leader: failover and a shrunken ISR"):
            victim, written = _kill_leader(watcher, bootstrap, say)
        with say.step(6, "restart it: the ISR recovers"):
            _restart(root, base_port, watcher, victim, say)
        with say.step(7, "the describe views"):
            _describe_views(bootstrap, written, say)
        say.summary()
        if cleanup:
            _clean_up(root, bootstrap, say)
        else:
            say.say(f"\nThe cluster keeps running at {bootstrap}. Try `slog topic list`, "
                    f"`slog consume {DEMO_TOPIC} -o beginning -e` or "
                    f"`kcat -b {bootstrap.split(',')[0]} -L`; stop it with `slog cluster down`.")
