"""SCRAM-SHA-256/512 (RFC 5802 / RFC 7677) and SASL/PLAIN messages, with no I/O.

Both sides live here because the broker (server side), the replica fetchers and
slog's client (client side) all need them. A credential keeps only the salt,
the iteration count, StoredKey and ServerKey: enough to verify a client proof
and to prove the server to the client, never enough to log in. PLAIN is
checked against the same credential (the password is salted and hashed and
compared to StoredKey), so no plaintext password is ever stored.

Not implemented: SASLprep normalisation of passwords (passwords are used as
UTF-8 as given, which matches SASLprep for ASCII) and channel binding
(``n,,`` only; there is no TLS to bind to).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable, Generator
from dataclasses import dataclass

from slog.core.errors import SlogError

SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
PLAIN = "PLAIN"
SCRAM_MECHANISMS = (SCRAM_SHA_256, SCRAM_SHA_512)
MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)
_HASH_NAMES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}
DEFAULT_ITERATIONS = 4096  # RFC 7677's minimum, and Kafka's default
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 1_000_000  # a stored count above this is refused, not computed
MAX_TOKEN_BYTES = 8192  # a SASL token larger than this is hostile
_GS2_HEADER = "n,,"


class SaslError(SlogError):
    """Authentication failed or a SASL message was malformed."""


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes
    mechanism: str = SCRAM_SHA_256


def _hash_name(mechanism: str) -> str:
    try:
        return _HASH_NAMES[mechanism]
    except KeyError:
        raise ValueError(f"{mechanism!r} is not a SCRAM mechanism") from None


def digest_size(mechanism: str) -> int:
    """The length of a salted password (and of each key) for ``mechanism``."""
    return hashlib.new(_hash_name(mechanism)).digest_size


def _hmac(key: bytes, message: bytes, hash_name: str) -> bytes:
    return hmac.new(key, message, hash_name).digest()


def _digest(data: bytes, hash_name: str) -> bytes:
    return hashlib.new(hash_name, data).digest()


def _salted_password(password: str, salt: bytes, iterations: int,
                     hash_name: str) -> bytes:
    return hashlib.pbkdf2_hmac(hash_name, password.encode("utf-8"), salt, iterations)


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def credential_from_salted_password(mechanism: str, salt: bytes, iterations: int,
                                    salted_password: bytes) -> ScramCredential:
    """The stored form of a password a client already salted (AlterUserScramCredentials
    carries SaltedPassword, never the password)."""
    hash_name = _hash_name(mechanism)
    client_key = _hmac(salted_password, b"Client Key", hash_name)
    return ScramCredential(salt, iterations, _digest(client_key, hash_name),
                           _hmac(salted_password, b"Server Key", hash_name), mechanism)


def derive_credential(password: str, salt: bytes | None = None,
                      iterations: int = DEFAULT_ITERATIONS,
                      mechanism: str = SCRAM_SHA_256) -> ScramCredential:
    """The stored form of ``password`` (a fresh random salt unless one is given)."""
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}")
    salt = secrets.token_bytes(16) if salt is None else salt
    salted = _salted_password(password, salt, iterations, _hash_name(mechanism))
    return credential_from_salted_password(mechanism, salt, iterations, salted)


def check_password(credential: ScramCredential, password: str) -> bool:
    """Whether ``password`` is the one ``credential`` was derived from (for PLAIN)."""
    if not MIN_ITERATIONS <= credential.iterations <= MAX_ITERATIONS:
        return False
    hash_name = _hash_name(credential.mechanism)
    salted = _salted_password(password, credential.salt, credential.iterations, hash_name)
    stored = _digest(_hmac(salted, b"Client Key", hash_name), hash_name)
    return hmac.compare_digest(stored, credential.stored_key)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError) as exc:
        raise SaslError("bad base64 in a SCRAM message") from exc


def _escape_name(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _unescape_name(text: str) -> str:
    if "=" in text.replace("=3D", "").replace("=2C", ""):
        raise SaslError("bad escape in a SCRAM user name")
    return text.replace("=2C", ",").replace("=3D", "=")


def _attributes(message: str) -> dict[str, str]:
    """``a=1,b=2`` into a dict (the first occurrence of each key wins)."""
    fields: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise SaslError(f"malformed SCRAM attribute {part[:40]!r}")
        fields.setdefault(key, value)
    return fields


def _text(token: bytes) -> str:
    if len(token) > MAX_TOKEN_BYTES:
        raise SaslError("SASL token too large")
    try:
        return token.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SaslError("SASL token is not UTF-8") from exc


# -- PLAIN (RFC 4616) ------------------------------------------------------------------
def plain_token(username: str, password: str) -> bytes:
    return b"\0" + username.encode("utf-8") + b"\0" + password.encode("utf-8")


def parse_plain_token(token: bytes) -> tuple[str, str]:
    """(username, password) from ``[authzid] NUL authcid NUL passwd``."""
    parts = _text(token).split("\0")
    if len(parts) != 3 or not parts[1]:
        raise SaslError("malformed PLAIN token")
    authzid, username, password = parts
    if authzid and authzid != username:
        raise SaslError("PLAIN authorization id differs from the user name")
    return username, password


# -- SCRAM client ----------------------------------------------------------------------
class ScramClient:
    """The client's two messages, and the check of the server's signature."""

    def __init__(self, username: str, password: str, nonce: str | None = None,
                 mechanism: str = SCRAM_SHA_256):
        self._hash = _hash_name(mechanism)
        self._password = password
        self._nonce = nonce or secrets.token_urlsafe(18)
        self._first_bare = f"n={_escape_name(username)},r={self._nonce}"
        self._server_signature = b""

    def first_message(self) -> bytes:
        return (_GS2_HEADER + self._first_bare).encode("utf-8")

    def final_message(self, server_first: bytes) -> bytes:
        text = _text(server_first)
        fields = _attributes(text)
        nonce, salt, iterations = fields.get("r", ""), fields.get("s"), fields.get("i", "")
        if not nonce.startswith(self._nonce) or salt is None or not iterations.isdigit():
            raise SaslError("bad SCRAM server-first message")
        if not MIN_ITERATIONS <= int(iterations) <= MAX_ITERATIONS:
            raise SaslError(f"server asked for {iterations} SCRAM iterations")
        hash_name = self._hash
        salted = _salted_password(self._password, _unb64(salt), int(iterations), hash_name)
        without_proof = f"c={_b64(_GS2_HEADER.encode())},r={nonce}"
        auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        client_key = _hmac(salted, b"Client Key", hash_name)
        signature = _hmac(_digest(client_key, hash_name), auth_message, hash_name)
        self._server_signature = _hmac(_hmac(salted, b"Server Key", hash_name), auth_message,
                                       hash_name)
        return f"{without_proof},p={_b64(_xor(client_key, signature))}".encode()

    def verify_server_final(self, server_final: bytes) -> None:
        fields = _attributes(_text(server_final))
        if "e" in fields:
            raise SaslError(f"server refused: {fields['e']}")
        if not hmac.compare_digest(_unb64(fields.get("v", "")), self._server_signature):
            raise SaslError("the server's SCRAM signature is wrong")


# -- SCRAM server ----------------------------------------------------------------------
class ScramServer:
    """Two steps: client-first → server-first, client-final → server-final.

    ``lookup`` returns the user's credential for ``mechanism``, or None; an
    unknown user is answered with a made-up salt so that the failure only shows
    at the end.
    """

    def __init__(self, lookup: Callable[[str], ScramCredential | None],
                 nonce: str | None = None, mechanism: str = SCRAM_SHA_256):
        self._hash = _hash_name(mechanism)
        self._lookup = lookup
        self._nonce = nonce or secrets.token_urlsafe(18)
        self._state = "first"
        self._credential: ScramCredential | None = None
        self._messages = ""  # client-first-bare + server-first, for the AuthMessage
        self._combined_nonce = ""
        self._gs2 = ""  # the client's GS2 header, echoed back base64 in c=
        self.username = ""

    @property
    def done(self) -> bool:
        return self._state == "done"

    def step(self, token: bytes) -> bytes:
        if self._state == "first":
            return self._first(_text(token))
        if self._state == "final":
            return self._final(_text(token))
        raise SaslError("SCRAM exchange already finished")

    def _first(self, text: str) -> bytes:
        if not text.startswith(("n,", "y,")):
            raise SaslError("SCRAM channel binding is not supported")
        _, _, bare = text.partition(",")
        authzid, _, bare = bare.partition(",")
        fields = _attributes(bare)
        if "m" in fields or not fields.get("n") or not fields.get("r"):
            raise SaslError("bad SCRAM client-first message")
        self.username = _unescape_name(fields["n"])
        if authzid and authzid != f"a={fields['n']}":
            raise SaslError("SCRAM authorization id differs from the user name")
        credential = self._lookup(self.username)
        if credential is not None and _HASH_NAMES.get(credential.mechanism) != self._hash:
            credential = None  # a credential for another mechanism cannot prove this one
        self._credential = credential
        salt = credential.salt if credential else hashlib.sha256(
            self.username.encode() + b"slog").digest()[:16]
        iterations = credential.iterations if credential else DEFAULT_ITERATIONS
        nonce = fields["r"] + self._nonce
        server_first = f"r={nonce},s={_b64(salt)},i={iterations}"
        self._messages = f"{bare},{server_first}"
        self._combined_nonce = nonce
        self._gs2 = text[:len(text) - len(bare)]
        self._state = "final"
        return server_first.encode()

    def _final(self, text: str) -> bytes:
        self._state = "failed"
        without_proof, sep, proof_part = text.rpartition(",p=")
        if not sep:
            raise SaslError("SCRAM client-final message has no proof")
        fields = _attributes(without_proof)
        if fields.get("r") != self._combined_nonce:
            raise SaslError("SCRAM nonce mismatch")
        if _unb64(fields.get("c", "")) != self._gs2.encode():
            raise SaslError("SCRAM channel binding mismatch")
        credential = self._credential
        if credential is None:
            raise SaslError(f"authentication failed for {self.username!r}")
        hash_name = self._hash
        auth_message = f"{self._messages},{without_proof}".encode()
        signature = _hmac(credential.stored_key, auth_message, hash_name)
        proof = _unb64(proof_part)
        if len(proof) != len(signature) or not hmac.compare_digest(
                _digest(_xor(proof, signature), hash_name), credential.stored_key):
            raise SaslError(f"authentication failed for {self.username!r}")
        self._state = "done"
        return f"v={_b64(_hmac(credential.server_key, auth_message, hash_name))}".encode()


# -- the client's side of a whole exchange ----------------------------------------------
@dataclass(frozen=True)
class SaslLogin:
    """What a client logs in with: mechanism, user name and password."""

    mechanism: str
    username: str
    password: str

    def __post_init__(self) -> None:
        if self.mechanism not in MECHANISMS:
            raise ValueError(f"SASL mechanism {self.mechanism!r} is not one of "
                             f"{', '.join(MECHANISMS)}")

    def __repr__(self) -> str:  # never print the password
        return f"SaslLogin({self.mechanism}, {self.username!r})"


def client_exchange(login: SaslLogin) -> Generator[bytes, bytes, None]:
    """Yields each token to send; is sent each server response; returns when done.

    Transport-free, so the blocking client and the brokers' asyncio channels
    drive the same conversation. Raises SaslError if the server is not who it
    claims to be (SCRAM's server signature).
    """
    if login.mechanism == PLAIN:
        yield plain_token(login.username, login.password)
        return
    client = ScramClient(login.username, login.password, mechanism=login.mechanism)
    server_first = yield client.first_message()
    server_final = yield client.final_message(server_first)
    client.verify_server_final(server_final)
