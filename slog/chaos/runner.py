"""One chaos run: a fault-free warm-up, faults for the rest of the duration, heal, final
reads through the protocol and through each replica's files, and the checker's verdict."""

from __future__ import annotations

import contextlib
import itertools
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slog.chaos.checker import REPLICA, Verdict, check
from slog.chaos.cluster import ChaosCluster
from slog.chaos.history import HistoryLog, Read
from slog.chaos.load import ack_rate, longest_stalls
from slog.chaos.nemesis import Nemesis
from slog.chaos.replicas import replica_records
from slog.chaos.schedule import schedule
from slog.chaos.workload import (
    VerifiableConsumer,
    VerifiableProducer,
    committed_offsets,
    end_offsets,
    final_read,
)
from slog.client import Admin, NewTopic

TOPIC = "chaos"
GROUP = "chaos-verifiers"
SEGMENT_BYTES = 16 * 1024  # small: segments roll every few seconds, where a full disk bites


@dataclass
class RunConfig:
    duration_s: float = 1800.0
    warmup_s: float = 10.0
    seed: int = 1
    faults: list[str] = field(default_factory=lambda: ["kill", "pause", "restart", "torn"])
    brokers: int = 3
    replication_factor: int = 3
    min_insync: int = 2
    partitions: int = 6
    producers: int = 1
    consumers: int = 2
    rate: float = 0  # records/s per producer; 0: unthrottled
    retries: int = 2_147_483_647
    idempotent: bool = True  # off: duplicates are reported but do not fail the run
    session_timeout_ms: int = 1500
    base_port: int = 0  # 0: a free range is found
    data_dir: Path | None = None
    history_path: Path | None = None
    tmpfs_mb: int = 512
    max_ops: int | None = None  # stop injecting after this many ops (CI)
    script: list[str] | None = None  # exactly these op kinds, in order, instead of random ones
    recovery_timeout_s: float = 60.0
    # the power-loss fault: a command that drops what the data dir's file system has not
    # synced (data_dir must live on that file system), e.g. tests/powerfs's ``cut``
    power_cut_command: str | None = None
    write_caching: bool = False  # write.caching.default of the brokers (slog's: false)

    def __post_init__(self) -> None:
        if self.wants("power-loss") and not (self.power_cut_command and self.data_dir):
            raise ValueError("the power fault needs --power-cut-command and a --data-dir on "
                             "the file system that command cuts")
        if self.wants("power-loss") and self.wants("full-disk"):
            raise ValueError("the power and disk faults exclude each other (the disk fault "
                             "mounts a tmpfs per broker, which no power cut reaches)")

    def wants(self, kind: str) -> bool:
        from slog.chaos.schedule import op_kinds

        return kind in (self.script if self.script is not None else op_kinds(self.faults))

    @property
    def broker_overrides(self) -> dict[str, str]:
        return {"broker.session.timeout.ms": str(self.session_timeout_ms),
                "write.caching.default": str(self.write_caching).lower(),
                "replica.lag.time.max.ms": str(2 * self.session_timeout_ms),
                "offsets.topic.replication.factor": str(self.replication_factor),
                "default.replication.factor": str(self.replication_factor)}


@dataclass
class RunResult:
    config: RunConfig
    verdict: Verdict
    fault_events: int
    ops: int
    rate_quiet: float  # records/s acknowledged in the warm-up
    rate_faults: float  # records/s acknowledged while faults were injected
    recovery_median_s: float
    recovery_max_s: float
    stalls_s: dict[str, float]  # fault kind -> longest time a partition acknowledged nothing
    healed: bool
    complete: bool
    problems: list[str]
    high_watermarks: dict[int, int]
    data_dir: Path
    history_path: Path | None
    offsets_went_back: list[str] = field(default_factory=list)  # after power losses

    @property
    def ok(self) -> bool:
        return self.verdict.ok and self.healed and self.complete and not self.offsets_went_back

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "verdict": self.verdict.line(), **self.verdict.to_json(),
                "seed": self.config.seed, "faults_enabled": self.config.faults,
                "retries": self.config.retries, "idempotent": self.config.idempotent,
                "fault_events": self.fault_events, "ops": self.ops,
                "records_per_s_without_faults": round(self.rate_quiet, 1),
                "records_per_s_with_faults": round(self.rate_faults, 1),
                "recovery_median_s": round(self.recovery_median_s, 3),
                "recovery_max_s": round(self.recovery_max_s, 3),
                "longest_ack_stall_s": self.stalls_s, "healed": self.healed,
                "complete": self.complete, "write_caching": self.config.write_caching,
                "committed_offsets_went_back": self.offsets_went_back,
                "problems": self.problems, "high_watermarks": self.high_watermarks,
                "data_dir": str(self.data_dir),
                "history": str(self.history_path) if self.history_path else None}


def _free_base_port(count: int) -> int:
    import random
    import socket
    from contextlib import ExitStack

    for _ in range(100):
        base = random.randrange(20000, 60000 - count)
        with ExitStack() as stack:
            try:
                for port in range(base, base + count):
                    stack.enter_context(socket.socket()).bind(("127.0.0.1", port))
            except OSError:
                continue
            return base
    raise RuntimeError(f"no {count} consecutive free ports")


def run(config: RunConfig, log: Callable[[str], None] = print) -> RunResult:
    root = config.data_dir or Path(tempfile.mkdtemp(prefix="slog-chaos-"))
    history_path = config.history_path
    history = HistoryLog(history_path)
    wants_disk = "disk" in config.faults or "full-disk" in (config.script or ())
    tmpfs = config.tmpfs_mb if wants_disk else None
    base_port = config.base_port or _free_base_port(config.brokers)
    cluster = ChaosCluster(root, config.brokers, base_port, config.broker_overrides, tmpfs)
    problems: list[str] = []
    result: RunResult | None = None
    try:
        log(f"data dir {root}; disk faults via {cluster.disk_mode}; seed {config.seed}")
        cluster.start()
        log(f"[{time.strftime('%H:%M:%S')}] {config.brokers} brokers up")
        with Admin(cluster.bootstrap, request_timeout_ms=10_000) as admin:
            admin.create_topics([NewTopic(TOPIC, config.partitions, config.replication_factor, {
                "min.insync.replicas": str(config.min_insync), "segment.bytes": str(SEGMENT_BYTES),
                "unclean.leader.election.enable": "false"})])
        cluster.wait_healthy(config.recovery_timeout_s)
        result = _run_workload(config, cluster, history, problems, log, root, history_path)
        return result
    finally:
        cluster.kill_all()
        cluster.unmount()
        history.close()
        if config.data_dir is None and result is not None and result.ok:
            shutil.rmtree(root, ignore_errors=True)  # a temporary cluster that passed


def _run_workload(config: RunConfig, cluster: ChaosCluster, history: HistoryLog,
                  problems: list[str], log: Callable[[str], None], root: Path,
                  history_path: Path | None) -> RunResult:
    def note(line: str) -> None:
        log(f"[{time.strftime('%H:%M:%S')}] {line}")

    producers = [VerifiableProducer(f"r{config.seed}-p{i}", cluster.bootstrap, TOPIC,
                                    config.partitions, history, rate=config.rate,
                                    retries=config.retries, idempotent=config.idempotent,
                                    on_error=note)
                 for i in range(config.producers)]
    consumers = [VerifiableConsumer(f"c{i}", cluster.bootstrap, TOPIC, GROUP, history,
                                    on_error=note) for i in range(config.consumers)]
    for worker in [*consumers, *producers]:
        worker.start()
    nemesis = Nemesis(cluster, TOPIC, config.partitions, history.add,
                      config.recovery_timeout_s, config.session_timeout_ms / 1000, note,
                      power_cut_command=config.power_cut_command,
                      committed=lambda: committed_offsets(cluster.bootstrap, TOPIC, GROUP))
    quiet_start = time.time()
    time.sleep(config.warmup_s)
    faults_start = time.time()
    ops = inject_faults(config, cluster, nemesis, problems, note)
    faults_end = time.time()
    healed = heal(config, cluster, problems)
    note(f"healed: {healed}; {nemesis.events} fault events in {ops} ops; producing on")
    time.sleep(3)  # acknowledged writes after the faults make lost writes visible
    for producer in producers:
        producer.stop()
    complete = True  # every send settled and the final read reached the high watermarks
    for producer in producers:
        producer.join(timeout=180)
        if producer.is_alive():
            complete = False
            problems.append(f"{producer.name} did not finish its sends")
    ends = _wait_consumers(cluster, consumers, config, problems)
    try:
        ends = final_read(cluster.bootstrap, TOPIC, config.partitions, history, timeout_s=900)
    except Exception as exc:  # reported, and the run fails: the check would be partial
        complete = False
        problems.append(f"final read: {type(exc).__name__}: {exc}")
    cluster.shutdown()
    _read_replicas(cluster, config, history)
    verdict = check(history.history, idempotent=config.idempotent)
    if history.write_error:
        problems.append(f"history file incomplete: {history.write_error}")
    acks = history.history.acks
    recovery = nemesis.recovery_s or [0.0]
    problems += nemesis.slow_recoveries
    return RunResult(
        config=config, verdict=verdict, fault_events=nemesis.events, ops=ops,
        # the first seconds of the warm-up are the clients' ramp-up, not the cluster's rate
        rate_quiet=ack_rate(acks, quiet_start + min(3.0, config.warmup_s / 3), faults_start),
        rate_faults=ack_rate(acks, faults_start, faults_end),
        recovery_median_s=statistics.median(recovery), recovery_max_s=max(recovery),
        stalls_s=longest_stalls(acks, history.history.faults),
        healed=healed, complete=complete, problems=problems, high_watermarks=ends, data_dir=root,
        history_path=history_path, offsets_went_back=nemesis.offsets_went_back)


def _wait_consumers(cluster: ChaosCluster, consumers: list[VerifiableConsumer],
                    config: RunConfig, problems: list[str]) -> dict[int, int]:
    """Let the group read up to the high watermarks (or time out), then stop it."""
    ends: dict[int, int] = {}
    try:
        ends = end_offsets(cluster.bootstrap, TOPIC, config.partitions)
    except (OSError, RuntimeError) as exc:
        problems.append(f"end offsets: {exc}")
    wanted = sum(ends.values())
    deadline = time.monotonic() + 60
    while sum(c.records for c in consumers) < wanted and time.monotonic() < deadline:
        time.sleep(0.2)
    for consumer in consumers:
        consumer.stop()
    for consumer in consumers:
        consumer.join(timeout=30)
    return ends


def _read_replicas(cluster: ChaosCluster, config: RunConfig, history: HistoryLog) -> None:
    """Every replica's log, read from its files once the brokers are stopped."""
    for broker in cluster.ids:
        for partition in range(config.partitions):
            directory = cluster.partition_dir(broker, TOPIC, partition)
            if not directory.is_dir():
                continue
            history.add_all(Read(f"{REPLICA}{broker}", partition, offset,
                                 "" if value is None else value.decode(errors="replace"))
                            for offset, value in replica_records(directory))


def inject_faults(config: RunConfig, cluster: ChaosCluster, nemesis: Nemesis,
                  problems: list[str], note: Callable[[str], None]) -> int:
    """Run the schedule's ops until the run's end or ``max_ops``; returns how many ran."""
    stop_at = time.monotonic() + max(0.0, config.duration_s - config.warmup_s)
    ops = schedule(config.seed, config.faults, config.session_timeout_ms / 1000, config.script)
    count = 0
    for op in itertools.islice(ops, config.max_ops):
        if time.monotonic() >= stop_at:
            break
        count += 1
        try:
            nemesis.run(op)
        except Exception as exc:  # a broker that will not come back: report, heal, go on
            problems.append(f"{op.kind}: {type(exc).__name__}: {exc}")
            note(f"{op.kind} failed: {exc}")
            with contextlib.suppress(Exception):
                cluster.heal(config.recovery_timeout_s)
    return count


def heal(config: RunConfig, cluster: ChaosCluster, problems: list[str]) -> bool:
    """End every fault; False (and a problem noted) when the cluster would not heal."""
    try:
        cluster.heal(config.recovery_timeout_s)
    except Exception as exc:
        problems.append(f"heal: {exc}")
        return False
    return True
