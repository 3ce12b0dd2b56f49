"""A controller paused with SIGSTOP is replaced once its lease expires, and fenced.

Real broker processes on one data dir (see conftest). The paused controller
still holds ``controller.lock``; the lease (``slog.core.controller_lease``) is
what lets a standby take over. Whatever the old controller tries when it runs
again must not reach the metadata log.
"""

from __future__ import annotations

import time

from slog.client.connection import BrokerConnection
from slog.core.metadata_log import MetadataLogReader
from slog.core.metadata_records import ControllerRecord
from slog.protocol.apis import ApiKey
from slog.protocol.errors import ErrorCode
from tests.cluster.conftest import FAST, Cluster, wait_until

SESSION_S = int(FAST["broker.session.timeout.ms"]) / 1000
# The goal is a new controller acting within the session timeout + 1 s; a loaded
# 2-core CI machine gets generous slack on top (the report measures the real figure).
ACT_WITHIN_S = SESSION_S + 1 + 6


def _create_topic_body(name: str) -> dict[str, object]:
    return {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1,
                        "assignments": [], "configs": []}],
            "timeout": 5_000, "validate_only": False}


def _records_after_takeover(cluster: Cluster, new_epoch: int) -> list[tuple[int, int, str]]:
    """(offset, controller epoch, type) of every record from the new controller's
    ``controller`` record on."""
    found, started = [], False
    for offset, record in MetadataLogReader(cluster.layout.metadata_dir).poll():
        if isinstance(record, ControllerRecord) and record.controller_epoch == new_epoch:
            started = True
        if started:
            found.append((offset, record.controller_epoch, type(record).__name__))
    return found


def test_a_paused_controller_is_replaced_fenced_and_refused(cluster: Cluster) -> None:
    old = cluster.controller()
    epoch = cluster.image().controller_epoch
    others = sorted(b for b in cluster.brokers if b != old)
    topic = "led-by-the-controller"
    cluster.create_topic(topic, assignment={0: [old, *others]},
                         configs={"min.insync.replicas": "2"})
    with cluster.producer() as producer:
        for i in range(20):
            producer.send(topic, f"before-{i}".encode(), partition=0)
        producer.flush(20)
    # Connected before the pause: a CreateTopics queued while it is stopped is the
    # first thing it serves when it runs again, with its stale idea of leading.
    stale_admin: BrokerConnection = cluster.connect(old)

    cluster.step(f"pausing controller {old} (epoch {epoch})")
    paused_at = time.monotonic()
    cluster.pause(old)
    stale_admin.send(ApiKey.CREATE_TOPICS, _create_topic_body("made-by-a-stale-controller"))

    new = wait_until(lambda: (c := cluster.controller()) != old and c, ACT_WITHIN_S,
                     "another broker to take the controller lease")
    took_over_s = time.monotonic() - paused_at
    new_epoch = cluster.image().controller_epoch
    assert new_epoch > epoch
    cluster.wait_fenced(old, timeout_s=ACT_WITHIN_S)
    leader = cluster.wait_leader(topic, not_in={old}, timeout_s=ACT_WITHIN_S)
    acted_s = time.monotonic() - paused_at
    cluster.step(f"controller {new} at epoch {new_epoch} after {took_over_s:.2f} s; "
                 f"{old} fenced and {topic} led by {leader} after {acted_s:.2f} s")
    assert acted_s < ACT_WITHIN_S
    assert "takes over as controller: the lease of broker" in cluster.log_text(new)
    # The partition it led takes writes again while it is still stopped.
    with cluster.producer() as producer:
        for i in range(20):
            producer.send(topic, f"during-{i}".encode(), partition=0)
        producer.flush(20)

    cluster.resume(old)
    cluster.step("resumed")
    # The queued CreateTopics is either refused by the deposed controller (the log
    # refused its append: connection closed, or NOT_CONTROLLER) or, had the broker
    # stepped down first, forwarded to the new controller, which created it.
    try:
        _, answer = stale_admin.receive()
        code = int(answer.topics[0].error_code)
    except (ConnectionError, OSError):
        code = int(ErrorCode.not_controller)
    finally:
        stale_admin.close()
    cluster.step(f"the queued CreateTopics answered {code}")
    assert code in (int(ErrorCode.not_controller), int(ErrorCode.none)), code
    wait_until(lambda: "is no longer the controller" in cluster.log_text(old), 20,
               "the old controller to step down")
    cluster.wait_registered()
    cluster.wait_in_sync(topic)
    assert cluster.controller() == new
    # Nothing the old controller did after waking took effect: every record since the
    # takeover carries the new epoch (the readers would skip older ones, but the
    # writer side must never have written them).
    after = _records_after_takeover(cluster, new_epoch)
    assert after and all(e == new_epoch for _, e, _ in after), after
    if code == int(ErrorCode.none):
        assert "made-by-a-stale-controller" in cluster.image().topics
    else:
        assert "made-by-a-stale-controller" not in cluster.image().topics
    values = [r.value for r in cluster.read_all(topic, 0, cluster.high_watermark(topic))]
    assert values == [f"before-{i}".encode() for i in range(20)] + \
        [f"during-{i}".encode() for i in range(20)]
