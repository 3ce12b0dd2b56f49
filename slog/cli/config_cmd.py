"""``slog config show``: the effective settings and where each one came from."""

from __future__ import annotations

import os

import typer

from slog.cli.common import DEFAULT_BOOTSTRAP, BootstrapOption, DataDirOption, default_data_dir
from slog.cli.output import OutputFormat, OutputOption, emit

app = typer.Typer(help="Show the effective configuration (profiles, environment, flags).",
                  no_args_is_help=True)


def _source(ctx: typer.Context, name: str, profile_source: str) -> str:
    from slog.cli.config import SETTINGS

    found = ctx.get_parameter_source(name)
    if found is None or found.name == "COMMANDLINE":
        return "flag"
    if found.name == "ENVIRONMENT":
        return f"env {SETTINGS[name]}"
    if found.name == "DEFAULT_MAP":
        return profile_source
    return "default"


@app.command()
def show(
    ctx: typer.Context,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    data_dir: DataDirOption = None,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Print each setting, its value and its source: flag, env, profile, or default.

    Precedence: flag > environment (SLOG_BOOTSTRAP, SLOG_DATA_DIR) > the
    profile of the config file > default. The config file is $SLOG_CONFIG,
    else ./slog.toml, else $XDG_CONFIG_HOME/slog/config.toml
    (~/.config/slog/config.toml). Its format:

    profile = "local"            # the default profile (optional)

    [profiles.local]

    bootstrap = "127.0.0.1:9092"

    data_dir = "~/slog-data"

    Examples:
      slog config show
      slog --profile staging config show -o json
    """
    from slog.cli.config import PROFILE_ENV, Profile, config_candidates

    loaded: Profile = ctx.find_root().meta.get("slog.profile") or Profile()
    root_source = ctx.find_root().get_parameter_source("profile")
    profile_from = "flag" if root_source is None or \
        root_source.name == "COMMANDLINE" else \
        f"env {PROFILE_ENV}" if root_source.name == "ENVIRONMENT" else \
        f"config ({loaded.path})"
    rows = [
        {"setting": "config_file",
         "value": str(loaded.path) if loaded.path else None,
         "source": "found" if loaded.path else
         "none of " + ", ".join(str(p) for p in config_candidates())},
        {"setting": "profile", "value": loaded.name,
         "source": profile_from if loaded.name else "default"},
        {"setting": "bootstrap", "value": bootstrap,
         "source": _source(ctx, "bootstrap", loaded.source())},
        {"setting": "data_dir",
         "value": str((data_dir or default_data_dir()).expanduser()),
         "source": _source(ctx, "data_dir", loaded.source()) if data_dir is not None else
         "env XDG_DATA_HOME" if os.environ.get("XDG_DATA_HOME") else "default"},
    ]
    emit(rows, ["setting", "value", "source"], output)
