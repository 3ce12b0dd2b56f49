"""Client quotas without a broker: Kafka's resolution order, validation, describe filters,
the sampled rate and its throttle times, handler-time measurement, and the record."""

from __future__ import annotations

import asyncio

import pytest

from slog.broker.quotas import ClientQuotas, SampledRate, TimedHandler, quota_user
from slog.core.metadata import MetadataImage
from slog.core.metadata_records import ClientQuotaRecord, decode_record, encode_record
from slog.core.quotas import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
    PRODUCER_BYTE_RATE,
    USER,
    ComponentFilter,
    QuotaEntity,
    QuotaError,
    check_filter,
    check_value,
    filter_matches,
    quota_entity,
    resolve,
)
from tests.fake_clock import FakeClock

ALICE_APP = quota_entity([(USER, "alice"), (CLIENT_ID, "app")])
ALICE_ANY_CLIENT = quota_entity([(USER, "alice"), (CLIENT_ID, None)])
ALICE = quota_entity([(USER, "alice")])
ANY_USER_APP = quota_entity([(USER, None), (CLIENT_ID, "app")])
ANY_USER_ANY_CLIENT = quota_entity([(USER, None), (CLIENT_ID, None)])
ANY_USER = quota_entity([(USER, None)])
APP = quota_entity([(CLIENT_ID, "app")])
ANY_CLIENT = quota_entity([(CLIENT_ID, None)])
ORDER = [ALICE_APP, ALICE_ANY_CLIENT, ALICE, ANY_USER_APP, ANY_USER_ANY_CLIENT, ANY_USER, APP,
         ANY_CLIENT]


def test_the_most_specific_entity_wins_in_kafkas_order() -> None:
    quotas: dict[QuotaEntity, dict[str, float]] = {
        entity: {PRODUCER_BYTE_RATE: float(rank)} for rank, entity in enumerate(ORDER)}
    for rank, entity in enumerate(ORDER):
        found = resolve(quotas, "alice", "app", PRODUCER_BYTE_RATE)
        assert found is not None and found.limit == rank, entity
        del quotas[entity]
    assert resolve(quotas, "alice", "app", PRODUCER_BYTE_RATE) is None


def test_keys_resolve_apart_and_sensors_follow_the_entity() -> None:
    quotas = {ALICE: {PRODUCER_BYTE_RATE: 100.0}, ANY_CLIENT: {CONSUMER_BYTE_RATE: 50.0}}
    produce = resolve(quotas, "alice", "app", PRODUCER_BYTE_RATE)
    fetch = resolve(quotas, "alice", "app", CONSUMER_BYTE_RATE)
    assert produce is not None and produce.sensor == ("alice", "")  # shared by alice's clients
    assert fetch is not None and fetch.sensor == ("", "app")  # each client id apart
    assert resolve(quotas, "bob", "x", PRODUCER_BYTE_RATE) is None


@pytest.mark.parametrize("components", [
    [], [("ip", "1.2.3.4")], [(USER, "a"), (USER, "b")], [(USER, "")]])
def test_bad_entities_are_refused(components: list[tuple[str, str | None]]) -> None:
    with pytest.raises(QuotaError):
        quota_entity(components)


def test_values_are_checked_as_kafka_types_them() -> None:
    assert check_value(PRODUCER_BYTE_RATE, 1024) == 1024.0
    assert check_value("request_percentage", 12.5) == 12.5
    for key, value in [(PRODUCER_BYTE_RATE, 1.5), (CONSUMER_BYTE_RATE, 0), ("nope", 1),
                       ("request_percentage", -1), ("request_percentage", float("nan"))]:
        with pytest.raises(QuotaError):
            check_value(key, value)


def test_describe_filters() -> None:
    entities = [ALICE, ALICE_APP, ANY_USER, APP]

    def matching(components: list[ComponentFilter], strict: bool = False) -> list[QuotaEntity]:
        return [e for e in entities if filter_matches(check_filter(components), strict, e)]

    assert matching([]) == entities
    assert matching([], strict=True) == []
    assert matching([ComponentFilter(USER, MATCH_EXACT, "alice")]) == [ALICE, ALICE_APP]
    assert matching([ComponentFilter(USER, MATCH_EXACT, "alice")], strict=True) == [ALICE]
    assert matching([ComponentFilter(USER, MATCH_DEFAULT)]) == [ANY_USER]
    assert matching([ComponentFilter(USER, MATCH_SPECIFIED)]) == [ALICE, ALICE_APP, ANY_USER]
    assert matching([ComponentFilter(CLIENT_ID, MATCH_SPECIFIED)], strict=True) == [APP]
    for bad in ([ComponentFilter("ip", MATCH_SPECIFIED)], [ComponentFilter(USER, 7)],
                [ComponentFilter(USER, MATCH_EXACT)],
                [ComponentFilter(USER, MATCH_DEFAULT), ComponentFilter(USER, MATCH_DEFAULT)]):
        with pytest.raises(QuotaError):
            check_filter(bad)


def test_a_new_rate_counts_at_least_one_sample() -> None:
    rate = SampledRate(samples=11, window_s=1.0)
    rate.record(10_000, now=100.0)
    assert rate.window_s(100.0) == pytest.approx(1.0)
    assert rate.rate(100.0) == pytest.approx(10_000)
    assert rate.rate(104.0) == pytest.approx(2_500)
    rate.record(1_000, now=109.0)
    # The first sample has left; the rest is spread over at least all but one sample.
    assert rate.rate(111.5) == pytest.approx(1_000 / 10)
    assert rate.rate(121.0) == 0
    for second in range(1, 30):  # a steady 500/s for long enough to fill the window
        rate.record(500, now=100.0 + second)
    assert rate.rate(129.5) == pytest.approx(500, rel=0.1)


def test_throttle_time_brings_the_rate_back_to_the_quota() -> None:
    image = MetadataImage()
    image.apply(ClientQuotaRecord({CLIENT_ID: "app"}, {PRODUCER_BYTE_RATE: 1000.0}))
    clock = FakeClock()
    quotas = ClientQuotas(lambda: image, samples=11, window_s=1.0, clock=clock)
    assert quotas.record("ANONYMOUS", "other", PRODUCER_BYTE_RATE, 10**9) == 0  # no quota
    # A new client may send one sample's worth at once; more waits until it is paced.
    assert quotas.record("ANONYMOUS", "app", PRODUCER_BYTE_RATE, 1_000) == 0
    assert quotas.record("ANONYMOUS", "app", PRODUCER_BYTE_RATE, 4_000) == 5_000
    clock.now += 9
    # 12,000 bytes over 9 s: 1333/s; 12 s brings them to 1000/s.
    assert quotas.record("ANONYMOUS", "app", PRODUCER_BYTE_RATE, 7_000) == 3_000
    clock.now += 1.5  # half of it: still over
    assert quotas.record("ANONYMOUS", "app", PRODUCER_BYTE_RATE, 0) == 1_500
    clock.now += 1.5
    assert quotas.record("ANONYMOUS", "app", PRODUCER_BYTE_RATE, 0) == 0
    assert quotas.record("ANONYMOUS", "app", PRODUCER_BYTE_RATE, 10**9) == 11_000  # the cap
    # A quota record changes what clients resolve to at once.
    image.apply(ClientQuotaRecord({CLIENT_ID: "app"}, {PRODUCER_BYTE_RATE: None}))
    assert quotas.record("ANONYMOUS", "app", PRODUCER_BYTE_RATE, 10**9) == 0
    assert not quotas.active


def test_fetch_responses_are_capped_by_the_quota_window() -> None:
    image = MetadataImage()
    image.apply(ClientQuotaRecord({USER: None}, {CONSUMER_BYTE_RATE: 1000.0}))
    quotas = ClientQuotas(lambda: image, samples=11, window_s=1.0)
    assert quotas.window_bytes("bob", "c") == 1_000  # one sample's worth
    assert quotas.window_bytes("bob", "c") is not None
    assert quota_user("User:bob") == "bob" and quota_user(None) == "ANONYMOUS"


def test_handler_time_counts_running_not_waiting() -> None:
    async def handler() -> str:
        await asyncio.sleep(0.2)  # a long poll: not handling time
        busy_until = asyncio.get_running_loop().time() + 0.05
        while asyncio.get_running_loop().time() < busy_until:
            pass
        return "done"

    async def run() -> tuple[str, float]:
        timed = TimedHandler(handler())
        return await timed, timed.spent_s

    result, spent = asyncio.run(run())
    assert result == "done"
    assert 0.04 <= spent < 0.15


def test_handler_errors_and_cancellation_reach_the_caller() -> None:
    async def failing() -> None:
        await asyncio.sleep(0)
        raise ValueError("boom")

    async def run() -> None:
        with pytest.raises(ValueError, match="boom"):
            await TimedHandler(failing())
        task = asyncio.ensure_future(TimedHandler(asyncio.sleep(10)))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())


def test_the_record_round_trips_and_builds_the_image() -> None:
    record = ClientQuotaRecord({USER: "alice", CLIENT_ID: None},
                               {PRODUCER_BYTE_RATE: 1048576.0, "request_percentage": None},
                               controller_epoch=3, ts=7)
    encoded = encode_record(record)
    assert encoded == {"type": "client_quota", "entity": {"user": "alice", "client-id": None},
                       "values": {PRODUCER_BYTE_RATE: 1048576.0, "request_percentage": None},
                       "controller_epoch": 3, "ts": 7}
    assert decode_record(encoded) == record
    image = MetadataImage()
    image.apply(record)
    assert image.client_quotas == {ALICE_ANY_CLIENT: {PRODUCER_BYTE_RATE: 1048576.0}}
    image.apply(ClientQuotaRecord({USER: "alice", CLIENT_ID: None},
                                  {PRODUCER_BYTE_RATE: None}))
    assert image.client_quotas == {}
