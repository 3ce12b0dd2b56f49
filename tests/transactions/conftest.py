"""A broker for the transactional client tests, and the multi-broker ``cluster`` fixture."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.brokers import BrokerProcess, running_broker
from tests.cluster.conftest import cluster, pytest_configure  # noqa: F401 - re-exported

# Few internal partitions (quick to create and load), and timeouts checked every 0.2 s.
TXN_BROKER_CONFIG = {
    "transaction.state.log.num.partitions": "5",
    "offsets.topic.num.partitions": "5",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
    "log.preallocate": "false",
}


@pytest.fixture(scope="package")
def txn_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for the package's modules: each names its topics, groups and
    transactional ids for itself and asserts only on those."""
    with running_broker(tmp_path_factory.mktemp("txn") / "data", 1,
                        **TXN_BROKER_CONFIG) as process:
        yield process
