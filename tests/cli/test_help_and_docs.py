"""The whole command tree, walked: help, examples, aliases, documented output, and the
generated files (docs/cli.md, completions/) being up to date. New commands are covered
as soon as they are registered."""

from __future__ import annotations

import subprocess
import sys
from typing import Annotated, Any

import pytest
import typer.main
from typer.core import TyperOption
from typer.testing import CliRunner

from slog.cli.app import app, split_examples
from slog.cli.common import LONG_OPTION_MEANINGS, SHORT_FLAG_MEANINGS
from slog.cli.docgen import DOC_PATH, completion_files, option_choices, render, walk
from slog.cli.schema import SCHEMAS

runner = CliRunner()
ROOT = typer.main.get_command(app)
COMMANDS = [(path, command) for path, command in walk(ROOT)]
LEAVES = [(path, c) for path, c in COMMANDS if not getattr(c, "commands", None)]


def ids(items: list[tuple[tuple[str, ...], Any]]) -> list[str]:
    return [" ".join(path) or "slog" for path, _ in items]


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=ids(COMMANDS))
def test_help_has_a_summary(path: tuple[str, ...], command: Any) -> None:
    result = runner.invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    summary = (command.help or "").strip().split("\n\n")[0]
    assert summary and len(summary) <= 200, f"{path}: one-line summary missing: {summary!r}"
    assert " ".join(summary.split())[:40] in " ".join(result.output.split())


@pytest.mark.parametrize(("path", "command"), LEAVES, ids=ids(LEAVES))
def test_every_command_has_examples_in_its_help(path: tuple[str, ...], command: Any) -> None:
    assert command.epilog and "Examples:" in command.epilog, \
        f"`slog {' '.join(path)}`: add an 'Example:' or 'Examples:' paragraph to its docstring"
    examples = [line.strip() for line in command.epilog.splitlines()[1:] if line.strip()]
    assert examples and all("slog" in e for e in examples), examples
    result = runner.invoke(app, [*path, "--help"])
    assert examples[0] in result.output


@pytest.mark.parametrize(("path", "command"), LEAVES, ids=ids(LEAVES))
def test_commands_with_output_have_documented_fields(path: tuple[str, ...], command: Any
                                                     ) -> None:
    output = next((p for p in command.params if p.name == "output"), None)
    if output is None:
        return
    assert isinstance(output, TyperOption)
    assert "--output" in output.opts
    assert option_choices(output) == ["table", "json", "yaml"]
    assert " ".join(path) in SCHEMAS, f"document the JSON fields of `slog {' '.join(path)}` " \
                                      "in slog/cli/schema.py"


def test_every_schema_names_a_command() -> None:
    names = {" ".join(path) for path, _ in LEAVES}
    assert set(SCHEMAS) <= names, sorted(set(SCHEMAS) - names)


def test_shared_option_names() -> None:
    """The same idea has the same flags everywhere."""
    expected = {"bootstrap": {"--bootstrap", "-b"}, "data_dir": {"--data-dir"},
                "regex": {"--regex", "-r"}}
    for path, command in LEAVES:
        for param in command.params:
            if param.name in expected and isinstance(param, TyperOption):
                assert set(param.opts) == expected[param.name], (path, param.opts)
            if param.name == "output" and path != ("consume",):
                assert set(param.opts) == {"--output", "-o"}, path


def meaning(param: Any) -> tuple[str, str, bool]:
    """What an option stands for, as far as the code says: the parameter it sets, its
    click type (integer, text, choice, ...) and whether it is an on/off flag."""
    # A bounded integer ("integer range") is still an integer.
    return param.name, param.type.name.removesuffix(" range"), bool(param.is_flag)


def option_name_problems(leaves: list[tuple[tuple[str, ...], Any]]) -> list[str]:
    """Long options with more than one meaning, and short flags standing for more than one
    long option, that slog/cli/common.py does not list (or lists wrongly)."""
    longs: dict[str, dict[tuple[str, str, bool], set[str]]] = {}
    shorts: dict[str, set[str]] = {}
    for path, command in leaves:
        for param in command.params:
            if not isinstance(param, TyperOption):
                continue
            names = [o for o in [*param.opts, *param.secondary_opts] if o.startswith("--")]
            for name in names:
                longs.setdefault(name, {}).setdefault(meaning(param), set()).add(" ".join(path))
            for flag in param.opts:
                if not flag.startswith("--") and names:
                    shorts.setdefault(flag, set()).add(names[0])
    problems = []
    for name, uses in sorted(longs.items()):
        documented = LONG_OPTION_MEANINGS.get(name, {})
        if len(uses) == 1 and not documented:
            continue
        # One documented command per meaning, and every meaning documented.
        covered = [next((m for m, commands in uses.items() if command in commands), None)
                   for command in documented]
        if len(uses) == 1 or None in covered or len(set(covered)) != len(uses) \
                or len(covered) != len(uses):
            problems.append(f"{name} has {len(uses)} meanings {sorted(uses.values())}; "
                            f"LONG_OPTION_MEANINGS lists {sorted(documented)}")
    for flag, names in sorted(shorts.items()):
        documented_names = set(SHORT_FLAG_MEANINGS.get(flag, {}))
        if (len(names) > 1 or documented_names) and names != documented_names:
            problems.append(f"{flag} stands for {sorted(names)}; SHORT_FLAG_MEANINGS lists "
                            f"{sorted(documented_names)}")
    problems += [f"{name} is not used" for name in [*LONG_OPTION_MEANINGS, *SHORT_FLAG_MEANINGS]
                 if name not in longs and name not in shorts]
    return problems


def test_each_option_name_has_one_meaning_or_is_documented() -> None:
    """--partition is always a partition number and --partitions a count, and so on; the
    few flags that follow rpk/kcat/Kafka into several meanings are listed in docs/cli.md."""
    assert option_name_problems(LEAVES) == []


def test_option_name_check_finds_a_second_meaning() -> None:
    """The check above can fail: a --partition that is a count, or a new -p."""
    bad = typer.Typer()

    @bad.command()
    def count(partitions: Annotated[int, typer.Option("--partition", "-p")] = 1,
              pages: Annotated[int, typer.Option("--pages", "-r")] = 1) -> None:
        """Not a real command."""

    problems = option_name_problems([*LEAVES, (("bad",), typer.main.get_command(bad))])
    assert len(problems) == 2, problems
    assert problems[0].startswith("--partition has 2 meanings"), problems
    assert problems[1].startswith("-r stands for"), problems


def test_aliases_are_listed_next_to_their_commands() -> None:
    root_help = runner.invoke(app, ["--help"]).output
    assert "describe-group" in root_help and "preferred-leader-election" in root_help
    assert "Alias of `slog group describe`" in root_help
    assert "Alias: slog describe-group" in runner.invoke(app, ["group", "describe",
                                                               "--help"]).output
    assert "Alias: slog preferred-leader-election" in runner.invoke(
        app, ["elect-leaders", "--help"]).output
    alias = ROOT.commands["describe-group"]
    canonical = ROOT.commands["group"].commands["describe"]
    assert [p.name for p in alias.params] == [p.name for p in canonical.params]


def test_split_examples() -> None:
    text, examples = split_examples("Do it.\n\nMore.\n\nExamples:\n  slog a\n  slog b -x")
    assert text == "Do it.\n\nMore." and examples == ["slog a", "slog b -x"]
    assert split_examples("Do.\n\nExample: slog c")[1] == ["slog c"]


def test_docs_cli_md_is_up_to_date() -> None:
    assert DOC_PATH.read_text() == render(), \
        "docs/cli.md is stale: run `python -m slog.cli.docgen --write`"


def test_docs_list_exit_codes_and_every_command() -> None:
    text = DOC_PATH.read_text()
    for code in ("| 0 |", "| 1 |", "| 2 |", "| 3 |", "| 4 |"):
        assert code in text
    for path, _ in LEAVES:
        assert f"### `slog {' '.join(path)}`" in text


def test_completion_scripts_are_up_to_date() -> None:
    for path, text in completion_files().items():
        assert path.read_text() == text, \
            f"{path.name} is stale: run `python -m slog.cli.docgen --write`"


def test_completion_generate_prints_the_checked_in_script() -> None:
    for shell, name in (("bash", "slog.bash"), ("zsh", "_slog"), ("fish", "slog.fish")):
        result = runner.invoke(app, ["completion", "generate", shell])
        assert result.exit_code == 0
        assert next(p for p in completion_files() if p.name == name).read_text() == \
            result.output


def test_completion_install_writes_the_script(tmp_path: Any) -> None:
    target = tmp_path / "deep" / "slog"
    result = runner.invoke(app, ["completion", "install", "bash", "--path", str(target),
                                 "-o", "json"])
    assert result.exit_code == 0, result.output
    assert "_SLOG_COMPLETE=complete_bash" in target.read_text()
    bad = runner.invoke(app, ["completion", "install"], env={"SHELL": "/bin/tcsh"})
    assert bad.exit_code == 2 and "SHELL" in bad.output


def test_completion_install_default_places(tmp_path: Any) -> None:
    env = {"HOME": str(tmp_path), "XDG_DATA_HOME": "", "XDG_CONFIG_HOME": ""}
    for shell, relative in (("bash", ".local/share/bash-completion/completions/slog"),
                            ("zsh", ".zfunc/_slog"),
                            ("fish", ".config/fish/completions/slog.fish")):
        result = runner.invoke(app, ["completion", "install", shell], env=env)
        assert result.exit_code == 0, result.output
        assert (tmp_path / relative).is_file(), relative


@pytest.mark.parametrize(("args", "unwanted"), [
    (["--help"], ["slog.client", "slog.protocol", "kio", "rich", "textual", "pyspark",
                  "pyarrow", "hypothesis"]),
    (["topic", "list", "-b", "127.0.0.1:1"], ["rich", "textual", "pyspark", "pyarrow",
                                              "pandas", "hypothesis", "asyncio", "tomllib",
                                              "slog.core.scram", "slog.core.datadir",
                                              "slog.cli.acl_cmd", "slog.cli.group_cmd"]),
])
def test_simple_commands_import_little(args: list[str], unwanted: list[str]) -> None:
    """Piped (so plain output): `slog --help` loads no client and no rich; `slog topic
    list` loads the client but no rich, textual, pyspark or pyarrow."""
    code = (f"import sys, runpy; sys.argv = ['slog', *{args!r}]\n"
            "try:\n    runpy.run_module('slog.cli', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            f"print('LOADED', [m for m in {unwanted!r} if sys.modules.get(m) is not None])\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60)
    assert "LOADED []" in result.stdout, result.stdout[-500:] + result.stderr[-2000:]


def test_asyncio_left_out_at_start_up_still_loads_for_real() -> None:
    """The CLI loads kio without asyncio; a command that then needs an event loop gets
    the real asyncio, and kio still encodes and decodes."""
    code = ("import sys, runpy; sys.argv = ['slog', 'topic', 'list', '-b', '127.0.0.1:1']\n"
            "try:\n    runpy.run_module('slog.cli', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "import asyncio\n"
            "print('LOOP', asyncio.run(asyncio.sleep(0, 'ran')))\n"
            "from slog.protocol.apis import ApiKey, request_class\n"
            "from slog.protocol.codec import decode_request, encode_request\n"
            "from slog.protocol.headers import parse_request_header\n"
            "req = request_class(ApiKey.API_VERSIONS, 3)(client_software_name='t',\n"
            "                                              client_software_version='1')\n"
            "frame = encode_request(req, correlation_id=7, client_id='c')[4:]\n"
            "header, at = parse_request_header(frame)\n"
            "print('KIO', header.correlation_id, decode_request(header, frame, at) == req)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60)
    assert "LOOP ran" in result.stdout and "KIO 7 True" in result.stdout, \
        result.stdout[-500:] + result.stderr[-2000:]


def test_the_command_to_build_is_found_after_global_options() -> None:
    from slog.cli.app import _root_command_name

    assert _root_command_name(["--profile", "dev", "--debug", "topic", "list"]) == "topic"
    assert _root_command_name(["--debug", "--help"]) is None
    assert _root_command_name([]) is None


def test_a_real_run_lists_every_command_in_the_root_help() -> None:
    """The root help of a real process (built with parameter-less stand-ins) lists the
    same commands, with the same summaries, as the full tree."""
    result = subprocess.run([sys.executable, "-m", "slog.cli", "--help"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    for name, command in ROOT.commands.items():
        if not command.hidden:
            summary = " ".join((command.help or "").split())[:20]
            assert any(line.strip().startswith(name) and summary[:10] in line
                       for line in result.stdout.splitlines()), (name, summary)
    topic_help = subprocess.run([sys.executable, "-m", "slog.cli", "topic", "list", "--help"],
                                capture_output=True, text=True, timeout=60)
    assert "--regex" in topic_help.stdout and "Examples:" in topic_help.stdout


@pytest.mark.parametrize(("path", "command"), LEAVES, ids=ids(LEAVES))
def test_every_command_rejects_unknown_options_with_exit_2(path: tuple[str, ...],
                                                          command: Any) -> None:
    result = runner.invoke(app, [*path, "--no-such-option"])
    assert result.exit_code == 2, result.output
    assert "No such option" in result.output and "Traceback" not in result.output
