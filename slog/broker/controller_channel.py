"""A connection to whichever broker the metadata names as controller.

The controller moves (failover, restarts), so the channel is re-aimed on
every request: when the image names another controller, the old socket is
closed and a new one opened. Requests on one channel go one at a time, so the
broker keeps one for ISR changes and another for forwarded requests: a slow
admin request never delays an AlterPartition.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from slog.core.errors import SlogError
from slog.core.metadata import MetadataImage
from slog.replication.broker_channel import BrokerChannel


class NoControllerError(SlogError, ConnectionError):
    """The metadata names no live controller yet."""


class ControllerChannel:
    def __init__(self, image: Callable[[], MetadataImage], client_id: str,
                 timeout_s: float = 30.0):
        self._image = image
        self._client_id = client_id
        self._timeout_s = timeout_s
        self._channel: BrokerChannel | None = None

    def _aimed(self) -> BrokerChannel:
        image = self._image()
        controller = image.brokers.get(image.controller_id)
        if controller is None:
            raise NoControllerError("no controller is known yet")
        address = (controller.host, controller.port)
        channel = self._channel
        if channel is None or (channel.host, channel.port) != address:
            if channel is not None:
                channel.close()
            channel = self._channel = BrokerChannel(*address, client_id=self._client_id,
                                                    timeout_s=self._timeout_s)
        return channel

    async def request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        """One request to the controller; ConnectionError (or TimeoutError) if it can't be."""
        return await self._aimed().request(api_key, version, body)

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
        self._channel = None
