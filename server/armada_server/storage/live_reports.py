"""An executor's plain reports of its runs pending, running and succeeded, applied in bulk.

Most of a sync's reports move a run to pending, running or succeeded, tens of thousands per
sync. Loading each job whole (every column, every run, as a Job), transitioning it and
saving every column was most of applying them. For a job whose every report in the sync
is pending, running or succeeded, of its latest run, active on this executor, with no
cancellation or preemption asked for, this reads only what `lifecycle.LiveRun` holds,
decides through `lifecycle.report_live` (the same checks, event and changes as
`mark_pending`, `mark_running` and `succeed`) and writes the jobs' and runs' changed
columns with one statement per table. A run that succeeds here was ended by its executor,
so it frees its node at once, as the loaded path frees a run whose end was reported. Every
other job, and a job whose reports the state machine refuses, stays on the sync's path of
loaded jobs; a gang's member does when the sync reports anything else, which may restart
its gang.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from sqlalchemy import ColumnElement, Connection, Select, and_, bindparam, exists, select
from sqlalchemy.orm import aliased

from armada_core.api import executor_pb2, submit_pb2
from armada_core.jobs import JobState, RunState, lifecycle
from armada_core.jobs.lifecycle import EventMessage, IllegalTransition, LiveRun
from armada_server.storage import schema as t
from armada_server.storage.base import UPDATE_JOBS, UPDATE_RUNS, from_timestamp
from armada_server.storage.bulk import executemany, fetch
from armada_server.storage.guard import Conflict
from armada_server.storage.rows import STATE_OF_JOBS_BY_ID, chunks

LIVE_UPDATES = frozenset({"pending", "running", "succeeded"})
_JOB_STATES = {int(s): s for s in JobState}
_RUN_STATES = {int(s): s for s in RunState}


@dataclass
class LiveReports:
    """The reports applied in bulk: each one's event by its place in the sync's reports, and
    the rows they change."""

    events: dict[int, EventMessage] = field(default_factory=dict)
    jobs: list[dict[str, Any]] = field(default_factory=list)  # guarded by version
    runs: dict[tuple[str, ...], list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def job_ids(self) -> set[str]:
        """The jobs whose reports were applied here."""
        return {row["_id"] for row in self.jobs}


def apply_live(
    conn: Connection,
    executor: str,
    updates: Sequence[executor_pb2.RunUpdate],
    now: datetime,
) -> LiveReports:
    """The reports of `updates` applied in bulk (see the module's docstring); the rest are
    left to the caller. A gang's member stays with the rest when the sync also reports
    anything else, which may restart its gang."""
    by_job: dict[str, list[int]] = {}  # job -> the places of its reports
    others: set[str] = set()  # jobs reported otherwise too
    for i, u in enumerate(updates):
        if u.WhichOneof("update") in LIVE_UPDATES:
            by_job.setdefault(u.job_id, []).append(i)
        else:
            others.add(u.job_id)
    candidates = [j for j in by_job if j not in others]
    found = _read(conn, executor, candidates, with_gangs=not others)
    done = LiveReports()
    runs = done.runs
    for job_id, (live, version) in found.items():
        mine = by_job[job_id]
        reports = [updates[i] for i in mine]
        run_id = live.run_id
        if any(u.run_id != run_id for u in reports):
            continue
        try:
            events, fields, changes = _apply(live, reports, now)
        except IllegalTransition:
            continue  # the loaded path says why it ignores it
        if len(mine) == 1:
            done.events[mine[0]] = events[0]
        else:
            done.events.update(zip(mine, events, strict=True))
        done.jobs.append(
            {
                "_id": job_id,
                "_version": version,
                "version": version + 1,
                "state": int(fields["state"]),
                "last_transition_at": fields["last_transition_at"],
            }
        )
        changes["state"] = int(changes["state"])  # the one RunState among them
        changes["_id"] = run_id
        key = tuple(changes)
        same = runs.get(key)
        if same is None:
            runs[key] = [changes]
        else:
            same.append(changes)
    return done


def _apply(
    live: LiveRun, reports: Sequence[executor_pb2.RunUpdate], now: datetime
) -> tuple[list[EventMessage], dict[str, Any], dict[str, Any]]:
    """One job's reports, in order: their events, and the job's and run's changes."""
    events: list[EventMessage] = []
    fields: dict[str, Any] = {}
    changes: dict[str, Any] = {}
    for u in reports:
        kind = u.WhichOneof("update")
        when = from_timestamp(u.time) if u.HasField("time") else now
        if kind == "pending":
            event, live, f, c = lifecycle.report_live(
                live, kind, now=when, kubernetes_id=u.pending.kubernetes_id
            )
        elif kind == "succeeded":
            event, live, f, c = lifecycle.report_live(live, kind, now=when)
        else:
            event, live, f, c = lifecycle.report_live(
                live,
                "running",
                now=when,
                node=u.running.node,
                kubernetes_id=u.running.kubernetes_id,
            )
        events.append(event)
        fields.update(f)
        changes.update(c)
    return events, fields, changes


def write_live(conn: Connection, done: LiveReports) -> None:
    """Write the jobs' and runs' rows the bulk reports change; each job only where its row
    still has the version it was read at, else Conflict."""
    written = executemany(conn, UPDATE_JOBS, done.jobs)
    if written != len(done.jobs):
        raise Conflict(
            f"{len(done.jobs) - written} of {len(done.jobs)} jobs changed since they were read"
        )
    for rows in done.runs.values():
        executemany(conn, UPDATE_RUNS, rows)


_later = aliased(t.runs)
# A run no later run of its job follows.
_LATEST = ~exists().where(
    and_(_later.c.job_id == t.runs.c.job_id, _later.c.run_index > t.runs.c.run_index)
)
_LIVE_JOB_STATES = (int(JobState.LEASED), int(JobState.PENDING), int(JobState.RUNNING))


def _live(*more: ColumnElement[bool]) -> Select[Any]:
    """The read of `_read`, for the job ids and executor given as parameters (built once:
    SQLAlchemy works out a statement's cache key once per object)."""
    j, r = t.jobs.c, t.runs.c
    columns = (j.id, j.job_set, j.queue, j.spec, j.state, j.version)
    run_columns = (r.id, r.run_index, r.cluster_id, r.node, r.pool, r.state, r.kubernetes_id)
    return (
        select(*columns, *run_columns)
        .join(t.runs, r.job_id == j.id)
        .where(
            j.id.in_(bindparam("ids", expanding=True)),
            STATE_OF_JOBS_BY_ID.in_(_LIVE_JOB_STATES),  # else SQLite walks every live job
            ~j.cancel_requested,
            ~j.preempt_requested,
            r.cluster_id == bindparam("executor"),
            _LATEST,
            *more,
        )
    )


_LIVE = _live()
_LIVE_NOT_IN_GANGS = _live(t.jobs.c.gang_id.is_(None))


def _namespace_only() -> Any:
    """A message of the stored job's namespace field alone: a stored spec parsed as it
    skips every other field unread (the pod spec above all, most of a spec's bytes), where
    parsing the whole job cost a live report more the larger its spec."""
    field = submit_pb2.Job.DESCRIPTOR.fields_by_name["namespace"]
    file = descriptor_pb2.FileDescriptorProto(name="job_namespace.proto", package="live")
    file.message_type.add(name="JobNamespace").field.add(
        name="namespace", number=field.number, type=field.type, label=1
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)  # type: ignore[no-untyped-call]  # the stubs leave the pool untyped
    found = pool.FindMessageTypeByName("live.JobNamespace")  # type: ignore[no-untyped-call]  # as Add
    return message_factory.GetMessageClass(found)


_JobNamespace = _namespace_only()


def _read(
    conn: Connection, executor: str, job_ids: Sequence[str], *, with_gangs: bool
) -> Mapping[str, tuple[LiveRun, int]]:
    """Of `job_ids`, the active jobs with no cancellation or preemption asked for (nor a
    gang, unless `with_gangs`) whose latest run is on `executor`: each as a LiveRun, with the
    version it was read at."""
    found: dict[str, tuple[LiveRun, int]] = {}
    stmt = _LIVE if with_gangs else _LIVE_NOT_IN_GANGS
    for chunk in chunks(job_ids, 2000):
        for row in fetch(conn, stmt, {"ids": chunk, "executor": executor}):
            job_id, job_set, queue, spec, state, version = row[:6]
            run_id, index, cluster, node, pool, run_state, kubernetes_id = row[6:]
            live = LiveRun(
                job_id,
                job_set,
                queue,
                _JobNamespace.FromString(spec).namespace,
                _JOB_STATES[state],
                run_id,
                index,
                cluster,
                node,
                pool,
                _RUN_STATES[run_state],
                kubernetes_id,
            )
            found[job_id] = (live, version)
    return found
