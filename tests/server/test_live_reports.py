"""A sync's plain pending, running and succeeded reports applied in bulk store exactly what applying
each to its loaded job stored, on SQLite and PostgreSQL.

One database is set up with every kind of job a report of a run meets, then copied; the same
syncs are applied to one copy with every report through the loaded jobs (the path the bulk
one replaced, which still takes every other report) and to the other by `executor_sync`.
Every row of the jobs, runs, events and job sets tables must match, and the responses.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, update

from armada_core.api import executor_pb2, submit_pb2
from armada_core.jobs import JobState, new_job_id, new_run_id
from armada_core.jobs import annotations as ann
from armada_core.retry.settings import RetrySettings
from armada_server.executors.backend import update as report
from armada_server.storage import Storage
from armada_server.storage import schema as t
from armada_server.storage.executor_runs import HeldRuns
from armada_server.storage.gangs import restart_gangs
from armada_server.storage.live_reports import LiveReports, apply_live
from armada_server.storage.nodes import encode_nodes
from armada_server.storage.sync import lease_budget

from ..jobs.factories import item
from .test_bulk_lease import NODES, OOM, PLACE, RETRY_OOM, copy, engines, stored, versions

__all__ = ["engines"]  # the fixture of two databases

Running = executor_pb2.RunUpdate.Running
Pending = executor_pb2.RunUpdate.Pending
Succeeded = executor_pb2.RunUpdate.Succeeded
Request = executor_pb2.SyncRequest


def gang(name: str) -> submit_pb2.JobSubmitRequestItem:
    return item(annotations={ann.GANG_ID: name, ann.GANG_CARDINALITY: "2"})


def set_up(store: Storage) -> tuple[list[Request], set[str], dict[str, str]]:
    """Leased jobs of every kind a report meets, and two syncs reporting on them: one with a
    failure that restarts a gang beside its plain reports, then one of plain reports only.
    Also the jobs whose reports of the first sync are applied in bulk, and each job's state
    after both syncs."""
    store.retry_policies.create_retry_policy(RETRY_OOM)
    store.queues.create_queue(submit_pb2.Queue(name="q", priority_factor=1, retry_policies=["oom"]))
    held: list[str] = []

    def sync(*updates: executor_pb2.RunUpdate) -> None:
        store.executors.executor_sync(
            Request(executor_id="e1", pool="default", nodes=NODES, updates=updates, run_ids=held)
        )

    def lease(job_ids: list[str]) -> dict[str, str]:
        store.scheduling_writes.apply_schedule(
            scheduled={j: PLACE for j in job_ids},
            preempted=(),
            failed={},
            reasons={},
            seen=versions(store, job_ids),
        )
        runs = {j.id: j.runs[-1].id for j in store.job_reads.jobs(job_ids)}
        held.extend(runs.values())
        return runs

    sync()
    ids = store.submissions.submit("q", "s1", [item() for _ in range(12)], owner="test")
    [ran, waits, both, again, preempting, cancelling, cancelled, retried, stray, late] = ids[:10]
    [done, quick] = ids[10:]
    pair = store.submissions.submit("q", "s1", [gang("pair"), gang("pair")], owner="test")
    duo = store.submissions.submit("q", "s2", [gang("duo"), gang("duo")], owner="test")
    runs = lease([*ids, *pair, *duo])
    first_run = runs[retried]
    sync(
        report(runs[again], again, running=Running(node="n1")),
        report(runs[retried], retried, failed=OOM),
    )
    runs |= lease([retried])  # its second run
    store.submissions.request_preemption("q", "s1", [preempting], reason="room", requestor="u")
    store.submissions.cancel("q", "s1", [cancelled])
    with store.engine.begin() as conn:  # asked for, not yet done (e.g. a grace period)
        conn.execute(update(t.jobs).where(t.jobs.c.id == cancelling).values(cancel_requested=True))

    at = datetime.now(UTC) - timedelta(seconds=30)
    mixed = [
        report(runs[ran], ran, running=Running(node="n2", kubernetes_id="k-ran")),
        report(runs[waits], waits, pending=Pending(kubernetes_id="k-waits"), at=at),
        report(runs[both], both, pending=Pending(kubernetes_id="k-both"), at=at),
        report(runs[both], both, running=Running(), at=at + timedelta(seconds=2)),
        report(runs[again], again, running=Running(node="n1")),  # running already
        report(runs[preempting], preempting, running=Running(node="n1")),
        report(runs[cancelling], cancelling, running=Running(node="n1")),
        report(runs[cancelled], cancelled, running=Running(node="n1")),
        report(first_run, retried, running=Running(node="n1")),  # an older attempt
        report(new_run_id(), stray, pending=Pending()),  # a run the server does not know
        report(new_run_id(), new_job_id(), running=Running()),  # nor its job
        report(runs[pair[0]], pair[0], failed=OOM),  # retried: its gang restarts
        report(runs[pair[1]], pair[1], running=Running(node="n1")),
        report(runs[duo[0]], duo[0], running=Running(node="n2")),  # a gang not restarted
        report(runs[late], late, pending=Pending(), at=at),
        report(runs[done], done, running=Running(node="n2"), at=at),
        report(runs[done], done, succeeded=Succeeded(), at=at + timedelta(seconds=5)),
    ]
    plain = [
        report(runs[quick], quick, succeeded=Succeeded()),  # leased, then ended at once
        report(runs[duo[0]], duo[0], succeeded=Succeeded()),  # a gang's member
        report(runs[cancelling], cancelling, succeeded=Succeeded()),  # before its cancel
        report(runs[waits], waits, running=Running(kubernetes_id="k-waits-2")),
        report(runs[late], late, running=Running(node="n0")),
        report(runs[duo[1]], duo[1], running=Running(node="n2")),
        report(runs[retried], retried, pending=Pending(), at=at),
    ]
    requests = [
        Request(executor_id="e1", pool="default", nodes=NODES, updates=u, run_ids=held)
        for u in (mixed, plain)
    ]
    running = [ran, waits, both, again, preempting, late, duo[1]]
    states = {j: "RUNNING" for j in running} | {j: "QUEUED" for j in pair}
    states |= {j: "SUCCEEDED" for j in (done, quick, duo[0], cancelling)}
    states |= {cancelled: "CANCELLED", retried: "PENDING", stray: "LEASED"}
    return requests, {ran, waits, both, late, done}, states


def sync_job_by_job(store: Storage, request: Request, now: datetime) -> executor_pb2.SyncResponse:
    """ExecutorSync._sync as it was before plain reports were applied in bulk: every report
    applied to its loaded job."""
    sync, tx, executor = store.executors, store.transactions, request.executor_id
    with tx.write() as (conn, touched):
        sync._record_executor(conn, request, encode_nodes(request.nodes), now)
        changes, events, confirmed = sync._apply_reports(
            conn, executor, request.updates, LiveReports(), now
        )
        restarts, more = restart_gangs(conn, changes, now)
        tx.save_many(conn, touched, changes + restarts, events + more, confirmed=confirmed)
        held = set(request.run_ids)
        sync._leases.release(conn, executor, held)
        updated = {u.run_id for u in request.updates}
        active = HeldRuns(None).read(conn, executor)  # read in full
        budget = lease_budget(request.max_response_bytes)
        return sync._work_for(conn, touched, executor, active, held, updated, budget, now)


def test_plain_reports_in_bulk_store_what_loaded_jobs_stored(
    engines: tuple[Engine, Engine],
) -> None:
    by_job_engine, bulk_engine = engines
    retrying = RetrySettings(enabled=True)
    by_job = Storage(by_job_engine, retry_settings=retrying)
    bulk = Storage(bulk_engine, retry_settings=retrying)
    requests, in_bulk, states = set_up(by_job)
    copy(by_job_engine, bulk_engine)
    before = stored(bulk_engine)
    assert stored(by_job_engine) == before
    now = datetime.now(UTC) + timedelta(minutes=1)

    mixed = requests[0].updates
    with bulk.transactions.read() as conn:
        assert apply_live(conn, "e1", mixed, now).job_ids == in_bulk
    for request in requests:
        expected = sync_job_by_job(by_job, request, now)
        assert bulk.executors.executor_sync(request, now=now) == expected

    got = stored(bulk_engine)
    assert got == stored(by_job_engine)
    assert {j["id"]: JobState(j["state"]).name for j in got["jobs"]} == states
    new = [e for e in got["events"] if e not in before["events"]]
    kinds = [str(e["event"].WhichOneof("events")) for e in new]
    assert kinds.count("pending") == 4 and kinds.count("running") == 10
    assert kinds.count("succeeded") == 4
    runs = {r["id"]: r for r in got["runs"]}
    ran, waits, both = mixed[0], mixed[1], mixed[2]
    assert (runs[ran.run_id]["node"], runs[ran.run_id]["kubernetes_id"]) == ("n2", "k-ran")
    assert runs[waits.run_id]["kubernetes_id"] == "k-waits-2"
    assert runs[both.run_id]["pending_at"] < runs[both.run_id]["started_at"]
