"""Jobs and runs as table rows, and back.

One place for the mapping between `armada_core.jobs` models and the `jobs` / `runs` tables,
used by every reader and writer. Reads take plain tuples in the column order below (see
`bulk.fetch`, which on SQLite hands times back as text).
"""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar, overload

from sqlalchemy import ColumnElement, Connection, select

from armada_core.api import submit_pb2
from armada_core.jobs import ContainerResult, Job, JobState, Run, RunState, gang_of
from armada_core.jobs import annotations as ann
from armada_core.jobs.alike import client_id_field
from armada_core.jobs.tasks import task_of
from armada_server.storage import schema as t
from armada_server.storage.bulk import fetch

T = TypeVar("T")

JOB_COLUMNS = (
    t.jobs.c.id,
    t.jobs.c.spec,
    t.jobs.c.state,
    t.jobs.c.priority,
    t.jobs.c.submitted_at,
    t.jobs.c.last_transition_at,
    t.jobs.c.retry_after,
    t.jobs.c.cancel_requested,
    t.jobs.c.cancel_reason,
    t.jobs.c.cancel_user,
    t.jobs.c.cancelled_at,
    t.jobs.c.preempt_requested,
    t.jobs.c.failure_reason,
    t.jobs.c.version,
)
RUN_COLUMNS = (
    t.runs.c.job_id,
    t.runs.c.id,
    t.runs.c.run_index,
    t.runs.c.cluster_id,
    t.runs.c.node,
    t.runs.c.pool,
    t.runs.c.state,
    t.runs.c.leased_at,
    t.runs.c.pending_at,
    t.runs.c.started_at,
    t.runs.c.finished_at,
    t.runs.c.kubernetes_id,
    t.runs.c.condition,
    t.runs.c.category,
    t.runs.c.subcategory,
    t.runs.c.reason,
    t.runs.c.containers,
)

# A job's state for filtering jobs found by id, as an expression no index serves. SQLite,
# which keeps no statistics here, takes `state = 0` for the more selective term and walks
# every queued job through the state's index to find a few thousand by id.
STATE_OF_JOBS_BY_ID = t.jobs.c.state + 0

_JOB_STATES = {int(s): s for s in JobState}
_RUN_STATES = {int(s): s for s in RunState}
_PARSED: dict[str, datetime] = {}

_JOB_FIELDS = (
    "spec",
    "state",
    "priority",
    "submitted_at",
    "last_transition_at",
    "runs",
    "retry_after",
    "cancel_requested",
    "cancel_reason",
    "cancel_user",
    "cancelled_at",
    "preempt_requested",
    "failure_reason",
    "version",
)
_RUN_FIELDS = (
    "id",
    "index",
    "cluster_id",
    "node",
    "pool",
    "state",
    "leased_at",
    "pending_at",
    "started_at",
    "finished_at",
    "kubernetes_id",
    "containers",
    "condition",
    "category",
    "subcategory",
    "reason",
)
# Rows become Jobs and Runs without their (frozen, validation-free) __init__, tens of
# thousands per sync; every field is set, which these checks keep true.
if (
    tuple(f.name for f in dataclasses.fields(Job)),
    tuple(f.name for f in dataclasses.fields(Run)),
) != (_JOB_FIELDS, _RUN_FIELDS):
    raise RuntimeError("Job or Run changed its fields: update rows._JOB_FIELDS/_RUN_FIELDS")


@overload
def when(value: datetime | str) -> datetime: ...
@overload
def when(value: None) -> None: ...
@overload
def when(value: datetime | str | None) -> datetime | None: ...
def when(value: datetime | str | None) -> datetime | None:
    """A stored time as an aware UTC datetime (SQLite text, or the driver's datetime)."""
    if value is None:
        return None
    if isinstance(value, str):
        # Rows written together share their times: parse each text once.
        parsed = _PARSED.get(value)
        if parsed is None:
            if len(_PARSED) >= 4096:
                _PARSED.clear()
            parsed = _PARSED[value] = datetime.fromisoformat(value).replace(tzinfo=UTC)
        return parsed
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def job_from_row(r: Sequence[Any], runs: tuple[Run, ...]) -> Job:
    """The job of a row of JOB_COLUMNS, with its runs."""
    job = object.__new__(Job)
    job.__dict__.update(
        zip(
            _JOB_FIELDS,
            (
                submit_pb2.Job.FromString(r[1]),
                _JOB_STATES[r[2]],
                r[3],
                when(r[4]),
                when(r[5]),
                runs,
                when(r[6]),
                bool(r[7]),
                r[8],
                r[9],
                when(r[10]),
                bool(r[11]),
                r[12],
                r[13],
            ),
            strict=True,
        )
    )
    return job


def run_from_row(r: Sequence[Any]) -> Run:
    """The run of a row of RUN_COLUMNS."""
    containers = () if r[16] == "[]" else tuple(ContainerResult(**c) for c in json.loads(r[16]))
    run = object.__new__(Run)
    run.__dict__.update(
        zip(
            _RUN_FIELDS,
            (
                r[1],
                r[2],
                r[3],
                r[4],
                r[5],
                _RUN_STATES[r[6]],
                when(r[7]),
                when(r[8]),
                when(r[9]),
                when(r[10]),
                r[11],
                containers,
                r[12],
                r[13],
                r[14],
                r[15],
            ),
            strict=True,
        )
    )
    return run


def job_row(spec: submit_pb2.Job, now: datetime) -> dict[str, Any]:
    """Every column of a new job's row, from the spec its `submitted` event carries, submitted
    and queued at `now` (UTC). Built without the Job that applying those events makes (a
    request of thousands of jobs showed it): its changeable columns hold what that Job's
    `mutable_job_row` would, which tests/server/test_rows.py checks."""
    annotations = spec.annotations
    gang = gang_of(annotations)
    pod = spec.pod_specs[0] if spec.pod_specs else spec.pod_spec
    return {
        "id": spec.id,
        "queue": spec.queue,
        "job_set": spec.job_set_id,
        "client_id": spec.client_id or None,
        "external_job_uri": annotations.get(ann.EXTERNAL_JOB_URI) or None,
        "task": task_of(annotations),
        "state": _QUEUED,
        "priority": spec.priority,
        "priority_class": pod.priorityClassName,
        "gang_id": gang.id if gang else None,
        "submitted_at": now,
        "last_transition_at": now,
        "retry_after": None,
        "cancel_requested": False,
        "cancel_reason": "",
        "cancel_user": "",
        "cancelled_at": None,
        "preempt_requested": False,
        "failure_reason": "",
        "spec": spec.SerializeToString(),
    }


_QUEUED = int(JobState.QUEUED)


def mutable_job_row(job: Job) -> dict[str, Any]:
    """The columns of job_row that a transition can change, keyed by `_id` and guarded by
    `_version` (the version `job` was read at) for an UPDATE that also writes the next
    version. The rest (ids, queue, job set, the spec and what derives from it) are fixed at
    submission, and re-serialising the spec per write was a large part of a cycle."""
    return {
        "_id": job.id,
        "_version": job.version,
        "version": job.version + 1,
        "state": int(job.state),
        "priority": job.priority,
        "last_transition_at": job.last_transition_at,
        "retry_after": job.retry_after,
        "cancel_requested": job.cancel_requested,
        "cancel_reason": job.cancel_reason,
        "cancel_user": job.cancel_user,
        "cancelled_at": job.cancelled_at,
        "preempt_requested": job.preempt_requested,
        "failure_reason": job.failure_reason,
    }


def run_row(job_id: str, run: Run) -> dict[str, Any]:
    """Every column of a run's row (an empty container list is not encoded per run)."""
    return {
        "id": run.id,
        "job_id": job_id,
        "run_index": run.index,
        "cluster_id": run.cluster_id,
        "node": run.node,
        "pool": run.pool,
        "state": int(run.state),
        "leased_at": run.leased_at,
        "pending_at": run.pending_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "kubernetes_id": run.kubernetes_id,
        "condition": run.condition,
        "category": run.category,
        "subcategory": run.subcategory,
        "reason": run.reason,
        "containers": json.dumps([vars(c) for c in run.containers]) if run.containers else "[]",
    }


def chunks(values: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """`values` in slices of at most `size` (bounded IN lists and statement sizes)."""
    for i in range(0, len(values), size):
        yield values[i : i + size]


def load_jobs(conn: Connection, where: ColumnElement[bool]) -> list[Job]:
    """The jobs `where` matches, with their runs, in id order."""
    rows = fetch(conn, select(*JOB_COLUMNS).where(where).order_by(t.jobs.c.id))
    if not rows:
        return []
    runs: dict[str, list[Run]] = defaultdict(list)
    for chunk in chunks([r[0] for r in rows], 500):
        for r in fetch(
            conn,
            select(*RUN_COLUMNS)
            .where(t.runs.c.job_id.in_(chunk))
            .order_by(t.runs.c.job_id, t.runs.c.run_index),
        ):
            runs[r[0]].append(run_from_row(r))
    return [job_from_row(r, tuple(runs[r[0]])) for r in rows]


def jobs_by_id(conn: Connection, job_ids: Iterable[str]) -> dict[str, Job]:
    """The jobs (with their runs) as load_jobs builds them, read in bulk."""
    jobs: dict[str, Job] = {}
    for chunk in chunks(sorted(set(job_ids)), 2000):
        runs: dict[str, list[Run]] = {}
        for r in fetch(
            conn,
            select(*RUN_COLUMNS)
            .where(t.runs.c.job_id.in_(chunk))
            .order_by(t.runs.c.job_id, t.runs.c.run_index),
        ):
            runs.setdefault(r[0], []).append(run_from_row(r))
        for r in fetch(conn, select(*JOB_COLUMNS).where(t.jobs.c.id.in_(chunk))):
            jobs[r[0]] = job_from_row(r, tuple(runs.get(r[0], ())))
    return jobs


def spec_key(job_id: str, raw: bytes, client_id: str | None = None) -> bytes | None:
    """A stored spec without its id, and without its client id when that follows the id
    (as a submission writes it: AlikeJobs): jobs submitted together have equal keys, so what
    a spec decides can be computed once per key. None when the id is not written first (the
    serialiser writes field 1, the id, first). Fields are cut only from the start, where
    they begin where the bytes say: the key is the rest of the fields, exactly."""
    if len(job_id) >= 128:
        return None
    prefix = b"\n" + bytes((len(job_id),)) + job_id.encode()
    if not raw.startswith(prefix):
        return None
    if client_id:
        field = client_id_field(client_id)
        if raw.startswith(field, len(prefix)):
            return raw[len(prefix) + len(field) :]
    return raw[len(prefix) :]
