"""``slog dump-log FILE...``: print segment files offline, like ``kafka-dump-log.sh``.

Table output keeps kafka-dump-log's ``name: value`` lines (people already grep
them); ``--output json`` gives the same facts as stable fields.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from slog.cli.common import EXIT_FAILURE, EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE
from slog.cli.output import OutputFormat, OutputOption, emit

if TYPE_CHECKING:
    from slog.cli.segment_scan import IndexMismatch, LogScan, ScannedBatch

SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")
# Transaction state: a segment's aborted transactions, and producer-state snapshots.
TXN_STATE_SUFFIXES = (".txnindex", ".snapshot")


def show_bytes(data: bytes | None) -> str | None:
    """Printable UTF-8 as it is; anything else with backslash escapes."""
    if data is None:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "".join(chr(c) if 32 <= c < 127 and c != 92 else f"\\x{c:02x}" for c in data)
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")


class _Problem(Exception):
    """A file that cannot be dumped at all; ``code`` is the exit code."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


def _read(path: Path) -> bytes:
    if path.suffix not in SUFFIXES:
        raise _Problem(f"{path}: not a segment file (expected .log, .index, .timeindex, "
                       ".txnindex or .snapshot)", EXIT_USAGE)
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise _Problem(f"{path}: no such file", EXIT_NOT_FOUND) from None
    except OSError as exc:
        raise _Problem(f"{path}: cannot read: {exc.strerror}", EXIT_FAILURE) from None


def _base_offset(path: Path) -> int | None:
    stem = path.name[: -len(path.suffix)]
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


# -- building the report (one dict per file) ---------------------------------------------

def _batch_row(batch: ScannedBatch) -> dict[str, Any]:
    from slog.core.compression import CODEC_NAMES

    h = batch.header
    return {
        "base_offset": h.base_offset, "last_offset": h.last_offset, "count": h.record_count,
        "position": batch.position, "size": h.size, "magic": h.magic,
        "create_time": h.max_timestamp,
        "timestamp_type": "LogAppendTime" if h.is_log_append_time else "CreateTime",
        "compression": CODEC_NAMES.get(h.compression, f"unknown({h.compression})"),
        "crc": h.crc, "crc_valid": batch.crc_valid, "computed_crc": batch.computed_crc,
        "partition_leader_epoch": h.partition_leader_epoch, "producer_id": h.producer_id,
        "producer_epoch": h.producer_epoch, "base_sequence": h.base_sequence,
        "last_sequence": h.last_sequence, "is_transactional": h.is_transactional,
        "is_control": h.is_control,
    }


def _record_rows(data: bytes, batch: ScannedBatch) -> tuple[list[dict[str, Any]], str | None]:
    from slog.cli.segment_scan import batch_records
    from slog.core.errors import CorruptRecordError

    try:
        records = batch_records(data, batch)
    except CorruptRecordError as exc:
        return [], f"records do not decode: {exc.reason}"
    rows = [{"offset": r.offset, "timestamp": r.timestamp,
             "key_size": -1 if r.key is None else len(r.key),
             "value_size": -1 if r.value is None else len(r.value),
             "key": show_bytes(r.key), "value": show_bytes(r.value),
             "headers": [{"key": k, "value": show_bytes(v)} for k, v in r.headers]}
            for r in records]
    return rows, None


def _mismatch_rows(mismatches: list[IndexMismatch]) -> list[dict[str, Any]]:
    return [{"entry": m.entry, "indexed": m.indexed, "found": m.found} for m in mismatches]


def _index_check(log_path: Path, suffix: str, scan: LogScan, base: int) -> dict[str, Any]:
    from slog.cli.segment_scan import INDEX, index_entries, verify_offset_index, verify_time_index

    path = log_path.with_suffix(suffix)
    if not path.exists():
        return {"file": str(path), "entries": 0, "mismatches": [], "missing": True}
    entries, stray = index_entries(path.read_bytes(), suffix)
    verify = verify_offset_index if suffix == INDEX else verify_time_index
    mismatches = _mismatch_rows(verify(entries, base, scan))
    if stray:
        mismatches.append({"entry": len(entries), "indexed": f"{stray} trailing bytes",
                           "found": "not a whole entry"})
    return {"file": str(path), "entries": len(entries), "mismatches": mismatches,
            "missing": False}


def dump_log_file(path: Path, data: bytes, deep: bool, verify_index: bool) -> dict[str, Any]:
    from slog.cli.segment_scan import INDEX, TIME_INDEX, scan_log

    scan = scan_log(data)
    batches = []
    for batch in scan.batches:
        row = _batch_row(batch)
        if deep:
            row["records"], row["records_error"] = _record_rows(data, batch)
        batches.append(row)
    report: dict[str, Any] = {
        "file": str(path), "type": "log", "base_offset": _base_offset(path),
        "size": len(data), "valid_bytes": scan.valid_bytes, "zero_padding_bytes": scan.zero_padding,
        "batches": batches, "invalid_batches": len(scan.invalid_batches), "error": scan.error,
    }
    if verify_index:
        base = report["base_offset"]
        if base is None:
            base = scan.batches[0].header.base_offset if scan.batches else 0
        report["index_check"] = {"index": _index_check(path, INDEX, scan, base),
                                 "timeindex": _index_check(path, TIME_INDEX, scan, base)}
    return report


def dump_index_file(path: Path, data: bytes, verify_index: bool) -> dict[str, Any]:
    from slog.cli.segment_scan import (
        INDEX,
        index_entries,
        scan_log,
        verify_offset_index,
        verify_time_index,
    )

    entries, stray = index_entries(data, path.suffix)
    base = _base_offset(path)
    relative_base = base or 0
    if path.suffix == INDEX:
        rows = [{"offset": relative_base + rel, "position": pos} for rel, pos in entries]
    else:
        rows = [{"timestamp": ts, "offset": relative_base + rel} for ts, rel in entries]
    report: dict[str, Any] = {
        "file": str(path), "type": path.suffix[1:], "base_offset": base, "entries": rows,
        "error": f"{stray} trailing bytes do not make a whole entry" if stray else None,
    }
    if verify_index:
        log_path = path.with_suffix(".log")
        try:
            log_data = log_path.read_bytes()
        except OSError:
            report["error"] = f"cannot verify: {log_path} is missing or unreadable"
            return report
        scan = scan_log(log_data)
        verify = verify_offset_index if path.suffix == INDEX else verify_time_index
        report["mismatches"] = _mismatch_rows(verify(entries, relative_base, scan))
    return report


def dump_txn_state_file(path: Path, data: bytes) -> dict[str, Any]:
    """A .txnindex (aborted transactions) or .snapshot (producer state) file."""
    from slog.core.aborted_txn_index import CorruptTxnIndexError, decode_entries
    from slog.core.producer_snapshot import CorruptSnapshotError, decode_snapshot

    rows: list[dict[str, Any]] = []
    error = None
    try:
        entries = decode_entries(data) if path.suffix == ".txnindex" else decode_snapshot(data)
        rows = [entry._asdict() for entry in entries]
    except (CorruptTxnIndexError, CorruptSnapshotError) as exc:
        error = str(exc)
    return {"file": str(path), "type": path.suffix[1:], "base_offset": _base_offset(path),
            "entries": rows, "error": error}


def report_exit_code(report: dict[str, Any]) -> int:
    if report.get("error") or report.get("invalid_batches"):
        return EXIT_FAILURE
    checks = report.get("index_check", {}).values()
    if report.get("mismatches") or any(c["mismatches"] for c in checks):
        return EXIT_FAILURE
    return EXIT_OK


# -- printing -----------------------------------------------------------------------------

def _flag(value: bool) -> str:
    return "true" if value else "false"


def _print_log(report: dict[str, Any]) -> None:
    echo = typer.echo
    echo(f"Dumping {report['file']}")
    if report["base_offset"] is not None:
        echo(f"Log starting offset: {report['base_offset']}")
    for b in report["batches"]:
        echo(f"baseOffset: {b['base_offset']} lastOffset: {b['last_offset']} "
             f"count: {b['count']} baseSequence: {b['base_sequence']} "
             f"lastSequence: {b['last_sequence']} producerId: {b['producer_id']} "
             f"producerEpoch: {b['producer_epoch']} "
             f"partitionLeaderEpoch: {b['partition_leader_epoch']} "
             f"isTransactional: {_flag(b['is_transactional'])} "
             f"isControl: {_flag(b['is_control'])} position: {b['position']} "
             f"{b['timestamp_type']}: {b['create_time']} size: {b['size']} magic: {b['magic']} "
             f"compresscodec: {b['compression']} crc: {b['crc']} "
             f"isvalid: {_flag(b['crc_valid'])}"
             + ("" if b["crc_valid"] else f" (computed crc: {b['computed_crc']})"))
        for r in b.get("records", []):
            headers = ", ".join(f"{h['key']}={h['value'] if h['value'] is not None else 'null'}"
                                for h in r["headers"])
            echo(f"| offset: {r['offset']} {b['timestamp_type']}: {r['timestamp']} "
                 f"keySize: {r['key_size']} valueSize: {r['value_size']} "
                 f"headers: [{headers}] key: {_or_null(r['key'])} "
                 f"payload: {_or_null(r['value'])}")
        if b.get("records_error"):
            echo(f"| {b['records_error']}")
    if report["zero_padding_bytes"]:
        echo(f"({report['zero_padding_bytes']} bytes of zero padding after the last batch: "
             "space an active segment keeps preallocated)")
    for name, check in report.get("index_check", {}).items():
        if check["missing"]:
            echo(f"{name}: {check['file']} is missing")
            continue
        echo(f"{name}: {check['entries']} entries checked, "
             f"{len(check['mismatches'])} mismatch(es)")
        _print_mismatches(check["mismatches"])


def _or_null(value: str | None) -> str:
    return "null" if value is None else value


def _print_mismatches(mismatches: list[dict[str, Any]]) -> None:
    for m in mismatches:
        typer.echo(f"  mismatch in entry {m['entry']}: index has {m['indexed']}, "
                   f"but {m['found']}")


def _print_index(report: dict[str, Any]) -> None:
    typer.echo(f"Dumping {report['file']}")
    for e in report["entries"]:
        if report["type"] == "index":
            typer.echo(f"offset: {e['offset']} position: {e['position']}")
        else:
            typer.echo(f"timestamp: {e['timestamp']} offset: {e['offset']}")
    if "mismatches" in report:
        typer.echo(f"{len(report['entries'])} entries checked against the log, "
                   f"{len(report['mismatches'])} mismatch(es)")
        _print_mismatches(report["mismatches"])


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.capitalize() for word in rest)


def _print_txn_state(report: dict[str, Any]) -> None:
    typer.echo(f"Dumping {report['file']}")
    if report["type"] == "snapshot" and report["base_offset"] is not None:
        typer.echo(f"Producer state as of offset: {report['base_offset']}")
    for e in report["entries"]:
        typer.echo(" ".join(f"{_camel(k)}: {v}" for k, v in e.items()))


_PRINTERS = {"log": _print_log, "index": _print_index, "timeindex": _print_index,
             "txnindex": _print_txn_state, "snapshot": _print_txn_state}


def _complain(report: dict[str, Any]) -> None:
    if report.get("error"):
        print(f"error: {report['file']}: {report['error']}", file=sys.stderr)
    if report.get("invalid_batches"):
        print(f"error: {report['file']}: {report['invalid_batches']} batch(es) fail their CRC",
              file=sys.stderr)


# -- the command --------------------------------------------------------------------------

def dump_log(
    files: Annotated[list[Path], typer.Argument(
        help="Segment files: NNN.log, NNN.index, NNN.timeindex, NNN.txnindex, or "
             "producer-state snapshots NNN.snapshot.", show_default=False)],
    deep: Annotated[bool, typer.Option(
        "--deep", help="Also print every record: offset, timestamp, key, value, headers.")
    ] = False,
    verify_index: Annotated[bool, typer.Option(
        "--verify-index", help="Check .index/.timeindex entries against the log.")] = False,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Print the batches of segment files offline, like kafka-dump-log.sh.

    No broker is needed. Exit 1 when a batch fails its CRC, the file is
    truncated or malformed, or --verify-index finds a mismatch; 4 when a file
    does not exist.

    Examples:
      slog dump-log brokers/1/logs/orders-0/00000000000000000000.log
      slog dump-log 00000000000000000000.log --deep --verify-index
      slog dump-log 00000000000000000000.index -o json
      slog dump-log 00000000000000000000.txnindex 00000000000000001024.snapshot
    """
    reports: list[dict[str, Any]] = []
    code = EXIT_OK
    for path in files:
        try:
            data = _read(path)
        except _Problem as problem:
            print(f"error: {problem}", file=sys.stderr)
            code = max(code, problem.code)
            continue
        if path.suffix == ".log":
            report = dump_log_file(path, data, deep, verify_index)
        elif path.suffix in TXN_STATE_SUFFIXES:
            report = dump_txn_state_file(path, data)
        else:
            report = dump_index_file(path, data, verify_index)
        reports.append(report)
        if output is OutputFormat.table:
            _PRINTERS[report["type"]](report)
        _complain(report)
        code = max(code, report_exit_code(report))
    if output is not OutputFormat.table:
        emit(reports, [], output)
    if code:
        raise typer.Exit(code)
