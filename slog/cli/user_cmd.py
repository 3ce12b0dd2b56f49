"""``slog user add|list|delete``: SASL users in the credentials file brokers read.

A user gets a SCRAM-SHA-256 and a SCRAM-SHA-512 credential (salt, iterations,
StoredKey, ServerKey; never the password); PLAIN logins are checked against
them too. Admin clients manage the same file through AlterUserScramCredentials.
Brokers pick changes up at the next login, without a restart.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from slog.cli.common import EXIT_NOT_FOUND, EXIT_USAGE, DataDirOption, default_data_dir, fail
from slog.cli.output import OutputFormat, OutputOption, emit

app = typer.Typer(help="Add, list and delete SASL users (PLAIN, SCRAM-SHA-256/512).",
                  no_args_is_help=True)

CredentialsFileOption = Annotated[Path | None, typer.Option(
    "--credentials-file", envvar="SLOG_CREDENTIALS_FILE",
    help="The brokers' sasl.credentials.file [default: credentials.json in the data dir].")]
UserArgument = Annotated[str, typer.Argument(help="User name (the principal is User:NAME).")]


def _path(data_dir: Path | None, credentials_file: Path | None, create: bool = False) -> Path:
    """The credentials file; ``create``: make the data dir (0700) if it is missing."""
    if credentials_file is not None:
        return credentials_file.expanduser()
    from slog.core.credentials import credentials_path
    from slog.core.errors import DataDirError
    from slog.core.names import ensure_data_dir

    root = (data_dir or default_data_dir()).expanduser()
    try:
        return credentials_path(ensure_data_dir(root) if create else root)
    except DataDirError as exc:
        fail(str(exc))


def _read_password(from_stdin: bool) -> str:
    if from_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    elif sys.stdin.isatty():
        password = typer.prompt("Password", hide_input=True, confirmation_prompt=True)
    else:
        fail("no terminal to prompt for a password", hint="pipe it in with --password-stdin",
             code=EXIT_USAGE)
    if not password:
        fail("the password is empty", code=EXIT_USAGE)
    return password


@app.command("add")
def add(
    name: UserArgument,
    password_stdin: Annotated[bool, typer.Option(
        "--password-stdin", help="Read the password from the first line of stdin.")] = False,
    iterations: Annotated[int, typer.Option(
        help="SCRAM iterations (4096 to 1000000).")] = 4096,
    data_dir: DataDirOption = None,
    credentials_file: CredentialsFileOption = None,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Add a user, or set a new password for one.

    Example: echo 's3cret' | slog user add alice --password-stdin
    """
    from slog.core.credentials import (
        CredentialsError,
        by_mechanism,
        load_credentials,
        save_credentials,
        validate_user_name,
    )
    from slog.core.errors import StorageError
    from slog.core.scram import SCRAM_MECHANISMS, derive_credential

    try:
        validate_user_name(name)
        path = _path(data_dir, credentials_file, create=True)
        users = load_credentials(path)
        password = _read_password(password_stdin)
        credentials = by_mechanism(*(derive_credential(password, iterations=iterations,
                                                       mechanism=m) for m in SCRAM_MECHANISMS))
    except (CredentialsError, ValueError) as exc:
        fail(str(exc), code=EXIT_USAGE)
    status = "updated" if name in users else "added"
    users[name] = credentials
    try:
        save_credentials(path, users)
    except StorageError as exc:
        fail(str(exc))
    emit([{"user": name, "status": status, "file": str(path)}], ["user", "status", "file"],
         output)


@app.command("list")
def list_users(
    data_dir: DataDirOption = None,
    credentials_file: CredentialsFileOption = None,
    output: OutputOption = OutputFormat.table,
) -> None:
    """List the users and their SCRAM parameters (never a secret).

    Example: slog user list -o json
    """
    from slog.core.credentials import CredentialsError, load_credentials

    try:
        users = load_credentials(_path(data_dir, credentials_file))
    except CredentialsError as exc:
        fail(str(exc))
    rows = [{"user": name, "mechanism": mechanism, "iterations": c.iterations}
            for name, credentials in sorted(users.items())
            for mechanism, c in sorted(credentials.items())]
    emit(rows, ["user", "mechanism", "iterations"], output)


@app.command("delete")
def delete(
    name: UserArgument,
    data_dir: DataDirOption = None,
    credentials_file: CredentialsFileOption = None,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Delete a user (its open connections stay open until they close).

    Example: slog user delete alice
    """
    from slog.core.credentials import CredentialsError, load_credentials, save_credentials

    path = _path(data_dir, credentials_file)
    try:
        users = load_credentials(path)
    except CredentialsError as exc:
        fail(str(exc))
    if users.pop(name, None) is None:
        fail(f"no user {name!r} in {path}", hint="list them with `slog user list`",
             code=EXIT_NOT_FOUND)
    save_credentials(path, users)
    emit([{"user": name, "status": "deleted"}], ["user", "status"], output)
