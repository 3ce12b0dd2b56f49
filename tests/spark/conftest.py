"""Spark export tests: one local SparkSession and one broker for the whole session.

Starting Spark costs seconds (a JVM, then Python workers), so every test shares
the session; the CLI runs in-process and picks up that session. The 3-broker
``cluster`` fixture is the cluster suite's, imported rather than copied.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.brokers import BrokerProcess, running_broker
from tests.cluster.conftest import cluster  # noqa: F401 - the fixture, reused

# Retention runs often so the data-loss tests see segments deleted quickly.
BROKER_CONFIG = {"log.retention.check.interval.ms": "200"}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "brokers(n): number of brokers in the cluster fixture")
    config.addinivalue_line("markers", "broker_config(dict): extra broker settings")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from slog.spark.session import spark_session

    session = spark_session("local[2]", app_name="slog-tests",
                            **{"spark.sql.shuffle.partitions": "2",
                               "spark.default.parallelism": "2"})
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("spark") / "data", **BROKER_CONFIG) as broker:
        yield broker
