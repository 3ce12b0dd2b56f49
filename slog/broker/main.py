"""Run one broker in this process until SIGTERM/SIGINT, then shut down cleanly."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from pathlib import Path

from slog.broker.broker import Broker
from slog.broker.dispatcher import Dispatcher
from slog.broker.handlers import all_handlers
from slog.broker.security import exposure_warning
from slog.broker.server import KafkaServer
from slog.core.config import BrokerConfig
from slog.protocol import warm_up
from slog.protocol.apis import ApiKey, ApiSpec

log = logging.getLogger("slog.broker")


FIRST_APIS = frozenset({ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.PRODUCE, ApiKey.FETCH,
                        ApiKey.LIST_OFFSETS, ApiKey.INIT_PRODUCER_ID,
                        ApiKey.OFFSET_FOR_LEADER_EPOCH, ApiKey.ALTER_PARTITION})


async def _warm_up_rest(specs: list[ApiSpec]) -> None:
    for spec in specs:
        await asyncio.sleep(0)
        warm_up([spec])


async def serve(config: BrokerConfig, ready: asyncio.Event | None = None) -> None:
    broker = Broker(config)
    broker.open()
    dispatcher = Dispatcher(broker, all_handlers())
    broker.api_table = dispatcher.table
    # Codecs for what clients and other brokers send first are built before we
    # listen; the rest in the background, one API per loop turn (building them
    # all up front is ~0.6 s of CPU per broker, on the path of `cluster up`).
    first = [s for s in dispatcher.table if s.api_key in FIRST_APIS]
    warm_up(first)
    server = KafkaServer(config, dispatcher)
    port = await server.start()
    broker.publish(port)
    broker.poll_metadata()
    broker.try_become_controller()
    broker.start_background_tasks()
    warming = asyncio.create_task(_warm_up_rest([s for s in dispatcher.table if s not in first]))
    log.info("broker %d listening on %s:%d (data dir %s)", config.broker_id, config.host, port,
             config.data_dir)
    exposed = exposure_warning(config.host, broker.security.sasl_enabled)
    if exposed:
        log.warning(exposed)
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
