"""SASL/PLAIN and SASL/SCRAM-SHA-256 against a real broker, with real clients."""

from __future__ import annotations

import hashlib
import socket
import struct
import threading
import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer

from slog.client.connection import BrokerConnection
from slog.core.scram import SaslLogin
from slog.protocol.apis import ApiKey, request_class
from slog.protocol.codec import decode_response, encode_request
from slog.protocol.shapes import shape
from tests.brokers import BrokerProcess, run_cli
from tests.security.conftest import (
    PASSWORDS,
    kafka_python_read_all,
    produce_and_consume,
    sasl_conf,
)

MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka_produces_and_consumes(sasl_broker: BrokerProcess,
                                               mechanism: str) -> None:
    topic = f"sasl-{mechanism.lower()}"
    values = [f"{mechanism}-{i}".encode() for i in range(50)]
    conf = sasl_conf(sasl_broker, "alice", mechanism)
    assert produce_and_consume(conf, topic, values) == values


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_wrong_password_is_an_authentication_error(sasl_broker: BrokerProcess,
                                                   mechanism: str) -> None:
    errors: list[KafkaError] = []
    conf = {**sasl_conf(sasl_broker, "alice", mechanism, password="wrong"),
            "error_cb": errors.append, "message.timeout.ms": 3000}
    producer = Producer(conf)
    producer.produce("never-written", b"x")
    deadline = time.monotonic() + 30
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
    assert "Authentication failed" in errors[0].str()
    producer.purge()
    producer.flush(5)


# -- the protocol, byte by byte ----------------------------------------------------------
class RawClient:
    def __init__(self, broker: BrokerProcess):
        self.sock = socket.create_connection(("127.0.0.1", broker.port), timeout=15)
        self.correlation = 0

    def send(self, api_key: int, version: int, body: dict[str, Any]) -> None:
        self.correlation += 1
        entity = shape(request_class(api_key, version), body)
        self.sock.sendall(encode_request(entity, correlation_id=self.correlation,
                                         client_id="raw"))

    def frame(self) -> bytes | None:
        """The next frame, or None when the broker closed the connection."""
        head = self._exactly(4)
        if head is None:
            return None
        return self._exactly(struct.unpack(">i", head)[0])

    def _exactly(self, size: int) -> bytes | None:
        data = b""
        while len(data) < size:
            try:
                chunk = self.sock.recv(size - len(data))
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            data += chunk
        return data

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        self.send(api_key, version, body)
        frame = self.frame()
        assert frame is not None, f"connection closed instead of answering api {api_key}"
        return decode_response(api_key, version, frame)[1]

    def closed_after(self, api_key: int, version: int, body: dict[str, Any]) -> bool:
        self.send(api_key, version, body)
        return self.frame() is None

    def close(self) -> None:
        self.sock.close()


METADATA = {"topics": None, "allow_auto_topic_creation": False}


@pytest.mark.parametrize("api_key, version, body", [
    (ApiKey.METADATA, 1, METADATA),
    (ApiKey.PRODUCE, 3, {"transactional_id": None, "acks": 1, "timeout": 1000,
                         "topic_data": []}),
    (ApiKey.LIST_GROUPS, 0, {}),
    (ApiKey.CREATE_TOPICS, 2, {"topics": [], "timeout": 1000, "validate_only": False}),
])
def test_unauthenticated_requests_close_the_connection(sasl_broker: BrokerProcess, api_key: int,
                                                       version: int, body: dict[str, Any]) -> None:
    client = RawClient(sasl_broker)
    try:
        versions = client.request(ApiKey.API_VERSIONS, 0, {})
        assert versions.error_code == 0
        assert {ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE} <= {
            k.api_key for k in versions.api_keys}
        assert client.closed_after(api_key, version, body)
    finally:
        client.close()


def test_handshake_then_a_request_before_authenticating_is_closed(
        sasl_broker: BrokerProcess) -> None:
    client = RawClient(sasl_broker)
    try:
        handshake = client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        assert handshake.error_code == 0
        assert set(handshake.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
        assert client.closed_after(ApiKey.METADATA, 1, METADATA)
    finally:
        client.close()


def test_unsupported_mechanism(sasl_broker: BrokerProcess) -> None:
    client = RawClient(sasl_broker)
    try:
        handshake = client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "GSSAPI"})
        assert handshake.error_code == 33  # UNSUPPORTED_SASL_MECHANISM
        assert client.frame() is None  # then closed
    finally:
        client.close()


@pytest.mark.parametrize("version", [0, 1, 2])
def test_failed_authenticate_answers_58_then_closes(sasl_broker: BrokerProcess,
                                                    version: int) -> None:
    client = RawClient(sasl_broker)
    try:
        client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        answer = client.request(ApiKey.SASL_AUTHENTICATE, version,
                                {"auth_bytes": b"\0alice\0nope"})
        assert answer.error_code == 58  # SASL_AUTHENTICATION_FAILED
        assert client.frame() is None
    finally:
        client.close()


def test_kip_152_plain_then_requests_work(sasl_broker: BrokerProcess) -> None:
    client = RawClient(sasl_broker)
    try:
        client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        token = b"\0alice\0" + PASSWORDS["alice"].encode()
        answer = client.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token})
        assert answer.error_code == 0
        assert client.request(ApiKey.METADATA, 1, METADATA).brokers
        # A second handshake on an authenticated connection is an illegal state.
        again = client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        assert again.error_code == 34
    finally:
        client.close()


def test_handshake_v0_takes_raw_tokens(sasl_broker: BrokerProcess) -> None:
    client = RawClient(sasl_broker)
    try:
        assert client.request(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"}).error_code == 0
        token = b"\0alice\0" + PASSWORDS["alice"].encode()
        client.sock.sendall(struct.pack(">i", len(token)) + token)
        assert client.frame() == b""  # success: an empty token back
        assert client.request(ApiKey.METADATA, 1, METADATA).brokers
    finally:
        client.close()


def test_handshake_v0_wrong_password_closes(sasl_broker: BrokerProcess) -> None:
    client = RawClient(sasl_broker)
    try:
        client.request(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})
        token = b"\0alice\0wrong"
        client.sock.sendall(struct.pack(">i", len(token)) + token)
        assert client.frame() is None
    finally:
        client.close()


# -- other clients -----------------------------------------------------------------------
def test_kafka_python_scram(sasl_broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    settings = {"bootstrap_servers": sasl_broker.bootstrap, "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": "bob",
                "sasl_plain_password": PASSWORDS["bob"]}
    producer = KafkaProducer(**settings)
    for i in range(10):
        producer.send("kafka-python-scram", f"kp-{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer("kafka-python-scram", auto_offset_reset="earliest",
                             consumer_timeout_ms=15000, **settings)
    values = kafka_python_read_all(consumer)
    consumer.close()
    assert values == [f"kp-{i}".encode() for i in range(10)]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_slog_client_logs_in(sasl_broker: BrokerProcess, mechanism: str) -> None:
    login = SaslLogin(mechanism, "alice", PASSWORDS["alice"])
    with BrokerConnection("127.0.0.1", sasl_broker.port, sasl=login) as conn:
        assert conn.request(ApiKey.METADATA, METADATA).brokers


def test_slog_cli_with_sasl_settings(sasl_broker: BrokerProcess, as_user: Any,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    as_user("alice")
    created = run_cli("topic", "create", "cli-sasl", "-b", sasl_broker.bootstrap)
    assert created.returncode == 0, created.stderr
    listed = run_cli("topic", "list", "-b", sasl_broker.bootstrap, "-o", "json")
    assert listed.returncode == 0 and "cli-sasl" in listed.stdout
    monkeypatch.setenv("SLOG_SASL_PASSWORD", "wrong")
    refused = run_cli("topic", "list", "-b", sasl_broker.bootstrap)
    assert refused.returncode == 1
    assert "SASL_AUTHENTICATION_FAILED" in refused.stderr


def test_large_frames_before_login_are_refused(sasl_broker: BrokerProcess) -> None:
    """Before authenticating, a frame over 512 KiB closes the connection unread."""
    client = RawClient(sasl_broker)
    try:
        client.sock.sendall(struct.pack(">i", 600 * 1024) + b"\0" * 1024)
        assert client.frame() is None
    finally:
        client.close()
    # ...while an authenticated connection may send large requests.
    login = SaslLogin("PLAIN", "alice", PASSWORDS["alice"])
    with BrokerConnection("127.0.0.1", sasl_broker.port, sasl=login) as conn:
        big = [{"name": f"t{i:04d}-" + "x" * 200} for i in range(3000)]  # ~650 KB
        response = conn.request(ApiKey.METADATA, {"topics": big,
                                                  "allow_auto_topic_creation": False})
        assert len(response.topics) == 3000


def test_plain_password_hashing_does_not_stall_other_clients(sasl_broker: BrokerProcess) -> None:
    """A PLAIN check is one PBKDF2 of the user's iteration count: at the 1,000,000 maximum
    about a second, which must not hold up other connections (it runs off the event loop)."""
    added = run_cli("user", "add", "slowhash", "--iterations", "1000000", "--password-stdin",
                    "--data-dir", str(sasl_broker.data_dir), input_text="right\n")
    assert added.returncode == 0, added.stderr
    attempts: list[float] = []

    def wrong_login() -> None:
        client = RawClient(sasl_broker)
        try:
            client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
            started = time.monotonic()
            answer = client.request(ApiKey.SASL_AUTHENTICATE, 2,
                                    {"auth_bytes": b"\0slowhash\0wrong"})
            attempts.append(time.monotonic() - started)
            assert answer.error_code == 58
        finally:
            client.close()

    def api_versions_s() -> float:
        client = RawClient(sasl_broker)
        try:
            started = time.monotonic()
            assert client.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0
            return time.monotonic() - started
        finally:
            client.close()

    api_versions_s()  # the credentials file is re-read: let that happen first
    attackers = [threading.Thread(target=wrong_login) for _ in range(3)]
    for thread in attackers:
        thread.start()
    time.sleep(0.2)
    latencies = []
    while any(t.is_alive() for t in attackers) and len(latencies) < 200:
        latencies.append(api_versions_s())
        time.sleep(0.05)
    for thread in attackers:
        thread.join()
    # The hash really was computed: each refusal took about as long as one PBKDF2 of a
    # million iterations takes here (a fixed 0.3 s failed on a fast quiet machine at 0.295 s).
    started = time.monotonic()
    hashlib.pbkdf2_hmac("sha256", b"wrong", b"salt" * 8, 1_000_000)
    one_hash_s = time.monotonic() - started
    assert len(attempts) == 3 and min(attempts) > one_hash_s / 2, (attempts, one_hash_s)
    assert latencies and max(latencies) < min(attempts) / 2, (latencies, attempts)
