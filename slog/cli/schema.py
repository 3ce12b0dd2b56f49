"""The JSON (and YAML) each command prints: one source for docs/cli.md and the tests.

Field names here are a contract with scripts: renaming one is a breaking change.
``list``: a JSON array of objects; ``object``: one JSON object; ``stream``: one
object per line (YAML: one document per record).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Shape:
    kind: str  # "list", "object" or "stream"
    fields: dict[str, str]
    optional: frozenset[str] = frozenset()  # present only with some flags
    nested: dict[str, dict[str, str]] = field(default_factory=dict)  # field -> item fields
    note: str = ""

    def check(self, item: dict[str, object]) -> list[str]:
        """What is wrong with one printed object (empty: it matches)."""
        problems = [f"undocumented field {k!r}" for k in item if k not in self.fields]
        problems += [f"missing field {k!r}" for k in self.fields
                     if k not in item and k not in self.optional]
        for name, item_fields in self.nested.items():
            values = item.get(name)
            for value in values if isinstance(values, list) else \
                    [values] if isinstance(values, dict) else []:
                problems += [f"{name}: field {k!r} is not {sorted(item_fields)}"
                             for k in value if k not in item_fields]
        return problems


_TOPIC = "topic name"
_PARTITION = "partition number"
_ERROR = "error message, or null"
_STATUS_ROW = {"status": "what happened", "error": _ERROR}

PLAN_FIELDS = {"version": "plan format version (1)",
               "partitions": "list of {topic, partition, replicas}"}
BROKER_FIELDS = {"id": "broker id", "host": "listen host", "port": "listen port",
                 "pid": "process id, or null", "alive": "process running",
                 "fenced": "fenced by the controller", "controller": "is the controller",
                 "status": "serving, fenced, starting, stopped...", "action": "cluster up only",
                 "rack": "broker.rack, or null"}
CLUSTER_FIELDS = {
    "source": "data-dir or protocol", "location": "data dir or bootstrap list",
    "cluster_id": "cluster id, or null", "healthy": "true when nothing is wrong",
    "problems": "list of problem descriptions", "controller": "{id, epoch}",
    "brokers": "list of brokers", "topics": "topic count", "partitions": "partition count",
    "offline_partitions": "list of {topic, partition}",
    "under_replicated_partitions": "list of {topic, partition, replicas, isr, "
                                   "offline_replicas}",
    "under_min_isr_partitions": "list of {topic, partition, isr, live_isr, "
                                "min_insync_replicas}",
    "elapsed_s": "cluster up only: seconds taken",
    "tls": "cluster up --tls only: {security_protocol, ca, client_cert, client_key}",
}

BENCH_FIELDS = {
    "mode": "produce, consume or e2e", "topic": _TOPIC, "partitions": "partition count",
    "records": "records acknowledged (produce) or consumed", "errors": "records that failed",
    "bytes": "value (+ key) bytes moved", "elapsed_s": "seconds timed",
    "records_per_s": "records per second", "mb_per_s": "MiB per second",
    **{f"latency_{n}_ms": "ms, or null (consume)"
       for n in ("min", "avg", "p50", "p95", "p99", "p999", "max")},
}
DUMP_LOG_FIELDS = {
    "file": "path", "type": "log, index, timeindex, txnindex or snapshot",
    "base_offset": "from the name, or null",
    "size": "file bytes", "valid_bytes": "bytes of readable batches",
    "zero_padding_bytes": "preallocated zeros after them", "batches": "list of batches",
    "invalid_batches": "batches failing their CRC", "error": _ERROR,
    "index_check": "--verify-index: {index, timeindex}: {file, entries, mismatches, missing}",
    "entries": "index files: list of {offset, position} or {timestamp, offset}; txnindex: "
               "{producer_id, first_offset, last_offset, last_stable_offset}; snapshot: "
               "{producer_id, epoch, last_sequence, last_offset, offset_delta, timestamp, "
               "coordinator_epoch, current_txn_first_offset}",
    "mismatches": "index files with --verify-index: list of {entry, indexed, found}",
}
DUMP_BATCH_FIELDS = {
    name: "as kafka-dump-log" for name in (
        "base_offset", "last_offset", "count", "position", "size", "magic", "create_time",
        "timestamp_type", "compression", "crc", "crc_valid", "computed_crc",
        "partition_leader_epoch", "producer_id", "producer_epoch", "base_sequence",
        "last_sequence", "is_transactional", "is_control", "records", "records_error")}

SCHEMAS: dict[str, Shape] = {
    "broker start": Shape("object", {"id": "broker id", "address": "host:port",
                                     "pid": "process id", "status": "started"}),
    "broker stop": Shape("object", {"id": "broker id", "status": "stopped"}),
    "cluster up": Shape("object", CLUSTER_FIELDS, optional=frozenset({"tls"}),
                        nested={"brokers": BROKER_FIELDS}),
    "cluster down": Shape("list", {"id": "broker id", "address": "host:port",
                                   "pid": "process id", "controller": "was the controller",
                                   "result": "stopped, already stopped or failed: ..."}),
    "cluster status": Shape("object", CLUSTER_FIELDS, optional=frozenset({"elapsed_s", "tls"}),
                            nested={"brokers": BROKER_FIELDS}),
    "topic create": Shape("list", {"topic": _TOPIC, "status": "created, exists or failed",
                                   "partitions": "partition count, or null",
                                   "replication_factor": "replicas per partition, or null",
                                   "topic_id": "topic UUID, or null", "error": _ERROR}),
    "topic delete": Shape("list", {"topic": _TOPIC, "status": "deleted or failed",
                                   "error": _ERROR}),
    "topic list": Shape("list", {"topic": _TOPIC, "partitions": "partition count",
                                 "internal": "internal topic (e.g. __consumer_offsets)",
                                 "topic_id": "topic UUID"}),
    "topic describe": Shape("list", {
        "topic": _TOPIC, "partition": _PARTITION, "leader": "leader broker id, or null",
        "leader_epoch": "leader epoch", "replicas": "replica broker ids",
        "isr": "in-sync replica ids", "offline_replicas": "replicas on offline brokers",
        "log_start_offset": "first offset",
        "high_watermark": "end of the committed records (exclusive)",
        "last_stable_offset": "end of what read_committed readers see (exclusive)",
        "log_end_offset": "offset the next record gets"}),
    "topic delete-records": Shape("list", {
        "topic": _TOPIC, "partition": _PARTITION,
        "before": "offset asked for (-1: the high watermark)",
        "status": "deleted or failed",
        "low_watermark": "lowest log start offset of the replicas after it, or null",
        "error": _ERROR}),
    "topic alter": Shape("list", {"topic": _TOPIC, "partitions": "partition count now",
                                  "set": "configs set {key: value}",
                                  "deleted": "configs reset to default"}),
    "group list": Shape("list", {"group": "group id", "state": "Stable, Empty, ...",
                                 "type": "classic, consumer, share or streams (KIP-848)",
                                 "protocol_type": "consumer, or empty",
                                 "coordinator": "coordinator broker id"}),
    "group describe": Shape(
        "list",
        {"group": "group id", "topic": _TOPIC, "partition": _PARTITION,
         "current_offset": "committed offset, or null", "log_end_offset": "end offset",
         "lag": "log_end_offset - current_offset, or null",
         "consumer_id": "member id, or null", "host": "member host, or null",
         "client_id": "member client id, or null",
         "group_instance_id": "--members: static member id, or null",
         "partitions": "--members: number of assigned partitions",
         "assignment": "--members --verbose: topic(p,p) text",
         "assigned": "--members --verbose: list of {topic, partition}",
         "coordinator": "--state: host:port (id)", "coordinator_id": "--state: broker id",
         "assignor": "--state: partition assignor", "state": "--state: group state",
         "members": "--state: member count",
         "type": "--state: classic or consumer (KIP-848)",
         "group_epoch": "--state: KIP-848 group epoch, or null (classic)",
         "assignment_epoch": "--state: KIP-848 target assignment epoch, or null",
         "member_epoch": "--members: KIP-848 member epoch, or null (classic)",
         "target": "--members --verbose: KIP-848 target topic(p,p) text, or null",
         "target_assigned": "--members --verbose: KIP-848 target {topic, partition} list, "
                            "or null"},
        optional=frozenset({"topic", "partition", "current_offset", "log_end_offset", "lag",
                            "consumer_id", "host", "client_id", "group_instance_id",
                            "partitions", "assignment", "assigned", "coordinator",
                            "coordinator_id", "assignor", "state", "members", "type",
                            "group_epoch", "assignment_epoch", "member_epoch", "target",
                            "target_assigned"}),
        note="Three views: offsets (default), --members and --state; each row has the "
             "fields of its view."),
    "group reset-offsets": Shape("list", {"group": "group id", "topic": _TOPIC,
                                          "partition": _PARTITION,
                                          "new_offset": "offset committed (or to be)"}),
    "group delete": Shape("list", {"group": "group id", "status": "deleted or failed",
                                   "error": _ERROR}),
    "group delete-offsets": Shape("list", {"group": "group id", "topic": _TOPIC,
                                           "partition": _PARTITION,
                                           "status": "deleted or failed", "error": _ERROR}),
    "produce": Shape("object", {"topic": _TOPIC, "records": "records acknowledged",
                                "errors": "records that failed",
                                "bytes": "key + value bytes sent",
                                "elapsed_s": "seconds taken",
                                "records_per_s": "records sent (acknowledged or not) per second",
                                "error": "the most frequent delivery error, or null",
                                "partitioner": "the key hash used: murmur3, murmur2 or crc32",
                                "transactions": "--transactional-id: transactions committed"},
                     optional=frozenset({"transactions"}),
                     note="Printed once, after the last record, instead of the summary "
                          "line on stderr."),
    "consume": Shape("stream", {"topic": _TOPIC, "partition": _PARTITION,
                                "offset": "record offset", "timestamp": "ms since epoch",
                                "key": "key text, or null", "value": "value text, or null",
                                "headers": "list of {key, value}"},
                     nested={"headers": {"key": "header key", "value": "header value"}}),
    "elect-leaders": Shape("list", {"topic": _TOPIC, "partition": _PARTITION,
                                    "result": "ELECTED, NOT NEEDED or an error name",
                                    "error": _ERROR}),
    "reassign generate": Shape("object", {"current": "plan of the current assignment",
                                          "proposed": "proposed plan"},
                               nested={"current": PLAN_FIELDS, "proposed": PLAN_FIELDS}),
    "reassign execute": Shape(
        "object", {"rollback_file": "path of the rollback plan",
                   "throttle": "bytes/s, or null", "complete": "true when done, null if "
                   "not waited for", "partitions": "list of per-partition rows"},
        nested={"partitions": {"topic": _TOPIC, "partition": _PARTITION,
                               "current": "replicas before", "target": "replicas wanted",
                               **_STATUS_ROW}}),
    "reassign verify": Shape(
        "object", {"complete": "all partitions done", "throttle_removed": "throttle removed",
                   "partitions": "list of per-partition rows"},
        nested={"partitions": {"topic": _TOPIC, "partition": _PARTITION,
                               "status": "complete, in progress, failed or missing",
                               "replicas": "replicas now", "target": "replicas wanted",
                               "adding": "being added", "removing": "being removed"}}),
    "reassign cancel": Shape("list", {"topic": _TOPIC, "partition": _PARTITION,
                                      "status": "cancelled, not in progress or failed",
                                      "replicas": "replicas kept, or null", "error": _ERROR}),
    "reassign list": Shape("list", {"topic": _TOPIC, "partition": _PARTITION,
                                    "replicas": "all replicas", "adding": "being added",
                                    "removing": "being removed"}),
    "config show": Shape("list", {"setting": "config_file, profile, bootstrap or data_dir",
                                  "value": "effective value, or null",
                                  "source": "flag, env VAR, profile NAME (file), config, "
                                            "default"}),
    "config describe": Shape("list", {
        "name": "config name", "value": "effective value, or null",
        "source": "DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, "
                  "DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG or DEFAULT_CONFIG",
        "read_only": "true when only a restart can change it"}),
    "config alter": Shape("list", {"name": "config name", "value": "value set, or null",
                                   "action": "set, deleted, or valid (--validate-only)"}),
    "completion install": Shape("object", {"shell": "bash, zsh or fish",
                                           "path": "file written",
                                           "note": "what else to do"}),
    "get-offsets": Shape("list", {"topic": _TOPIC, "partition": _PARTITION,
                                  "offset": "offset found", "timestamp": "ms, or null",
                                  "leader_epoch": "leader epoch, or null"}),
    "log-dirs": Shape("list", {"broker": "broker id", "log_dir": "that broker's log directory",
                               "topic": _TOPIC, "partition": _PARTITION,
                               "size": "bytes of the replica's segments",
                               "offset_lag": "messages its log end is behind the high "
                                             "watermark its broker knows"}),
    # slog bench / dump-log (see their modules).
    **{f"bench {mode}": Shape("list", {**BENCH_FIELDS, **extra}) for mode, extra in (
        ("produce", {"record_size": "value bytes", "acks": "0, 1 or all",
                     "compression": "codec"}),
        ("consume", {}),
        ("e2e", {"record_size": "value bytes", "acks": "0, 1 or all",
                 "throughput": "records/s aimed at, -1 unlimited"}))},
    "dump-log": Shape(
        "list", DUMP_LOG_FIELDS, nested={"batches": DUMP_BATCH_FIELDS},
        optional=frozenset({"size", "valid_bytes", "zero_padding_bytes", "batches",
                            "invalid_batches", "index_check", "entries", "mismatches"}),
        note="one object per file; log files have batches, index files entries"),
}

_BENCH = {"mode": "produce, consume or e2e", "topic": _TOPIC, "records": "records done",
          "errors": "records failed", "bytes": "value bytes moved",
          "elapsed_s": "seconds", "records_per_s": "records per second",
          "mb_per_s": "MB (10^6 bytes) per second", "partitions": "partitions of the topic",
          "record_size": "produce, e2e: value bytes", "acks": "produce, e2e: acks",
          "compression": "produce: codec", "throughput": "e2e: target records/s",
          **{f"latency_{p}_ms": f"produce, e2e: {p} latency in ms, or null"
             for p in ("min", "avg", "p50", "p95", "p99", "p999", "max")}}
_BENCH_OPTIONAL = frozenset({"record_size", "acks", "compression", "throughput"})
for _mode in ("produce", "consume", "e2e"):
    SCHEMAS[f"bench {_mode}"] = Shape("list", _BENCH, optional=_BENCH_OPTIONAL)
SCHEMAS["dump-log"] = Shape(
    "list", {"file": "file dumped",
             "type": "log, index, timeindex, txnindex or snapshot",
             "base_offset": "from the file name, or null", "size": "log: bytes",
             "valid_bytes": "log: bytes of whole valid batches",
             "zero_padding_bytes": "log: preallocated zero bytes at the end",
             "batches": "log: list of batches", "invalid_batches": "log: count",
             "entries": "index, txnindex (aborted transactions), snapshot (producers): "
                        "list of entries",
             "index_check": "log --verify-index",
             "mismatches": "index --verify-index", "error": _ERROR},
    optional=frozenset({"size", "valid_bytes", "zero_padding_bytes", "batches",
                        "invalid_batches", "entries", "index_check", "mismatches"}),
    note="One report per file; log and index files have different fields.")
SCHEMAS["spark-export"] = Shape("list", {
    "run": "export run id", "records": "records exported", "bytes": "bytes read",
    "files": "files written", "output_bytes": "bytes written", "seconds": "wall time",
    "records_per_s": "records per second", "manifest": "path of the manifest"})
SCHEMAS["user add"] = Shape("list", {"user": "user name", "status": "added or updated",
                                     "file": "credentials file"})
SCHEMAS["user list"] = Shape("list", {"user": "user name", "mechanism": "SCRAM mechanism",
                                      "iterations": "SCRAM iterations"})
SCHEMAS["user delete"] = Shape("list", {"user": "user name", "status": "deleted"})
_ACL = {"principal": "User:NAME", "permission": "ALLOW or DENY",
        "operation": "READ, WRITE, ...", "host": "host or *",
        "resource_type": "TOPIC, GROUP, CLUSTER...", "resource": "resource name",
        "pattern": "LITERAL or PREFIXED"}
for _verb in ("add", "list", "remove"):
    SCHEMAS[f"acl {_verb}"] = Shape("list", _ACL)
_QUOTA = {"user": "user name, <default>, or null (not part of the entity)",
          "client_id": "client id, <default>, or null (not part of the entity)",
          "key": "producer_byte_rate, consumer_byte_rate or request_percentage",
          "value": "bytes/s (whole) or percent of one thread"}
for _verb in ("set", "list", "remove"):
    SCHEMAS[f"quota {_verb}"] = Shape("list", _QUOTA)
_TXN_STATE = "Kafka's state: Empty, Ongoing, PrepareCommit, ..."
SCHEMAS["transactions list"] = Shape("list", {
    "transactional_id": "transactional id", "producer_id": "producer id",
    "state": _TXN_STATE, "coordinator": "coordinator broker id"})
SCHEMAS["transactions describe"] = Shape("list", {
    "transactional_id": "transactional id", "coordinator": "coordinator broker id",
    "state": _TXN_STATE, "producer_id": "producer id", "producer_epoch": "producer epoch",
    "timeout_ms": "transaction.timeout.ms",
    "start_ms": "when the open transaction began (epoch ms), or 0",
    "partitions": "list of TOPIC-PARTITION in the transaction"})
SCHEMAS["transactions describe-producers"] = Shape("list", {
    "topic": _TOPIC, "partition": _PARTITION, "producer_id": "producer id",
    "producer_epoch": "producer epoch", "last_sequence": "last sequence number, or -1",
    "last_timestamp": "last batch's max timestamp, or -1",
    "current_txn_start_offset": "first offset of its open transaction, or -1"})
SCHEMAS["transactions abort"] = Shape("list", {
    "topic": _TOPIC, "partition": _PARTITION, "producer_id": "producer id",
    "producer_epoch": "producer epoch", "status": "aborted"})
SCHEMAS["chaos run"] = Shape("object", {
    "ok": "no anomaly found", "faults": "faults injected", "acked": "records acknowledged",
    "verified": "records read back", "failed_sends": "sends that failed",
    "anomalies": "{class: count}", "examples": "{class: [examples]}",
    "verdict": "the one-line verdict", "seed": "schedule seed",
    "faults_enabled": "fault groups", "retries": "producer retries",
    "idempotent": "idempotent producer", "fault_events": "broker fault events",
    "ops": "nemesis ops run", "records_per_s_without_faults": "acked/s in the warm-up",
    "records_per_s_with_faults": "acked/s during faults",
    "recovery_median_s": "median time to a healthy cluster after an op",
    "recovery_max_s": "longest such time",
    "longest_ack_stall_s": "{fault kind: longest time one partition acked nothing}",
    "healed": "the cluster healed at the end", "complete": "the final read finished",
    "write_caching": "the brokers' write.caching.default",
    "committed_offsets_went_back": "[power losses after which a committed offset was lower]",
    "problems": "[what went wrong besides anomalies]",
    "high_watermarks": "{partition: high watermark}", "data_dir": "the cluster's data dir",
    "history": "the JSON-lines history file, or null"})
# --workload txn: the transactional pipeline's figures instead of the log workload's.
_CHAOS_TXN = {"workload": "txn", "input_acked": "input records acknowledged",
              "transactions": "{committed|aborted|unknown: pipeline transactions}",
              "output_read": "output records in the final read_committed read",
              "pipeline_restarts": "pipeline members started over after a failed abort"}
_CHAOS_LOG_ONLY = {"acked", "verified", "failed_sends", "retries", "idempotent",
                   "records_per_s_without_faults", "records_per_s_with_faults",
                   "recovery_median_s", "recovery_max_s", "longest_ack_stall_s",
                   "high_watermarks", "committed_offsets_went_back"}
SCHEMAS["chaos run"] = Shape("object", {**SCHEMAS["chaos run"].fields, **_CHAOS_TXN},
                             optional=frozenset(_CHAOS_TXN) | _CHAOS_LOG_ONLY)

# Same name, same command: aliases print what their canonical command prints.
SCHEMAS["describe-group"] = SCHEMAS["group describe"]
SCHEMAS["preferred-leader-election"] = SCHEMAS["elect-leaders"]
