"""slog's principal serde for Envelopes: ``Type:name``, and when signed, NUL + HMAC."""

from __future__ import annotations

import pytest

from slog.broker.forwarding import EnvelopeError, decode_principal, encode_principal

KEY = b"k" * 32


def test_unsigned_and_signed_round_trip() -> None:
    assert decode_principal(encode_principal("User:alice", b"", b"req", None)) \
        == ("User:alice", None)
    principal, signature = decode_principal(
        encode_principal("User:alice", b"\x7f\0\0\1", b"req", KEY))
    assert principal == "User:alice" and signature is not None and len(signature) == 32


def test_the_signature_covers_principal_host_and_request() -> None:
    signed = {encode_principal(p, h, r, KEY)[len(p) + 1:]
              for p, h, r in (("User:a", b"\1\2\3\4", b"x"), ("User:b", b"\1\2\3\4", b"x"),
                              ("User:a", b"\1\2\3\5", b"x"), ("User:a", b"\1\2\3\4", b"y"))}
    assert len(signed) == 4
    assert encode_principal("User:a", b"", b"x", b"other key") != \
        encode_principal("User:a", b"", b"x", KEY)


@pytest.mark.parametrize("raw", [None, b"", b"alice", b"User:", b"\xff:x", b"User:a\0short",
                                 b"User:a\0" + b"s" * 33])
def test_malformed_principals_are_refused(raw: bytes | None) -> None:
    with pytest.raises(EnvelopeError):
        decode_principal(raw)
