"""``slog log-dirs``: DescribeLogDirs from the command line against a real three-broker
cluster (the CLI as a real process), one broker of which dies."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.brokers import run_cli
from tests.cluster.conftest import FAST, Cluster, wait_until

VALUE = b"d" * 900


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path / "data", 3, dict(FAST))
    try:
        cluster.start()
        cluster.create_topic("sized", assignment={0: [1, 2], 1: [2, 3]})
        cluster.create_topic("other", assignment={0: [3, 1]})
        with cluster.producer(acks="all") as producer:
            for i in range(200):
                producer.send("sized", VALUE, partition=i % 2)
            producer.flush(30)
        yield cluster
    finally:
        cluster.close()
    assert "Traceback" not in cluster.all_logs()


def log_dirs(cluster: Cluster, *args: str) -> tuple[int, list[dict[str, Any]], str]:
    result = run_cli("log-dirs", *args, "-b", cluster.bootstrap, "-o", "json")
    return result.returncode, json.loads(result.stdout or "[]"), result.stderr


def test_sizes_per_broker_and_a_dead_broker(nodes: Cluster) -> None:
    def replicas() -> dict[tuple[int, str, int], dict[str, Any]]:
        code, rows, stderr = log_dirs(nodes, "sized")
        assert code == 0, stderr
        return {(r["broker"], r["topic"], r["partition"]): r for r in rows}

    # Followers may still be copying: the same size on both replicas of each partition.
    wait_until(lambda: (found := replicas())[1, "sized", 0]["size"] ==
               found[2, "sized", 0]["size"] and found[2, "sized", 1]["size"] ==
               found[3, "sized", 1]["size"], 20, "the followers to catch up")
    found = replicas()
    assert sorted(found) == [(1, "sized", 0), (2, "sized", 0), (2, "sized", 1),
                             (3, "sized", 1)]
    for (broker_id, _, _), row in found.items():
        assert row["size"] > 100 * len(VALUE)
        assert row["offset_lag"] == 0
        assert Path(row["log_dir"]).resolve() == nodes.layout.logs_dir(broker_id).resolve()

    code, rows, _ = log_dirs(nodes, "--broker", "2")
    assert code == 0
    assert {(r["broker"], r["topic"], r["partition"]) for r in rows} == {
        (2, "sized", 0), (2, "sized", 1)}
    code, rows, _ = log_dirs(nodes)  # every topic
    assert {(r["topic"], r["broker"]) for r in rows} >= {("other", 3), ("other", 1)}

    code, _, stderr = log_dirs(nodes, "no-such-topic")
    assert code == 4 and "no such topic: no-such-topic" in stderr
    code, _, stderr = log_dirs(nodes, "--broker", "9")
    assert code == 4 and "no such broker: 9" in stderr
    code, _, stderr = log_dirs(nodes, "-r", "nothing-.*")
    assert code == 4

    # A dead broker, once fenced, is not asked; the others' replicas are still listed.
    nodes.kill(3)
    nodes.wait_fenced(3)
    code, rows, stderr = log_dirs(nodes, "sized")
    assert code == 0, stderr
    assert {(r["broker"], r["partition"]) for r in rows} == {(1, 0), (2, 0), (2, 1)}
    code, _, stderr = log_dirs(nodes, "--broker", "3")
    assert code == 4 and "no such broker: 3 (brokers: 1, 2)" in stderr
    table = run_cli("log-dirs", "sized", "-b", nodes.bootstrap)
    assert table.returncode == 0 and "sized" in table.stdout
