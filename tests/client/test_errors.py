"""Kafka error mapping (pure code)."""

from __future__ import annotations

import pickle

import pytest

from slog.client.errors import (
    KafkaError,
    NotLeaderOrFollowerError,
    ProduceError,
    TopicAlreadyExistsError,
    raise_for_items,
)


def test_codes_map_to_named_retriable_errors() -> None:
    error = KafkaError.for_code(6, "moved", item="t-0")
    assert isinstance(error, NotLeaderOrFollowerError)
    assert (error.code, error.name, error.message, error.retriable) == \
        (6, "NOT_LEADER_OR_FOLLOWER", "moved", True)
    assert str(error) == "t-0: NOT_LEADER_OR_FOLLOWER: moved"
    assert KafkaError.for_code(36).retriable is False
    assert type(KafkaError.for_code(87)) is KafkaError  # no subclass: the base class
    assert KafkaError.for_code(31999).name == "UNKNOWN_ERROR_31999"
    assert TopicAlreadyExistsError().code == 36


def test_errors_pickle() -> None:
    error = pickle.loads(pickle.dumps(ProduceError(10, "too big", topic="t", partition=3)))
    assert (error.name, error.topic, error.partition) == ("MESSAGE_TOO_LARGE", "t", 3)
    assert isinstance(pickle.loads(pickle.dumps(KafkaError.for_code(36))),
                      TopicAlreadyExistsError)


def test_raise_for_items_raises_the_first_with_all_attached() -> None:
    raise_for_items({})
    failures = {"a": KafkaError.for_code(36, item="a"), "b": KafkaError.for_code(3, item="b")}
    with pytest.raises(TopicAlreadyExistsError) as info:
        raise_for_items(failures, {"c": 1})
    assert info.value.errors == failures and info.value.results == {"c": 1}
