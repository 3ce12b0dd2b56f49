"""The CLI and client against Kafka-protocol clusters that are not slog.

Such a cluster may name no controller, or a controller that is not among its
brokers (KRaft hides its controllers); it may lack APIs slog offers; and the
CLI's stdout may be a pipe that closes early (``slog consume ... | head``).
The other cluster is a real slog broker behind :class:`KafkaPeer`, which
changes only those answers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from slog.client import Admin, Producer
from slog.client.admin import NewTopic
from slog.client.connection import UnsupportedApiError
from slog.protocol.apis import ApiKey
from tests.brokers import BrokerProcess, run_cli
from tests.compat.kafka_peer import KafkaPeer

TIMEOUT_S = 60


@pytest.fixture(params=[-1, 42], ids=["controller-unknown", "controller-not-listed"])
def no_controller(request: pytest.FixtureRequest, shared_broker: BrokerProcess
                  ) -> Iterator[KafkaPeer]:
    with KafkaPeer(shared_broker.bootstrap, controller_id=request.param) as peer:
        yield peer


def test_admin_requests_go_to_any_broker_without_a_known_controller(
        no_controller: KafkaPeer, shared_broker: BrokerProcess) -> None:
    peer = no_controller
    topic = f"other-admin-{'unknown' if peer.controller_id == -1 else 'unlisted'}"
    with Admin(peer.bootstrap) as admin:
        assert admin.cluster.refresh_metadata([]).controller_id == peer.controller_id
        created = admin.create_topics([NewTopic(topic, 2, 1)])
        assert created[topic].partitions == 2
    done = run_cli("topic", "alter", topic, "--partitions", "3", "-b", peer.bootstrap)
    assert done.returncode == 0, done.stderr
    described = run_cli("topic", "describe", topic, "-o", "json", "-b",
                        shared_broker.bootstrap)
    assert described.returncode == 0, described.stderr
    assert len(json.loads(described.stdout)) == 3  # a row per partition
    deleted = run_cli("topic", "delete", topic, "-b", peer.bootstrap)
    assert deleted.returncode == 0, deleted.stderr
    assert "controller" not in deleted.stderr


@pytest.mark.parametrize(("hidden", "command", "name"), [
    (ApiKey.LIST_GROUPS, ["group", "list"], "ListGroups"),
    (ApiKey.DELETE_TOPICS, ["topic", "delete", "other-missing-api"], "DeleteTopics"),
    (ApiKey.CREATE_TOPICS, ["topic", "create", "other-missing-api"], "CreateTopics"),
])
def test_a_missing_api_is_named(shared_broker: BrokerProcess, hidden: ApiKey,
                                command: list[str], name: str) -> None:
    with KafkaPeer(shared_broker.bootstrap, hidden_apis=[hidden]) as peer:
        done = run_cli(*command, "-b", peer.bootstrap)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert f"this cluster does not support {name}" in done.stderr
    assert "lost the connection" not in done.stderr


def test_the_client_raises_unsupported_api_naming_it(shared_broker: BrokerProcess) -> None:
    with KafkaPeer(shared_broker.bootstrap, hidden_apis=[ApiKey.CREATE_TOPICS]) as peer, \
            Admin(peer.bootstrap) as admin, pytest.raises(UnsupportedApiError) as caught:
        admin.create_topics([NewTopic("other-never", 1, 1)])
    assert caught.value.api == "CreateTopics"
    assert "does not offer it" in str(caught.value)


@pytest.fixture(scope="module")
def filled_topic(shared_broker: BrokerProcess) -> str:
    """~1 MB of records: far more than a pipe holds, so the CLI is still writing at close."""
    topic = "other-stdout"
    with Producer(shared_broker.bootstrap) as producer:
        for i in range(10_000):
            producer.send(topic, f"record {i} ".encode() + b"x" * 100, f"k{i}".encode())
        producer.flush(TIMEOUT_S)
    return topic


def read_three_lines_then_close(args: list[str]) -> tuple[int, str]:
    """Run ``slog ARGS`` as ``| head -n 3`` would: the exit status and stderr."""
    process = subprocess.Popen([sys.executable, "-m", "slog.cli", *args],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    lines = [process.stdout.readline() for _ in range(3)]
    assert all(lines), lines
    process.stdout.close()  # as head does once it has its lines
    try:
        returncode = process.wait(TIMEOUT_S)
    finally:
        process.kill()
    stderr = process.stderr.read().decode()
    process.stderr.close()
    return returncode, stderr


@pytest.mark.parametrize("extra", [["-e"], [], ["-e", "--output", "json"],
                                   ["-e", "--group", "other-stdout-group"]],
                         ids=["to-end", "follow", "json", "group"])
def test_consume_into_a_closed_pipe_ends_quietly(shared_broker: BrokerProcess,
                                                 filled_topic: str, extra: list[str]) -> None:
    """``slog consume ... | head -n 3``: status 0, nothing on stderr."""
    assert read_three_lines_then_close(
        ["consume", filled_topic, "-b", shared_broker.bootstrap, *extra]) == (0, "")


def test_an_offline_command_into_a_closed_pipe_ends_quietly(shared_broker: BrokerProcess,
                                                            filled_topic: str) -> None:
    """Commands that talk to no broker (dump-log reads segment files) end with 0 too."""
    segment = next(shared_broker.data_dir.rglob(f"{filled_topic}-0/*.log"))
    assert read_three_lines_then_close(["dump-log", str(segment), "--deep"]) == (0, "")


def test_shell_pipeline_into_head(shared_broker: BrokerProcess, filled_topic: str) -> None:
    script = (f"set -o pipefail; {sys.executable} -m slog.cli consume {filled_topic} -e "
              f"-b {shared_broker.bootstrap} | head -n 2")
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 2
    assert done.stderr == ""
