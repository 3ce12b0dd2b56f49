"""Dynamic shell completion: topic and group names from a running cluster.

The shell runs ``slog`` on every TAB, so a lookup gets about a second at most
and stays silent on any failure: an unreachable broker just means no names.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

TIMEOUT_S = 1.0  # SLOG_COMPLETE_TIMEOUT overrides it (seconds)


def _timeout_s() -> float:
    import os

    try:
        return float(os.environ.get("SLOG_COMPLETE_TIMEOUT", TIMEOUT_S))
    except ValueError:
        return TIMEOUT_S


def completion_bootstrap(ctx: Any) -> str:
    """The bootstrap a command would use: its -b, else SLOG_BOOTSTRAP, else the profile,
    else the default (the global callback that applies profiles does not run while
    completing)."""
    import os

    from slog.cli.common import DEFAULT_BOOTSTRAP
    from slog.cli.config import PROFILE_ENV, ConfigFileError, load_profile

    given = ctx.params.get("bootstrap") if ctx is not None else None
    if given and given != DEFAULT_BOOTSTRAP:
        return str(given)
    if os.environ.get("SLOG_BOOTSTRAP"):
        return os.environ["SLOG_BOOTSTRAP"]
    root = ctx.find_root() if ctx is not None else None
    profile = (root.params.get("profile") if root is not None else None) or \
        os.environ.get(PROFILE_ENV)
    try:
        return load_profile(profile).values.get("bootstrap", DEFAULT_BOOTSTRAP)
    except ConfigFileError:
        return DEFAULT_BOOTSTRAP


def _within_timeout(lookup: Callable[[], list[str]]) -> list[str]:
    """``lookup()`` on a daemon thread; nothing if it fails or takes too long. The client
    is imported first, so the time limit is the cluster's alone."""
    import slog.client  # noqa: F401

    found: list[str] = []

    def run() -> None:
        with contextlib.suppress(Exception):  # completion must never print an error
            found.extend(lookup())

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(_timeout_s())
    return list(found) if not worker.is_alive() else []


def _matching(names: list[str], incomplete: str, ctx: Any) -> list[str]:
    already: set[str] = set()
    if ctx is not None:
        for value in ctx.params.values():
            if isinstance(value, (list, tuple)):
                already.update(v for v in value if isinstance(v, str))
    return [n for n in sorted(names) if n.startswith(incomplete) and n not in already]


def topic_names(ctx: Any, incomplete: str) -> list[str]:
    bootstrap = completion_bootstrap(ctx)

    def lookup() -> list[str]:
        from slog.client import Admin

        with Admin(bootstrap, client_id="slog-complete",
                   request_timeout_ms=int(_timeout_s() * 1000)) as admin:
            return [t.name for t in admin.list_topics()]

    return _matching(_within_timeout(lookup), incomplete, ctx)


def group_names(ctx: Any, incomplete: str) -> list[str]:
    bootstrap = completion_bootstrap(ctx)

    def lookup() -> list[str]:
        from slog.client.cluster import ClusterClient
        from slog.client.group_admin import GroupAdmin

        cluster = ClusterClient(bootstrap, client_id="slog-complete",
                                request_timeout_ms=int(_timeout_s() * 1000))
        try:
            return [g.group_id for g in GroupAdmin(cluster).list_groups()]
        finally:
            cluster.close()

    return _matching(_within_timeout(lookup), incomplete, ctx)
