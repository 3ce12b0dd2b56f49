"""The dashboard's transaction views against a real broker with open transactions:
the LSO and LSO lag per partition, the open transactions, and a hanging one (open
past its timeout, which this broker's coordinator is configured not to abort yet)
flagged in red with an event."""

from __future__ import annotations

import asyncio

import pytest
from rich.text import Text

from slog.tui.screens import TopicScreen
from slog.tui.views import PARTITION_COLUMNS, TRANSACTION_COLUMNS
from slog.tui.widgets import Table
from tests.cluster.conftest import Cluster
from tests.tui.live import in_snapshot, make_app, produce, table_keys, until

TIMEOUT_S = 30.0


def _cells(app: object, table_id: str, key: str, columns: tuple[str, ...]) -> dict[str, object]:
    table = app.screen.query_one(f"#{table_id}", Table)  # type: ignore[attr-defined]
    return dict(zip(columns, table.get_row(key), strict=True))


@pytest.mark.brokers(1)
@pytest.mark.broker_config({
    "transaction.state.log.num.partitions": "3",
    # Timed-out transactions are aborted only after the test: one stays hanging.
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "600000",
})
def test_open_and_hanging_transactions(cluster: Cluster) -> None:
    cluster.create_topic("payments", partitions=2, replication_factor=1)
    produce(cluster, "payments", 5, partition=0)
    open_txn = cluster.producer(acks="all", transactional_id="dash-open")
    open_txn.init_transactions()
    open_txn.begin_transaction()
    for i in range(3):
        open_txn.send("payments", b"t%d" % i, partition=0)
    open_txn.flush()
    hanging = cluster.producer(acks="all", transactional_id="dash-hanging",
                               transaction_timeout_ms=1000)
    hanging.init_transactions()
    hanging.begin_transaction()
    hanging.send("payments", b"h", partition=1).result(TIMEOUT_S)

    async def run() -> None:
        app = make_app(cluster)
        async with app.run_test(size=(120, 30)) as pilot:
            def settled(snap: object) -> object:
                t = snap.topic("payments")  # type: ignore[attr-defined]
                txns = {x.transactional_id: x for x in snap.transactions}  # type: ignore
                return (t is not None and t.partitions[0].open_transactions == 1
                        and t.partitions[1].open_transactions == 1
                        and "dash-hanging" in txns and txns["dash-hanging"].start_ms > 0
                        and snap.hanging_transactions == 1)  # type: ignore[attr-defined]
            await in_snapshot(app, pilot, settled, "both transactions, one hanging")
            snap = app.state.snapshot
            p0, p1 = snap.topic("payments").partitions
            assert (p0.last_stable, p0.high_watermark, p0.lso_lag) == (5, 8, 3)
            assert (p1.last_stable, p1.high_watermark, p1.lso_lag) == (0, 1, 1)
            txns = {t.transactional_id: t for t in snap.transactions}
            assert set(txns) == {"dash-open", "dash-hanging"}
            assert txns["dash-open"].state == "Ongoing"
            assert txns["dash-open"].partitions == (("payments", 0),)
            assert txns["dash-open"].timeout_ms == 60_000
            assert not txns["dash-open"].hanging(snap.taken_at)
            assert txns["dash-hanging"].timeout_ms == 1000
            assert txns["dash-hanging"].hanging(snap.taken_at)
            await until(pilot, lambda: any(e.kind == "txn-hanging" and "dash-hanging" in e.text
                                           for e in app.state.events), "the hanging event")
            assert not any("dash-open" in e.text for e in app.state.events
                           if e.kind == "txn-hanging")

            await pilot.press("5")
            assert table_keys(app, "transactions-table") == ["dash-hanging", "dash-open"]
            row = _cells(app, "transactions-table", "dash-hanging", TRANSACTION_COLUMNS)
            state = row["state"]
            assert isinstance(state, Text) and state.plain == "Ongoing HANGING"
            assert "red" in str(state.style)
            row = _cells(app, "transactions-table", "dash-open", TRANSACTION_COLUMNS)
            assert str(row["state"]) == "Ongoing" and str(row["timeout"]) == "60s"

            await pilot.press("2")
            table = app.query_one("#topics-table", Table)
            table.move_cursor(row=table_keys(app, "topics-table").index("payments"))
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, TopicScreen), "the detail screen")
            row = _cells(app, "detail-table", "0", PARTITION_COLUMNS)
            assert (str(row["LSO"]), str(row["HW"]), str(row["LSO lag"]),
                    str(row["txns"])) == ("5", "8", "3", "1")

            # Committed: the LSO catches up with the high watermark, the transaction ends.
            open_txn.commit_transaction(TIMEOUT_S)
            await in_snapshot(app, pilot, lambda s: s.topic("payments").partitions[0].lso_lag
                              == 0 and "dash-open" not in {t.transactional_id
                                                           for t in s.transactions},
                              "the commit")
            p0 = app.state.snapshot.topic("payments").partitions[0]
            assert (p0.last_stable, p0.high_watermark, p0.open_transactions) == (9, 9, 0)
            await pilot.press("escape")
            await pilot.press("q")

    asyncio.run(run())
    hanging.abort_transaction(TIMEOUT_S)
