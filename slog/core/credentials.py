"""The SASL credentials file: user name → SCRAM mechanism → credential (hashed secrets only).

The file (``credentials.json`` in the data dir unless ``sasl.credentials.file``
names another) is JSON, written atomically with mode 0600::

    {"version": 2, "users": {"alice": {"SCRAM-SHA-256": {"salt": "...",
     "iterations": 4096, "stored_key": "...", "server_key": "..."},
     "SCRAM-SHA-512": {...}}}}

A user has one credential per SCRAM mechanism, as in Kafka (KIP-554).
Version 1 files (one SCRAM-SHA-256 credential per user) are still read.
Writers are ``slog user`` and the controller (AlterUserScramCredentials);
brokers re-read the file when it changes, so a change takes effect at once.

Brokers log in to each other as :data:`BROKER_USER` with a random secret kept
in ``inter-broker.secret`` (0600) in the data dir, which every broker of the
cluster shares. It is not weaker than the rest: whoever can read the data dir
already owns the cluster (see docs/SECURITY.md).
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TypeAlias

from slog.core.checkpoint import create_exclusively, write_atomically
from slog.core.errors import SlogError
from slog.core.names import DataDirLayout
from slog.core.scram import SCRAM_MECHANISMS, SCRAM_SHA_256, ScramCredential

# user name → mechanism → credential
Users: TypeAlias = dict[str, dict[str, ScramCredential]]
FILE_VERSION = 2

BROKER_USER = "__broker"  # the inter-broker principal; reserved, always a super user
MAX_USER_NAME = 256


class CredentialsError(SlogError, ValueError):
    """A bad user name or an unreadable credentials file."""


def credentials_path(data_dir: Path, configured: str = "") -> Path:
    return Path(configured).expanduser() if configured else DataDirLayout(data_dir).credentials_file


def validate_user_name(name: str) -> str:
    if not name or len(name) > MAX_USER_NAME:
        raise CredentialsError(f"a user name is 1 to {MAX_USER_NAME} characters long")
    if not name.isprintable() or name != name.strip():
        raise CredentialsError(f"user name {name!r} has control characters or outer spaces")
    if name.startswith("__"):
        raise CredentialsError("user names starting with '__' are reserved for slog")
    return name


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def by_mechanism(*credentials: ScramCredential) -> dict[str, ScramCredential]:
    """One user's credentials, keyed by mechanism (the value type of :data:`Users`)."""
    return {c.mechanism: c for c in credentials}


def _encode(credential: ScramCredential) -> dict[str, object]:
    return {"salt": _b64(credential.salt), "iterations": credential.iterations,
            "stored_key": _b64(credential.stored_key),
            "server_key": _b64(credential.server_key)}


def _decode(name: str, mechanism: str, entry: Mapping[str, object]) -> ScramCredential:
    if mechanism not in SCRAM_MECHANISMS:
        raise CredentialsError(f"{name!r} has a credential for unknown mechanism {mechanism!r}")
    try:
        return ScramCredential(
            salt=base64.b64decode(str(entry["salt"])),
            # A JSON value: int() raises TypeError or ValueError for a bad one, caught below.
            iterations=int(entry["iterations"]),  # type: ignore[call-overload]
            stored_key=base64.b64decode(str(entry["stored_key"])),
            server_key=base64.b64decode(str(entry["server_key"])),
            mechanism=mechanism)
    except (KeyError, TypeError, ValueError) as exc:
        raise CredentialsError(f"credentials of {name!r} are malformed: {exc}") from exc


def _decode_user(name: str, entry: Mapping[str, Mapping[str, object]], version: int
                 ) -> dict[str, ScramCredential]:
    if version == 1:  # one SCRAM-SHA-256 credential, with the mechanism inside it
        return {SCRAM_SHA_256: _decode(name, SCRAM_SHA_256, entry)}
    return {str(mechanism): _decode(name, str(mechanism), fields)
            for mechanism, fields in entry.items()}


def load_credentials(path: Path) -> Users:
    """Every user in the file; an absent file means no users."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise CredentialsError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        body = json.loads(text)
        version, users = int(body.get("version", 1)), body["users"]
        if version not in (1, FILE_VERSION):
            raise ValueError(f"unknown version {version}")
        return {str(name): _decode_user(str(name), entry, version)
                for name, entry in users.items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CredentialsError(f"{path} is not a slog credentials file: {exc}") from exc


def save_credentials(path: Path, users: Mapping[str, Mapping[str, ScramCredential]]) -> None:
    """Replace the file atomically; it is created 0600 and never world-readable.

    A user left with no credential is dropped (Kafka has no such user either)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    body = {"version": FILE_VERSION, "users": {
        name: {mechanism: _encode(c) for mechanism, c in sorted(credentials.items())}
        for name, credentials in sorted(users.items()) if credentials}}
    # Mode 0600; a temp name of its own, as two `slog user` commands may run at once.
    write_atomically(path, json.dumps(body, indent=2).encode(), unique_temp=True)


class CredentialStore:
    """The credentials file as the broker sees it, re-read whenever it changes."""

    def __init__(self, path: Path):
        self.path = path
        self._stamp: tuple[int, int, int] | None = None
        self._users: Users = {}

    def lookup(self, username: str, mechanism: str = SCRAM_SHA_256) -> ScramCredential | None:
        return self.users().get(username, {}).get(mechanism)

    def users(self) -> Users:
        """Every user as the file holds them now (do not modify the answer)."""
        try:
            stat = self.path.stat()
            stamp = (stat.st_ino, stat.st_mtime_ns, stat.st_size)  # a new file: a new inode
        except OSError:
            stamp = None
        if stamp != self._stamp:
            try:
                self._users = load_credentials(self.path)
            except CredentialsError:
                pass  # keep the last good copy while a writer replaces the file
            else:
                self._stamp = stamp
        return self._users


def inter_broker_secret(data_dir: Path) -> str:
    """The cluster's inter-broker secret, created (0600) by the first broker to start."""
    path = DataDirLayout(data_dir).inter_broker_secret
    create_exclusively(path, secrets.token_urlsafe(32).encode())  # mode 0600
    for _ in range(50):  # another broker may have created it an instant ago
        secret = path.read_text().strip()
        if secret:
            return secret
        time.sleep(0.02)
    raise CredentialsError(f"{path} is empty")
