"""Topics a broker creates on its own initiative, from any broker.

Two requests create topics as a side effect: Metadata for an unknown topic
(``auto.create.topics.enable``) and FindCoordinator before
``__consumer_offsets`` exists. The controller creates them directly; any
other broker sends CreateTopics to the controller as itself (the client's
permission to create was checked here already), then reads the metadata log
so that the caller sees the topic at once.

Clients ask about a new topic from many connections at once (a producer's
first records, librdkafka's retries): one CreateTopics per name is in flight,
and everyone asking meanwhile waits for that one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from slog.broker.controller_channel import ControllerChannel
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode, ProtocolError
from slog.replication.controller import ControllerError, NewTopic

if TYPE_CHECKING:
    from slog.replication.controller import Controller

log = logging.getLogger("slog.broker.topics")

CREATE_TOPICS_VERSION = 5
CREATE_TIMEOUT_MS = 5000
_CHANNEL_ERRORS = (OSError, TimeoutError, asyncio.IncompleteReadError, ProtocolError)


def _create_topics_body(spec: NewTopic) -> dict[str, object]:
    return {"topics": [{
        "name": spec.name, "num_partitions": spec.num_partitions,
        "replication_factor": spec.replication_factor,
        "assignments": [{"partition_index": p, "broker_ids": list(ids)}
                        for p, ids in sorted(spec.assignment.items())],
        "configs": [{"name": k, "value": v} for k, v in spec.configs.items()]}],
        "timeout": CREATE_TIMEOUT_MS, "validate_only": False}


class TopicCreator:
    def __init__(self, controller: Callable[[], Controller | None],
                 channel: ControllerChannel, catch_up: Callable[[], object]):
        self._controller = controller  # this broker's controller duty, None if not ours
        self._channel = channel
        self._catch_up = catch_up  # Broker.poll_metadata
        self._in_flight: dict[str, asyncio.Task[ErrorCode]] = {}

    async def create(self, spec: NewTopic) -> ErrorCode:
        """Create ``spec`` unless it exists: NONE when it exists now (or already did),
        else the error (NOT_CONTROLLER and REQUEST_TIMED_OUT: ask again later)."""
        controller = self._controller()
        if controller is not None:
            [outcome] = controller.create_topics([spec])
            return _error_of(outcome)
        task = self._in_flight.get(spec.name)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._ask_controller(spec))
            self._in_flight[spec.name] = task
            task.add_done_callback(lambda _: self._in_flight.pop(spec.name, None))
        # Shielded: one caller's client hanging up must not cancel the others' create.
        return await asyncio.shield(task)

    async def _ask_controller(self, spec: NewTopic) -> ErrorCode:
        try:
            response = await self._channel.request(ApiKey.CREATE_TOPICS, CREATE_TOPICS_VERSION,
                                                   _create_topics_body(spec))
        except _CHANNEL_ERRORS as exc:
            log.info("asking the controller to create %s failed: %s", spec.name, exc)
            return ErrorCode.not_controller
        [result] = response.topics
        error = ErrorCode(result.error_code)
        if error in (ErrorCode.none, ErrorCode.topic_already_exists):
            self._catch_up()  # the controller wrote it to the metadata log before answering
            return ErrorCode.none
        log.info("the controller did not create %s: %s %s", spec.name, error.name,
                 result.error_message or "")
        return error


def _error_of(outcome: object) -> ErrorCode:
    if isinstance(outcome, ControllerError) and \
            outcome.code is not ErrorCode.topic_already_exists:
        return outcome.code
    return ErrorCode.none
