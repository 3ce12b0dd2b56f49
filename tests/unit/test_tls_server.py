"""KafkaServer on an SSL listener, against the echo dispatcher of test_broker_server:
TLS keeps the framing promises (large frames and responses through partial I/O,
pipelining beyond the read-ahead limit), and a bad peer costs only its connection."""

from __future__ import annotations

import asyncio
import re
import ssl
from pathlib import Path

import pytest

from slog.broker import server as server_mod
from slog.broker.server import KafkaServer
from slog.cli.local_ca import TlsFiles, ensure_local_ca
from slog.core.listeners import Endpoint
from slog.protocol.tls import TlsConfigError, client_context, server_context
from tests.unit.test_broker_server import EchoDispatcher, _config, _frame, _read_frame, _run


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return ensure_local_ca(tmp_path_factory.mktemp("tls"))


async def _with_tls_server(ca: TlsFiles, dispatcher, client, **settings: str):
    config = _config(**{"security.protocol": "SSL",
                        "ssl.keystore.location": str(ca.broker_keystore), **settings})
    listener = Endpoint("SSL", "127.0.0.1", 0, "SSL")
    server = KafkaServer(config, dispatcher, listener, server_context(config.values))
    port = await server.start()
    try:
        return await client(port, client_context(str(ca.ca)))
    finally:
        await server.stop()


def test_large_frames_and_responses_over_tls(ca: TlsFiles) -> None:
    dispatcher = EchoDispatcher(chunks=7)
    big = bytes(range(256)) * (12 * 1024)  # 3 MiB: many TLS records, partial sends
    payloads = [big, b"small", big[:100_000], big[::-1]]

    async def client(port, context):
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context,
                                                       server_hostname="127.0.0.1")
        writer.write(b"".join(_frame(p) for p in payloads))
        answers = []
        for _ in payloads:
            await asyncio.sleep(0.05)
            answers.append(await _read_frame(reader))
        writer.close()
        return answers

    assert _run(_with_tls_server(ca, dispatcher, client)) == payloads


def test_pipelined_frames_beyond_the_read_ahead_limit(ca: TlsFiles) -> None:
    """More frames than READ_AHEAD_FRAMES in one TLS record: reading pauses with
    plaintext left in the pipe, which select cannot see; resuming must read it."""
    dispatcher = EchoDispatcher(delay_s=0.001)
    payloads = [f"frame-{i}".encode() for i in range(server_mod.READ_AHEAD_FRAMES * 5)]
    # ...and more bytes than READ_AHEAD_BYTES, in frames that each fit the receive buffer.
    payloads += [bytes([i]) * 30_000 for i in range(60)]

    async def client(port, context):
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context,
                                                       server_hostname="127.0.0.1")
        writer.write(b"".join(_frame(p) for p in payloads))
        answers = [await _read_frame(reader) for _ in payloads]
        writer.close()
        return answers

    assert _run(_with_tls_server(ca, dispatcher, client)) == payloads


def test_a_stalled_handshake_is_dropped_and_others_are_served(
        ca: TlsFiles, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server_mod, "TLS_HANDSHAKE_TIMEOUT_S", 0.5)

    async def client(port, context):
        stalled_reader, stalled = await asyncio.open_connection("127.0.0.1", port)
        stalled.write(b"\x16\x03\x01\x02\x00\x01")  # a ClientHello that never finishes
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context,
                                                       server_hostname="127.0.0.1")
        writer.write(_frame(b"hello"))
        answer = await _read_frame(reader)
        closed = await asyncio.wait_for(stalled_reader.read(), 5)  # EOF after the timeout
        writer.close()
        stalled.close()
        return answer, closed

    assert _run(_with_tls_server(ca, EchoDispatcher(), client)) == (b"hello", b"")


def test_client_auth_required_refuses_a_client_without_a_certificate(ca: TlsFiles) -> None:
    async def client(port, context):
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context,
                                                       server_hostname="127.0.0.1")
        writer.write(_frame(b"hello"))
        try:
            await _read_frame(reader)
        except (asyncio.IncompleteReadError, ssl.SSLError, ConnectionError):
            return "refused"
        return "served"

    assert _run(_with_tls_server(ca, EchoDispatcher(), client, **{
        "ssl.client.auth": "required", "ssl.truststore.location": str(ca.ca)})) == "refused"


def test_server_context_errors_name_the_file(tmp_path: Path, ca: TlsFiles) -> None:
    with pytest.raises(TlsConfigError, match=r"ssl\.keystore\.location"):
        server_context({})
    missing = tmp_path / "missing.pem"
    with pytest.raises(TlsConfigError, match=re.escape(str(missing))):
        server_context({"ssl.keystore.location": str(missing)})
    with pytest.raises(TlsConfigError, match=r"ssl\.truststore\.location"):
        server_context({"ssl.keystore.location": str(ca.broker_keystore),
                        "ssl.client.auth": "required"})
    # PEM text in ssl.keystore.certificate.chain / ssl.keystore.key works as in Kafka.
    context = server_context({"ssl.keystore.certificate.chain": ca.broker_cert.read_text(),
                              "ssl.keystore.key": ca.broker_key.read_text()})
    assert isinstance(context, ssl.SSLContext)


def test_certificate_subject_becomes_kafkas_principal_name() -> None:
    from slog.broker.server import distinguished_name

    subject = ((("countryName", "DE"),), (("organizationName", "acme"),),
               (("organizationalUnitName", "ops"),), (("commonName", "alice"),))
    assert distinguished_name({"subject": subject}) == "CN=alice,OU=ops,O=acme,C=DE"


def test_local_ca_is_reused_and_keeps_its_ca_for_a_new_host(tmp_path: Path) -> None:
    files = ensure_local_ca(tmp_path / "tls")
    ca, broker_key = files.ca.read_bytes(), files.broker_key.read_bytes()
    assert ensure_local_ca(tmp_path / "tls").broker_key.read_bytes() == broker_key
    wider = ensure_local_ca(tmp_path / "tls", ("127.0.0.1", "localhost", "::1", "10.0.0.7"))
    assert wider.ca.read_bytes() == ca and wider.broker_key.read_bytes() != broker_key
    context = ssl.create_default_context(cafile=str(wider.ca))
    context.load_cert_chain(str(wider.broker_keystore))  # the new leaf chains to the old CA
