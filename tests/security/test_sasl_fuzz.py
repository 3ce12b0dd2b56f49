"""Fuzzing a broker with SASL (and ACLs) on, without ever logging in.

The broker requires SASL_PLAINTEXT. Every case runs on a connection that has
not authenticated (see tests/fuzz/hostile.py and hostile_sasl.py):

* the inputs of tests/integration/test_broker_fuzz.py, for every advertised API
  and version: random frames and bytes, hostile values, mutations, huge
  declared lengths, nulls, unknown tagged fields, mismatched versions;
* hostile SaslHandshake and SaslAuthenticate requests (mechanism names, PLAIN
  and SCRAM tokens broken every way);
* whole SASL exchanges (both handshake versions, PLAIN and SCRAM-SHA-256)
  whose last step is hostile: bad tokens, SCRAM client-finals with wrong
  nonces, bad proofs or channel bindings, and requests of other APIs sent in
  the middle of the exchange.

Each case passes if its answer decodes as the request's API and version with
its correlation id, or the connection is closed; no API but ApiVersions,
SaslHandshake and SaslAuthenticate is ever answered; and a Metadata request
sent after the probe closes the connection unanswered (no case authenticated
it). After these ~1,000 cases the topics are the same, the topics they aimed
at are empty, and nobody but the tests' own admin has logged in.

Then ~400 hostile requests (two of every API and version, and mutated ones) are
sent by a logged-in principal with few rights (alice: three of the fuzzed
topics, every group), so that every request also passes through the ACL
checks, allowed or denied; the oracle is the plain one (a valid request is
answered). Afterwards the broker is alive,
bounded, has no traceback in its log, kept its records, and confluent-kafka
logged in with SCRAM or PLAIN produces and consumes. Seeds are fixed
(derandomize): the same cases every run.
"""

from __future__ import annotations

import dataclasses
import re
import struct
import time
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from slog.core.credentials import by_mechanism, load_credentials, save_credentials
from slog.core.scram import ScramClient, derive_credential, plain_token
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from tests.brokers import running_broker
from tests.compat.clients import Wire, create_topic, slog_connection, slog_consume
from tests.fuzz.hostile import (
    API_CASES,
    SETTINGS,
    TARGET_CONFIG,
    TOPICS,
    Tally,
    Target,
    assert_unharmed,
    exchange,
    mutated_requests,
    prepare_target,
    requests,
    strategies,
)
from tests.fuzz.hostile_sasl import (
    FINAL_ATTACKS,
    REQUEST,
    SASL_CASES,
    TOKEN,
    Conversation,
    conversations,
    converse,
    logged_in_wire,
)
from tests.security.conftest import (
    ACLS,
    PASSWORDS,
    add_users,
    logged_in,
    produce_and_consume,
    sasl_conf,
)

HUGE_ITERATIONS = 2**31 - 1  # "hugeiter"'s stored SCRAM iteration count
ALICE_TOPICS = ["fz.c", "fz_c", "fz-new"]  # of hostile.TOPICS; not fz-a, fz-b or fz-keep
PRE_AUTH, LOGGED_IN = Tally(), Tally()  # outcomes, for docs/RELIABILITY.md


def topic_names(target: Target) -> set[str]:
    with logged_in("admin"), slog_connection(target.broker.bootstrap) as conn:
        response = conn.request(ApiKey.METADATA, {"topics": None,
                                                  "allow_auto_topic_creation": False})
    return {t.name for t in response.topics}


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    data = tmp_path_factory.mktemp("sasl-fuzz") / "data"
    add_users(data)
    users = load_credentials(data / "credentials.json")
    # A credential stored with an absurd iteration count: checking a PLAIN
    # password against it must be refused, not computed for hours.
    users["hugeiter"] = by_mechanism(dataclasses.replace(derive_credential("hugeiter-secret"),
                                                         iterations=HUGE_ITERATIONS))
    save_credentials(data / "credentials.json", users)
    # ~1,000 failed logins from one address: the growing hold on their answers
    # (tests/security/test_login_throttle.py) would make this run for hours.
    no_login_hold = {"connection.failed.authentication.delay.max.ms": "0"}
    with running_broker(data, **ACLS, **TARGET_CONFIG, **no_login_hold) as broker:
        with logged_in("admin"):
            prepared = prepare_target(broker)
        yield prepared


@pytest.fixture(scope="module", autouse=True)
def topics_before(target: Target) -> set[str]:
    return topic_names(target)


# Examples per kind of hostile frame: hostile.strategies() (every advertised API),
# and the SASL APIs alone.
STRATEGIES = {**strategies(), "hostile SASL values": requests(SASL_CASES),
              "mutated SASL frame": mutated_requests(SASL_CASES)}
BEFORE_LOGIN = {"random frame": 100, "hostile values": 200, "mutated frame": 100,
                "mismatched version": 30, "huge declared length": 30,
                "null where not nullable": 20, "unknown tagged fields": 20,
                "hostile SASL values": 150, "mutated SASL frame": 60}
# Examples per kind of hostile last step of a SASL exchange.
EXCHANGES = {"hostile token": ([TOKEN], 100), "SCRAM client-final": (list(FINAL_ATTACKS), 100),
             "other request mid-exchange": ([REQUEST], 60)}


def test_every_advertised_api_is_fuzzed(target: Target) -> None:
    advertised = {(key, v) for key, (lo, hi) in target.advertised.items()
                  for v in range(lo, hi + 1)}
    assert set(API_CASES) == advertised
    assert {k for k, _ in SASL_CASES} == {ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE}


@pytest.mark.parametrize("kind", BEFORE_LOGIN)
def test_hostile_frames_before_login(target: Target, kind: str) -> None:
    @settings(max_examples=BEFORE_LOGIN[kind], **SETTINGS)
    @given(sent=STRATEGIES[kind])
    def case(sent: bytes) -> None:
        PRE_AUTH.add(exchange(target, sent, pre_auth=True))
    case()


@settings(max_examples=40, **SETTINGS)
@given(raw=st.binary(min_size=1, max_size=64))
def test_random_unframed_bytes_before_login(target: Target, raw: bytes) -> None:
    PRE_AUTH.add(exchange(target, raw, framed=False, pre_auth=True))


@pytest.mark.parametrize("kind", EXCHANGES)
def test_sasl_exchanges_with_a_hostile_step(target: Target, kind: str) -> None:
    attacks, examples = EXCHANGES[kind]

    @settings(max_examples=examples, **SETTINGS)
    @given(conversation=conversations(attacks))
    def case(conversation: Conversation) -> None:
        PRE_AUTH.add(converse(target, conversation))
    case()


def test_a_recorded_scram_exchange_cannot_be_replayed(target: Target) -> None:
    """A client-final with the right password, from another connection, is refused."""
    def client_first(wire: Wire) -> bytes:
        assert wire.request(ApiKey.SASL_HANDSHAKE, 1,
                            {"mechanism": "SCRAM-SHA-256"}).error_code == ErrorCode.none
        answer = wire.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": first})
        assert answer.error_code == ErrorCode.none
        return bytes(answer.auth_bytes)

    client = ScramClient("admin", PASSWORDS["admin"], nonce="replayed-nonce")
    first = client.first_message()
    with Wire(target.broker.bootstrap) as wire:
        final = client.final_message(client_first(wire))
        answer = wire.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": final})
        assert answer.error_code == ErrorCode.none  # the original exchange logs in
    with Wire(target.broker.bootstrap) as wire:
        client_first(wire)  # same client nonce; the server's half is new
        answer = wire.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": final})
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert wire.closed_by_peer()


def test_huge_stored_iteration_count_is_refused_not_computed(target: Target) -> None:
    """PLAIN against a credential stored with 2**31 - 1 iterations fails at once."""
    with Wire(target.broker.bootstrap) as wire:
        assert wire.request(ApiKey.SASL_HANDSHAKE, 1,
                            {"mechanism": "PLAIN"}).error_code == ErrorCode.none
        started = time.monotonic()
        answer = wire.request(ApiKey.SASL_AUTHENTICATE, 2,
                              {"auth_bytes": plain_token("hugeiter", "hugeiter-secret")})
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert time.monotonic() - started < 2
    # SCRAM passes the count on; slog's own client refuses to compute it.
    with Wire(target.broker.bootstrap) as wire:
        wire.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"})
        answer = wire.request(ApiKey.SASL_AUTHENTICATE, 2,
                              {"auth_bytes": ScramClient("hugeiter", "x").first_message()})
        assert bytes(answer.auth_bytes).endswith(b",i=%d" % HUGE_ITERATIONS)


def test_pipelined_requests_before_authenticating(target: Target) -> None:
    """A valid handshake and Metadata in one write: the handshake answered, then closed."""
    with Wire(target.broker.bootstrap) as wire:
        handshake = wire.encode(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        metadata = wire.encode(ApiKey.METADATA, 1, {"topics": None})
        wire.send(handshake + metadata + metadata)
        assert struct.unpack_from(">i", wire.read_frame() or b"")[0] == 101
        assert wire.closed_by_peer()


def test_nothing_before_authentication_changed_anything(target: Target,
                                                        topics_before: set[str]) -> None:
    """After the unauthenticated cases: same topics, nothing written, nobody else logged in."""
    print(f"\nSASL fuzz before login: {PRE_AUTH.total} cases, {dict(PRE_AUTH.outcomes)}")
    assert PRE_AUTH.total >= 1000
    assert topic_names(target) == topics_before
    with logged_in("admin"):
        assert [slog_consume(target.broker.bootstrap, t) for t in TOPICS[:2]] == [[], []]
    principals = set(re.findall(r"authenticated as (\S+)", target.broker.log_text))
    assert principals == {"User:admin"}, principals


# -- then as a logged-in principal with few rights: every request passes the ACL checks
@pytest.fixture(scope="module")
def alice(target: Target) -> str:
    """alice may do anything with three of the fuzzed topics and with every group."""
    bindings = [AclBinding(ResourceType.TOPIC, name, ResourcePatternType.LITERAL, "User:alice",
                           "*", AclOperation.ALL, AclPermissionType.ALLOW)
                for name in ALICE_TOPICS]
    bindings.append(AclBinding(ResourceType.GROUP, "*", ResourcePatternType.LITERAL,
                               "User:alice", "*", AclOperation.ALL, AclPermissionType.ALLOW))
    admin = AdminClient(sasl_conf(target.broker, "admin"))
    for future in admin.create_acls(bindings).values():
        future.result(timeout=30)
    return "alice"


def fuzz_as(target: Target, user: str, sent: bytes) -> None:
    with logged_in_wire(target, user, PASSWORDS[user]) as wire:
        LOGGED_IN.add(exchange(target, sent, wire=wire))


@pytest.mark.parametrize("case", API_CASES, ids=[f"{k}v{v}" for k, v in API_CASES])
@settings(max_examples=2, **SETTINGS)
@given(data=st.data())
def test_every_api_version_as_an_unprivileged_user(target: Target, alice: str,
                                                   case: tuple[int, int],
                                                   data: st.DataObject) -> None:
    """Every advertised API and version, so that each goes through the ACL checks."""
    fuzz_as(target, alice, data.draw(requests([case])))


@settings(max_examples=100, **SETTINGS)
@given(sent=mutated_requests())
def test_mutated_requests_as_an_unprivileged_user(target: Target, alice: str,
                                                  sent: bytes) -> None:
    fuzz_as(target, alice, sent)


def test_broker_survived(target: Target) -> None:
    """Runs last in this module: unharmed, and it serves logged-in clients."""
    print(f"\nSASL fuzz as alice: {LOGGED_IN.total} cases, {dict(LOGGED_IN.outcomes)}")
    with logged_in("admin"):
        assert_unharmed(target)
        for topic in ("after-scram", "after-plain"):
            create_topic(target.broker.bootstrap, topic)
    for mechanism, topic in (("SCRAM-SHA-256", "after-scram"), ("PLAIN", "after-plain")):
        values = [f"{mechanism}-{i}".encode() for i in range(20)]
        assert produce_and_consume(sasl_conf(target.broker, "admin", mechanism), topic,
                                   values) == values
