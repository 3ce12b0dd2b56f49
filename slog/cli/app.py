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
from collections.abc import Iterable
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

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
    """Move examples to the epilog, mark variadic arguments and give every command with
    --bootstrap the TLS options, recursively (idempotent)."""
    import typer.core

    if command.help and command.epilog is None:
        help_text, examples = split_examples(command.help)
        if examples:
            command.help = help_text
            # click rewraps epilog paragraphs unless they start with \b; rich keeps lines.
            keep_lines = "" if typer.core.HAS_RICH else "\b\n"
            command.epilog = keep_lines + "Examples:\n" + "\n".join(f"  {e}" for e in examples)
    params = getattr(command, "params", None)
    if params is not None and any(p.name == "bootstrap" for p in params) \
            and not any(p.name == "tls" for p in params):
        from slog.cli.common import tls_options

        params.extend(tls_options())  # every command that connects speaks TLS the same way
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


# Every subcommand, in help order: name → (module in slog.cli, attribute, kind). A
# "group" attribute is a Typer app; a "command" attribute is a function. A run imports
# only the module of the command it runs (see ``app_for_run``).
SUBCOMMANDS: dict[str, tuple[str, str, str]] = {
    "broker": ("broker_cmd", "app", "group"),
    "cluster": ("cluster_cmd", "app", "group"),
    "chaos": ("chaos_cmd", "app", "group"),
    "group": ("group_cmd", "app", "group"),
    "topic": ("topic_cmd", "app", "group"),
    "produce": ("produce_cmd", "produce", "command"),
    "consume": ("consume_cmd", "consume", "command"),
    "demo": ("demo", "demo", "command"),
    "dashboard": ("dashboard_cmd", "dashboard", "command"),
    "reassign": ("reassign_cmd", "app", "group"),
    "bench": ("bench_cmd", "app", "group"),
    "dump-log": ("dumplog_cmd", "dump_log", "command"),
    "get-offsets": ("offsets_cmd", "get_offsets", "command"),
    "log-dirs": ("log_dirs_cmd", "log_dirs", "command"),
    "spark-export": ("spark_cmd", "spark_export", "command"),
    "elect-leaders": ("elect_cmd", "elect_leaders", "command"),
    "config": ("config_cmd", "app", "group"),
    "completion": ("completion_cmd", "app", "group"),
    "user": ("user_cmd", "app", "group"),
    "acl": ("acl_cmd", "app", "group"),
    "quota": ("quota_cmd", "app", "group"),
    "transactions": ("transactions_cmd", "app", "group"),
    # Aliases: the design card's names, listed in their own help panel.
    "preferred-leader-election": ("elect_cmd", "preferred_leader_election", "command"),
    "describe-group": ("group_cmd", "describe", "command"),
}
ALIAS_HELP = {
    "preferred-leader-election":
        "Alias of `slog elect-leaders --type preferred`.\n\n"
        "Examples:\n  slog preferred-leader-election orders payments\n"
        "  slog preferred-leader-election -r 'orders-.*'",
    "describe-group":
        "Alias of `slog group describe`: offsets and lag, --members or --state.\n\n"
        "Example: slog describe-group billing --members",
}


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


def build_app(names: Iterable[str] | None = None) -> typer.Typer:
    """The ``slog`` app with the named subcommands (all of them by default)."""
    from importlib import import_module

    root = typer.Typer(name="slog", cls=SlogGroup, no_args_is_help=True,
                       add_completion=False, pretty_exceptions_enable=False)
    root.callback()(_global_options)
    wanted = set(SUBCOMMANDS if names is None else names)
    for name, (module, attribute, kind) in SUBCOMMANDS.items():
        if name not in wanted:
            continue
        target = getattr(import_module(f"slog.cli.{module}"), attribute)
        if kind == "group":
            root.add_typer(target, name=name)
        elif name in ALIAS_HELP:
            root.command(name=name, rich_help_panel=ALIAS_PANEL, help=ALIAS_HELP[name])(target)
        else:
            root.command(name=name)(target)
    return root


def __getattr__(name: str) -> Any:
    """``app``, the whole command tree, is built on first use (tests, docs, completion)."""
    if name == "app":
        globals()["app"] = built = build_app()
        return built
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _root_command_name(argv: list[str]) -> str | None:
    """The subcommand named on the command line, skipping the root's own options."""
    words = iter(argv)
    for word in words:
        if word == "--profile":
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def app_for_run(argv: list[str]) -> typer.Typer:
    """The command tree a run needs. Typer builds the click tree of every registered
    command on each run, evaluating every annotation, and each command module has imports
    of its own: a run gets only the subcommand it names. The root's own help (and an
    unknown name, so click's error is the usual one) gets every command without its
    parameters: the listing needs names and summaries only."""
    import copy

    name = _root_command_name(argv)
    if name in SUBCOMMANDS:
        _load_kio_without_asyncio()  # before the command's module imports the client
        return build_app([name])
    whole = build_app()

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

    whole.registered_commands = [summary_only(c) for c in whole.registered_commands]
    whole.registered_groups = [without_subcommands(g) for g in whole.registered_groups]
    return whole


def inspect_doc(callback: Any) -> str | None:
    import inspect

    return inspect.getdoc(callback) if callback is not None else None


def _no_parameters() -> None:
    """Stands in for a command while only the root's help is printed."""


def _load_kio_without_asyncio() -> None:
    """Load kio's serializers without asyncio, which costs ~45 ms: a third of what a short
    command like `slog topic list` spends beyond the interpreter's own start-up.

    kio.serial.writers imports asyncio only to spell a type alias with
    ``asyncio.StreamWriter``. It is loaded here against a stand-in module holding just
    that name, which is removed again at once: a command that needs an event loop
    (dashboard, bench, chaos) still gets the real asyncio from its own import.
    """
    if "asyncio" in sys.modules or "kio.serial" in sys.modules:
        return
    import types

    stand_in = types.ModuleType("asyncio")
    # A bare module: the one name kio.serial reads from it is set here.
    stand_in.StreamWriter = type("StreamWriter", (), {})  # type: ignore[attr-defined]
    sys.modules["asyncio"] = stand_in
    try:
        import kio.serial  # noqa: F401
    finally:
        if sys.modules.get("asyncio") is stand_in:
            del sys.modules["asyncio"]


def _prepare_process() -> typer.Typer:
    """Process-wide settings for a real run (not for in-process tests); the app to run."""
    import typer.core

    # Plain help when piped or NO_COLOR, as for tables (and rich's help renderer is the
    # slowest import of `slog --help`).
    if not sys.stdout.isatty() or os.environ.get("NO_COLOR"):
        typer.core.HAS_RICH = False
    # kio imports hypothesis (a test tool, ~0.1 s) only to register strategies when it is
    # installed; the CLI never needs them.
    if "hypothesis" not in sys.modules:
        sys.modules["hypothesis"] = None  # type: ignore[assignment]  # None: import fails fast
    if os.environ.get("_SLOG_COMPLETE"):
        from typer._completion_classes import completion_init

        completion_init()
        return build_app()
    return app_for_run(sys.argv[1:])


def _end_quietly_if_stdout_closed(exc: SystemExit) -> None:
    """Click answers a broken stdout (``slog dump-log ... | head``) with status 1; Unix
    tools end with 0 there. Click marks that case by wrapping stdout, which is how it
    is told apart from a real failure. Commands talking to brokers handle it earlier
    (``common.client_errors``)."""
    # By name: typer ships its own copy of click, so the class is not click's.
    if exc.code == 1 and type(sys.stdout).__name__ == "PacifyFlushWrapper":
        from slog.cli.output import discard_stdout

        discard_stdout()
        raise SystemExit(0) from None


def main() -> None:
    """Entry point: no traceback reaches the user unless --debug or SLOG_DEBUG is set."""
    from slog.cli.common import EXIT_FAILURE, debug_enabled

    run = _prepare_process()
    try:
        run(prog_name="slog")
    except SystemExit as exc:
        _end_quietly_if_stdout_closed(exc)
        raise
    except Exception as exc:
        if debug_enabled():
            raise
        print(f"error: unexpected {type(exc).__name__}: {exc}", file=sys.stderr)
        print("hint: rerun with --debug for the traceback, and please report it",
              file=sys.stderr)
        raise SystemExit(EXIT_FAILURE) from None
