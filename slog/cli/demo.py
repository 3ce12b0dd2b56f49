"""``slog demo``: start a broker, create a topic, produce keyed records, read them back."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from slog.cli.common import default_data_dir, fail

DEMO_TOPIC = "slog-demo"


def demo(
    data_dir: Annotated[Path | None, typer.Option("--data-dir", envvar="SLOG_DATA_DIR")] = None,
    port: Annotated[int, typer.Option(help="Port for the demo broker.")] = 9092,
    cleanup: Annotated[bool, typer.Option(help="Stop the broker at the end.")] = False,
) -> None:
    """Show slog working end to end on the default data dir.

    Example: slog demo --cleanup
    """
    from rich.console import Console
    from rich.table import Table

    from slog.broker.daemon import BrokerStartError, is_running, start_daemon, stop_daemon
    from slog.client.connection import BrokerConnection
    from slog.core.datadir import read_broker_info
    from slog.core.names import DataDirLayout
    from slog.core.records import BatchBuilder, iter_records

    console = Console()
    root = (data_dir or default_data_dir()).expanduser().resolve()
    layout = DataDirLayout(root)
    started = time.monotonic()
    if is_running(layout, 1):
        info = read_broker_info(layout, 1)
        assert info is not None
        console.print(f"broker 1 already running on {info.host}:{info.port}")
    else:
        try:
            info = start_daemon(1, root, f"127.0.0.1:{port}")
        except BrokerStartError as exc:
            fail(str(exc), hint=f"is port {port} taken? try --port")
        console.print(f"[green]started[/] broker 1 on {info.host}:{info.port}, data dir {root}")

    with BrokerConnection(info.host, info.port, client_id="slog-demo") as conn:
        conn.request(19, {"topics": [{"name": DEMO_TOPIC, "num_partitions": 1,
                                      "replication_factor": 1}], "timeout": 5000})
        builder = BatchBuilder()
        keys = ["alice", "bob", "carol", "alice", "bob"]
        for i, key in enumerate(keys):
            builder.append(key.encode(), f"order #{i + 1} from {key}".encode(),
                           headers=(("source", b"demo"),))
        response = conn.request(0, {"acks": -1, "timeout": 5000, "topic_data": [
            {"name": DEMO_TOPIC, "partition_data": [{"index": 0, "records": builder.build()}]}]})
        part = response.responses[0].partition_responses[0]
        if part.error_code != 0:
            fail(f"produce failed: {part.error_code.name}")
        base = part.base_offset
        console.print(f"produced {len(keys)} records to {DEMO_TOPIC}-0 at offsets "
                      f"{base}..{base + len(keys) - 1} (acks=all)")
        fetched = conn.request(1, {"replica_id": -1, "max_wait": 500, "min_bytes": 1,
                                   "max_bytes": 1 << 20, "isolation_level": 0, "topics": [
                                       {"topic": DEMO_TOPIC, "partitions": [
                                           {"partition": 0, "fetch_offset": base,
                                            "partition_max_bytes": 1 << 20}]}]})
        records = fetched.responses[0].partitions[0].records or b""
    table = Table(title=f"read back from {DEMO_TOPIC}-0")
    for column in ("OFFSET", "KEY", "VALUE", "HEADERS"):
        table.add_column(column)
    for record in iter_records(records):
        headers = ", ".join(f"{k}={(v or b'').decode()}" for k, v in record.headers)
        table.add_row(str(record.offset), (record.key or b"").decode(),
                      (record.value or b"").decode(), headers)
    console.print(table)
    console.print(f"round trip in {time.monotonic() - started:.2f}s. Try: "
                  f"kcat -b 127.0.0.1:{info.port} -C -t {DEMO_TOPIC} -e")
    if cleanup:
        stop_daemon(1, root)
        console.print("broker 1 stopped")
    else:
        console.print("the broker keeps running; stop it with `slog broker stop --id 1`")
