"""The multi-broker ``cluster`` fixture (and its markers) of tests/cluster, for the compat tests."""

from tests.cluster.conftest import cluster, pytest_configure  # noqa: F401 - re-exported fixture
