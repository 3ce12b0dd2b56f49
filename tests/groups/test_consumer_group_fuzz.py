"""The KIP-848 APIs under the protocol fuzzer, on their own (the full run in
tests/integration/test_broker_fuzz.py spreads its cases over every API)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given, settings

from slog.protocol.apis import ApiKey
from tests.brokers import running_broker
from tests.fuzz import hostile
from tests.fuzz.hostile import Target

KIP848 = [(k, v) for k, v in hostile.API_CASES
          if k in (ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE)]


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    with running_broker(tmp_path_factory.mktemp("fuzz848") / "data",
                        **hostile.TARGET_CONFIG) as broker:
        yield hostile.prepare_target(broker)


def test_both_apis_are_advertised() -> None:
    assert sorted(KIP848) == [(68, 0), (68, 1), (69, 0), (69, 1)]


@settings(max_examples=400, **hostile.SETTINGS)
@given(sent=hostile.requests(KIP848))
def test_hostile_valid_requests(target: Target, sent: bytes) -> None:
    hostile.exchange(target, sent)


@settings(max_examples=300, **hostile.SETTINGS)
@given(sent=hostile.mutated_requests(KIP848))
def test_mutated_requests(target: Target, sent: bytes) -> None:
    hostile.exchange(target, sent)


def test_broker_survived(target: Target) -> None:
    hostile.assert_unharmed(target)
