"""Failed SASL logins are answered later and later per source address; successful
logins never wait; other connections are served meanwhile. A real broker, real
clients (confluent-kafka for PLAIN and SCRAM, raw frames where timing is measured)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer

from slog.broker.login_throttle import FIRST_DELAY_S, FREE_FAILURES
from slog.protocol.apis import ApiKey
from tests.brokers import BrokerProcess, running_broker
from tests.security.conftest import PASSWORDS, SASL, add_users, sasl_conf
from tests.security.test_sasl import RawClient

THROTTLED = "SASL logins from 127.0.0.1 failed"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    data = tmp_path / "data"
    add_users(data)
    with running_broker(data, **SASL) as running:
        yield running


def _hold_after(failures: int) -> float:
    """The hold on the answer to the ``failures``-th failure in a row (one at a time)."""
    beyond = failures - FREE_FAILURES
    return 0.0 if beyond <= 0 else FIRST_DELAY_S * 2 ** (beyond - 1)


def _failed_login_s(broker: BrokerProcess, mechanism: str) -> float:
    """How long confluent-kafka waits for the refusal of a wrong password."""
    errors: list[KafkaError] = []
    conf = {**sasl_conf(broker, "alice", mechanism, password="wrong"),
            "error_cb": errors.append, "message.timeout.ms": 60_000,
            "reconnect.backoff.ms": 60_000, "reconnect.backoff.max.ms": 60_000}
    producer = Producer(conf)
    started = time.monotonic()
    producer.produce("never-written", b"x")
    while not errors and time.monotonic() - started < 60:
        producer.poll(0.02)
    took = time.monotonic() - started
    producer.purge()
    producer.flush(1)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
    return took


def _raw_plain_login(broker: BrokerProcess, password: str) -> tuple[int, float]:
    """(error code, seconds) of one PLAIN SaslAuthenticate on a new connection."""
    client = RawClient(broker)
    try:
        client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        started = time.monotonic()
        answer = client.request(ApiKey.SASL_AUTHENTICATE, 2,
                                {"auth_bytes": f"\0alice\0{password}".encode()})
        return answer.error_code, time.monotonic() - started
    finally:
        client.close()


def test_failed_logins_are_answered_later_and_later(broker: BrokerProcess) -> None:
    took = [_failed_login_s(broker, mechanism)
            for mechanism in ["PLAIN", "SCRAM-SHA-256"] * 3]
    # Every failure from the 4th on was held at least as long as its turn says
    # (a client may fail more than once per attempt: then longer still).
    for number, seconds in enumerate(took, start=1):
        assert seconds >= _hold_after(number) * 0.9, (number, took)
    assert broker.log_text.count(THROTTLED) == 1, broker.log_text[-3000:]


def test_successful_logins_and_other_clients_never_wait(broker: BrokerProcess) -> None:
    for _ in range(FREE_FAILURES + 3):  # held up to 1 s by the 6th
        code, _ = _raw_plain_login(broker, "wrong")
        assert code == 58
    held: list[tuple[int, float, float]] = []

    def one_more_failure() -> None:
        code, seconds = _raw_plain_login(broker, "wrong")
        held.append((code, seconds, time.monotonic()))

    guesser = threading.Thread(target=one_more_failure)
    guesser.start()
    time.sleep(0.2)  # its answer is now being held (2 s)
    code, login_s = _raw_plain_login(broker, PASSWORDS["alice"])
    assert code == 0
    logged_in_at = time.monotonic()
    other = RawClient(broker)
    try:
        started = time.monotonic()
        assert other.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0
        api_versions_s = time.monotonic() - started
    finally:
        other.close()
    guesser.join(30)
    [(failed_code, failed_s, failed_at)] = held
    assert failed_code == 58
    assert failed_s >= _hold_after(FREE_FAILURES + 4) * 0.9, held
    # The good password and another client were served while the guess was held.
    assert logged_in_at < failed_at and login_s < failed_s / 2, (login_s, held)
    assert api_versions_s < failed_s / 2, (api_versions_s, held)
