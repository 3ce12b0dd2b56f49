"""SCRAM-SHA-256 and PLAIN messages against RFC 7677's example, and the credentials file."""

from __future__ import annotations

import base64
import hashlib
import json
import stat
from pathlib import Path

import pytest

from slog.core.credentials import (
    CredentialsError,
    CredentialStore,
    by_mechanism,
    inter_broker_secret,
    load_credentials,
    save_credentials,
    validate_user_name,
)
from slog.core.scram import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    SaslError,
    SaslLogin,
    ScramClient,
    ScramServer,
    check_password,
    client_exchange,
    credential_from_salted_password,
    derive_credential,
    digest_size,
    parse_plain_token,
    plain_token,
)

# RFC 7677 section 3.
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SERVER_FIRST = (f"r={CLIENT_NONCE}{SERVER_NONCE},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096").encode()
CLIENT_FINAL = (f"c=biws,r={CLIENT_NONCE}{SERVER_NONCE},"
                "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=").encode()
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_client_matches_rfc_7677() -> None:
    client = ScramClient("user", "pencil", nonce=CLIENT_NONCE)
    assert client.first_message() == f"n,,n=user,r={CLIENT_NONCE}".encode()
    assert client.final_message(SERVER_FIRST) == CLIENT_FINAL
    client.verify_server_final(SERVER_FINAL)
    with pytest.raises(SaslError):
        client.verify_server_final(b"v=" + base64.b64encode(b"x" * 32))


def test_server_matches_rfc_7677() -> None:
    credential = derive_credential("pencil", salt=SALT)
    server = ScramServer(lambda name: credential if name == "user" else None, nonce=SERVER_NONCE)
    assert server.step(f"n,,n=user,r={CLIENT_NONCE}".encode()) == SERVER_FIRST
    assert server.step(CLIENT_FINAL) == SERVER_FINAL
    assert server.done and server.username == "user"


@pytest.mark.parametrize("password, user", [("wrong", "user"), ("pencil", "nobody")])
def test_server_refuses_wrong_password_or_unknown_user(password: str, user: str) -> None:
    credential = derive_credential("pencil")
    server = ScramServer(lambda name: credential if name == "user" else None)
    conversation = client_exchange(SaslLogin("SCRAM-SHA-256", user, password))
    first = server.step(next(conversation))
    with pytest.raises(SaslError, match="authentication failed"):
        server.step(conversation.send(first))
    assert not server.done


def test_full_exchange_with_odd_user_names() -> None:
    name = "a,b=c"  # escaped as =2C and =3D on the wire
    credential = derive_credential("pw", iterations=5000)
    server = ScramServer(lambda n: credential if n == name else None)
    conversation = client_exchange(SaslLogin("SCRAM-SHA-256", name, "pw"))
    reply = server.step(next(conversation))
    final = server.step(conversation.send(reply))
    with pytest.raises(StopIteration):
        conversation.send(final)
    assert server.username == name


@pytest.mark.parametrize("token", [b"", b"garbage", b"n,,", b"p=tls-unique,,n=a,r=b",
                                   b"n,,n=a", b"\xff\xfe", b"n,,n=a,r=b,m=ext", b"x" * 9000])
def test_server_rejects_malformed_first_messages(token: bytes) -> None:
    with pytest.raises(SaslError):
        ScramServer(lambda n: None).step(token)


def test_plain_tokens() -> None:
    assert parse_plain_token(plain_token("alice", "pw")) == ("alice", "pw")
    assert parse_plain_token(b"alice\0alice\0pw") == ("alice", "pw")
    for bad in (b"alice", b"\0\0pw", b"bob\0alice\0pw"):
        with pytest.raises(SaslError):
            parse_plain_token(bad)


def test_check_password_against_the_scram_credential() -> None:
    credential = derive_credential("correct horse")
    assert check_password(credential, "correct horse")
    assert not check_password(credential, "correct horse ")


def test_credentials_file_is_private_and_holds_no_password(tmp_path: Path) -> None:
    path = tmp_path / "credentials.json"
    save_credentials(path, {"alice": by_mechanism(
        derive_credential("hunter2-secret"),
        derive_credential("hunter2-secret", mechanism=SCRAM_SHA_512))})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()
    assert "hunter2-secret" not in text
    stored = json.loads(text)["users"]["alice"]
    assert set(stored) == {SCRAM_SHA_256, SCRAM_SHA_512}
    assert set(stored[SCRAM_SHA_512]) == {"salt", "iterations", "stored_key", "server_key"}
    for credential in load_credentials(path)["alice"].values():
        assert check_password(credential, "hunter2-secret")
    assert not list(tmp_path.glob(".credentials-*"))  # no temporary file left behind


def test_store_rereads_a_changed_file(tmp_path: Path) -> None:
    path = tmp_path / "credentials.json"
    store = CredentialStore(path)
    assert store.lookup("alice") is None
    save_credentials(path, {"alice": by_mechanism(derive_credential("one"))})
    assert store.lookup("alice") is not None
    assert store.lookup("alice", SCRAM_SHA_512) is None
    save_credentials(path, {})
    assert store.lookup("alice") is None
    path.write_text("{not json")  # a broken file keeps the last good copy
    assert store.lookup("alice") is None
    with pytest.raises(CredentialsError):
        load_credentials(path)


@pytest.mark.parametrize("name", ["", "__broker", "a\nb", " alice", "x" * 300])
def test_bad_user_names(name: str) -> None:
    with pytest.raises(CredentialsError):
        validate_user_name(name)


def test_inter_broker_secret_is_created_once_and_private(tmp_path: Path) -> None:
    first = inter_broker_secret(tmp_path)
    assert first == inter_broker_secret(tmp_path) and len(first) >= 32
    assert stat.S_IMODE((tmp_path / "inter-broker.secret").stat().st_mode) == 0o600


def test_scram_sha_512_exchange_and_mechanism_mismatch() -> None:
    sha512 = derive_credential("pw", mechanism=SCRAM_SHA_512)
    assert len(sha512.stored_key) == len(sha512.server_key) == 64
    server = ScramServer(lambda n: sha512, mechanism=SCRAM_SHA_512)
    conversation = client_exchange(SaslLogin(SCRAM_SHA_512, "alice", "pw"))
    final = server.step(conversation.send(server.step(next(conversation))))
    with pytest.raises(StopIteration):
        conversation.send(final)
    assert server.done
    # A SCRAM-SHA-256 exchange cannot be proven with the SHA-512 credential.
    server = ScramServer(lambda n: sha512, mechanism=SCRAM_SHA_256)
    conversation = client_exchange(SaslLogin(SCRAM_SHA_256, "alice", "pw"))
    with pytest.raises(SaslError, match="authentication failed"):
        server.step(conversation.send(server.step(next(conversation))))


def test_credential_from_a_client_salted_password() -> None:
    """AlterUserScramCredentials carries Hi(password, salt, i), as Kafka's clients compute it."""
    for mechanism, hash_name in ((SCRAM_SHA_256, "sha256"), (SCRAM_SHA_512, "sha512")):
        salted = hashlib.pbkdf2_hmac(hash_name, b"pw", b"salt", 8192)
        assert credential_from_salted_password(mechanism, b"salt", 8192, salted) == \
            derive_credential("pw", salt=b"salt", iterations=8192, mechanism=mechanism)
        assert digest_size(mechanism) == len(salted)
    with pytest.raises(ValueError):
        derive_credential("pw", mechanism="SCRAM-MD5")


def test_version_1_credentials_files_are_read(tmp_path: Path) -> None:
    path = tmp_path / "credentials.json"
    credential = derive_credential("old")
    path.write_text(json.dumps({"version": 1, "users": {"bob": {
        "mechanism": SCRAM_SHA_256, "salt": base64.b64encode(credential.salt).decode(),
        "iterations": credential.iterations,
        "stored_key": base64.b64encode(credential.stored_key).decode(),
        "server_key": base64.b64encode(credential.server_key).decode()}}}))
    assert load_credentials(path) == {"bob": {SCRAM_SHA_256: credential}}
    path.write_text(json.dumps({"version": 9, "users": {}}))
    with pytest.raises(CredentialsError):
        load_credentials(path)
