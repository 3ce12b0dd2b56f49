"""``python -m slog.broker``: run one broker in the foreground (what the daemon execs)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from slog.broker.main import run
from slog.core.config import BrokerConfig, ConfigError, parse_key_values


def parse_listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"--listen expects host:port, got {value!r}")
    return host or "127.0.0.1", int(port)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m slog.broker")
    parser.add_argument("--id", type=int, required=True)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--listen", default="127.0.0.1:9092")
    parser.add_argument("--config", action="append", default=[])
    parser.add_argument("--log-file", type=Path)
    args = parser.parse_args(argv)
    try:
        host, port = parse_listen(args.listen)
        config = BrokerConfig.build(args.id, args.data_dir.resolve(), host, port,
                                    parse_key_values(args.config))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return run(config, args.log_file)


if __name__ == "__main__":
    sys.exit(main())
