"""One broker for the package's live modules, configured for group tests (fast
rebalances): each module names its topics and groups for itself (``unique``) and lists
only classic groups."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.brokers import BrokerProcess, running_broker
from tests.groups.helpers import GROUP_BROKER


@pytest.fixture(scope="package")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("groups") / "data", **GROUP_BROKER) as process:
        yield process
