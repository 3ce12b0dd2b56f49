"""SSL and SASL_SSL listeners with real brokers and real clients (kcat, confluent-kafka,
kafka-python, aiokafka, slog), client certificates, inter-broker TLS, mixed listeners,
hostile bytes on a TLS port and `slog cluster up --tls`."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import ssl
import stat
import struct
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from slog.broker.daemon import BrokerStartError, in_parallel, start_daemon
from slog.cli.local_ca import TlsFiles, ensure_local_ca
from slog.client.admin import Admin as SlogAdmin
from slog.client.connection import BrokerConnection, tls_context
from slog.client.consumer import Consumer as SlogConsumer
from slog.client.errors import BrokerUnavailableError
from slog.client.producer import Producer as SlogProducer
from slog.client.types import TopicPartition
from slog.protocol.apis import ApiKey
from tests.brokers import BrokerProcess, free_port, free_port_range, run_cli, running_broker
from tests.security.conftest import (
    PASSWORDS,
    add_users,
    kafka_python_read_all,
    logged_in,
    poll_values,
    produce_and_consume,
)

METADATA = {"topics": None, "allow_auto_topic_creation": False}


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return ensure_local_ca(tmp_path_factory.mktemp("ca") / "tls")


def tls_settings(ca: TlsFiles, **more: str) -> dict[str, str]:
    return {"security.protocol": "SSL", "ssl.keystore.location": str(ca.broker_keystore),
            "ssl.truststore.location": str(ca.ca), **more}


def ssl_conf(bootstrap: str, ca: TlsFiles, **more: Any) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SSL",
            "ssl.ca.location": str(ca.ca), **more}


@pytest.fixture(scope="module")
def ssl_broker(tmp_path_factory: pytest.TempPathFactory, ca: TlsFiles
               ) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("ssl") / "data", **tls_settings(ca)) as broker:
        yield broker


def topic() -> str:
    return f"tls-{uuid.uuid4().hex[:8]}"


# -- clients over SSL ----------------------------------------------------------------------
def test_kcat_over_ssl(ssl_broker: BrokerProcess, ca: TlsFiles) -> None:
    name = topic()
    tls = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={ca.ca}"]
    produced = subprocess.run(["kcat", "-P", "-b", ssl_broker.bootstrap, *tls, "-t", name],
                              input="one\ntwo\nthree\n", capture_output=True, text=True,
                              timeout=60)
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(["kcat", "-C", "-b", ssl_broker.bootstrap, *tls, "-t", name,
                               "-o", "beginning", "-e", "-q"],
                              capture_output=True, text=True, timeout=60)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == ["one", "two", "three"]


def test_confluent_kafka_over_ssl(ssl_broker: BrokerProcess, ca: TlsFiles) -> None:
    values = [f"ck-{i}".encode() for i in range(20)]
    assert produce_and_consume(ssl_conf(ssl_broker.bootstrap, ca), topic(), values) == values


def test_kafka_python_over_ssl(ssl_broker: BrokerProcess, ca: TlsFiles) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    name = topic()
    settings = {"bootstrap_servers": ssl_broker.bootstrap, "security_protocol": "SSL",
                "ssl_cafile": str(ca.ca)}
    producer = KafkaProducer(**settings)
    for i in range(10):
        producer.send(name, f"kp-{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(name, auto_offset_reset="earliest", consumer_timeout_ms=15000,
                             **settings)
    values = kafka_python_read_all(consumer)
    consumer.close()
    assert values == [f"kp-{i}".encode() for i in range(10)]


def test_aiokafka_over_ssl(ssl_broker: BrokerProcess, ca: TlsFiles) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    name = topic()

    async def run() -> list[bytes]:
        context = create_ssl_context(cafile=str(ca.ca))
        producer = AIOKafkaProducer(bootstrap_servers=ssl_broker.bootstrap, acks="all",
                                    security_protocol="SSL", ssl_context=context)
        await producer.start()
        try:
            for i in range(10):
                await producer.send_and_wait(name, f"aio-{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(name, bootstrap_servers=ssl_broker.bootstrap,
                                    auto_offset_reset="earliest", security_protocol="SSL",
                                    ssl_context=context)
        await consumer.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(30):
                while len(got) < 10:
                    batch = await consumer.getmany(timeout_ms=1000)
                    got += [m.value for records in batch.values() for m in records]
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(run()) == [f"aio-{i}".encode() for i in range(10)]


def test_slog_client_over_ssl(ssl_broker: BrokerProcess, ca: TlsFiles) -> None:
    name = topic()
    settings = {"security_protocol": "SSL", "ssl_cafile": str(ca.ca)}
    producer = SlogProducer(ssl_broker.bootstrap, **settings)
    # Large records: a fetch response spans many TLS records and socket reads.
    values = [os.urandom(200_000) for _ in range(15)]
    for value in values:
        producer.send(name, value)
    producer.flush(30)
    producer.close()
    consumer = SlogConsumer(ssl_broker.bootstrap, auto_offset_reset="earliest", **settings)
    consumer.assign([TopicPartition(name, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < len(values) and time.monotonic() < deadline:
        got += [r.value for r in consumer.poll(1.0)]  # type: ignore[misc]
    consumer.close()
    assert got == values


def test_slog_client_refuses_an_untrusted_broker(ssl_broker: BrokerProcess) -> None:
    context = tls_context("SSL")  # the system's CAs, which never signed our local CA
    with pytest.raises(BrokerUnavailableError, match="not trusted"):
        BrokerConnection("127.0.0.1", ssl_broker.port, tls=context).connect()


def test_plaintext_client_on_the_ssl_port_fails_cleanly(ssl_broker: BrokerProcess) -> None:
    with pytest.raises(BrokerUnavailableError):
        BrokerConnection("127.0.0.1", ssl_broker.port, tls=None, timeout_s=5).connect()


# -- hostile bytes ---------------------------------------------------------------------------
def test_garbage_and_stalled_handshakes_hurt_only_their_connection(
        ssl_broker: BrokerProcess, ca: TlsFiles) -> None:
    context = tls_context("SSL", str(ca.ca))
    with contextlib.ExitStack() as stack:
        # A Kafka client speaking plaintext, random bytes, and handshakes that stall.
        plain = stack.enter_context(socket.create_connection(("127.0.0.1", ssl_broker.port)))
        plain.sendall(struct.pack(">ihhi", 10, 18, 0, 1) + b"\0\0")
        noise = stack.enter_context(socket.create_connection(("127.0.0.1", ssl_broker.port)))
        noise.sendall(os.urandom(4096))
        stalled = [stack.enter_context(socket.create_connection(("127.0.0.1",
                                                                  ssl_broker.port)))
                   for _ in range(5)]
        for sock in stalled:
            sock.sendall(b"\x16\x03\x01\x00\xff\x01")  # half a ClientHello, then nothing
        for sock in (plain, noise):
            sock.settimeout(10)
            with contextlib.suppress(ConnectionResetError):
                while sock.recv(4096):  # at most an alert, then the broker closes it
                    pass
        # Meanwhile a real client is served at once.
        started = time.monotonic()
        with BrokerConnection("127.0.0.1", ssl_broker.port, tls=context) as conn:
            assert conn.request(ApiKey.METADATA, METADATA).brokers
        assert time.monotonic() - started < 5
    assert "Traceback" not in ssl_broker.log_text


# -- SASL_SSL -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sasl_ssl_broker(tmp_path_factory: pytest.TempPathFactory, ca: TlsFiles
                    ) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("sasl-ssl") / "data"
    add_users(data)
    settings = tls_settings(ca, **{"security.protocol": "SASL_SSL",
                                   "sasl.enabled.mechanisms": "SCRAM-SHA-256,PLAIN"})
    with running_broker(data, **settings) as broker:
        yield broker


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "PLAIN"])
def test_sasl_ssl(sasl_ssl_broker: BrokerProcess, ca: TlsFiles, mechanism: str) -> None:
    conf = ssl_conf(sasl_ssl_broker.bootstrap, ca, **{
        "security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
        "sasl.username": "alice", "sasl.password": PASSWORDS["alice"]})
    values = [f"{mechanism}-{i}".encode() for i in range(10)]
    assert produce_and_consume(conf, topic(), values) == values
    wrong = {**conf, "sasl.password": "wrong", "client.id": "wrong-password"}
    metadata_error = None
    try:
        AdminClient(wrong).list_topics(timeout=5)
    except Exception as exc:  # confluent-kafka: KafkaException(_TRANSPORT / auth failure)
        metadata_error = exc
    assert metadata_error is not None


def test_sasl_ssl_needs_a_login(sasl_ssl_broker: BrokerProcess, ca: TlsFiles) -> None:
    """TLS alone is not enough on SASL_SSL: without a login the broker closes the
    connection at the first request other than ApiVersions or SASL."""
    context = tls_context("SSL", str(ca.ca))
    with BrokerConnection("127.0.0.1", sasl_ssl_broker.port, tls=context) as conn, \
            pytest.raises(ConnectionError):
        conn.request(ApiKey.METADATA, METADATA)


# -- client certificates --------------------------------------------------------------------
def test_client_auth_required(tmp_path: Path, ca: TlsFiles) -> None:
    with running_broker(tmp_path / "data", **tls_settings(
            ca, **{"ssl.client.auth": "required"})) as broker:
        without = tls_context("SSL", str(ca.ca))
        with pytest.raises((BrokerUnavailableError, ConnectionError)):
            BrokerConnection("127.0.0.1", broker.port, tls=without, timeout_s=5).connect()
        with_cert = tls_context("SSL", str(ca.ca), str(ca.client_cert), str(ca.client_key))
        with BrokerConnection("127.0.0.1", broker.port, tls=with_cert) as conn:
            assert conn.request(ApiKey.METADATA, METADATA).brokers
        conf = ssl_conf(broker.bootstrap, ca, **{"ssl.certificate.location": str(ca.client_cert),
                                                 "ssl.key.location": str(ca.client_key)})
        values = [b"cert-1", b"cert-2"]
        assert produce_and_consume(conf, topic(), values) == values
        # The CLI hands its --cert/--key to the client.
        listed = run_cli("topic", "list", "-b", broker.bootstrap, "--ca", str(ca.ca),
                         "--cert", str(ca.client_cert), "--key", str(ca.client_key))
        assert listed.returncode == 0, listed.stderr
        refused = run_cli("topic", "list", "-b", broker.bootstrap, "--ca", str(ca.ca))
        assert refused.returncode == 3, refused.stderr


# -- start-up errors -------------------------------------------------------------------------
def test_missing_or_bad_certificate_stops_the_start(tmp_path: Path, ca: TlsFiles) -> None:
    missing = tmp_path / "nowhere.pem"
    with pytest.raises(BrokerStartError) as failed:
        start_daemon(1, tmp_path / "a", f"127.0.0.1:{free_port()}", tls_settings(
            ca, **{"ssl.keystore.location": str(missing)}), timeout_s=20)
    assert str(missing) in str(failed.value) and "Traceback" not in str(failed.value)
    bad = tmp_path / "bad.pem"
    bad.write_text("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n")
    with pytest.raises(BrokerStartError) as failed:
        start_daemon(1, tmp_path / "b", f"127.0.0.1:{free_port()}", tls_settings(
            ca, **{"ssl.keystore.location": str(bad)}), timeout_s=20)
    assert str(bad) in str(failed.value) and "Traceback" not in str(failed.value)
    with pytest.raises(BrokerStartError) as failed:
        start_daemon(1, tmp_path / "c", f"127.0.0.1:{free_port()}",
                     {"security.protocol": "SSL"}, timeout_s=20)
    assert "ssl.keystore.location" in str(failed.value)


# -- listeners -------------------------------------------------------------------------------
def test_mixed_listeners_advertise_their_own_endpoints(tmp_path: Path, ca: TlsFiles) -> None:
    plain_port, tls_port = free_port(), free_port()
    settings = tls_settings(ca, **{
        "security.protocol": "PLAINTEXT",
        "listeners": f"PLAINTEXT://127.0.0.1:{plain_port},SSL://127.0.0.1:{tls_port}"})
    broker = BrokerProcess(1, tmp_path / "data", plain_port, settings).start()
    try:
        with BrokerConnection("127.0.0.1", plain_port, tls=None) as conn:
            plain = conn.request(ApiKey.METADATA, METADATA).brokers
        context = tls_context("SSL", str(ca.ca))
        with BrokerConnection("127.0.0.1", tls_port, tls=context) as conn:
            secure = conn.request(ApiKey.METADATA, METADATA).brokers
            described = conn.request(ApiKey.DESCRIBE_CLUSTER, {
                "include_cluster_authorized_operations": False}).brokers
        assert [(b.host, b.port) for b in plain] == [("127.0.0.1", plain_port)]
        assert [(b.host, b.port) for b in secure] == [("127.0.0.1", tls_port)]
        assert [(b.host, b.port) for b in described] == [("127.0.0.1", tls_port)]
        # Each listener's clients find the group coordinator on their own listener.
        for bootstrap, conf in ((f"127.0.0.1:{plain_port}", {}),
                                (f"127.0.0.1:{tls_port}", ssl_conf("", ca))):
            conf = {**conf, "bootstrap.servers": bootstrap}
            assert produce_and_consume(conf, topic(), [b"x", b"y"]) == [b"x", b"y"]
    finally:
        broker.stop()
    assert "Traceback" not in broker.log_text


@pytest.mark.parametrize("protocol", ["SSL", "SASL_SSL"])
def test_three_brokers_replicate_over_tls(tmp_path: Path, ca: TlsFiles, protocol: str) -> None:
    """acks=all with min.insync.replicas=3: every follower fetches over the TLS (and, for
    SASL_SSL, logged-in) inter-broker listener."""
    data = tmp_path / "data"
    add_users(data)
    base = free_port_range(3)
    settings = tls_settings(ca, **{"security.protocol": protocol})
    brokers = [BrokerProcess(i, data, base + i - 1, settings) for i in (1, 2, 3)]
    stack = contextlib.ExitStack()
    try:
        # a start is mostly waiting for the port: the three wait at once
        started = in_parallel(lambda i: brokers[i].start(), range(len(brokers)))
        failed = [r for r in started.values() if isinstance(r, Exception)]
        if failed:
            raise failed[0]
        conf = ssl_conf(",".join(b.bootstrap for b in brokers), ca)
        if protocol == "SASL_SSL":
            conf.update({"security.protocol": protocol, "sasl.mechanism": "SCRAM-SHA-256",
                         "sasl.username": "admin", "sasl.password": PASSWORDS["admin"]})
            stack.enter_context(logged_in("admin"))  # slog's client logs in too
        admin = SlogAdmin(conf["bootstrap.servers"], security_protocol="SSL",
                          ssl_cafile=str(ca.ca))
        deadline = time.monotonic() + 30
        while len(admin.describe_cluster().brokers) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)  # the controller registers them
        name = topic()
        creator = AdminClient(conf)  # kept: a collected client cancels its futures
        futures = creator.create_topics([NewTopic(
            name, num_partitions=2, replication_factor=3,
            config={"min.insync.replicas": "3"})])
        futures[name].result(30)
        producer = Producer({**conf, "acks": "all", "enable.idempotence": True})
        for i in range(200):
            producer.produce(name, f"r-{i}".encode(), partition=i % 2)
        assert producer.flush(60) == 0
        # Every replica caught up over the TLS inter-broker listener.
        deadline = time.monotonic() + 30
        while True:
            described = admin.describe_topics([name])[0]
            if all(len(p.isr) == 3 for p in described.partitions) or \
                    time.monotonic() > deadline:
                break
            time.sleep(0.2)
        admin.close()
        assert all(len(p.isr) == 3 for p in described.partitions)
        assert sorted(p.high_watermark for p in described.partitions) == [100, 100]
        consumer = Consumer({**conf, "group.id": f"g-{name}", "auto.offset.reset": "earliest"})
        consumer.subscribe([name])
        assert len(poll_values(consumer, 200)) == 200
    finally:
        stack.close()
        for broker in brokers:
            with contextlib.suppress(Exception):
                broker.stop()
    for broker in brokers:
        assert "Traceback" not in broker.log_text


# -- slog cluster up --tls -------------------------------------------------------------------
def test_cluster_up_tls_end_to_end(tmp_path: Path) -> None:
    data = tmp_path / "data"
    base = free_port_range(2)
    up = run_cli("cluster", "up", "--tls", "-n", "2", "--base-port", str(base),
                 "--data-dir", str(data), "--timeout", "60", timeout=120)
    try:
        assert up.returncode == 0, up.stderr
        ca = data / "tls" / "ca.pem"
        assert f"ssl.ca.location={ca}" in up.stdout and "--tls --ca" in up.stdout
        for key in ("ca.key", "broker.key", "broker-keystore.pem", "client.key"):
            assert stat.S_IMODE((data / "tls" / key).stat().st_mode) == 0o600
        bootstrap = f"127.0.0.1:{base}"
        created = run_cli("topic", "create", "cli-tls", "-b", bootstrap, "--tls", "--ca",
                          str(ca))
        assert created.returncode == 0, created.stderr
        produced = run_cli("produce", "cli-tls", "-b", bootstrap, "--tls", "--ca", str(ca),
                           input_text="a\nb\nc\n")
        assert produced.returncode == 0, produced.stderr
        consumed = run_cli("consume", "cli-tls", "-b", bootstrap, "--tls", "--ca", str(ca),
                           "-o", "beginning", "-e")
        assert consumed.returncode == 0, consumed.stderr
        assert consumed.stdout.split() == ["a", "b", "c"]
        plain = run_cli("topic", "list", "-b", bootstrap, timeout=60)
        assert plain.returncode != 0
        status = run_cli("cluster", "status", "--data-dir", str(data))
        assert status.returncode == 0, status.stdout + status.stderr
        first_ca = ca.read_bytes()
        assert run_cli("cluster", "down", "--data-dir", str(data)).returncode == 0
        again = run_cli("cluster", "up", "--tls", "-n", "2", "--base-port", str(base),
                        "--data-dir", str(data), "--timeout", "60", "-o", "json",
                        timeout=120)
        assert again.returncode == 0, again.stderr
        assert ca.read_bytes() == first_ca  # reused, so clients keep trusting it
        assert '"tls"' in again.stdout
    finally:
        run_cli("cluster", "down", "--data-dir", str(data))


def test_client_tls_context_checks_files(tmp_path: Path) -> None:
    from slog.protocol.tls import TlsConfigError

    with pytest.raises(TlsConfigError, match=r"nope\.pem"):
        tls_context("SSL", str(tmp_path / "nope.pem"))
    assert tls_context("PLAINTEXT") is None
    assert isinstance(tls_context("SASL_SSL"), ssl.SSLContext)


def test_describe_configs_hides_tls_secrets(ssl_broker: BrokerProcess, ca: TlsFiles) -> None:
    with BrokerConnection("127.0.0.1", ssl_broker.port,
                          tls=tls_context("SSL", str(ca.ca))) as conn:
        answer = conn.request(ApiKey.DESCRIBE_CONFIGS, {
            "resources": [{"resource_type": 4, "resource_name": "1",
                           "configuration_keys": ["ssl.key.password", "ssl.keystore.location"]}],
            "include_synonyms": False, "include_documentation": False}, version=4)
    configs = {c.name: c for c in answer.results[0].configs}
    assert configs["ssl.key.password"].is_sensitive and configs["ssl.key.password"].value is None
    assert configs["ssl.keystore.location"].value == str(ca.broker_keystore)


def test_a_profile_carries_the_tls_settings(ssl_broker: BrokerProcess, ca: TlsFiles,
                                            tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "slog.toml"
    config.write_text(f'[profiles.secure]\nbootstrap = "{ssl_broker.bootstrap}"\n'
                      f'tls = true\nca = "{ca.ca}"\n')
    monkeypatch.setenv("SLOG_CONFIG", str(config))
    for name in ("SLOG_TLS", "SLOG_TLS_CA", "SLOG_BOOTSTRAP"):
        monkeypatch.delenv(name, raising=False)
    listed = run_cli("--profile", "secure", "topic", "list")
    assert listed.returncode == 0, listed.stderr
    plain = run_cli("topic", "list", "-b", ssl_broker.bootstrap, timeout=60)
    assert plain.returncode == 3, plain.stderr  # no profile: plaintext, refused
