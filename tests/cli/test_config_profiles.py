"""Settings precedence: flag > environment > config-file profile > default, and
`slog config show` saying where each value came from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from slog.cli.app import app
from slog.cli.common import DEBUG
from tests.brokers import run_cli

runner = CliRunner()
CONFIG = """\
profile = "home"

[profiles.home]
bootstrap = "127.0.0.1:1"

[profiles.far]
bootstrap = "127.0.0.1:2"
data_dir = "/srv/slog-far"
"""


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(CONFIG)
    return path


def settings(env: dict[str, str], *args: str) -> dict[str, dict[str, Any]]:
    """`slog [GLOBAL...] config show -o json [OPTIONS...]`; args: GLOBAL... "config" OPTIONS..."""
    split = args.index("config") if "config" in args else len(args)
    result = runner.invoke(app, [*args[:split], "config", "show", "-o", "json",
                                 *args[split + 1:]], env=env)
    assert result.exit_code == 0, result.output
    return {row["setting"]: row for row in json.loads(result.stdout)}


def clean_env(**extra: str) -> dict[str, str]:
    return {"SLOG_BOOTSTRAP": "", "SLOG_DATA_DIR": "", "SLOG_PROFILE": "",
            "XDG_DATA_HOME": "", **extra}


def test_the_file_default_profile(config_file: Path) -> None:
    found = settings(clean_env(SLOG_CONFIG=str(config_file)))
    assert found["profile"]["value"] == "home"
    assert found["bootstrap"]["value"] == "127.0.0.1:1"
    assert found["bootstrap"]["source"] == f"profile home ({config_file})"
    assert found["data_dir"]["source"] == "default"
    assert found["config_file"]["value"] == str(config_file)


def test_precedence_flag_env_profile_default(config_file: Path) -> None:
    env = clean_env(SLOG_CONFIG=str(config_file))
    by_profile = settings(env, "--profile", "far", "config")
    assert by_profile["bootstrap"]["value"] == "127.0.0.1:2"
    assert by_profile["data_dir"]["value"] == "/srv/slog-far"
    assert by_profile["profile"]["source"] == "flag"
    by_env = settings({**env, "SLOG_PROFILE": "far", "SLOG_BOOTSTRAP": "127.0.0.1:3"})
    assert by_env["profile"]["source"] == "env SLOG_PROFILE"
    assert (by_env["bootstrap"]["value"], by_env["bootstrap"]["source"]) == \
        ("127.0.0.1:3", "env SLOG_BOOTSTRAP")
    assert by_env["data_dir"]["source"] == f"profile far ({config_file})"
    by_flag = settings({**env, "SLOG_BOOTSTRAP": "127.0.0.1:3"}, "config", "-b", "127.0.0.1:4")
    assert (by_flag["bootstrap"]["value"], by_flag["bootstrap"]["source"]) == \
        ("127.0.0.1:4", "flag")
    nothing = settings(clean_env(SLOG_CONFIG=str(config_file.parent / "missing.toml")))
    assert nothing["bootstrap"]["source"] == "default"
    assert nothing["config_file"]["value"] is None


def test_profiles_reach_every_command(config_file: Path) -> None:
    """A command run with the profile talks to the profile's bootstrap."""
    result = runner.invoke(app, ["--profile", "far", "topic", "list"],
                           env=clean_env(SLOG_CONFIG=str(config_file)))
    assert result.exit_code == 3 and "127.0.0.1:2" in result.output


def test_project_file_then_xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    xdg = tmp_path / "xdg"
    (xdg / "slog").mkdir(parents=True)
    (xdg / "slog" / "config.toml").write_text('bootstrap = "127.0.0.1:5"\n')
    monkeypatch.chdir(tmp_path)
    env = clean_env(SLOG_CONFIG="", XDG_CONFIG_HOME=str(xdg))
    found = settings(env)
    assert found["bootstrap"]["value"] == "127.0.0.1:5"
    assert found["bootstrap"]["source"] == f"config ({xdg / 'slog' / 'config.toml'})"
    (tmp_path / "slog.toml").write_text('bootstrap = "127.0.0.1:6"\n')
    assert settings(env)["bootstrap"]["value"] == "127.0.0.1:6"


@pytest.mark.parametrize(("text", "args", "message"), [
    ("bootstrap = ", [], "cannot read"),
    ('colour = "red"\n', [], "unknown setting"),
    (CONFIG, ["--profile", "nope"], "no profile 'nope'"),
])
def test_bad_config_is_a_usage_error(config_file: Path, text: str, args: list[str],
                                     message: str) -> None:
    config_file.write_text(text)
    result = runner.invoke(app, [*args, "config", "show"],
                           env=clean_env(SLOG_CONFIG=str(config_file)))
    assert result.exit_code == 2 and message in result.output, result.output


def test_debug_flag_and_env() -> None:
    DEBUG["on"] = False
    try:
        assert runner.invoke(app, ["--debug", "config", "show"]).exit_code == 0
        assert DEBUG["on"] is True
    finally:
        DEBUG["on"] = False
    hidden = run_cli("topic", "list", "-b", "127.0.0.1:1")
    assert hidden.returncode == 3 and "Traceback" not in hidden.stderr


def test_no_color_and_pipes_give_plain_help() -> None:
    piped = run_cli("topic", "--help")
    assert piped.returncode == 0 and "╭" not in piped.stdout and "\x1b[" not in piped.stdout
