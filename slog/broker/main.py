"""Run one broker in this process until SIGTERM/SIGINT, then shut down cleanly."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from dataclasses import replace
from pathlib import Path

from slog.broker.broker import Broker
from slog.broker.dispatcher import Dispatcher
from slog.broker.handlers import all_handlers
from slog.broker.security import exposure_warning
from slog.broker.server import KafkaServer
from slog.core import gc_policy
from slog.core.config import BrokerConfig
from slog.core.listeners import advertised, configured_listeners
from slog.protocol import warm_up
from slog.protocol.apis import ApiKey, ApiSpec
from slog.protocol.tls import broker_client_context, server_context
from slog.replication.broker_channel import use_tls

log = logging.getLogger("slog.broker")


FIRST_APIS = frozenset({ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.PRODUCE, ApiKey.FETCH,
                        ApiKey.LIST_OFFSETS, ApiKey.INIT_PRODUCER_ID,
                        ApiKey.OFFSET_FOR_LEADER_EPOCH, ApiKey.ALTER_PARTITION})


async def _warm_up_rest(specs: list[ApiSpec]) -> None:
    for spec in specs:
        await asyncio.sleep(0)
        warm_up([spec])


async def serve(config: BrokerConfig, ready: asyncio.Event | None = None) -> None:
    listeners = configured_listeners(config)
    gc_policy.install()
    # Certificates are read before anything else, so a bad file stops the start at once.
    tls_context = server_context(config.values) if any(e.tls for e in listeners) else None
    broker = Broker(config)
    if broker.security.inter_broker.tls:
        use_tls(broker_client_context(config.values))
    broker.open()
    dispatcher = Dispatcher(broker, all_handlers())
    broker.api_table = dispatcher.table
    # Codecs for what clients and other brokers send first are built before we
    # listen; the rest in the background, one API per loop turn (building them
    # all up front is ~0.6 s of CPU per broker, on the path of `cluster up`).
    first = [s for s in dispatcher.table if s.api_key in FIRST_APIS]
    warm_up(first)
    servers = [KafkaServer(config, dispatcher, listener, tls_context if listener.tls else None)
               for listener in listeners]
    bound = []
    try:
        for server in servers:
            port = await server.start()
            bound.append(replace(server.listener, port=port))
    except BaseException:
        for server in servers:
            await server.stop()
        raise
    # Warned before broker.json is written: whoever sees the broker up finds it in the log.
    client_auth = config.values["ssl.client.auth"] == "required"
    for listener in listeners:
        exposed = exposure_warning(listener.host, listener.sasl, listener.tls and client_auth)
        if exposed:
            log.warning(exposed)
    broker.publish(advertised(config, bound), bound)
    broker.poll_metadata()  # creates every replica: seconds with thousands of partitions
    await broker.replicas.settled()  # new logs may be made on a worker thread
    broker.caught_up()
    gc_policy.settle()  # what start-up built is long-lived: later collections skip it
    broker.try_become_controller()
    broker.start_background_tasks()
    warming = asyncio.create_task(_warm_up_rest([s for s in dispatcher.table if s not in first]))
    log.info("broker %d listening on %s (data dir %s)", config.broker_id,
             ", ".join(f"{e.name}://{e.host}:{e.port}" for e in bound), config.data_dir)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # `kill -USR1 <pid>`: how many requests of each kind this broker has served, and
    # its fetch sessions (counting what an idle cluster costs needs no profiler).
    loop.add_signal_handler(signal.SIGUSR1, lambda: log.info(
        "stats: %s fetch_sessions=%d fetch_session_evictions=%d", broker.stats.summary(),
        len(broker.replicas.fetch_sessions), broker.replicas.fetch_sessions.evictions))
    if ready is not None:
        ready.set()
    try:
        await stop.wait()
        log.info("shutting down broker %d", config.broker_id)
        await broker.controlled_shutdown()
    finally:
        warming.cancel()
        for server in servers:
            await server.stop()
        await broker.close()


def configure_logging(log_file: Path | None, level: int = logging.INFO) -> None:
    handler: logging.Handler
    handler = logging.FileHandler(log_file) if log_file else logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def run(config: BrokerConfig, log_file: Path | None = None) -> int:
    configure_logging(log_file)
    try:
        asyncio.run(serve(config))
    except Exception as exc:
        log.error("broker %d failed: %s", config.broker_id, exc)
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0
