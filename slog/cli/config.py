"""Where the CLI's settings come from: flag > environment > profile > default.

A config file holds base settings and named profiles::

    profile = "local"              # used when neither --profile nor SLOG_PROFILE is given

    [profiles.local]
    bootstrap = "127.0.0.1:9092"

    [profiles.staging]
    bootstrap = "10.0.0.5:9092,10.0.0.6:9092"
    data_dir = "~/slog-staging"

The file is ``$SLOG_CONFIG``, else ``./slog.toml``, else
``$XDG_CONFIG_HOME/slog/config.toml`` (``~/.config/slog/config.toml``): the
first that exists. Profile values reach the commands as click's ``default_map``,
which click consults after the command line and the environment variables, so
the precedence needs no code in the commands themselves.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slog.core.errors import SlogError

# Setting -> environment variable. Every command option of the same name follows it.
SETTINGS: dict[str, str] = {"bootstrap": "SLOG_BOOTSTRAP", "data_dir": "SLOG_DATA_DIR",
                            # TLS (cli.common.TLS_SETTINGS): tls = true, ca = "path", ...
                            "tls": "SLOG_TLS", "ca": "SLOG_TLS_CA", "cert": "SLOG_TLS_CERT",
                            "key": "SLOG_TLS_KEY"}
PROFILE_ENV = "SLOG_PROFILE"
CONFIG_ENV = "SLOG_CONFIG"


class ConfigFileError(SlogError):
    """The config file cannot be read, or names a profile it does not define."""


def config_candidates() -> list[Path]:
    explicit = os.environ.get(CONFIG_ENV)
    if explicit:
        return [Path(explicit).expanduser()]
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return [Path("slog.toml"), Path(base) / "slog" / "config.toml"]


def find_config_file() -> Path | None:
    found = next((path for path in config_candidates() if path.is_file()), None)
    return found.resolve() if found is not None else None


@dataclass
class Profile:
    """The settings a config file gives, and where the file is."""

    path: Path | None = None
    name: str | None = None
    values: dict[str, str] = field(default_factory=dict)

    def source(self) -> str:
        where = str(self.path)
        return f"profile {self.name} ({where})" if self.name else f"config ({where})"


def _settings(table: dict[str, Any], where: str) -> dict[str, str]:
    unknown = sorted(set(table) - set(SETTINGS) - {"profile", "profiles"})
    if unknown:
        raise ConfigFileError(f"{where}: unknown setting(s) {', '.join(unknown)}; "
                              f"known: {', '.join(SETTINGS)}")
    return {key: str(table[key]) for key in SETTINGS if key in table}


def load_profile(name: str | None) -> Profile:
    """Base settings of the config file overlaid with profile ``name`` (or the file's own
    ``profile`` key). No file and no name: an empty profile."""
    path = find_config_file()
    if path is None:
        if name:
            raise ConfigFileError(f"profile {name!r} requested but there is no config file "
                                  f"(looked at {', '.join(map(str, config_candidates()))})")
        return Profile()
    import tomllib  # only when there is a file: ~5 ms of every run's start-up otherwise

    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigFileError(f"cannot read {path}: {exc}") from None
    values = _settings(data, str(path))
    profiles = data.get("profiles", {})
    if not isinstance(profiles, dict):
        raise ConfigFileError(f"{path}: [profiles] must be a table of tables")
    chosen = name or data.get("profile")
    if chosen:
        table = profiles.get(chosen)
        if not isinstance(table, dict):
            known = ", ".join(sorted(profiles)) or "none"
            raise ConfigFileError(f"{path} has no profile {chosen!r} (profiles: {known})")
        values.update(_settings(table, f"{path} [profiles.{chosen}]"))
    return Profile(path, chosen, values)


def default_map(command: Any, values: dict[str, str]) -> dict[str, Any]:
    """click's nested ``default_map`` giving ``values`` to every (sub)command option of
    the same name, however deep the command tree."""
    found: dict[str, Any] = {name: values[name] for name in values
                             if any(p.name == name for p in getattr(command, "params", []))}
    for sub_name, sub in getattr(command, "commands", {}).items():
        nested = default_map(sub, values)
        if nested:
            found[sub_name] = nested
    return found
