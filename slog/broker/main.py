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
from slog.broker.server import KafkaServer
from slog.core.config import BrokerConfig
from slog.protocol import warm_up

log = logging.getLogger("slog.broker")


async def serve(config: BrokerConfig, ready: asyncio.Event | None = None) -> None:
    broker = Broker(config)
    broker.open()
    dispatcher = Dispatcher(broker, all_handlers())
    broker.api_table = dispatcher.table
    warm_up(dispatcher.table)
    server = KafkaServer(config, dispatcher)
    port = await server.start()
    broker.publish(port)
    broker.poll_metadata()
    broker.try_become_controller()
    broker.start_background_tasks()
    log.info("broker %d listening on %s:%d (data dir %s)", config.broker_id, config.host, port,
             config.data_dir)
    if config.host == "0.0.0.0":
        log.warning("listening on all interfaces without authentication")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if ready is not None:
        ready.set()
    try:
        await stop.wait()
        log.info("shutting down broker %d", config.broker_id)
        await broker.controlled_shutdown()
    finally:
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
