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


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for a whole test module (compat suites create distinct topics)."""
    with running_broker(tmp_path_factory.mktemp("shared") / "data") as process:
        yield process
