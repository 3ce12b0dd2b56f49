"""One transactional chaos run (``slog chaos run --workload txn``): the verifiable producer
feeds an input topic, a transactional pipeline group copies it to an output topic, a
read_committed verifier reads the output; faults, heal, let the pipeline catch up, a final
read_committed read of the output, and the transactional checker's verdict.

Leader faults alternate between partition leaders and the broker that is the transaction
coordinator of a pipeline member's transactional id."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slog.chaos.cluster import ChaosCluster
from slog.chaos.history import HistoryLog
from slog.chaos.nemesis import Nemesis
from slog.chaos.runner import RunConfig, _free_base_port, heal, inject_faults
from slog.chaos.schedule import Op
from slog.chaos.txn_checker import TxnVerdict, check_txn
from slog.chaos.txn_history import TxnLog
from slog.chaos.txn_workload import CommittedVerifier, TxnPipeline, wait_processed
from slog.chaos.workload import VerifiableProducer, final_read
from slog.client import Admin, NewTopic
from slog.transactions.coordinator import TRANSACTION_STATE_TOPIC, partition_for

INPUT, OUTPUT, GROUP = "txn-in", "txn-out", "txn-pipeline"
PIPELINES = 2
STATE_PARTITIONS = 10  # __transaction_state: fewer than Kafka's 50, quicker to elect
TXN_OVERRIDES = {"transaction.state.log.num.partitions": str(STATE_PARTITIONS),
                 "transaction.abort.timed.out.transaction.cleanup.interval.ms": "2000"}


@dataclass
class TxnRunResult:
    config: RunConfig
    verdict: TxnVerdict
    fault_events: int
    ops: int
    pipeline_restarts: int
    healed: bool
    complete: bool
    problems: list[str]
    data_dir: Path
    history_path: Path | None

    @property
    def ok(self) -> bool:
        return self.verdict.ok and self.healed and self.complete

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "workload": "txn", "verdict": self.verdict.line(),
                **self.verdict.to_json(), "seed": self.config.seed,
                "faults_enabled": self.config.faults, "fault_events": self.fault_events,
                "ops": self.ops, "pipeline_restarts": self.pipeline_restarts,
                "healed": self.healed, "complete": self.complete, "problems": self.problems,
                "write_caching": self.config.write_caching, "data_dir": str(self.data_dir),
                "history": str(self.history_path) if self.history_path else None}


class TxnNemesis(Nemesis):
    """Leader faults hit, by the op's pick, a partition leader or the transaction
    coordinator of one pipeline member (the leader of its ``__transaction_state`` partition)."""

    transactional_ids: tuple[str, ...] = ()

    def _target(self, kind: str, op: Op) -> int:
        if kind.endswith("-leader") and op.pick % 2 and self.transactional_ids:
            txn_id = self.transactional_ids[op.pick // 2 % len(self.transactional_ids)]
            coordinator = self.cluster.leader(TRANSACTION_STATE_TOPIC,
                                              partition_for(txn_id, STATE_PARTITIONS))
            if coordinator:
                self.log(f"{kind}: the transaction coordinator of {txn_id} is {coordinator}")
                return coordinator
        return super()._target(kind, op)


def run_txn(config: RunConfig, log: Callable[[str], None] = print) -> TxnRunResult:
    root = config.data_dir or Path(tempfile.mkdtemp(prefix="slog-txnchaos-"))
    history = HistoryLog(config.history_path)
    base_port = config.base_port or _free_base_port(config.brokers)
    cluster = ChaosCluster(root, config.brokers, base_port,
                           {**config.broker_overrides, **TXN_OVERRIDES}, None)
    result: TxnRunResult | None = None
    try:
        log(f"data dir {root}; seed {config.seed}; transactional workload")
        cluster.start()
        with Admin(cluster.bootstrap, request_timeout_ms=10_000) as admin:
            admin.create_topics([NewTopic(topic, config.partitions, config.replication_factor, {
                "min.insync.replicas": str(config.min_insync),
                "unclean.leader.election.enable": "false"}) for topic in (INPUT, OUTPUT)])
        cluster.wait_healthy(config.recovery_timeout_s)
        result = _run(config, cluster, TxnLog(history), log, root)
        return result
    finally:
        cluster.kill_all()
        history.close()
        if config.data_dir is None and result is not None and result.ok:
            shutil.rmtree(root, ignore_errors=True)


def _run(config: RunConfig, cluster: ChaosCluster, txn_log: TxnLog,
         log: Callable[[str], None], root: Path) -> TxnRunResult:
    def note(line: str) -> None:
        log(f"[{time.strftime('%H:%M:%S')}] {line}")

    bootstrap, problems = cluster.bootstrap, list[str]()
    producer = VerifiableProducer(f"r{config.seed}-in", bootstrap, INPUT, config.partitions,
                                  txn_log.base, rate=config.rate, on_error=note)
    pipelines = [TxnPipeline(f"r{config.seed}-t{i}", bootstrap, INPUT, OUTPUT, GROUP, txn_log,
                             on_error=note) for i in range(PIPELINES)]
    verifier = CommittedVerifier("verifier", bootstrap, OUTPUT, config.partitions, txn_log,
                                 on_error=note)
    for worker in [verifier, *pipelines, producer]:
        worker.start()
    nemesis = TxnNemesis(cluster, INPUT, config.partitions, txn_log.base.add,
                         config.recovery_timeout_s, config.session_timeout_ms / 1000, note)
    nemesis.transactional_ids = tuple(p.transactional_id for p in pipelines)
    time.sleep(config.warmup_s)
    ops = inject_faults(config, cluster, nemesis, problems, note)
    healed = heal(config, cluster, problems)
    note(f"healed: {healed}; {nemesis.events} fault events in {ops} ops; finishing")
    time.sleep(3)
    producer.stop()
    producer.join(timeout=180)
    complete = not producer.is_alive()
    if not complete:
        problems.append("the input producer did not finish its sends")
    ends, done = wait_processed(bootstrap, INPUT, config.partitions, GROUP, timeout_s=180)
    if any(done.get(p, 0) < end for p, end in ends.items()):
        complete = False
        problems.append(f"the pipeline did not catch up: committed {done}, input ends {ends}")
    for worker in [*pipelines, verifier]:
        worker.stop()
    for worker in [*pipelines, verifier]:
        worker.join(timeout=120)
    try:
        final_read(bootstrap, OUTPUT, config.partitions, txn_log.base, timeout_s=180,
                   isolation_level="read_committed")
    except Exception as exc:
        complete = False
        problems.append(f"final read: {type(exc).__name__}: {exc}")
    cluster.shutdown()
    if config.history_path is not None:  # the plain events first, then the transactions'
        txn_log.base.close()
        txn_log.append_to(config.history_path)
    return TxnRunResult(
        config=config, verdict=check_txn(txn_log.history), fault_events=nemesis.events,
        ops=ops, pipeline_restarts=sum(p.restarts for p in pipelines), healed=healed,
        complete=complete, problems=problems + nemesis.slow_recoveries, data_dir=root,
        history_path=config.history_path)

