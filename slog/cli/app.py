"""The ``slog`` command: subcommand groups are registered here.

Global options (``--profile``, ``--debug``) live on the root callback. The root
group's class finishes every command's help the same way, so commands added by
one registration line get it too: the "Examples:" paragraph of a docstring
becomes the help epilog, and aliases are listed in their own help panel.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from slog.cli import (
    acl_cmd,
    bench_cmd,
    broker_cmd,
    chaos_cmd,
    cluster_cmd,
    completion_cmd,
    config_cmd,
    consume_cmd,
    dashboard_cmd,
    demo,
    dumplog_cmd,
    elect_cmd,
    group_cmd,
    offsets_cmd,
    produce_cmd,
    reassign_cmd,
    spark_cmd,
    topic_cmd,
    user_cmd,
)

ALIAS_PANEL = "Aliases"
# "Example:", "Examples:", "Example (the soak):" ... at the start of a paragraph.
EXAMPLES_HEADING = re.compile(r"Examples?\b[^:\n]*:")


def split_examples(help_text: str) -> tuple[str, list[str]]:
    """A docstring without its "Example(s):" paragraph, and that paragraph's examples."""
    import inspect

    paragraphs = inspect.cleandoc(help_text).split("\n\n")
    kept, examples = [], []
    for paragraph in paragraphs:
        heading = EXAMPLES_HEADING.match(paragraph)
        if heading is None:
            kept.append(paragraph)
            continue
        examples += [line.strip() for line in paragraph[heading.end():].splitlines()
                     if line.strip()]
    return "\n\n".join(kept), examples


def finish_help(command: Any) -> None:
    """Move examples to the epilog and mark variadic arguments, recursively (idempotent)."""
    import typer.core

    if command.help and command.epilog is None:
        help_text, examples = split_examples(command.help)
        if examples:
            command.help = help_text
            # click rewraps epilog paragraphs unless they start with \b; rich keeps lines.
            keep_lines = "" if typer.core.HAS_RICH else "\b\n"
            command.epilog = keep_lines + "Examples:\n" + "\n".join(f"  {e}" for e in examples)
    for param in getattr(command, "params", ()):
        # An argument taking several values says so ("TOPIC..."): typer prints a given
        # metavar as it is, without the "..." it adds to names.
        if param.param_type_name == "argument" and param.nargs == -1 and param.metavar \
                and not param.metavar.endswith("..."):
            param.metavar += "..."
    for sub in getattr(command, "commands", {}).values():
        finish_help(sub)


class SlogGroup(TyperGroup):
    """The root group: finishes the help of the whole command tree once it is built."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        finish_help(self)


app = typer.Typer(
    name="slog",
    cls=SlogGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _global_options(
    ctx: typer.Context,
    profile: Annotated[str | None, typer.Option(
        "--profile", envvar="SLOG_PROFILE", show_default=False,
        help="Use this profile of the config file (slog.toml or "
             "~/.config/slog/config.toml).")] = None,
    debug: Annotated[bool, typer.Option(
        "--debug", help="Show tracebacks instead of one-line errors (or SLOG_DEBUG=1).")
    ] = False,
) -> None:
    """slog: a Kafka-compatible commit log for one machine.

    Settings come from flags, then SLOG_BOOTSTRAP / SLOG_DATA_DIR, then the
    config file's profile, then the defaults; `slog config show` explains them.
    Exit codes: 0 ok, 1 failure or unhealthy, 2 usage, 3 no broker reachable,
    4 not found.

    Examples:
      slog cluster up
      slog topic list -o json
      slog completion install bash
    """
    from slog.cli.common import DEBUG, EXIT_USAGE, fail
    from slog.cli.config import ConfigFileError, default_map, load_profile

    if debug:
        DEBUG["on"] = True
    try:
        loaded = load_profile(profile)
    except ConfigFileError as exc:
        fail(str(exc), hint="see `slog config show --help` for the file format",
             code=EXIT_USAGE)
    ctx.meta["slog.profile"] = loaded
    if loaded.values:
        ctx.default_map = default_map(ctx.command, loaded.values)


app.add_typer(broker_cmd.app, name="broker")
app.add_typer(cluster_cmd.app, name="cluster")
app.add_typer(chaos_cmd.app, name="chaos")
app.add_typer(group_cmd.app, name="group")
app.add_typer(topic_cmd.app, name="topic")
app.command(name="produce")(produce_cmd.produce)
app.command(name="consume")(consume_cmd.consume)
app.command(name="demo")(demo.demo)
app.command(name="dashboard")(dashboard_cmd.dashboard)
app.add_typer(reassign_cmd.app, name="reassign")
app.add_typer(bench_cmd.app, name="bench")
app.command(name="dump-log")(dumplog_cmd.dump_log)
app.command(name="get-offsets")(offsets_cmd.get_offsets)
app.command(name="spark-export")(spark_cmd.spark_export)
app.command(name="elect-leaders")(elect_cmd.elect_leaders)
app.add_typer(config_cmd.app, name="config")
app.add_typer(completion_cmd.app, name="completion")
app.add_typer(user_cmd.app, name="user")
app.add_typer(acl_cmd.app, name="acl")

# Aliases: the design card's names, listed in their own help panel.
app.command(name="preferred-leader-election", rich_help_panel=ALIAS_PANEL,
            help="Alias of `slog elect-leaders --type preferred`.\n\n"
                 "Examples:\n  slog preferred-leader-election orders payments\n"
                 "  slog preferred-leader-election -r 'orders-.*'")(
    elect_cmd.preferred_leader_election)
app.command(name="describe-group", rich_help_panel=ALIAS_PANEL,
            help="Alias of `slog group describe`: offsets and lag, --members or --state.\n\n"
                 "Example: slog describe-group billing --members")(group_cmd.describe)


def _root_command_name(argv: list[str]) -> str | None:
    """The subcommand named on the command line, skipping the root's own options."""
    words = iter(argv)
    for word in words:
        if word == "--profile":
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def _build_only_what_runs(argv: list[str]) -> None:
    """Typer builds the whole click tree on every run, evaluating every annotation of every
    command; a run needs one subtree. Keep only the named command, or, for the root's own
    help, every command without its parameters (the listing needs names and summaries)."""
    import copy

    name = _root_command_name(argv)
    commands, groups = app.registered_commands, app.registered_groups
    names = {c.name for c in commands} | {g.name for g in groups}
    if name is not None:
        if name in names:
            app.registered_commands = [c for c in commands if c.name == name]
            app.registered_groups = [g for g in groups if g.name == name]
        return

    def summary_only(command: Any) -> Any:
        stub = copy.copy(command)
        stub.help = command.help or inspect_doc(command.callback)
        stub.callback = _no_parameters
        return stub

    def without_subcommands(group: Any) -> Any:
        stub, sub = copy.copy(group), copy.copy(group.typer_instance)
        sub.registered_commands, sub.registered_groups = [], []
        stub.typer_instance = sub
        return stub

    app.registered_commands = [summary_only(c) for c in commands]
    app.registered_groups = [without_subcommands(g) for g in groups]


def inspect_doc(callback: Any) -> str | None:
    import inspect

    return inspect.getdoc(callback) if callback is not None else None


def _no_parameters() -> None:
    """Stands in for a command while only the root's help is printed."""


def _prepare_process() -> None:
    """Process-wide settings for a real run (not for in-process tests)."""
    import typer.core

    # Plain help when piped or NO_COLOR, as for tables (and rich's help renderer is the
    # slowest import of `slog --help`).
    if not sys.stdout.isatty() or os.environ.get("NO_COLOR"):
        typer.core.HAS_RICH = False
    # kio imports hypothesis (a test tool, ~0.1 s) only to register strategies when it is
    # installed; the CLI never needs them.
    if "hypothesis" not in sys.modules:
        sys.modules["hypothesis"] = None  # type: ignore[assignment]
    if os.environ.get("_SLOG_COMPLETE"):
        from typer._completion_classes import completion_init

        completion_init()
    else:
        _build_only_what_runs(sys.argv[1:])


def main() -> None:
    """Entry point: no traceback reaches the user unless --debug or SLOG_DEBUG is set."""
    from slog.cli.common import EXIT_FAILURE, debug_enabled

    _prepare_process()
    try:
        app(prog_name="slog")
    except Exception as exc:
        if debug_enabled():
            raise
        print(f"error: unexpected {type(exc).__name__}: {exc}", file=sys.stderr)
        print("hint: rerun with --debug for the traceback, and please report it",
              file=sys.stderr)
        raise SystemExit(EXIT_FAILURE) from None
