"""The multi-broker ``cluster`` fixture of tests/cluster, for the stream-processing app tests."""

from tests.cluster.conftest import cluster, pytest_configure  # noqa: F401 - re-exported
