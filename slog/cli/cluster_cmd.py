"""``slog cluster up|down|status``: a local cluster of brokers on one data dir."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from slog.cli.common import (
    DEFAULT_BOOTSTRAP,
    EXIT_FAILURE,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    DataDirOption,
    client_errors,
    default_data_dir,
    fail,
)
from slog.cli.output import (
    OutputFormat,
    OutputOption,
    Progress,
    console,
    print_data,
    print_table,
    progress_bar,
)

if TYPE_CHECKING:
    from slog.core.cluster_view import ClusterView, DataDirWatcher

app = typer.Typer(help="Start, stop and check a local cluster of brokers.", no_args_is_help=True)

BROKER_COLUMNS = ["id", "address", "pid", "status", "controller"]
POLL_S = 0.02
# A broker still starting (recovering logs, catching up with the metadata) is waited
# for past --timeout: this long after it was last seen starting, up to this many
# timeouts or DAEMON_START_S, whichever is longer.
STARTING_GRACE_S = 5.0
STARTING_EXTENSION = 10
DAEMON_START_S = 120.0  # a broker neither serving nor gone by then is hung


def _root(data_dir: Path | None) -> Path:
    return (data_dir or default_data_dir()).expanduser().resolve()


class _Progress:
    """A spinner on stderr when it is a terminal (and not for JSON); silent otherwise."""

    def __init__(self, status: Any | None):
        self._status = status

    def update(self, message: str) -> None:
        if self._status is not None:
            self._status.update(message)


@contextmanager
def _progress(message: str, output: OutputFormat) -> Iterator[_Progress]:
    if output.structured or not sys.stderr.isatty():
        yield _Progress(None)
        return
    with console(stderr=True).status(message) as status:
        yield _Progress(status)


def _broker_rows(view: ClusterView, extra: dict[int, dict[str, Any]] | None = None
                 ) -> list[dict[str, Any]]:
    return [{"id": b.broker_id, "address": b.address, "pid": b.pid, "status": b.status,
             "controller": "yes" if b.controller else None, "rack": b.rack,
             **(extra or {}).get(b.broker_id, {})}
            for b in view.brokers]


def _broker_columns(view: ClusterView) -> list[str]:
    """The rack column only when some broker has a rack."""
    return [*BROKER_COLUMNS, "rack"] if any(b.rack for b in view.brokers) else BROKER_COLUMNS


def _controller_line(view: ClusterView) -> str:
    if view.controller_id is None:
        return "controller: none"
    epoch = f" (epoch {view.controller_epoch})" if view.controller_epoch else ""
    return f"controller: broker {view.controller_id}{epoch}"


# -- up ------------------------------------------------------------------------------------

def _ports_in_use(host: str, ports: Iterable[int]) -> list[int]:
    import socket

    taken = []
    for port in ports:
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError:
                taken.append(port)
    return taken


def _waiting_for(view: ClusterView, expected: Iterable[int]) -> list[str]:
    """What still keeps ``expected`` brokers from forming a cluster (empty: ready)."""
    missing = []
    if view.controller_id is None:
        missing.append("a controller")
    for broker_id in expected:
        state = view.broker(broker_id)
        if state is None or not state.serving:
            missing.append(f"broker {broker_id} ({state.status if state else 'unregistered'})")
    return missing


def _wait_until_ready(watcher: DataDirWatcher, expected: list[int], deadline: float,
                      limit: float, progress: Progress) -> tuple[ClusterView, list[str]]:
    """Wait until ``expected`` form a cluster, or ``deadline`` passes. A broker still
    recovering its logs and catching up with the metadata (its process runs and its
    ``starting`` marker is there, or the controller has yet to register it) is
    progress, not a hang: the wait goes on while one is, until ``limit`` at most."""
    while True:
        view = watcher.view()
        missing = _waiting_for(view, expected)
        ready = sum(1 for b in expected if (s := view.broker(b)) is not None and s.serving)
        progress.update(completed=ready, description="waiting for " + ", ".join(missing)
                        if missing else "cluster ready")
        now = time.monotonic()
        if any((s := view.broker(b)) is not None and s.alive and (
                not s.registered or watcher.layout.broker(b).starting.exists())
               for b in expected):
            deadline = min(limit, max(deadline, now + STARTING_GRACE_S))
        if not missing or now >= deadline:
            return view, missing
        time.sleep(POLL_S)


@app.command()
def up(
    brokers: Annotated[int, typer.Option("--brokers", "-n", min=1, max=1000,
                                         help="Number of brokers (ids 1..N).")] = 3,
    data_dir: DataDirOption = None,
    base_port: Annotated[int, typer.Option(
        min=1, max=65535, help="Broker N listens on base-port + N - 1.")] = 9092,
    host: Annotated[str, typer.Option(help="Address the brokers listen on.")] = "127.0.0.1",
    config: Annotated[list[str] | None, typer.Option(
        "--config", "-c", help="Broker setting key=value for every broker (repeatable).")] = None,
    racks: Annotated[str | None, typer.Option(
        help="Racks (broker.rack) given to brokers 1..N round-robin, e.g. a,b,c.")] = None,
    timeout: Annotated[float, typer.Option(
        min=0.1, help="Seconds to wait for a healthy cluster (longer while brokers are "
                      "still recovering their logs).")] = 15.0,
    serve_tls: Annotated[bool, typer.Option(
        "--tls", help="Serve TLS (security.protocol SSL, or SASL_SSL with SASL), "
                      "between the brokers too, with certificates of a local CA kept in "
                      "<data-dir>/tls/; prints the client settings.")] = False,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Start brokers 1..N (those not running yet) and wait until they form a cluster.

    A progress bar of the brokers serving shows on a terminal. With --racks,
    topics place each partition's replicas in different racks. With --tls the
    CA and certificates are made on the first `up` and reused after.

    Examples:
      slog cluster up --brokers 3 --base-port 9092 --racks a,b,c
      slog cluster up -c log.retention.hours=24 -c log.segment.bytes=104857600
      slog cluster up --tls
    """
    from slog.broker.daemon import BrokerStartError, in_parallel, start_daemon
    from slog.core.cluster_view import DataDirWatcher
    from slog.core.config import BrokerConfig, ConfigError, parse_key_values
    from slog.core.errors import DataDirError
    from slog.core.names import ensure_data_dir

    started_at = time.monotonic()
    deadline = started_at + timeout
    if base_port + brokers - 1 > 65535:
        fail(f"ports {base_port}..{base_port + brokers - 1} go past 65535",
             hint="choose a lower --base-port", code=EXIT_USAGE)
    rack_names = [r.strip() for r in racks.split(",")] if racks is not None else []
    if racks is not None and not all(rack_names):
        fail(f"--racks {racks!r} has an empty rack name", hint="e.g. --racks a,b,c",
             code=EXIT_USAGE)
    tls_files = None
    try:
        overrides = parse_key_values(config or [])
        if rack_names and "broker.rack" in overrides:
            fail("give racks with --racks or with -c broker.rack=..., not both", code=EXIT_USAGE)
        BrokerConfig.build(1, _root(data_dir), host, base_port, overrides)  # validate first
        root = ensure_data_dir(_root(data_dir))
        if serve_tls:  # not named `tls`: a profile's `tls = true` is for clients
            tls_files = _tls_overrides(root, host, overrides)
    except ConfigError as exc:
        fail(str(exc), code=EXIT_USAGE)
    except DataDirError as exc:
        fail(str(exc))
    watcher = DataDirWatcher(root)
    wanted = list(range(1, brokers + 1))
    running = set(watcher.running_broker_ids())
    to_start = {b: base_port + b - 1 for b in wanted if b not in running}
    taken = _ports_in_use(host, to_start.values())
    if taken:
        fail(f"port{'s' if len(taken) > 1 else ''} {', '.join(map(str, taken))} on {host} "
             "already in use", hint="choose another --base-port, or stop what listens there")

    def start(broker_id: int) -> object:
        settings = dict(overrides)
        if rack_names:
            settings["broker.rack"] = rack_names[(broker_id - 1) % len(rack_names)]
        # A broker recovering thousands of logs listens only after seconds; one that
        # dies is reported at once, so only a hung one would wait this out.
        return start_daemon(broker_id, root, f"{host}:{to_start[broker_id]}", settings,
                            timeout_s=max(DAEMON_START_S, deadline - time.monotonic()))

    expected = sorted(running | set(wanted))
    with progress_bar(f"starting {len(to_start)} broker(s)", len(expected), "brokers serving",
                      output) as progress:
        results = in_parallel(start, sorted(to_start))
        failures = {b: r for b, r in results.items() if isinstance(r, Exception)}
        if failures:
            for broker_id, error in sorted(failures.items()):
                detail = str(error) if isinstance(error, BrokerStartError | DataDirError) else \
                    f"{type(error).__name__}: {error}"
                print(f"error: broker {broker_id} failed to start: {detail}", file=sys.stderr)
            fail(f"{len(failures)} of {len(to_start)} broker(s) failed to start",
                 hint=f"see {root}/brokers/<id>/broker.log; `slog cluster down` stops the rest")
        view, missing = _wait_until_ready(watcher, expected, deadline,
                                          started_at + max(timeout * STARTING_EXTENSION,
                                                           DAEMON_START_S), progress)

    actions = {b: {"action": "already running" if b in running else "started"} for b in wanted}
    _print_up(view, actions, output, time.monotonic() - started_at, tls_files,
              overrides.get("security.protocol", "PLAINTEXT"))
    if missing:
        _print_log_tails(watcher, [b for b in expected if not (
            (s := view.broker(b)) and s.serving)])
        fail(f"the cluster was not ready within {timeout:g}s: still waiting for "
             f"{', '.join(missing)}",
             hint="check again with `slog cluster status`, or raise --timeout")


def _tls_overrides(root: Path, host: str, overrides: dict[str, str]) -> Any:
    """Make (or reuse) the local CA and set the brokers' TLS settings in ``overrides``."""
    from slog.cli.local_ca import LOCAL_NAMES, ensure_local_ca
    from slog.core.config import ConfigError
    from slog.core.names import DataDirLayout

    if overrides.get("listeners"):
        raise ConfigError("--tls sets up one SSL listener per broker; with your own "
                          "listeners, set ssl.keystore.location and "
                          "ssl.truststore.location instead")
    names = LOCAL_NAMES if host in LOCAL_NAMES else (*LOCAL_NAMES, host)
    files = ensure_local_ca(DataDirLayout(root).tls_dir, names)
    protocol = overrides.get("security.protocol", "PLAINTEXT")
    overrides["security.protocol"] = "SASL_SSL" if "SASL" in protocol else "SSL"
    overrides.setdefault("ssl.keystore.location", str(files.broker_keystore))
    overrides.setdefault("ssl.truststore.location", str(files.ca))
    return files


def tls_client_settings(bootstrap: str, files: Any, protocol: str) -> dict[str, str]:
    """How each client reaches a `cluster up --tls` cluster (copy-paste ready)."""
    ca = str(files.ca)
    return {
        "slog": f"slog topic list --bootstrap {bootstrap} --tls --ca {ca}",
        "kcat": f"kcat -b {bootstrap} -X security.protocol={protocol} -X ssl.ca.location={ca}",
        "confluent-kafka": f"{{'bootstrap.servers': '{bootstrap}', 'security.protocol': "
                           f"'{protocol}', 'ssl.ca.location': '{ca}'}}",
        "kafka-python": f"bootstrap_servers='{bootstrap}', security_protocol='{protocol}', "
                        f"ssl_cafile='{ca}'",
        "aiokafka": f"bootstrap_servers='{bootstrap}', security_protocol='{protocol}', "
                    f"ssl_context=aiokafka.helpers.create_ssl_context(cafile='{ca}')",
        "client certificate (ssl.client.auth)": f"--cert {files.client_cert} "
                                                f"--key {files.client_key}",
    }


def _print_up(view: ClusterView, actions: dict[int, dict[str, Any]], output: OutputFormat,
              elapsed_s: float, tls_files: Any = None, protocol: str = "SSL") -> None:
    addresses = (b.address for b in view.brokers if b.broker_id in actions)
    bootstrap = ",".join(a for a in addresses if a is not None)  # None: not listening
    if output.structured:
        data = view.to_json()
        for broker in data["brokers"]:
            broker["action"] = actions.get(broker["id"], {}).get("action")
        data["elapsed_s"] = round(elapsed_s, 3)
        if tls_files is not None:
            data["tls"] = {"security_protocol": protocol, "ca": str(tls_files.ca),
                           "client_cert": str(tls_files.client_cert),
                           "client_key": str(tls_files.client_key)}
        print_data(data, output)
        return
    print_table(_broker_rows(view, actions), [*_broker_columns(view), "action"])
    started = sum(1 for a in actions.values() if a["action"] == "started")
    typer.echo(f"{_controller_line(view)}; {started} started, "
               f"{len(actions) - started} already running, in {elapsed_s:.2f}s")
    others = [b for b in view.brokers if b.broker_id not in actions and not b.serving]
    if others:
        ids = ", ".join(str(b.broker_id) for b in others)
        which = f"brokers {ids} are" if len(others) > 1 else f"broker {ids} is"
        typer.echo(f"note: {which} registered but not serving "
                   f"(`slog cluster up --brokers {max(b.broker_id for b in others)}` starts them)")
    if tls_files is not None:
        typer.echo(f"\nTLS ({protocol}); CA certificate: {tls_files.ca}")
        for client, setting in tls_client_settings(bootstrap, tls_files, protocol).items():
            typer.echo(f"  {client}: {setting}")


def _print_log_tails(watcher: DataDirWatcher, broker_ids: Iterable[int]) -> None:
    from slog.broker.daemon import tail_log

    for broker_id in broker_ids:
        path = watcher.layout.broker(broker_id).log
        print(f"--- last lines of {path}:\n{tail_log(path)}", file=sys.stderr)


# -- down ----------------------------------------------------------------------------------

@app.command()
def down(
    data_dir: DataDirOption = None,
    timeout: Annotated[float, typer.Option(
        min=0.1, help="Seconds to wait for each broker to stop.")] = 30.0,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Stop every running broker of the data dir cleanly (SIGTERM), the controller last.

    Example: slog cluster down
    """
    from slog.broker.daemon import in_parallel, stop_daemon
    from slog.core.cluster_view import DataDirWatcher

    root = _root(data_dir)
    watcher = DataDirWatcher(root)
    view = watcher.view() if watcher.has_cluster else None
    running = [b for b in view.brokers if b.alive] if view else []
    if not running:
        if output.structured:
            print_data([], output)
        else:
            typer.echo(f"no broker is running in {root}")
        return

    def stop(broker_id: int) -> bool:
        return stop_daemon(broker_id, root, timeout_s=timeout)

    # Followers first, all at once; then the controller, so nobody fails over to a
    # broker that is itself shutting down.
    with _progress(f"stopping {len(running)} broker(s)", output):
        results = in_parallel(stop, [b.broker_id for b in running if not b.controller])
        results.update(in_parallel(stop, [b.broker_id for b in running if b.controller]))
    rows = []
    for broker in running:
        result = results[broker.broker_id]
        rows.append({"id": broker.broker_id, "address": broker.address, "pid": broker.pid,
                     "controller": broker.controller,
                     "result": "stopped" if result is True else
                     "already stopped" if result is False else f"failed: {result}"})
    if output.structured:
        print_data(rows, output)
    else:
        print_table([{**r, "controller": "yes" if r["controller"] else None} for r in rows],
                    ["id", "address", "pid", "controller", "result"])
    if any(isinstance(r, Exception) for r in results.values()):
        raise typer.Exit(EXIT_FAILURE)


# -- status --------------------------------------------------------------------------------

@app.command()
def status(
    data_dir: DataDirOption = None,
    bootstrap: Annotated[str | None, typer.Option(
        "--bootstrap", "-b", envvar="SLOG_BOOTSTRAP",
        help="Ask these brokers instead when the data dir holds no cluster (e.g. Kafka).")
    ] = None,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Brokers, controller and partition health; exit 0 when healthy, 1 when not.

    Reads the data dir (it knows about fenced brokers); with only --bootstrap,
    or when the data dir holds no cluster, asks the brokers over the protocol.
    Exit 3 when there is neither a cluster in the data dir nor a broker answering.

    Example: until slog cluster status -o json >/dev/null; do sleep 0.5; done
    """
    from slog.cli.cluster_view import view_from_protocol
    from slog.core.cluster_view import DataDirWatcher

    root = _root(data_dir)
    watcher = DataDirWatcher(root)
    if watcher.has_cluster and (data_dir is not None or bootstrap is None):
        view = watcher.view()
    elif bootstrap is None and data_dir is not None:
        fail(f"no slog cluster in {root}", hint="start one with `slog cluster up`, "
             "or pass --bootstrap to ask running brokers", code=EXIT_UNREACHABLE)
    else:
        target = bootstrap or DEFAULT_BOOTSTRAP
        with client_errors(target):
            try:
                view = view_from_protocol(target)
            except (ConnectionError, TimeoutError):  # BrokerUnavailableError included
                if bootstrap is not None:
                    raise
                fail(f"no slog cluster in {root} and no broker answers at {target}",
                     hint="start one with `slog cluster up`", code=EXIT_UNREACHABLE)
    _print_status(view, output)
    if not view.healthy:
        if not any(b.alive for b in view.brokers) and view.source == "data-dir":
            print(f"hint: start it with `slog cluster up --data-dir {root}`", file=sys.stderr)
        raise typer.Exit(EXIT_FAILURE)


def _print_status(view: ClusterView, output: OutputFormat) -> None:
    if output.structured:
        print_data(view.to_json(), output)
        return
    print_table(_broker_rows(view), _broker_columns(view))
    typer.echo(f"{_controller_line(view)}; {view.topic_count} topic(s), "
               f"{len(view.partitions)} partition(s)")
    sections: list[tuple[str, list[Any], list[str]]] = [
        ("offline partitions", view.offline_partitions,
         ["topic", "partition", "leader", "replicas", "isr"]),
        ("under-replicated partitions", view.under_replicated_partitions,
         ["topic", "partition", "leader", "replicas", "isr", "offline_replicas"]),
        ("partitions under min.insync.replicas", view.under_min_isr_partitions,
         ["topic", "partition", "isr", "min_insync_replicas"]),
    ]
    serving = any(b.alive for b in view.brokers)
    if not serving and view.partitions:
        typer.echo(f"\nall {len(view.partitions)} partition(s) are offline")
    for title, partitions, columns in sections:
        if partitions and serving:
            typer.echo(f"\n{title}:")
            print_table([p.to_json() for p in partitions], columns)
    problems = view.problems()
    typer.echo("\nhealthy" if not problems else f"\nunhealthy: {'; '.join(problems)}")
