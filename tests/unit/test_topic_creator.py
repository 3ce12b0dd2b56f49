"""TopicCreator on a broker that is not the controller: one CreateTopics per name in
flight, whatever the number of Metadata requests asking for it.

The controller's side is a stand-in channel that answers like a controller
(and counts what it is sent); the creator itself is the real one.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from slog.broker.topic_creator import TopicCreator
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from slog.replication.controller import NewTopic


class ControllerStandIn:
    """Answers CreateTopics as a controller would: created once, then already exists."""

    def __init__(self, fail: bool = False):
        self.sent: list[str] = []
        self.existing: set[str] = set()
        self.fail = fail
        self.release = asyncio.Event()

    async def request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        assert api_key == ApiKey.CREATE_TOPICS
        [topic] = body["topics"]
        self.sent.append(topic["name"])
        await self.release.wait()
        if self.fail:
            raise ConnectionRefusedError("the controller is gone")
        error = ErrorCode.topic_already_exists if topic["name"] in self.existing \
            else ErrorCode.none
        self.existing.add(topic["name"])
        return SimpleNamespace(topics=[SimpleNamespace(error_code=error, error_message=None)])


def _run(fail: bool = False) -> tuple[list[ErrorCode], list[str], int]:
    """11 concurrent creates (8 of one name, 3 of another), then one more of the first."""
    channel = ControllerStandIn(fail)
    caught_up: list[int] = []
    creator = TopicCreator(lambda: None, channel,  # type: ignore[arg-type]
                           lambda: caught_up.append(1))

    async def scenario() -> list[ErrorCode]:
        asking = [asyncio.create_task(creator.create(NewTopic(name)))
                  for name in ["new"] * 8 + ["other"] * 3]
        await asyncio.sleep(0.01)  # every create is waiting for the controller now
        channel.release.set()
        results = list(await asyncio.gather(*asking))
        # Once the first create is answered, a new one is sent (and "already exists").
        results.append(await creator.create(NewTopic("new")))
        return results

    return asyncio.run(scenario()), channel.sent, len(caught_up)


def test_concurrent_creates_of_one_name_send_one_request() -> None:
    results, sent, caught_up = _run()
    assert sorted(sent) == ["new", "new", "other"]
    assert results == [ErrorCode.none] * 12
    assert caught_up == 3  # read the metadata log after every successful answer


def test_an_unreachable_controller_means_ask_again() -> None:
    results, sent, caught_up = _run(fail=True)
    assert sorted(sent) == ["new", "new", "other"]
    assert results == [ErrorCode.not_controller] * 12
    assert caught_up == 0
