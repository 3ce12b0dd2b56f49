"""The broker's security settings and the per-connection session.

* :class:`Security` is read once from the broker config: is SASL required on
  the listener (``security.protocol=SASL_PLAINTEXT``), which mechanisms, where
  the credentials are, is the ACL authorizer on (``authorizer.class.name``),
  and how this broker logs in to the others.
* :class:`Session` is one connection's state: the SASL exchange in progress,
  and once it succeeds, the authenticated principal.

Inter-broker connections (replica fetchers, AlterPartition to the controller)
authenticate as ``User:__broker`` with the cluster's inter-broker secret
(``inter-broker.secret`` in the shared data dir); that principal is always a
super user. No config file has to carry a broker password. The same secret
keys the signature of forwarded requests (:mod:`slog.broker.forwarding`), so a
cluster with ACLs but without SASL can forward too.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from slog.broker.authorizer import AuthorizerSettings, authorize
from slog.broker.login_throttle import FailedLoginThrottle
from slog.core.acls import AclBinding, Operation, ResourceType
from slog.core.config import BrokerConfig
from slog.core.credentials import (
    BROKER_USER,
    CredentialStore,
    credentials_path,
    inter_broker_secret,
)
from slog.core.listeners import configured_listeners, inter_broker_listener
from slog.core.scram import (
    PLAIN,
    SCRAM_MECHANISMS,
    SCRAM_SHA_256,
    SaslError,
    SaslLogin,
    ScramCredential,
    ScramServer,
    check_password,
    derive_credential,
    parse_plain_token,
)

ANONYMOUS = "User:ANONYMOUS"
BROKER_PRINCIPAL = f"User:{BROKER_USER}"


@dataclass
class Session:
    """One connection's authentication state."""

    principal: str = ANONYMOUS
    host: str = "*"
    authenticated: bool = False
    mechanism: str | None = None  # chosen by SaslHandshake
    raw_tokens: bool = False  # SaslHandshake v0: the tokens come unframed (no headers)
    close_after_response: bool = False  # failed authentication: answer, then close
    # Set while a long-polling Fetch waits on this connection: a request queued
    # behind it ends the wait (answers are in order, so it would wait too).
    end_long_poll: Callable[[], None] | None = field(default=None, repr=False)
    scram: ScramServer | None = field(default=None, repr=False)
    listener: str = ""  # the listener the connection arrived on (Metadata answers for it)
    sasl_required: bool = False  # a SASL_PLAINTEXT or SASL_SSL listener
    # Client quotas: nothing more is read from the connection until then (KIP-219),
    # on time.monotonic()'s clock; set after a throttled request (slog.broker.quotas).
    muted_until: float = 0.0
    # A produce byte-rate quota applies: its produce requests are handled one at a
    # time, as Kafka handles every request, so each throttle is felt by the next one.
    # Looked up again at every request (a quota may be set while the client is connected);
    # None until the connection's first request has been looked up: a client's first
    # produce requests may arrive together, before any of them is dispatched.
    produce_quota: bool | None = None


class Security:
    def __init__(self, config: BrokerConfig):
        listeners = configured_listeners(config)
        # SASL on any listener; which connections must log in is Session.sasl_required.
        self.sasl_enabled = any(e.sasl for e in listeners)
        inter_broker = inter_broker_listener(config, listeners)
        self.inter_broker = next(e for e in listeners if e.name == inter_broker)
        self.mechanisms = tuple(config.values["sasl.enabled.mechanisms"].split(","))
        self.credentials = CredentialStore(
            credentials_path(Path(config.data_dir), config.values["sasl.credentials.file"]))
        self.authorizer_enabled = bool(config.values["authorizer.class.name"])
        settings = AuthorizerSettings.parse(config.values["super.users"],
                                            config.get_bool("allow.everyone.if.no.acl.found"))
        self.settings = AuthorizerSettings(settings.super_users | {BROKER_PRINCIPAL},
                                           settings.allow_everyone_if_no_acl_found)
        self._data_dir = Path(config.data_dir)
        self._broker_credentials: dict[str, ScramCredential] = {}
        self.inter_broker_login: SaslLogin | None = None
        self.envelope_key: bytes | None = None  # signs forwarded principals (forwarding.py)
        self.login_throttle = FailedLoginThrottle(
            config.get_int("connection.failed.authentication.delay.max.ms") / 1000)

    def load_inter_broker_secret(self) -> None:
        """Read (or create) the cluster's inter-broker secret: start-up, after the data dir.

        Only a cluster where principals matter (SASL or an authorizer) needs one."""
        if not (self.sasl_enabled or self.authorizer_enabled):
            return
        secret = inter_broker_secret(self._data_dir)
        self.envelope_key = hashlib.sha256(b"slog envelope key\0" + secret.encode()).digest()
        if not self.sasl_enabled:
            return
        self._broker_credentials = {m: derive_credential(secret, mechanism=m)
                                    for m in SCRAM_MECHANISMS}
        if not self.inter_broker.sasl:
            return  # brokers may log in on a SASL listener, but talk to each other without
        mechanism = next((m for m in SCRAM_MECHANISMS if m in self.mechanisms), PLAIN)
        self.inter_broker_login = SaslLogin(mechanism, BROKER_USER, secret)

    def lookup(self, username: str, mechanism: str = SCRAM_SHA_256) -> ScramCredential | None:
        if username == BROKER_USER:
            return self._broker_credentials.get(mechanism)
        return self.credentials.lookup(username, mechanism)

    def plain_credential(self, username: str) -> ScramCredential | None:
        """What a PLAIN password is checked against: any of the user's SCRAM credentials."""
        for mechanism in SCRAM_MECHANISMS:
            credential = self.lookup(username, mechanism)
            if credential is not None:
                return credential
        return None

    # -- SASL ------------------------------------------------------------------------
    def authenticate(self, session: Session, token: bytes) -> bytes:
        """One SaslAuthenticate step; raises SaslError when authentication fails.

        Sets ``session.authenticated`` and the principal once the exchange is done.
        """
        if session.mechanism == PLAIN:
            username, password = parse_plain_token(token)
            credential = self.plain_credential(username)
            if credential is None or not check_password(credential, password):
                raise SaslError(f"authentication failed for {username!r}")
            self._succeed(session, username)
            return b""
        if session.mechanism in SCRAM_MECHANISMS:
            if session.scram is None:
                mechanism = session.mechanism
                session.scram = ScramServer(lambda user: self.lookup(user, mechanism),
                                            mechanism=mechanism)
            answer = session.scram.step(token)
            if session.scram.done:
                self._succeed(session, session.scram.username)
            return answer
        raise SaslError("no SASL mechanism was chosen")

    async def authenticate_off_loop(self, session: Session, token: bytes) -> bytes:
        """:meth:`authenticate`, with a PLAIN password check (one PBKDF2, ~5 ms at 4096
        iterations) on a worker thread so failed logins cannot stall the event loop;
        hashlib releases the GIL while it hashes. SCRAM steps cost no PBKDF2.

        A failure is answered (SaslError raised) only after the delay its source
        address has earned (:mod:`slog.broker.login_throttle`); success at once."""
        try:
            if session.mechanism == PLAIN:
                return await asyncio.to_thread(self.authenticate, session, token)
            return self.authenticate(session, token)
        except SaslError:
            delay = self.login_throttle.failure_delay(session.host)
            if delay:
                await asyncio.sleep(delay)
            raise

    @staticmethod
    def _succeed(session: Session, username: str) -> None:
        session.principal = f"User:{username}"
        session.authenticated = True
        session.scram = None
        session.raw_tokens = False
        session.produce_quota = None  # its quotas are the new principal's

    # -- ACLs ------------------------------------------------------------------------
    def allows(self, acls: set[AclBinding], session: Session | None, operation: Operation,
               resource_type: ResourceType, name: str) -> bool:
        if not self.authorizer_enabled:
            return True
        session = session or Session()
        return authorize(acls, self.settings, session.principal, session.host, operation,
                         resource_type, name)


def exposure_warning(host: str, sasl_enabled: bool, client_auth: bool = False) -> str | None:
    """The warning for a listener reachable from other machines without authentication
    (SASL, or TLS with ``ssl.client.auth=required``)."""
    if sasl_enabled or client_auth or _is_loopback(host):
        return None
    where = "all interfaces" if host in ("", "0.0.0.0", "::") else host
    return (f"WARNING: the listener is bound to {where} without authentication: anyone who "
            "can reach this port can read, write and delete every topic. Bind to 127.0.0.1 "
            "or set security.protocol=SASL_PLAINTEXT or SASL_SSL (see docs/SECURITY.md).")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to a public address
