"""A job's reason history as the cycles write it, on SQLite and PostgreSQL: the reason in
force and the cycle it began in live on the job's row, an earlier reason is a row of
job_reasons written when it is replaced, a cycle where no reason changes writes nothing, and
pruning keeps a queued job's reason in force when the kept cycles begin.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime

import pytest
from sqlalchemy import event, func, select

from armada_core.api import executor_pb2, submit_pb2
from armada_server.storage import Storage, open_storage
from armada_server.storage import schema as t
from armada_server.storage.scheduling_writes import ReasonRead

from ..jobs.factories import item

PLACE = ("e1", "n1", "default")
NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def store(database_url: str) -> Iterator[Storage]:
    store = open_storage(database_url, clock=lambda: NOW)
    store.queues.create_queue(submit_pb2.Queue(name="q", priority_factor=1))
    nodes = [executor_pb2.Node(name="n1", allocatable={"cpu": "16", "memory": "64Gi"})]
    store.executors.executor_sync(
        executor_pb2.SyncRequest(executor_id="e1", pool="default", nodes=nodes)
    )
    yield store
    store.engine.dispose()


def read(store: Storage) -> dict[str, ReasonRead]:
    """What a cycle's snapshot reads of the queued jobs' reasons."""
    state = store.scheduling_reads.scheduling_state(executor_timeout=3600, now=NOW)
    return {j.id: j for j in state.queued}


def cycle(
    store: Storage,
    number: int | None,
    reasons: Mapping[str, str],
    placed: tuple[str, ...] = (),
    *,
    snapshot: bool = True,
) -> None:
    """One cycle's writes: `placed` leased, the rest of `reasons` left queued for them."""
    seen: dict[str, int | str] = {j.id: j.version for j in store.job_reads.jobs(list(placed))}
    store.scheduling_writes.apply_schedule(
        scheduled=dict.fromkeys(placed, PLACE),
        preempted=(),
        failed={},
        reasons=reasons,
        seen=seen,
        now=NOW,
        cycle=number,
        reasons_read=read(store) if snapshot else None,
    )


def rows(store: Storage) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(t.job_reasons)).scalar_one())


@pytest.mark.parametrize("snapshot", [True, False], ids=["read", "unread"])
def test_only_changes_are_written_and_first_reasons_cost_no_row(
    store: Storage, snapshot: bool
) -> None:
    a, b, c = store.submissions.submit("q", "s", [item(), item(), item()], owner="t")
    history = store.cycle_reports.history
    cycle(store, 1, {a: "x", b: "x", c: "y"}, snapshot=snapshot)
    assert (history(a), history(c)) == ([(1, "x")], [(1, "y")])
    assert rows(store) == 0  # the reasons in force are on the jobs' rows

    updates: list[str] = []

    def count(conn, cursor, statement, *args) -> None:  # type: ignore[no-untyped-def]
        if statement.lstrip().upper().startswith("UPDATE JOBS"):
            updates.append(statement)

    event.listen(store.engine, "before_cursor_execute", count)
    cycle(store, 2, {a: "x", b: "x", c: "y"}, snapshot=snapshot)
    event.remove(store.engine, "before_cursor_execute", count)
    assert updates == []  # nothing changed: nothing written
    assert history(a) == [(1, "x")]

    cycle(store, 3, {a: "z", b: "x"}, placed=(c,), snapshot=snapshot)
    assert history(a) == [(1, "x"), (3, "z")]
    assert history(b) == [(1, "x")]
    assert history(c) == [(1, "y"), (3, "")]
    assert rows(store) == 2
    assert store.job_reads.scheduling_reasons([a, b, c]) == {a: "z", b: "x"}


def test_with_reports_off_reasons_are_kept_but_no_history(store: Storage) -> None:
    [a] = store.submissions.submit("q", "s", [item()], owner="t")
    cycle(store, None, {a: "x"})
    assert store.job_reads.scheduling_reasons([a]) == {a: "x"}
    assert store.cycle_reports.history(a) == []
    cycle(store, 4, {a: "y"})  # reports on again: history begins with the next change
    assert store.cycle_reports.history(a) == [(4, "y")]
    assert rows(store) == 0


def test_pruning_keeps_the_reason_in_force_when_the_kept_cycles_begin(store: Storage) -> None:
    a, b, gone = store.submissions.submit("q", "s", [item(), item(), item()], owner="t")
    history = store.cycle_reports.history
    cycle(store, 1, {a: "p", b: "p", gone: "p"})
    cycle(store, 2, {a: "q", b: "p", gone: "q"})
    cycle(store, 5, {a: "q", b: "r"}, placed=(gone,))
    # Keeping 2 cycles from cycle 4 on: a's "p" ended at 2 and goes; b's "p" was in force
    # at cycle 3 and stays; gone is no longer queued, so its earlier reasons go.
    store.cycle_reports.write_cycle(4, NOW, 0.1, "{}", keep=2)
    assert history(a) == [(2, "q")]
    assert history(b) == [(1, "p"), (5, "r")]
    assert history(gone) == [(5, "")]
    assert rows(store) == 1


def test_a_cycle_number_used_again_does_not_fail_the_cycle(store: Storage) -> None:
    """A leader that died before keeping its cycles' numbers: the next one numbers from the
    last kept and may give a number again; the reasons it replaces are kept once."""
    [a] = store.submissions.submit("q", "s", [item()], owner="t")
    cycle(store, 7, {a: "m"})
    cycle(store, 8, {a: "n"})  # keeps (7, m)
    cycle(store, 7, {a: "o"})  # numbered again: n began at 8, after it, and is not kept
    cycle(store, 8, {a: "p"})  # (7, o) is already kept as (7, m): left as it is
    assert store.cycle_reports.history(a) == [(7, "m"), (8, "p")]
