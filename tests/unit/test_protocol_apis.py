"""The advertised API table."""

from __future__ import annotations

import pytest
from kafka.protocol.broker_version_data import BROKER_API_VERSIONS

from slog.protocol import (
    ALL_APIS,
    API_BY_KEY,
    ApiKey,
    UnsupportedVersionError,
    api_versions_table,
    is_flexible_request,
    kio_version_range,
    request_class,
    response_class,
    response_header_version,
    warm_up,
)
from tests.unit.test_protocol_compat import KP

EXPECTED = {
    "AlterPartition": (2, 2),
    "ApiVersions": (0, 4),
    "Metadata": (0, 13),
    "Produce": (3, 13),
    "Fetch": (4, 17),
    "ListOffsets": (1, 10),
    "InitProducerId": (0, 4),
    # Transactions, classic protocol (no KIP-890 versions).
    "AddPartitionsToTxn": (0, 3),
    "AddOffsetsToTxn": (0, 3),
    "EndTxn": (0, 3),
    "WriteTxnMarkers": (1, 1),  # inter-broker: coordinators ask leaders for markers
    "TxnOffsetCommit": (0, 3),
    "DescribeProducers": (0, 0),
    "DescribeTransactions": (0, 0),
    "ListTransactions": (0, 1),  # v2's regular expressions: not with Python's re
    "CreateTopics": (2, 7),
    "DeleteTopics": (1, 6),
    "DeleteRecords": (0, 2),
    "CreatePartitions": (0, 3),
    "DescribeConfigs": (1, 4),
    "AlterConfigs": (0, 2),
    "IncrementalAlterConfigs": (0, 1),
    "FindCoordinator": (0, 6),
    "JoinGroup": (0, 9),
    "SyncGroup": (0, 5),
    "Heartbeat": (0, 4),
    "LeaveGroup": (0, 5),
    "OffsetCommit": (2, 9),
    "OffsetFetch": (1, 9),
    "DescribeGroups": (0, 6),
    "ListGroups": (0, 5),
    "DeleteGroups": (0, 2),
    "OffsetDelete": (0, 0),
    "DescribeClientQuotas": (0, 1),
    "AlterClientQuotas": (0, 1),
    "ElectLeaders": (0, 2),
    "AlterPartitionReassignments": (0, 1),
    "ListPartitionReassignments": (0, 0),
    "OffsetForLeaderEpoch": (2, 4),  # kio has no v0/v1 (Kafka 4 removed them)
    "SaslHandshake": (0, 1),
    "SaslAuthenticate": (0, 2),
    "DescribeAcls": (1, 3),  # kio has no v0 (Kafka 4 removed it)
    "CreateAcls": (1, 3),
    "DeleteAcls": (1, 3),
    "DescribeQuorum": (0, 2),
    "DescribeCluster": (0, 2),
    "ConsumerGroupHeartbeat": (0, 1),
    "ConsumerGroupDescribe": (0, 1),
    "DescribeUserScramCredentials": (0, 0),
    "AlterUserScramCredentials": (0, 0),
    "AlterReplicaLogDirs": (1, 2),
    "DescribeLogDirs": (1, 4),  # kio has no v0 (Kafka 4 removed it)
    "ListConfigResources": (0, 1),
    "DescribeTopicPartitions": (0, 0),
    "Envelope": (0, 0),  # inter-broker only: never advertised (see slog.broker.forwarding)
}


def test_table_contents() -> None:
    assert {s.name: (s.min_version, s.max_version) for s in ALL_APIS} == EXPECTED
    assert [s.api_key for s in ALL_APIS] == sorted(s.api_key for s in ALL_APIS)
    assert {s.api_key for s in ALL_APIS} == {int(k) for k in ApiKey}


def test_no_client_api_is_offered_beyond_kafka_4_1() -> None:
    """Clients infer a broker's release from its ApiVersions maxima (kafka-python from
    the table below, taken from Kafka's releases): slog offers Kafka 4.1's surface, so
    no maximum may be newer. Inter-broker APIs are not in the table."""
    kafka_4_1 = BROKER_API_VERSIONS[(4, 1)]
    newer = {spec.name: (spec.max_version, kafka_4_1[spec.api_key][1]) for spec in ALL_APIS
             if spec.api_key in kafka_4_1 and spec.max_version > kafka_4_1[spec.api_key][1]}
    assert newer == {}


def test_every_range_is_within_kio() -> None:
    for spec in ALL_APIS:
        lo, hi = kio_version_range(spec.api_key) or (None, None)
        assert lo is not None and hi is not None
        assert lo <= spec.min_version <= spec.max_version <= hi, spec
        # Low minimums: as low as kio goes, so client ranges always overlap.
        assert spec.min_version == lo, spec


def test_warm_up_loads_every_advertised_class() -> None:
    warm_up()
    for spec in ALL_APIS:
        for version in range(spec.min_version, spec.max_version + 1):
            assert request_class(spec.api_key, version).__version__ == version
            assert response_class(spec.api_key, version).__api_key__ == spec.api_key


def test_unknown_lookups() -> None:
    assert kio_version_range(9999) is None
    with pytest.raises(UnsupportedVersionError):
        request_class(9999, 0)
    with pytest.raises(UnsupportedVersionError):
        response_class(0, 2)


def test_api_versions_table_filters_and_always_has_api_versions() -> None:
    table = api_versions_table([ApiKey.PRODUCE, ApiKey.FETCH, 9999])
    assert [s.api_key for s in table] == [0, 1, 18]
    assert api_versions_table([]) == (API_BY_KEY[18],)
    assert API_BY_KEY[1].supports(17) and not API_BY_KEY[1].supports(18)


def test_header_versions_agree_with_kafka_python() -> None:
    # kafka-python derives flexibility from Kafka's JSON "flexibleVersions";
    # slog from kio's classes. They must agree for every advertised version.
    for spec in ALL_APIS:
        if (spec.api_key, "request") not in KP:
            continue  # inter-broker APIs kafka-python has no schema for (AlterPartition)
        kp_req, kp_resp = KP[(spec.api_key, "request")], KP[(spec.api_key, "response")]
        for version in range(spec.min_version, spec.max_version + 1):
            assert is_flexible_request(spec.api_key, version) == kp_req.flexible_version_q(version)
            expected = 1 if kp_resp.flexible_version_q(version) else 0
            if spec.api_key == ApiKey.API_VERSIONS:
                expected = 0  # KIP-511
            assert response_header_version(spec.api_key, version) == expected, (spec, version)
