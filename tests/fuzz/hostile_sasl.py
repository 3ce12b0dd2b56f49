"""Hostile SASL exchanges against a broker that requires authentication.

Each :class:`Conversation` opens a connection, chooses PLAIN or SCRAM-SHA-256
with a valid SaslHandshake (v1: tokens in SaslAuthenticate requests; v0: bare
frames, before KIP-152), for SCRAM optionally sends a well-formed client-first
message for a user, and then one hostile step:

* a hostile token (``hostile.SASL_TOKENS``: PLAIN and SCRAM messages broken
  every way, oversized, not UTF-8) or random bytes;
* for SCRAM, after the server-first message, a hostile client-final: wrong or
  altered nonces, garbage, short, long, empty or non-base64 proofs, a proof for
  a wrong password, wrong channel binding, huge iteration attributes;
* a hostile request of any advertised API (``hostile.requests`` and
  ``hostile.mutated_requests``) in the middle of the exchange.

The hostile step goes through :func:`hostile.exchange` in ``pre_auth`` mode on
the same connection, so the oracle is the one every fuzz case has, plus: no
API but ApiVersions/SaslHandshake/SaslAuthenticate is answered, and a Metadata
request after the step still closes the connection (it never authenticated).
The steps before it must be answered exactly as a well-behaved client expects.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable
from dataclasses import dataclass

from hypothesis import strategies as st

from slog.core.scram import PLAIN, SCRAM_SHA_256, SaslError, ScramClient, plain_token
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from tests.compat.clients import Wire
from tests.fuzz.hostile import (
    ANSWER_TIMEOUT_S,
    API_CASES,
    SASL_TOKENS,
    SASL_USERS,
    Target,
    exchange,
    mutated_requests,
    requests,
)

SASL_CASES = [(k, v) for k, v in API_CASES
              if k in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)]
AUTHENTICATE_VERSIONS = [v for k, v in SASL_CASES if k == ApiKey.SASL_AUTHENTICATE]
CLIENT_NONCE = "fyko+d2lbbFgONRv9qkxdawL"  # RFC 5802's example
WRONG_PASSWORD = "not-the-password"

# A hostile client-final from (the combined nonce, the server-first message,
# random bytes, the client that sent the client-first).
FinalAttack = Callable[[str, bytes, bytes, ScramClient], bytes]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _final(nonce: str, proof: str, binding: str = "biws", extra: str = "") -> bytes:
    return f"c={binding},r={nonce}{extra},p={proof}".encode()


def _wrong_password(nonce: str, server_first: bytes, noise: bytes, client: ScramClient) -> bytes:
    """A correct SCRAM computation with the wrong password."""
    try:
        return client.final_message(server_first)
    except SaslError:  # hugeiter: the server asks for 2**31 - 1 rounds; slog's client refuses
        return _final(nonce, _b64(noise[:32]))


FINAL_ATTACKS: dict[str, FinalAttack] = {
    "wrong password": _wrong_password,
    "garbage proof": lambda n, sf, noise, c: _final(n, _b64(noise[:32])),
    "short proof": lambda n, sf, noise, c: _final(n, _b64(noise[:16])),
    "long proof": lambda n, sf, noise, c: _final(n, _b64(noise * 2)),
    "empty proof": lambda n, sf, noise, c: _final(n, ""),
    "proof not base64": lambda n, sf, noise, c: _final(n, "!!" + noise.hex()),
    "no proof": lambda n, sf, noise, c: f"c=biws,r={n}".encode(),
    "client nonce only": lambda n, sf, noise, c: _final(CLIENT_NONCE, _b64(noise[:32])),
    "altered nonce": lambda n, sf, noise, c: _final(n[:-1] + ("A" if n[-1] != "A" else "B"),
                                                   _b64(noise[:32])),
    "nonce with a suffix": lambda n, sf, noise, c: _final(n + "x", _b64(noise[:32])),
    "nonce of another exchange": lambda n, sf, noise, c: _final(CLIENT_NONCE + noise.hex(),
                                                               _b64(noise[:32])),
    "two nonces": lambda n, sf, noise, c: f"c=biws,r=bogus,r={n},p={_b64(noise[:32])}".encode(),
    "wrong channel binding": lambda n, sf, noise, c: _final(n, _b64(noise[:32]), "eSws"),
    "channel binding data": lambda n, sf, noise, c: _final(
        n, _b64(noise[:32]), _b64(b"p=tls-unique,," + noise)),
    "no channel binding": lambda n, sf, noise, c: f"r={n},p={_b64(noise[:32])}".encode(),
    "huge iterations": lambda n, sf, noise, c: _final(n, _b64(noise[:32]),
                                                      extra=",i=2147483647"),
    "extension": lambda n, sf, noise, c: b"m=ext," + _final(n, _b64(noise[:32])),
    "oversized": lambda n, sf, noise, c: _final(n, "A" * 9000),
    "not UTF-8": lambda n, sf, noise, c: b"\xff" + _final(n, _b64(noise[:32])),
    "server-first echoed": lambda n, sf, noise, c: sf,
}
TOKEN, REQUEST = "token", "request"  # the other kinds of hostile step


@dataclass(frozen=True)
class Conversation:
    mechanism: str
    handshake_version: int  # 0: tokens travel as bare frames
    authenticate_version: int
    user: str | None  # SCRAM: send a valid client-first as this user first; None: don't
    attack: str  # a FINAL_ATTACKS name, TOKEN or REQUEST
    payload: bytes  # the token (TOKEN), the frame (REQUEST), or random bytes for a proof

    @property
    def raw(self) -> bool:
        return self.handshake_version == 0


@st.composite
def conversations(draw: st.DrawFn, attacks: list[str]) -> Conversation:
    """Exchanges whose hostile step is one of ``attacks`` (FINAL_ATTACKS names, TOKEN, REQUEST)."""
    attack = draw(st.sampled_from(attacks))
    mechanism = SCRAM_SHA_256 if attack in FINAL_ATTACKS else \
        draw(st.sampled_from([PLAIN, SCRAM_SHA_256]))
    # SCRAM: a well-formed client-first first (always before a client-final attack).
    user = None if mechanism == PLAIN else draw(st.sampled_from(
        SASL_USERS if attack in FINAL_ATTACKS else [None, *SASL_USERS]))
    if attack == TOKEN:
        payload = draw(st.sampled_from(SASL_TOKENS) | st.binary(max_size=120))
    elif attack == REQUEST:
        payload = draw(requests() | mutated_requests() | requests(SASL_CASES))
    else:
        payload = draw(st.binary(min_size=32, max_size=48))
    return Conversation(mechanism, draw(st.sampled_from([0, 1])),
                        draw(st.sampled_from(AUTHENTICATE_VERSIONS)), user, attack, payload)


def _bare(token: bytes) -> bytes:
    return struct.pack(">i", len(token)) + token


class _Sasl:
    """The well-behaved steps of an exchange, on one connection, strictly checked."""

    def __init__(self, wire: Wire, conversation: Conversation):
        self.wire = wire
        self.conv = conversation

    def handshake(self) -> None:
        answer = self.wire.request(ApiKey.SASL_HANDSHAKE, self.conv.handshake_version,
                                   {"mechanism": self.conv.mechanism})
        assert answer.error_code == ErrorCode.none, answer
        assert self.conv.mechanism in answer.mechanisms, answer

    def frame(self, token: bytes) -> bytes:
        """``token`` as the next step sends it: bare, or in a SaslAuthenticate request."""
        if self.conv.raw:
            return _bare(token)
        return self.wire.encode(ApiKey.SASL_AUTHENTICATE, self.conv.authenticate_version,
                                {"auth_bytes": token})

    def step(self, token: bytes) -> bytes:
        """A step the broker must accept: its answer token."""
        if self.conv.raw:
            self.wire.send(_bare(token))
            answer = self.wire.read_frame()
            assert answer is not None, f"closed instead of answering {token!r}"
            return answer
        response = self.wire.request(ApiKey.SASL_AUTHENTICATE, self.conv.authenticate_version,
                                     {"auth_bytes": token})
        assert response.error_code == ErrorCode.none, response
        return bytes(response.auth_bytes)


def converse(target: Target, conv: Conversation) -> str:
    """Run one hostile exchange; the outcome class of its hostile step."""
    with Wire(target.broker.bootstrap, timeout_s=ANSWER_TIMEOUT_S) as wire:
        sasl = _Sasl(wire, conv)
        sasl.handshake()
        if conv.user is not None:
            client = ScramClient(conv.user, WRONG_PASSWORD, nonce=CLIENT_NONCE)
            server_first = sasl.step(client.first_message())
            nonce = server_first.decode().split(",")[0].removeprefix("r=")
            assert nonce.startswith(CLIENT_NONCE) and nonce != CLIENT_NONCE, server_first
        if conv.attack == REQUEST:
            sent = conv.payload
        elif conv.attack == TOKEN:
            sent = sasl.frame(conv.payload)
        else:
            sent = sasl.frame(FINAL_ATTACKS[conv.attack](nonce, server_first, conv.payload,
                                                         client))
        # Bare tokens carry no header: their answers cannot be matched to a request.
        return exchange(target, sent, framed=not conv.raw, pre_auth=True, wire=wire)


def logged_in_wire(target: Target, user: str, password: str) -> Wire:
    """A fresh connection that has logged in (PLAIN), for fuzzing as that principal."""
    wire = Wire(target.broker.bootstrap, timeout_s=ANSWER_TIMEOUT_S)
    assert wire.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": PLAIN}).error_code == 0
    answer = wire.request(ApiKey.SASL_AUTHENTICATE, 2,
                          {"auth_bytes": plain_token(user, password)})
    assert answer.error_code == ErrorCode.none, answer
    return wire
