"""The API versions up to Kafka 4.1 that add little more than a field, against real brokers:
each new field means what Kafka says it means, and the older versions keep answering."""

from __future__ import annotations

from pathlib import Path

import pytest

from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from tests.cluster.conftest import Cluster, running_cluster, wait_until

pytestmark = pytest.mark.brokers(2)


@pytest.fixture
def cluster(shared_cluster: Cluster) -> Cluster:
    """The module's cluster: these tests break no broker and create their own topics."""
    return shared_cluster


def test_api_versions_v4_and_metadata_v13(cluster: Cluster) -> None:
    cluster.create_topic("nv-meta", 2, 2)
    with cluster.connect(1) as conn:
        answer = conn.request(ApiKey.API_VERSIONS, {"client_software_name": "t",
                                                    "client_software_version": "1"}, version=4)
        assert answer.error_code == ErrorCode.none  # not the v0 fallback
        offered = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
        assert offered[ApiKey.METADATA] == (0, 13)
        assert offered[ApiKey.DESCRIBE_TOPIC_PARTITIONS] == (0, 0)
        for version in (12, 13):
            metadata = conn.request(ApiKey.METADATA, {
                "topics": [{"name": "nv-meta", "topic_id": None}],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False}, version=version)
            [topic] = metadata.topics
            assert topic.error_code == ErrorCode.none and len(topic.partitions) == 2
            assert {b.node_id for b in metadata.brokers} == {1, 2}
        assert metadata.error_code == ErrorCode.none


def test_describe_cluster_v2_lists_fenced_brokers_when_asked(
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    # it stops a broker: a cluster of its own, not the module's
    with running_cluster(tmp_path / "data", request) as cluster:
        cluster.stop(2)
        cluster.wait_fenced(2)
        with cluster.connect(1) as conn:
            def brokers(version: int, include_fenced: bool) -> dict[int, bool]:
                answer = conn.request(ApiKey.DESCRIBE_CLUSTER, {
                    "include_cluster_authorized_operations": False, "endpoint_type": 1,
                    "include_fenced_brokers": include_fenced}, version=version)
                assert answer.error_code == ErrorCode.none
                return {b.broker_id: getattr(b, "is_fenced", False) for b in answer.brokers}

            assert brokers(2, True) == {1: False, 2: True}
            assert brokers(2, False) == {1: False}
            assert brokers(1, True) == {1: False}  # v1 has no such flag


def test_alter_reassignments_v1_may_forbid_replication_factor_changes(cluster: Cluster) -> None:
    cluster.create_topic("nv-move", 2, 1, assignment={0: [1], 1: [1]})

    def alter(partition: int, replicas: list[int], allow: bool, version: int = 1) -> tuple[
            ErrorCode, bool]:
        with cluster.connect(cluster.controller()) as conn:
            answer = conn.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, {
                "timeout": 30_000, "allow_replication_factor_change": allow,
                "topics": [{"name": "nv-move", "partitions": [
                    {"partition_index": partition, "replicas": replicas}]}]}, version=version)
        assert answer.error_code == ErrorCode.none
        [result] = answer.responses[0].partitions
        return result.error_code, getattr(answer, "allow_replication_factor_change", True)

    assert alter(0, [1, 2], allow=False) == (ErrorCode.invalid_replication_factor, False)
    assert cluster.state("nv-move", 0).replicas == (1,)  # untouched
    assert alter(0, [2], allow=False) == (ErrorCode.none, False)  # a move, same factor
    assert alter(1, [1, 2], allow=True) == (ErrorCode.none, True)
    assert alter(1, [1, 2], allow=False, version=0)[0] == ErrorCode.none  # v0: always allowed
    wait_until(lambda: cluster.state("nv-move", 0).replicas == (2,)
               and tuple(sorted(cluster.state("nv-move", 1).replicas)) == (1, 2),
               30, "both reassignments to finish")


def test_describe_log_dirs_v4_and_find_coordinator_v5_v6(cluster: Cluster) -> None:
    cluster.create_topic("nv-dirs", 1, 2)
    with cluster.connect(1) as conn:
        # v4 adds the dir's sizes; v5 (KIP-1066, cordoning) is newer than Kafka 4.1.
        dirs = conn.request(ApiKey.DESCRIBE_LOG_DIRS, {"topics": None}, version=4)
        [result] = dirs.results
        assert result.error_code == ErrorCode.none and result.total_bytes > 0
        assert "nv-dirs" in {t.name for t in result.topics}

        def find(version: int, key_type: int) -> ErrorCode:
            def settled() -> tuple[ErrorCode] | None:  # a tuple: NONE is falsy
                answer = conn.request(ApiKey.FIND_COORDINATOR, {
                    "key_type": key_type, "coordinator_keys": ["nv-group"]}, version=version)
                error = answer.coordinators[0].error_code
                return None if error == ErrorCode.coordinator_not_available else (error,)
            return wait_until(settled, 30, "the offsets topic")[0]

        assert find(5, 0) == find(6, 0) == ErrorCode.none
        assert find(6, 2) == ErrorCode.invalid_request  # share groups: slog has none
        assert find(4, 2) == ErrorCode.invalid_request
    # The connection and the broker survived all of it.
    with cluster.connect(1) as conn:
        assert conn.request(ApiKey.METADATA, {"topics": []}).brokers


def test_list_offsets_v8_to_v10_tiered_specs_without_tiering(cluster: Cluster) -> None:
    cluster.create_topic("nv-offsets", 1, 2, assignment={0: [1, 2]})
    cluster.append_to(1, "nv-offsets", 0, [b"v%d" % i for i in range(10)], acks=-1)
    with cluster.connect(1) as conn:
        deleted = conn.request(ApiKey.DELETE_RECORDS, {"timeout": 30_000, "topics": [
            {"name": "nv-offsets", "partitions": [{"partition_index": 0, "offset": 4}]}]})
        assert deleted.topics[0].partitions[0].error_code == ErrorCode.none

        def offset(version: int, spec: int) -> tuple[ErrorCode, int]:
            answer = conn.request(ApiKey.LIST_OFFSETS, {
                "replica_id": -1, "isolation_level": 0, "timeout": 1000, "topics": [
                    {"name": "nv-offsets", "partitions": [
                        {"partition_index": 0, "current_leader_epoch": -1, "timestamp": spec}]}]},
                version=version)
            [p] = answer.topics[0].partitions
            return p.error_code, p.offset

        for version in (8, 9, 10):
            assert offset(version, -2) == (ErrorCode.none, 4)  # earliest
            assert offset(version, -4) == (ErrorCode.none, 4)  # earliest local: every byte is
            assert offset(version, -1) == (ErrorCode.none, 10)
            # max timestamp: the first record that has it (one batch, one timestamp), as
            # Kafka since 3.8, and not one DeleteRecords removed
            assert offset(version, -3) == (ErrorCode.none, 4)
        for version in (9, 10):
            assert offset(version, -5) == (ErrorCode.none, -1)  # nothing tiered
