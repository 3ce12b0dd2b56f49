from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.brokers import BrokerProcess, running_broker


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """One real broker process on a free port with its own data dir."""
    with running_broker(tmp_path / "data") as process:
        yield process


@pytest.fixture(scope="session")
def shared_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for every module whose tests break nothing and make topics and groups
    named for their module (a broker start is seconds); a module that watches the
    broker's files, memory or log uses ``module_broker``."""
    with running_broker(tmp_path_factory.mktemp("shared") / "data") as process:
        yield process


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for one module: no other module's topics are busy on it meanwhile."""
    with running_broker(tmp_path_factory.mktemp("module") / "data") as process:
        yield process
