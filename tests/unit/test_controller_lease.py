"""The controller lease and the epoch fence on the metadata log's writer side.

Two ``ControllerLease`` handles on one data dir behave as two brokers do: each
opens the append lock on its own, and flock excludes one open file from another
even inside one process. The cluster test (tests/cluster/test_controller_lease.py)
does the same with SIGSTOPped broker processes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from slog.core.controller_lease import ControllerLease, LeaseBusyError, NotControllerError
from slog.core.errors import StorageError
from slog.core.kafka_errors import ErrorCode
from slog.core.metadata_log import MetadataLogReader, MetadataLogWriter
from slog.core.metadata_records import ControllerRecord, FenceBrokerRecord
from slog.core.names import DataDirLayout

DURATION_S = 0.4  # renewed every 50 ms


@pytest.fixture
def layout(tmp_path: Path) -> DataDirLayout:
    return DataDirLayout(tmp_path / "data")


@pytest.fixture
def leases(layout: DataDirLayout) -> Iterator[list[ControllerLease]]:
    """Two brokers' handles."""
    made = [ControllerLease(layout.controller_lease, layout.metadata_append_lock, DURATION_S)
            for _ in range(2)]
    yield made
    for lease in made:
        lease.close()


def _take_over(layout: DataDirLayout, lease: ControllerLease, broker_id: int,
               known_epoch: int = 0) -> MetadataLogWriter:
    with lease.exclusive(1.0):
        return MetadataLogWriter.take_over(layout.metadata_dir, lease, broker_id,
                                           f"run-of-{broker_id}", known_epoch)


def _records(layout: DataDirLayout) -> list[tuple[int, object]]:
    return [(r.controller_epoch, r) for _, r in MetadataLogReader(layout.metadata_dir).poll()]


def test_a_deposed_writer_is_refused_and_leaves_the_log_to_its_successor(
        layout: DataDirLayout, leases: list[ControllerLease]) -> None:
    first = _take_over(layout, leases[0], 1)
    assert first.epoch == 1
    first.append([ControllerRecord(1, controller_epoch=1)])
    # Broker 2 takes over while broker 1 is (as it were) paused: the next epoch.
    second = _take_over(layout, leases[1], 2)
    assert second.epoch == 2
    second.append([ControllerRecord(2, controller_epoch=2)])
    # Broker 1 wakes and writes with its stale state: refused, nothing written.
    with pytest.raises(NotControllerError, match="passed from epoch 1 to broker 2") as refused:
        first.append([FenceBrokerRecord(2, True, controller_epoch=1)])
    assert refused.value.code == ErrorCode.not_controller
    first.abandon()  # no trim, no flush: the successor's bytes stay
    second.append([FenceBrokerRecord(1, True, controller_epoch=2)])
    assert _records(layout) == [
        (1, ControllerRecord(1, controller_epoch=1)),
        (2, ControllerRecord(2, controller_epoch=2)),
        (2, FenceBrokerRecord(1, True, controller_epoch=2))]
    second.close()
    # A third controller recovers the log whole and takes the epoch after both.
    third = _take_over(layout, leases[0], 1, known_epoch=1)
    assert third.epoch == 3 and third.end_offset == 3
    third.close()


def test_the_lease_is_renewed_while_held_and_expires_once_abandoned(
        layout: DataDirLayout, leases: list[ControllerLease]) -> None:
    lease = leases[0]
    _take_over(layout, lease, 1).close()
    claimed = lease.read()
    assert claimed is not None and (claimed.controller, claimed.epoch) == (1, 1)
    time.sleep(DURATION_S * 1.5)
    renewed = lease.read()
    assert renewed is not None and renewed.renewed_at > claimed.renewed_at
    assert not renewed.expired(DURATION_S, time.time())
    lease.abandon()  # what a SIGSTOP does to the renewing thread
    time.sleep(DURATION_S * 1.5)
    stale = lease.read()
    assert stale is not None and stale.expired(DURATION_S, time.time())


def test_a_released_lease_reads_as_expired_at_once(
        layout: DataDirLayout, leases: list[ControllerLease]) -> None:
    _take_over(layout, leases[0], 1).close()
    leases[0].release()
    released = leases[0].read()
    assert released is not None and released.renewed_at == 0
    assert released.expired(DURATION_S, time.time())


def test_a_deposed_controller_renews_only_its_own_replaced_lease(
        layout: DataDirLayout, leases: list[ControllerLease]) -> None:
    _take_over(layout, leases[0], 1).close()
    _take_over(layout, leases[1], 2, known_epoch=1).close()
    leases[1].abandon()  # the successor stops renewing; broker 1's thread still runs
    time.sleep(DURATION_S * 1.5)
    lease = leases[0].read()
    assert lease is not None and (lease.controller, lease.epoch) == (2, 2)
    assert lease.expired(DURATION_S, time.time())  # broker 1 did not keep it alive


def test_the_append_lock_is_given_up_after_the_wait(
        layout: DataDirLayout, leases: list[ControllerLease]) -> None:
    with leases[0].exclusive(0):
        started = time.monotonic()
        with pytest.raises(LeaseBusyError), leases[1].exclusive(0.1):
            pass
        assert time.monotonic() - started >= 0.1
    with leases[1].exclusive(0):  # free again
        pass


def test_an_unreadable_lease_is_vacant(layout: DataDirLayout,
                                       leases: list[ControllerLease]) -> None:
    layout.root.mkdir(parents=True)
    layout.controller_lease.write_text("{not json")
    assert leases[0].read() is None
    writer = _take_over(layout, leases[0], 1, known_epoch=4)
    assert writer.epoch == 5
    writer.close()


def test_a_takeover_that_cannot_open_the_log_releases_the_lease(
        layout: DataDirLayout, leases: list[ControllerLease]) -> None:
    layout.metadata_dir.mkdir(parents=True)
    (layout.metadata_dir / "__cluster_metadata-0").write_text("a file, not a directory")
    with pytest.raises(StorageError), leases[0].exclusive(1.0):
        MetadataLogWriter.take_over(layout.metadata_dir, leases[0], 1, "run", 0)
    released = leases[0].read()
    assert released is not None and released.renewed_at == 0  # the others take over


def test_the_fence_is_the_holder_as_well_as_the_epoch(
        layout: DataDirLayout, leases: list[ControllerLease]) -> None:
    first = _take_over(layout, leases[0], 1)
    with leases[1].exclusive(1.0):  # a lease lost and rewritten with the same epoch
        leases[1].claim(2, "run-of-2", first.epoch)
    with pytest.raises(NotControllerError):
        first.append([ControllerRecord(1, controller_epoch=1)])
    first.abandon()
