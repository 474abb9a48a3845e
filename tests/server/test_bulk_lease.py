"""A cycle's leases written in bulk store exactly what leasing each job through the state
machine stored, on SQLite and PostgreSQL.

One database is set up with every kind of job a lease meets, then copied; the same decisions
are written into one copy job by job (each job loaded whole, `lifecycle.lease`, `save_many`:
the path the bulk lease replaced) and into the other by `apply_schedule`. Every row of the
jobs, runs, events and job sets tables must match, but for the runs' random ids.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, delete, insert, select

from armada_core.api import event_pb2, executor_pb2, submit_pb2
from armada_core.jobs import JobState, lifecycle, new_run_ids
from armada_core.jobs import annotations as ann
from armada_core.retry.settings import RetrySettings
from armada_server.executors.backend import update
from armada_server.storage import Storage, changes
from armada_server.storage import schema as t
from armada_server.storage.base import UPDATE_RUNS
from armada_server.storage.bulk import executemany
from armada_server.storage.database import open_database
from armada_server.storage.rows import jobs_by_id
from armada_server.storage.scheduling_writes import (
    _fail_unschedulable,
    _preempt,
    _Preemptions,
    _record_reasons,
    _unchanged,
    _Writes,
)

from ..jobs.factories import item

NODES = [
    executor_pb2.Node(name=f"n{i}", allocatable={"cpu": "16", "memory": "64Gi"}) for i in range(3)
]
PLACE = ("e1", "n1", "default")
RETRY_OOM = submit_pb2.RetryPolicy(
    name="oom",
    retry_limit=2,
    default_action=submit_pb2.RETRY_ACTION_FAIL,
    rules=[
        submit_pb2.RetryRule(
            action=submit_pb2.RETRY_ACTION_RETRY,
            match_conditions=["OOMKilled"],
            backoff_initial_delay_seconds=60,
        )
    ],
)
OOM = executor_pb2.RunUpdate.Failed(
    reason="OOMKilled",
    condition="OOMKilled",
    containers=[executor_pb2.ContainerResult(name="main", exit_code=137, reason="OOMKilled")],
)


@pytest.fixture
def engines(  # type: ignore[no-untyped-def]
    database_url: str, request: pytest.FixtureRequest, tmp_path
) -> Iterator[tuple[Engine, Engine]]:
    """Two new databases on one backend."""
    if database_url.startswith("sqlite"):
        other = f"sqlite:///{tmp_path / 'other.db'}"
    else:
        other = request.getfixturevalue("postgres_server").new_database()
    first, second = open_database(database_url), open_database(other)
    yield first, second
    first.dispose()
    second.dispose()


def gang(name: str, size: int) -> submit_pb2.JobSubmitRequestItem:
    return item(annotations={ann.GANG_ID: name, ann.GANG_CARDINALITY: str(size)})


def set_up(store: Storage) -> dict[str, Any]:
    """Jobs of every kind a lease meets, and a cycle's decisions about them (apply_schedule's
    arguments)."""
    store.retry_policies.create_retry_policy(RETRY_OOM)
    store.queues.create_queue(submit_pb2.Queue(name="q", priority_factor=1, retry_policies=["oom"]))
    store.queues.create_queue(submit_pb2.Queue(name="r", priority_factor=1))

    held: list[str] = []  # the runs the executor has

    def sync(*updates: executor_pb2.RunUpdate) -> None:
        store.executors.executor_sync(
            executor_pb2.SyncRequest(
                executor_id="e1", pool="default", nodes=NODES, updates=updates, run_ids=held
            )
        )

    def submit(queue: str, job_set: str, *items: submit_pb2.JobSubmitRequestItem) -> list[str]:
        return store.submissions.submit(queue, job_set, items, owner="test")

    sync()
    plain = submit("q", "s1", item(), item()) + submit("r", "s2", item())
    whole = submit("q", "s1", *[gang("whole", 3) for _ in range(3)])
    cut = submit("r", "s2", *[gang("cut", 2) for _ in range(2)])
    [changed, retried, running, unplaceable] = submit("q", "s1", item(), item(), item(), item())

    # A job whose first run failed and was retried: queued again, waiting out its backoff,
    # with a preemption asked for on the run that failed.
    store.scheduling_writes.apply_schedule(
        scheduled={retried: PLACE, running: PLACE},
        preempted=(),
        failed={},
        reasons={},
        seen=versions(store, [retried, running]),
    )
    runs = {j.id: j.runs[-1].id for j in store.job_reads.jobs([retried, running])}
    held.extend(runs.values())
    sync(update(runs[running], running, running=executor_pb2.RunUpdate.Running(node="n1")))
    store.submissions.request_preemption("q", "s1", [retried], reason="make room", requestor="u")
    sync(update(runs[retried], retried, failed=OOM))
    [again, still] = store.job_reads.jobs([retried, running])
    assert again.state == JobState.QUEUED and len(again.runs) == 1
    assert again.retry_after is not None and again.preempt_requested
    assert still.state == JobState.RUNNING

    # A reason for waiting that the lease clears.
    store.scheduling_writes.apply_schedule(
        scheduled={}, preempted=(), failed={}, reasons={plain[0]: "no room"}, seen={}
    )

    queued = [*plain, *whole, *cut, changed, retried]
    seen = {**versions(store, [*queued, unplaceable]), running: runs[running]}
    # After the snapshot: one job reprioritised, one member of a gang cancelled.
    store.submissions.reprioritize("q", "s1", [changed], 5, requestor="u")
    store.submissions.cancel("r", "s2", cut[:1])
    members = {j: ("q", "whole") for j in whole} | {j: ("r", "cut") for j in cut}
    return {
        "scheduled": {j: (PLACE[0], f"n{i % 3}", PLACE[2]) for i, j in enumerate(queued)},
        "preempted": [running],
        "failed": {unplaceable: "no node can ever hold it"},
        "reasons": {unplaceable: "no node can ever hold it"},
        "seen": seen,
        "gangs": members,
        "preempting": {running: plain[0]},
        "preempt_reasons": {},
        "kinds": {running: "fair_share"},
        "charges": {plain[0]: 1500, retried: 250, plain[1]: 0},
        "now": datetime.now(UTC) + timedelta(minutes=5),
    }


def versions(store: Storage, job_ids: list[str]) -> dict[str, int | str]:
    return {j.id: j.version for j in store.job_reads.jobs(job_ids)}


def lease_job_by_job(
    store: Storage,
    *,
    scheduled: Mapping[str, tuple[str, str, str]],
    preempted: list[str],
    failed: Mapping[str, str],
    reasons: Mapping[str, str],
    seen: Mapping[str, int | str],
    gangs: Mapping[str, tuple[str, str]],
    preempting: Mapping[str, str],
    preempt_reasons: Mapping[str, str],
    kinds: Mapping[str, str],
    charges: Mapping[str, int],
    now: datetime,
) -> int:
    """apply_schedule as it was before leases were written in bulk: each scheduled job
    loaded whole and leased through the state machine, everything saved by save_many."""
    tx = store.transactions
    with tx.write() as (conn, touched):
        jobs = jobs_by_id(conn, [*scheduled, *preempted, *failed])
        writes = _Writes()
        charged = []
        changed = [j for j in scheduled if _unchanged(jobs, seen, j) is None]
        skipped = {gangs[j] for j in changed if j in gangs}
        run_ids = iter(new_run_ids(len(scheduled)))
        for job_id, (executor, node, pool) in scheduled.items():
            job = _unchanged(jobs, seen, job_id)
            if job is None or gangs.get(job_id) in skipped:
                continue
            after, events = lifecycle.lease(
                job, run_id=next(run_ids), cluster_id=executor, node=node, pool=pool, now=now
            )
            writes.changes.append((job, after, events))
            if charges.get(job_id):
                charged.append({"_id": after.runs[-1].id, "excess_flow": charges[job_id]})
        why = _Preemptions(preempting, preempt_reasons, kinds)
        _preempt(jobs, seen, preempted, why, writes, now)
        _fail_unschedulable(jobs, seen, failed, writes, now)
        tx.save_many(conn, touched, writes.changes)
        executemany(conn, UPDATE_RUNS, charged)
        executemany(conn, UPDATE_RUNS, writes.made_room)
        executemany(conn, UPDATE_RUNS, writes.why_runs)
        _record_reasons(conn, scheduled, reasons, {}, None)
        return sum(1 for _, after, _ in writes.changes if after.state == JobState.LEASED)


def copy(source: Engine, target: Engine) -> None:
    """Every row of `source`'s tables into the same tables of `target` (new: only the rows
    its migrations wrote, which are replaced)."""
    with source.connect() as read, target.begin() as write:
        for table in t.metadata.sorted_tables:
            rows = [dict(r._mapping) for r in read.execute(select(table))]
            write.execute(delete(table))
            if rows:
                write.execute(insert(table), rows)


def stored(engine: Engine, new_ids: Mapping[str, str] | None = None) -> dict[str, list[Any]]:
    """The tables a lease writes, in key order; run ids renamed by `new_ids`, events decoded,
    jobs without their change numbers (which number a transaction stamps differs by
    database: see changed_numbers)."""
    new_ids = new_ids or {}
    out: dict[str, list[Any]] = {}
    with engine.connect() as conn:
        for table, key in (
            (t.jobs, [t.jobs.c.id]),
            (t.runs, [t.runs.c.job_id, t.runs.c.run_index]),
            (t.job_sets, [t.job_sets.c.queue, t.job_sets.c.name]),
            (t.events, [t.events.c.queue, t.events.c.job_set, t.events.c.seq]),
        ):
            out[table.name] = [dict(r._mapping) for r in conn.execute(select(table).order_by(*key))]
    for job in out["jobs"]:
        del job["changed"]
    for run in out["runs"]:
        run["id"] = new_ids.get(run["id"], run["id"])
    for row in out["events"]:
        event = event_pb2.EventMessage.FromString(row.pop("payload"))
        body = getattr(event, str(event.WhichOneof("events")))
        if getattr(body, "run_id", "") in new_ids:
            body.run_id = new_ids[body.run_id]
        row["event"] = event
    return out


def change_numbers(engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {r.id: r.changed for r in conn.execute(select(t.jobs.c.id, t.jobs.c.changed))}


def test_bulk_leases_store_what_leasing_job_by_job_stored(engines: tuple[Engine, Engine]) -> None:
    by_job_engine, bulk_engine = engines
    retrying = RetrySettings(enabled=True)
    by_job = Storage(by_job_engine, retry_settings=retrying)
    bulk = Storage(bulk_engine, retry_settings=retrying)
    decisions = set_up(by_job)
    copy(by_job_engine, bulk_engine)
    before = stored(bulk_engine)
    assert stored(by_job_engine) == before

    assert lease_job_by_job(by_job, **decisions) == 7
    with bulk_engine.begin() as conn:
        changes.move_on(conn)
    with bulk_engine.begin() as conn:
        mark = changes.mark(conn)  # as a reader takes it after the rows so far
    leased = bulk.scheduling_writes.apply_schedule(**decisions)

    expected, got = stored(by_job_engine), stored(bulk_engine)
    # The runs the leases started, matched by job and index: only their ids differ.
    mine = {(r["job_id"], r["run_index"]): r["id"] for r in got["runs"]}
    renamed = {mine[r["job_id"], r["run_index"]]: r["id"] for r in expected["runs"]}
    got = stored(bulk_engine, renamed)
    assert got == expected
    # What the decisions covered: 3 plain jobs, a whole gang and the retried job leased,
    # the changed job and the cut gang not, a preemption and a failure beside them.
    leased_jobs = [j for j in got["jobs"] if j["state"] == JobState.LEASED]
    assert leased == 7 == len(leased_jobs)
    # The next read of what changed finds every job the bulk lease wrote, and no other.
    later = {k for k, v in change_numbers(bulk_engine).items() if v >= mark}
    written = {j["id"] for j in got["jobs"] if j not in before["jobs"]}
    assert later == written
    new = [e for e in got["events"] if e not in before["events"]]
    kinds = sorted(str(e["event"].WhichOneof("events")) for e in new)
    assert kinds == ["failed", *["leased"] * 7, "preempting"]
    charged = {r["job_id"]: r["excess_flow"] for r in got["runs"] if r["excess_flow"]}
    assert charged == {j: c for j, c in decisions["charges"].items() if c}
    [second_run] = [r for r in got["runs"] if r["run_index"] == 1]
    assert second_run["job_id"] in decisions["scheduled"]
    assert any(j["scheduling_reason"] for j in before["jobs"])
    assert not any(j["scheduling_reason"] for j in leased_jobs)
