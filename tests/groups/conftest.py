"""One broker per test module, configured for group tests (fast rebalances)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.brokers import BrokerProcess, running_broker
from tests.groups.helpers import GROUP_BROKER


@pytest.fixture(scope="module")
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[BrokerProcess]:
    name = request.module.__name__.rsplit(".", 1)[-1]
    with running_broker(tmp_path_factory.mktemp(name) / "data", **GROUP_BROKER) as process:
        yield process
