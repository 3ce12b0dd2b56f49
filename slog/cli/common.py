"""Options and error handling shared by every command."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import NoReturn

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_NOT_FOUND = 4


def default_data_dir() -> Path:
    """``$SLOG_DATA_DIR``, else ``$XDG_DATA_HOME/slog`` (``~/.local/share/slog``)."""
    configured = os.environ.get("SLOG_DATA_DIR")
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "slog"


def fail(message: str, hint: str | None = None, code: int = EXIT_FAILURE) -> NoReturn:
    """Print a one-line error (and a hint) on stderr and exit with ``code``."""
    print(f"error: {message}", file=sys.stderr)
    if hint:
        print(f"hint: {hint}", file=sys.stderr)
    raise SystemExit(code)
