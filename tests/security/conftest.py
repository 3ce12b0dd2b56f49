"""A broker with SASL and the ACL authorizer on, and the users the tests log in as."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from slog.client.connection import BrokerConnection
from slog.core.credentials import by_mechanism, save_credentials
from slog.core.names import ensure_data_dir
from slog.core.scram import SCRAM_MECHANISMS, SaslLogin, derive_credential
from slog.protocol.apis import ApiKey
from tests.brokers import BrokerProcess, running_broker
from tests.cluster.conftest import FAST, Cluster

PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
SASL = {"security.protocol": "SASL_PLAINTEXT"}
ACLS = {**SASL, "authorizer.class.name": "slog", "super.users": "User:admin"}


def add_users(data_dir: Path) -> None:
    ensure_data_dir(data_dir)
    save_credentials(data_dir / "credentials.json", {
        name: by_mechanism(*(derive_credential(pw, mechanism=m) for m in SCRAM_MECHANISMS))
        for name, pw in PASSWORDS.items()})


def sasl_conf(broker: BrokerProcess | str, user: str, mechanism: str = "SCRAM-SHA-256",
              password: str | None = None) -> dict[str, Any]:
    """confluent-kafka settings for ``user``."""
    bootstrap = broker if isinstance(broker, str) else broker.bootstrap
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user,
            "sasl.password": PASSWORDS.get(user, "") if password is None else password}


def sasl_connection(port: int, user: str, *, node_id: int = -1,
                    client_id: str = "slog") -> BrokerConnection:
    """slog's BrokerConnection to 127.0.0.1:``port``, logging in as ``user``
    (SCRAM-SHA-256) when entered."""
    return BrokerConnection("127.0.0.1", port, node_id=node_id, client_id=client_id,
                            sasl=SaslLogin("SCRAM-SHA-256", user, PASSWORDS[user]))


def cluster_login(cluster: Cluster, broker_id: int, user: str) -> BrokerConnection:
    """:func:`sasl_connection` to one broker of ``cluster``."""
    return sasl_connection(cluster.brokers[broker_id].port, user, node_id=broker_id)


def produce_and_consume(conf: dict[str, Any], topic: str, values: list[bytes]) -> list[bytes]:
    """Produce ``values`` to ``topic`` with confluent-kafka, then read them back in a group."""
    producer = Producer(conf)
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    return poll_values(consumer, len(values))


def poll_values(consumer: Consumer, count: int, timeout_s: float = 60) -> list[bytes]:
    """Up to ``count`` record values from a subscribed or assigned consumer, which is closed."""
    got: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
    finally:
        consumer.close()
    return got


def _broker_with_users(tmp_path_factory: pytest.TempPathFactory, name: str,
                       settings: dict[str, str]) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp(name) / "data"
    add_users(data)
    with running_broker(data, **settings) as broker:
        yield broker


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """SASL required, no authorizer."""
    yield from _broker_with_users(tmp_path_factory, "sasl", SASL)


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """SASL required and ACLs enforced; User:admin is a super user."""
    yield from _broker_with_users(tmp_path_factory, "acl", ACLS)


def _login(monkeypatch: pytest.MonkeyPatch, user: str, mechanism: str = "SCRAM-SHA-256") -> None:
    monkeypatch.setenv("SLOG_SASL_MECHANISM", mechanism)
    monkeypatch.setenv("SLOG_SASL_USERNAME", user)
    monkeypatch.setenv("SLOG_SASL_PASSWORD", PASSWORDS[user])


@contextlib.contextmanager
def logged_in(user: str) -> Iterator[None]:
    """slog's client (and CLI subprocesses) log in as ``user`` inside the block."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        _login(monkeypatch, user)
        yield


@pytest.fixture
def as_user(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Make slog's client (and CLI subprocesses) log in as a user."""
    def login(user: str, mechanism: str = "SCRAM-SHA-256") -> None:
        _login(monkeypatch, user, mechanism)
    return login


@pytest.fixture
def secure_cluster(tmp_path: Path, as_user: Any) -> Iterator[Cluster]:
    """Three brokers with SASL and ACLs on (the fixture's slog clients log in as admin)."""
    as_user("admin")
    yield from _secure_cluster(tmp_path / "data")


@pytest.fixture(scope="module")
def shared_secure_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """``secure_cluster`` for a whole module whose tests remove the users, ACLs and topics
    they make (slog's clients log in as admin for the module). Failed logins are held at
    most 0.5 s: the hold grows per address over the module's refused logins, up to 8 s
    each by default (test_login_throttle.py checks the hold itself)."""
    with logged_in("admin"):
        yield from _secure_cluster(tmp_path_factory.mktemp("secure") / "data",
                                   {"connection.failed.authentication.delay.max.ms": "500"})


def _secure_cluster(data: Path, settings: dict[str, str] | None = None) -> Iterator[Cluster]:
    add_users(data)
    yield from three_brokers(data, {**ACLS, **(settings or {})})


def kafka_python_read_all(consumer: Any) -> list[bytes]:
    """The values a kafka-python consumer reads until its position is at the end of every
    partition it was given (its consumer_timeout_ms still bounds a stall): records beyond
    the ones expected would be read too, without waiting the timeout out at the end."""
    values = []
    for message in consumer:
        values.append(message.value)
        given = list(consumer.assignment())
        if given and all(consumer.position(tp) >= end
                         for tp, end in consumer.end_offsets(given).items()):
            break
    return values


def three_brokers(data: Path, settings: dict[str, str]) -> Iterator[Cluster]:
    """A started 3-broker cluster with ``settings``; closed after, with no traceback."""
    nodes = Cluster(data, 3, {**FAST, **settings})
    try:
        nodes.start()
        yield nodes
    finally:
        nodes.close()
    assert not any("Traceback" in nodes.log_text(b) for b in nodes.brokers)


def describe_acls(port: int) -> set[tuple[str, str]]:
    """(resource name, principal) of every ACL, as one broker describes them to the admin."""
    login = SaslLogin("SCRAM-SHA-256", "admin", PASSWORDS["admin"])
    with BrokerConnection("127.0.0.1", port, sasl=login) as conn:
        response = conn.request(ApiKey.DESCRIBE_ACLS, {
            "resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
            "principal_filter": None, "host_filter": None, "operation": 1,
            "permission_type": 1})
    return {(r.resource_name, a.principal) for r in response.resources for a in r.acls}
