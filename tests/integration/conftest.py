"""The multi-broker fixtures of tests/cluster (and their markers), for the
stream-processing app tests."""

from tests.cluster.conftest import (  # noqa: F401 - re-exported
    cluster,
    own_cluster,
    pytest_configure,
    shared_cluster,
)
