"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554).

Both work on the credentials file ``slog user`` writes (:mod:`slog.core.credentials`),
so a user made by an admin client and one made by the CLI are the same thing.
Describing is answered by any broker from the file (all brokers share it);
altering is a controller request (other brokers forward it), so one writer
applies each change. The dispatcher checks DESCRIBE or ALTER on the cluster.

An upsertion carries what Kafka's clients send: the salt, the iteration count
and SaltedPassword (Hi(password, salt, i)), never the password. The broker
derives StoredKey and ServerKey from it. A user's changes are applied all or
none: if one of them is refused, the user's result carries the error and
nothing of that user changes; the other users' changes still apply.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any, Final

from slog.broker.dispatcher import RequestContext
from slog.core.credentials import (
    CredentialsError,
    Users,
    load_credentials,
    save_credentials,
    validate_user_name,
)
from slog.core.errors import StorageError
from slog.core.scram import (
    MIN_ITERATIONS,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramCredential,
    credential_from_salted_password,
    digest_size,
)
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode, KafkaApiError

log = logging.getLogger("slog.broker.scram")

# Kafka's ScramMechanism type codes on the wire (0 is UNKNOWN).
MECHANISM_BY_TYPE: Final = {1: SCRAM_SHA_256, 2: SCRAM_SHA_512}
TYPE_BY_MECHANISM: Final = {name: code for code, name in MECHANISM_BY_TYPE.items()}
MAX_ALTER_ITERATIONS: Final = 16384  # Kafka refuses more through this API


class Refused(KafkaApiError):
    """One user's changes cannot be applied; ``code`` goes in the user's result."""


# -- DescribeUserScramCredentials ------------------------------------------------------------
def _described(name: str, users: Users) -> dict[str, Any]:
    infos = [{"mechanism": TYPE_BY_MECHANISM[mechanism], "iterations": credential.iterations}
             for mechanism, credential in sorted(users[name].items())
             if mechanism in TYPE_BY_MECHANISM]
    return {"user": name, "error_code": ErrorCode.none, "error_message": None,
            "credential_infos": infos}


def _describe_error(name: str, error: ErrorCode, message: str) -> dict[str, Any]:
    return {"user": name, "error_code": error, "error_message": message,
            "credential_infos": []}


async def describe_user_scram_credentials(ctx: RequestContext, request: Any
                                          ) -> dict[str, Any]:
    users = ctx.broker.security.credentials.users()
    if not request.users:  # null or empty: every user
        results = [_described(name, users) for name in sorted(users) if users[name]]
    else:
        asked = Counter(user.name for user in request.users)
        results = []
        for name, times in asked.items():
            if times > 1:
                results.append(_describe_error(
                    name, ErrorCode.duplicate_resource,
                    f"user {name!r} is named more than once in the request"))
            elif not users.get(name):
                results.append(_describe_error(
                    name, ErrorCode.resource_not_found,
                    f"user {name!r} has no SCRAM credential"))
            else:
                results.append(_described(name, users))
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "results": results}


# -- AlterUserScramCredentials ---------------------------------------------------------------
@dataclass(frozen=True)
class _Change:
    user: str
    mechanism_type: int
    upsertion: Any | None  # None: a deletion


def _mechanism(change: _Change) -> str:
    mechanism = MECHANISM_BY_TYPE.get(change.mechanism_type)
    if mechanism is None:
        raise Refused(ErrorCode.unsupported_sasl_mechanism,
                      f"unknown SCRAM mechanism type {change.mechanism_type}")
    return mechanism


def _check_user_name(name: str) -> None:
    try:
        validate_user_name(name)
    except CredentialsError as exc:
        raise Refused(ErrorCode.unacceptable_credential, str(exc)) from None


def _apply(credentials: dict[str, ScramCredential], change: _Change) -> None:
    """One change to one user's credentials (mechanism → credential), or Refused."""
    mechanism = _mechanism(change)
    upsertion = change.upsertion
    if upsertion is None:
        if credentials.pop(mechanism, None) is None:
            raise Refused(ErrorCode.resource_not_found,
                          f"user {change.user!r} has no {mechanism} credential to delete")
        return
    if upsertion.iterations < MIN_ITERATIONS:
        raise Refused(ErrorCode.unacceptable_credential,
                      f"too few iterations: {upsertion.iterations} < {MIN_ITERATIONS}")
    if upsertion.iterations > MAX_ALTER_ITERATIONS:
        raise Refused(ErrorCode.unacceptable_credential,
                      f"too many iterations: {upsertion.iterations} > {MAX_ALTER_ITERATIONS}")
    if not upsertion.salt:
        raise Refused(ErrorCode.unacceptable_credential, "the salt is empty")
    if len(upsertion.salted_password) != digest_size(mechanism):
        raise Refused(ErrorCode.unacceptable_credential,
                      f"a {mechanism} salted password is {digest_size(mechanism)} bytes, "
                      f"not {len(upsertion.salted_password)}")
    credentials[mechanism] = credential_from_salted_password(
        mechanism, bytes(upsertion.salt), upsertion.iterations, bytes(upsertion.salted_password))


def _alter_user(users: Users, user: str, changes: list[_Change]) -> None:
    """Apply one user's changes to ``users``, all or none (Refused)."""
    _check_user_name(user)
    mechanisms = Counter(change.mechanism_type for change in changes)
    twice = [kind for kind, times in mechanisms.items() if times > 1]
    if twice:
        raise Refused(ErrorCode.duplicate_resource,
                      f"user {user!r} has more than one change for mechanism type {twice[0]}")
    credentials = dict(users.get(user, {}))
    for change in changes:
        _apply(credentials, change)
    if credentials:
        users[user] = credentials
    else:
        users.pop(user, None)


def _changes_by_user(request: Any) -> dict[str, list[_Change]]:
    by_user: dict[str, list[_Change]] = {}
    for deletion in request.deletions:
        by_user.setdefault(deletion.name, []).append(
            _Change(deletion.name, deletion.mechanism, None))
    for upsertion in request.upsertions:
        by_user.setdefault(upsertion.name, []).append(
            _Change(upsertion.name, upsertion.mechanism, upsertion))
    return by_user


def _result(user: str, error: ErrorCode = ErrorCode.none, message: str | None = None
            ) -> dict[str, Any]:
    return {"user": user, "error_code": error, "error_message": message}


async def alter_user_scram_credentials(ctx: RequestContext, request: Any) -> dict[str, Any]:
    by_user = _changes_by_user(request)
    if ctx.broker.controller is None:  # only when this broker could not forward it
        return {"throttle_time": 0, "results": [
            _result(user, ErrorCode.not_controller, "this broker is not the controller")
            for user in by_user]}
    path = ctx.broker.security.credentials.path
    try:
        users = load_credentials(path)
    except CredentialsError as exc:
        log.warning("AlterUserScramCredentials: %s", exc)
        return {"throttle_time": 0, "results": [
            _result(user, ErrorCode.unknown_server_error, str(exc)) for user in by_user]}
    results = []
    changed = False
    for user, changes in by_user.items():
        try:
            _alter_user(users, user, changes)
        except Refused as exc:
            results.append(_result(user, exc.code, str(exc)))
        else:
            results.append(_result(user))
            changed = True
    if changed:
        # No await between the read and this write: the controller's changes never interleave.
        try:
            save_credentials(path, users)
        except (OSError, StorageError) as exc:
            log.warning("AlterUserScramCredentials: cannot write %s: %s", path, exc)
            return {"throttle_time": 0, "results": [
                _result(r["user"], ErrorCode.unknown_server_error, f"cannot write: {exc}")
                if r["error_code"] == ErrorCode.none else r for r in results]}
        log.info("SCRAM credentials changed for %s",
                 ", ".join(r["user"] for r in results if r["error_code"] == ErrorCode.none))
    return {"throttle_time": 0, "results": results}


HANDLERS = {
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: alter_user_scram_credentials,
}
