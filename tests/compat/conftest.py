"""The multi-broker ``cluster`` fixture (and its markers) of tests/cluster, for the compat
tests, and ``conn`` for modules that define a ``broker`` fixture."""

import time
from collections.abc import Iterator

import pytest

from slog.client.connection import BrokerConnection
from slog.protocol.apis import ApiKey
from tests.brokers import BrokerProcess
from tests.cluster.conftest import (  # noqa: F401 - re-exported fixtures
    cluster,
    own_cluster,
    pytest_configure,
    shared_cluster,
)

COORDINATOR_WAIT_S = 60


@pytest.fixture
def conn(broker: BrokerProcess) -> Iterator[BrokerConnection]:
    """A connection to the module's ``broker`` once __consumer_offsets exists and is loaded."""
    host, port = broker.bootstrap.rsplit(":", 1)
    with BrokerConnection(host, int(port)).connect() as connection:
        deadline = time.monotonic() + COORDINATOR_WAIT_S
        while connection.request(ApiKey.FIND_COORDINATOR, {"key": "any", "key_type": 0},
                                 version=3).error_code:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        yield connection
