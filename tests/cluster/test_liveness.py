"""Busy is not dead: brokers busy for seconds keep their registration; paused and killed ones don't.

An honest way to keep a broker's event loop busy is the real workload of
issue 20: thousands of RF-3 partitions, which every broker applies to its
image and turns into logs, at creation and again on a restart (log recovery,
then the whole image). The test measures how long that keeps a broker busy
and insists it is longer than the session timeout, so that it proves
something; under it no broker may be fenced for a stale heartbeat, while a
SIGSTOPped broker still is after the timeout and a ``kill -9`` is seen at once.
"""

from __future__ import annotations

import re
import time

import pytest

from slog.broker.daemon import start_daemon
from slog.broker.liveness import heartbeat_interval_s
from slog.client import Admin, NewTopic
from tests.cluster.conftest import Cluster, wait_until

PARTITIONS = 5000
# Shorter than the cluster tests' FAST timeout, and PARTITIONS large enough that a restart
# stays busy for about two seconds (0.7 s at 1,000 once the scale work landed: too short to
# prove anything): the busy spell must outlast the timeout with room to spare. Not shorter
# than 1.2 s: on a machine loaded several times over, a heartbeat thread waiting for the
# CPU went 1.0 s stale with 0.8 s, and that is the machine, not the broker.
SESSION_TIMEOUT_MS = 1200
SESSION_TIMEOUT_S = SESSION_TIMEOUT_MS / 1000
BUSY_WAIT_S = 240.0  # a 2-core machine shared with other test runs


def fencings(cluster: Cluster) -> list[str]:
    return re.findall(r"fencing broker \d+: [^;]*", cluster.all_logs())


def heartbeat_fencings(cluster: Cluster) -> list[str]:
    return [line for line in fencings(cluster) if ": heartbeat " in line]


def starved_beats(cluster: Cluster) -> list[str]:
    """The heartbeat threads' own lateness warnings: why a live broker went stale."""
    return re.findall(r"heartbeat (?:thread ran|write took) [^\n]*", cluster.all_logs())


def caught_up_seconds(cluster: Cluster, broker_id: int) -> list[float]:
    return [float(s) for s in re.findall(r"caught up with the metadata log: \d+ partitions, "
                                         r"([\d.]+) s after start", cluster.log_text(broker_id))]


@pytest.mark.timeout(900)
@pytest.mark.broker_config({"broker.session.timeout.ms": str(SESSION_TIMEOUT_MS)})
def test_busy_brokers_stay_registered_paused_and_killed_ones_are_fenced(cluster: Cluster
                                                                         ) -> None:
    # 1. every broker creates PARTITIONS replicas at once: all event loops busy
    started = time.monotonic()
    with Admin(cluster.bootstrap, request_timeout_ms=120_000) as admin:
        admin.create_topics([NewTopic("many", PARTITIONS, 3)])
    wait_until(lambda: all(len(list(cluster.layout.logs_dir(b).glob("many-*"))) == PARTITIONS
                           for b in cluster.brokers), BUSY_WAIT_S, "every replica's log")
    created_s = time.monotonic() - started
    cluster.step(f"{PARTITIONS} partitions x 3 replicas created in {created_s:.1f} s")
    assert heartbeat_fencings(cluster) == [], starved_beats(cluster)
    cluster.wait_registered(timeout_s=BUSY_WAIT_S)

    # 2. a restart: recovery of every log, then the whole image, before it can serve
    victim = next(b for b in sorted(cluster.brokers) if b != cluster.controller())
    cluster.kill(victim)
    restarting = cluster.brokers[victim]  # recovering every log outlasts the usual 15 s
    restarting.info = start_daemon(victim, cluster.data_dir, restarting.bootstrap,
                                   restarting.overrides, timeout_s=BUSY_WAIT_S)
    cluster.down.discard(victim)
    cluster.wait_registered([victim], timeout_s=BUSY_WAIT_S)
    # Its registration may come before the restart's line is logged: wait for that line,
    # not the first start's (0.4 s, with nothing to recover).
    wait_until(lambda: len(caught_up_seconds(cluster, victim)) >= 2, BUSY_WAIT_S,
               "the restart's caught-up line")
    busy_s = caught_up_seconds(cluster, victim)[-1]
    cluster.step(f"broker {victim} caught up {busy_s:.1f} s after start")
    assert busy_s > SESSION_TIMEOUT_S, \
        f"a {busy_s:.1f} s start-up proves nothing against a {SESSION_TIMEOUT_S} s timeout"
    assert heartbeat_fencings(cluster) == [], starved_beats(cluster)
    assert all(f"fencing broker {victim}" in line for line in fencings(cluster)), \
        fencings(cluster)

    # 3. SIGSTOP: fenced for its heartbeat after the session timeout, not before. First
    # let the ISR changes settle: a controller busy writing a thousand of them does not
    # tick (a busy controller stalls fencing; it never fences a live broker).
    cluster.wait_in_sync("many", timeout_s=BUSY_WAIT_S)
    paused = next(b for b in sorted(cluster.brokers) if b not in (victim, cluster.controller()))
    cluster.pause(paused)
    stopped_at = time.monotonic()
    cluster.wait_fenced(paused, timeout_s=30)
    fenced_after_s = time.monotonic() - stopped_at
    cluster.step(f"paused broker {paused} fenced after {fenced_after_s:.2f} s")
    # its last beat came up to one interval before the pause
    assert fenced_after_s >= SESSION_TIMEOUT_S - heartbeat_interval_s(SESSION_TIMEOUT_S)
    assert any(line.startswith(f"fencing broker {paused}: heartbeat ")
               for line in heartbeat_fencings(cluster))
    cluster.resume(paused)
    cluster.wait_registered([paused], timeout_s=BUSY_WAIT_S)

    # 4. kill -9: the lock probe sees it at once, whatever the session timeout
    before = len(fencings(cluster))
    cluster.kill(victim)
    killed_at = time.monotonic()
    cluster.wait_fenced(victim, timeout_s=30)
    seen_after_s = time.monotonic() - killed_at
    cluster.step(f"killed broker {victim} fenced after {seen_after_s:.2f} s")
    # The reason below proves the lock probe saw it, not an expired heartbeat; the time
    # is a controller tick or a few on a loaded machine, far below Kafka's 9 s default.
    assert seen_after_s < 3.0
    assert fencings(cluster)[before:] == \
        [f"fencing broker {victim}: alive.lock is free: the process is gone"]
