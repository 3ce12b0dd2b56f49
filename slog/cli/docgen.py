"""Generate docs/cli.md and completions/ from the app itself.

    python -m slog.cli.docgen            # print docs/cli.md
    python -m slog.cli.docgen --write    # rewrite docs/cli.md and completions/*

The tests compare the checked-in files with what this produces, so a command
added or changed without regenerating them fails the tests.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DOC_PATH = REPO / "docs" / "cli.md"
COMPLETIONS_DIR = REPO / "completions"

INTRO = """\
# The `slog` command line

Generated from the app by `python -m slog.cli.docgen --write`; do not edit by hand.

## Conventions

- Topics and groups are positional and several can be given at once; `-r/--regex`
  adds every name a regular expression matches completely (`topic list|describe|delete`,
  `group list|describe|delete`, `get-offsets`, `elect-leaders`).
- Long option names are shared per idea: `--bootstrap`, `--data-dir`, `--output`,
  `--topic`, `--group`, `--regex`, `--partition` (a partition number), `--partitions`
  (a partition count), `--replication-factor` ... mean the same in every command that
  has them. A few long options keep the meaning of the tool they come from, and a few
  short flags follow rpk and kcat, so `-p` and `-r` are counts in the commands that
  create topics (`topic create`, `bench`); see [Option names](#option-names).
- `-o table` (default) prints upper-case headers and `-` for values that do not apply;
  `-o json` and `-o yaml` print the fields listed under each command, which are stable.
- Colour appears only on a terminal and never with `NO_COLOR` set; progress bars
  (produce from a file, reassignment, `cluster up`) only on a terminal.
- Errors go to stderr as one line and a hint; `--debug` (or `SLOG_DEBUG=1`) shows the
  traceback instead.

{option_names}
## Exit codes

| code | meaning |
|------|---------|
| 0 | success (also when stdout closes early, as when piped into `head`) |
| 1 | failure, partial failure, an unhealthy cluster, or an API the cluster does not offer |
| 2 | usage error (bad option, bad file, nothing to do) |
| 3 | no broker could be reached |
| 4 | not found (topic, group, partition, broker) |

## Configuration

Each setting is taken from the first of: the flag, the environment variable, the
selected profile of the config file, the default.

| setting | flag | environment | default |
|---------|------|-------------|---------|
| bootstrap | `-b/--bootstrap` | `SLOG_BOOTSTRAP` | `127.0.0.1:9092` |
| data_dir | `--data-dir` | `SLOG_DATA_DIR` | `$XDG_DATA_HOME/slog` (`~/.local/share/slog`) |
| profile | `--profile` | `SLOG_PROFILE` | the file's `profile` key |

The config file is `$SLOG_CONFIG`, else `./slog.toml`, else
`$XDG_CONFIG_HOME/slog/config.toml` (`~/.config/slog/config.toml`):

```toml
profile = "local"          # optional: the profile used without --profile

[profiles.local]
bootstrap = "127.0.0.1:9092"

[profiles.staging]
bootstrap = "10.0.0.5:9092,10.0.0.6:9092"
data_dir = "~/slog-staging"
```

`slog config show` prints the effective values and where each came from.

## Shell completion

`slog completion install [bash|zsh|fish]`, or source `completions/slog.bash`,
`completions/_slog` or `completions/slog.fish`. Topic and group names complete from
the cluster of the current bootstrap (flag, env or profile) within about a second
(`SLOG_COMPLETE_TIMEOUT`, in seconds), and nothing is printed when no broker answers.

## Commands
"""


def walk(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every (sub)command with its path, parents first, in registration order."""
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        if not getattr(sub, "hidden", False):
            yield from walk(sub, (*path, name))


def root_command() -> Any:
    import typer.main

    from slog.cli.app import app

    return typer.main.get_command(app)


def _default(param: Any) -> str:
    if getattr(param, "required", False) or param.default is None or param.is_flag \
            or getattr(param, "show_default", True) is False:
        return ""
    value = param.default
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, (list, tuple)):
        return ""
    return f"`{value}`"


def option_choices(param: Any) -> list[str] | None:
    """An option's allowed values (typer >= 0.2x keeps the annotation, click a Choice)."""
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return [str(c.value) for c in annotation]
    choices = getattr(getattr(param, "type", None), "choices", None)
    return [str(c) for c in choices] if choices else None


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _params(command: Any) -> list[str]:
    from typer.core import TyperOption

    rows = []
    for param in command.params:
        if getattr(param, "hidden", False) or param.name == "help":
            continue
        is_option = isinstance(param, TyperOption)
        names = ", ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts]) \
            if is_option else \
            f"`{param.metavar or param.name.upper() + ('...' if param.nargs == -1 else '')}`"
        if is_option and getattr(param, "is_bool_flag", False) and param.secondary_opts:
            names = ", ".join(f"`{o}`" for o in param.opts) + " / " + \
                ", ".join(f"`{o}`" for o in param.secondary_opts)
        choices = option_choices(param)
        extra = f" One of: {', '.join(str(c) for c in choices)}." if choices else ""
        env = f" Env: `{param.envvar}`." if getattr(param, "envvar", None) else ""
        rows.append(f"| {names} | {_cell((getattr(param, 'help', None) or '') + extra + env)} "
                    f"| {_default(param)} |")
    if not rows:
        return []
    return ["| argument / option | meaning | default |", "|---|---|---|", *rows, ""]


def _schema(key: str) -> list[str]:
    from slog.cli.schema import SCHEMAS

    shape = SCHEMAS.get(key)
    if shape is None:
        return []
    kind = {"list": "a JSON array of objects", "object": "one JSON object",
            "stream": "one JSON object per line (YAML: one document per record)"}[shape.kind]
    lines = [f"JSON/YAML output: {kind}." + (f" {shape.note}" if shape.note else ""), "",
             "| field | meaning |", "|---|---|"]
    lines += [f"| `{name}` | {_cell(text)} |" for name, text in shape.fields.items()]
    for name, fields in shape.nested.items():
        lines += ["", f"Each item of `{name}`:", "", "| field | meaning |", "|---|---|"]
        lines += [f"| `{n}` | {_cell(t)} |" for n, t in fields.items()]
    return [*lines, ""]


def render_command(path: tuple[str, ...], command: Any, parent_ctx: Any) -> tuple[list[str], Any]:
    ctx = command.context_class(command, info_name=path[-1] if path else "slog",
                                parent=parent_ctx)
    title = " ".join(("slog", *path))
    help_text = (command.help or "").strip()
    summary, _, rest = help_text.partition("\n\n")
    lines = [f"### `{title}`", "", " ".join(summary.split()), ""]
    usage = " ".join(command.collect_usage_pieces(ctx))
    lines += ["```", f"{title} {usage}".rstrip(), "```", ""]
    if rest.strip():
        lines += [" ".join(p.split()) + "\n" for p in rest.strip().split("\n\n")]
    lines += _params(command)
    if command.epilog:
        lines += ["Examples:", "", "```sh",
                  *[e.strip() for e in command.epilog.replace("\b", "").splitlines()[1:]
                    if e.strip()], "```", ""]
    lines += _schema(" ".join(path))
    return lines, ctx


MAX_LISTED = 12  # commands named per flag meaning; more are "every other command"


def flag_uses(root: Any) -> dict[str, dict[str, list[str]]]:
    """Short flag -> long option -> the commands where the flag stands for it."""
    from typer.core import TyperOption

    uses: dict[str, dict[str, list[str]]] = {}
    for path, command in walk(root):
        if getattr(command, "commands", None):
            continue
        for param in command.params:
            if not isinstance(param, TyperOption):
                continue
            long = next((o for o in param.opts if o.startswith("--")), None)
            for flag in param.opts:
                if long is not None and not flag.startswith("--"):
                    uses.setdefault(flag, {}).setdefault(long, []).append(" ".join(path))
    return uses


def render_option_names(root: Any) -> str:
    """The "Option names" section: the flags that mean different things in different
    commands (slog/cli/common.py lists them; the commands come from the app)."""
    from slog.cli.common import LONG_OPTION_MEANINGS, SHORT_FLAG_MEANINGS

    lines = ["## Option names", "",
             "Every long option means one thing in every command that has it, except these, "
             "which keep the meaning of the tool they come from:", "",
             "| option | command | meaning |", "|---|---|---|"]
    lines += [f"| `{option}` | `slog {command}` | {_cell(meaning)} |"
              for option, meanings in LONG_OPTION_MEANINGS.items()
              for command, meaning in meanings.items()]
    lines += ["", "A few short flags follow rpk and kcat, so one letter stands for different "
              "long options in different commands; the long option always says which:", "",
              "| flag | long option | meaning | commands |", "|---|---|---|---|"]
    uses = flag_uses(root)
    for flag, meanings in SHORT_FLAG_MEANINGS.items():
        for long, meaning in meanings.items():
            used_by = uses.get(flag, {}).get(long, [])
            commands = "every other command" if len(used_by) > MAX_LISTED else \
                ", ".join(f"`{c}`" for c in used_by)
            lines.append(f"| `{flag}` | `{long}` | {_cell(meaning)} | {commands} |")
    return "\n".join(lines) + "\n"


def render() -> str:
    root = root_command()
    lines = [INTRO.replace("{option_names}", render_option_names(root))]
    contexts: dict[tuple[str, ...], Any] = {}
    for path, command in walk(root):
        body, ctx = render_command(path, command, contexts.get(path[:-1]))
        contexts[path] = ctx
        lines += body
    return "\n".join(lines).rstrip() + "\n"


def completion_files() -> dict[Path, str]:
    from slog.cli.completion_cmd import SCRIPT_NAMES, script

    return {COMPLETIONS_DIR / name: script(shell) for shell, name in SCRIPT_NAMES.items()}


def main(argv: list[str]) -> None:
    if "--write" not in argv:
        sys.stdout.write(render())
        return
    DOC_PATH.write_text(render())
    COMPLETIONS_DIR.mkdir(exist_ok=True)
    for path, text in completion_files().items():
        path.write_text(text)
    print(f"wrote {DOC_PATH.relative_to(REPO)} and {COMPLETIONS_DIR.relative_to(REPO)}/",
          file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
