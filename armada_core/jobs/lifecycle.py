"""The job state machine, as events.

Every change to a job is an `api.EventMessage`; `apply` is the only place a job changes, so a
job's state can always be rebuilt from its job set's log (`rebuild`). The commands below
(`lease`, `fail`, `cancel`, ...) check the transition, build its events and apply them; an
illegal transition raises IllegalTransition and changes nothing.

    queued -> leased -> pending -> running -> succeeded | failed | cancelled | preempted
    queued -> rejected | cancelled | failed (e.g. a gang member the scheduler could not place)
    leased | pending | running -> queued (a returned lease, or a failure the server retries)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from google.protobuf.timestamp_pb2 import Timestamp

from armada_core.api import event_pb2, submit_pb2
from armada_core.jobs.model import (
    ContainerResult,
    Job,
    JobState,
    Run,
    RunState,
    pod_name,
)

EventMessage = event_pb2.EventMessage

ACTIVE_JOB_STATES = (JobState.LEASED, JobState.PENDING, JobState.RUNNING)

# Failure conditions and the upstream Cause each maps onto.
CONDITION_CAUSES = {
    "OOMKilled": event_pb2.OOM,
    "Evicted": event_pb2.Evicted,
    "Preempted": event_pb2.Evicted,
    "DeadlineExceeded": event_pb2.DeadlineExceeded,
}


class IllegalTransition(ValueError):
    """An event that the job's current state does not allow."""


@dataclasses.dataclass(frozen=True)
class Failure:
    """What an executor (or the server itself) knows about why a run failed."""

    reason: str
    containers: tuple[ContainerResult, ...] = ()
    condition: str = ""
    category: str = ""
    subcategory: str = ""


# A transaction stamps thousands of events with one time, so the conversions between datetimes
# and Timestamps are memoised. A cached Timestamp is never handed out to be changed: message
# constructors and CopyFrom copy it.
_TS: dict[datetime, Timestamp] = {}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_DT: dict[tuple[int, int], datetime] = {}


def timestamp(when: datetime) -> Timestamp:
    """`when` (timezone-aware) as a Timestamp, memoised: never change the one returned."""
    ts = _TS.get(when)
    if ts is None:
        if len(_TS) >= 1024:
            _TS.clear()
        # Timestamp.FromDatetime, by arithmetic (its own is slow for a call per event).
        delta = when - _EPOCH
        ts = _TS[when] = Timestamp(
            seconds=delta.days * 86_400 + delta.seconds, nanos=delta.microseconds * 1000
        )
    return ts


def _dt(ts: Timestamp) -> datetime:
    key = (ts.seconds, ts.nanos)
    when = _DT.get(key)
    if when is None:
        if len(_DT) >= 1024:
            _DT.clear()
        when = _DT[key] = _EPOCH + timedelta(seconds=ts.seconds, microseconds=ts.nanos // 1000)
    return when


_Frozen = TypeVar("_Frozen", Job, Run, "LiveRun")


def _replace(obj: _Frozen, **changes: object) -> _Frozen:
    """dataclasses.replace for the frozen, validation-free Job, Run and LiveRun, without
    calling __init__: a transition per job in a batch of tens of thousands made it show."""
    new = object.__new__(type(obj))
    new.__dict__.update(obj.__dict__)
    new.__dict__.update(changes)
    return new


def _base(job: Job | submit_pb2.Job, now: datetime) -> dict[str, Any]:
    spec = job if isinstance(job, submit_pb2.Job) else job.spec
    return _header(spec.id, spec.job_set_id, spec.queue, now)


def _header(job_id: str, job_set_id: str, queue: str, now: datetime) -> dict[str, Any]:
    """What every event says of where it belongs and when it happened."""
    return {"job_id": job_id, "job_set_id": job_set_id, "queue": queue, "created": timestamp(now)}


def _pod(job: Job, run: Run) -> dict[str, Any]:
    return _pod_of(job.id, job.spec.namespace, run.id, run.index, run.cluster_id, run.kubernetes_id)


def _pod_of(
    job_id: str, namespace: str, run_id: str, run_index: int, cluster_id: str, kubernetes_id: str
) -> dict[str, Any]:
    """What an event of a run says of its pod."""
    return {
        "cluster_id": cluster_id,
        "kubernetes_id": kubernetes_id,
        "pod_number": 0,
        "pod_name": pod_name(job_id, run_index),
        "pod_namespace": namespace,
        "run_id": run_id,
    }


def _pod_event(
    kind: str,
    job_id: str,
    job_set_id: str,
    queue: str,
    now: datetime,
    namespace: str,
    run_id: str,
    run_index: int,
    cluster_id: str,
    kubernetes_id: str,
) -> tuple[EventMessage, Any]:
    """An event of a run's pod, `kind` naming its body: the event, and the body for what
    its kind adds. What `_header` and `_pod_of` say, filled in place: a cycle or a sync makes
    these by the tens of thousands, and a body built from a dict cost twice as much."""
    event = EventMessage()
    body = getattr(event, kind)
    body.job_id = job_id
    body.job_set_id = job_set_id
    body.queue = queue
    body.created.CopyFrom(timestamp(now))
    body.cluster_id = cluster_id
    body.kubernetes_id = kubernetes_id
    body.pod_name = pod_name(job_id, run_index)
    body.pod_namespace = namespace
    body.run_id = run_id
    return event, body


def _job_pod_event(kind: str, job: Job, run: Run, now: datetime) -> tuple[EventMessage, Any]:
    """`_pod_event` of the job's `run`."""
    spec = job.spec
    return _pod_event(
        kind,
        spec.id,
        spec.job_set_id,
        spec.queue,
        now,
        spec.namespace,
        run.id,
        run.index,
        run.cluster_id,
        run.kubernetes_id,
    )


# --- applying events ------------------------------------------------------------------------


def apply(job: Job | None, event: EventMessage) -> Job:
    """The job after `event`; raises IllegalTransition if its state does not allow it."""
    kind = event.WhichOneof("events")
    if kind is None:
        raise IllegalTransition("empty event message")
    body = getattr(event, kind)
    if kind == "submitted":
        if job is not None:
            raise IllegalTransition(f"job {job.id} was already submitted")
        when = _dt(body.created)
        # The job shares the event's message: both are treated as immutable, and not copying
        # a whole pod spec per job matters when submitting thousands at once.
        return Job(
            spec=body.job,
            state=JobState.SUBMITTED,
            priority=body.job.priority,
            submitted_at=when,
            last_transition_at=when,
        )
    if job is None:
        raise IllegalTransition(f"{kind} event for job {body.job_id} before it was submitted")
    if body.job_id != job.id:
        raise IllegalTransition(f"{kind} event for job {body.job_id} applied to job {job.id}")
    if job.terminal:
        raise IllegalTransition(f"job {job.id} is {job.state.name}: no {kind} after that")
    handler = _HANDLERS.get(kind)
    if handler is None:
        raise IllegalTransition(f"unsupported event {kind}")
    return handler(job, body, _dt(body.created))


def rebuild(events: Iterable[EventMessage]) -> Job | None:
    """A job's state from its events alone, in log order."""
    job: Job | None = None
    for event in events:
        job = apply(job, event)
    return job


def rebuild_job_set(events: Iterable[EventMessage]) -> dict[str, Job]:
    """Every job of a job set from the set's log."""
    jobs: dict[str, Job] = {}
    for event in events:
        body = getattr(event, event.WhichOneof("events") or "submitted")
        jobs[body.job_id] = apply(jobs.get(body.job_id), event)
    return jobs


def _require(job: Job, kind: str, *states: JobState) -> None:
    _require_state(job.id, job.state, kind, *states)


def _require_state(job_id: str, state: JobState, kind: str, *states: JobState) -> None:
    if state not in states:
        allowed = ", ".join(s.name for s in states)
        raise IllegalTransition(f"job {job_id} is {state.name}: {kind} needs one of {allowed}")


def _run_of(job: Job, kind: str, run_id: str, *, active: bool = True) -> Run:
    run = job.latest_run
    if run is None:
        raise IllegalTransition(f"job {job.id} has no run for {kind}")
    if run_id and run_id != run.id:
        raise IllegalTransition(f"{kind} names run {run_id}, job {job.id} is on run {run.id}")
    if active and not run.state.active:
        raise IllegalTransition(f"run {run.id} of job {job.id} is {run.state.name}: no {kind}")
    return run


def _with_run(job: Job, run: Run, **changes: object) -> Job:
    return _replace(job, runs=(*job.runs[:-1], run), **changes)


def _on_queued(job: Job, e: event_pb2.JobQueuedEvent, when: datetime) -> Job:
    _require(job, "queued", JobState.SUBMITTED, JobState.QUEUED)
    retry_after = _dt(e.retry_after) if e.HasField("retry_after") else None
    return _replace(job, state=JobState.QUEUED, retry_after=retry_after, last_transition_at=when)


def _on_leased(job: Job, e: event_pb2.JobLeasedEvent, when: datetime) -> Job:
    _require(job, "leased", JobState.QUEUED)
    fields, run = _lease_effects(e.run_id, len(job.runs), e.cluster_id, e.node_name, e.pool, when)
    return _replace(job, runs=(*job.runs, run), **fields)


def _on_lease_returned(job: Job, e: event_pb2.JobLeaseReturnedEvent, when: datetime) -> Job:
    run = _run_of(job, "lease_returned", e.run_id)
    run = _replace(run, state=RunState.LEASE_RETURNED, finished_at=when, reason=e.reason)
    return _with_run(job, run, state=JobState.QUEUED, last_transition_at=when)


def _on_lease_expired(job: Job, e: event_pb2.JobLeaseExpiredEvent, when: datetime) -> Job:
    run = _run_of(job, "lease_expired", e.run_id)
    run = _replace(run, state=RunState.LEASE_EXPIRED, finished_at=when, reason="lease expired")
    return _with_run(job, run)


def _on_pending(job: Job, e: event_pb2.JobPendingEvent, when: datetime) -> Job:
    _require(job, "pending", JobState.LEASED)
    run = _run_of(job, "pending", e.run_id)
    fields, changes = _pending_effects(e.kubernetes_id or run.kubernetes_id, when)
    return _with_run(job, _replace(run, **changes), **fields)


def _on_running(job: Job, e: event_pb2.JobRunningEvent, when: datetime) -> Job:
    _require(job, "running", JobState.LEASED, JobState.PENDING)
    run = _run_of(job, "running", e.run_id)
    fields, changes = _running_effects(
        e.node_name or run.node, e.kubernetes_id or run.kubernetes_id, when
    )
    return _with_run(job, _replace(run, **changes), **fields)


def _pending_effects(kubernetes_id: str, when: datetime) -> tuple[dict[str, Any], dict[str, Any]]:
    """What a run's pod being pending at `when` does: the job's fields it sets, and the
    run's."""
    job = {"state": JobState.PENDING, "last_transition_at": when}
    return job, {"state": RunState.PENDING, "pending_at": when, "kubernetes_id": kubernetes_id}


def _running_effects(
    node: str, kubernetes_id: str, when: datetime
) -> tuple[dict[str, Any], dict[str, Any]]:
    """What a run's pod running on `node` from `when` does: the job's fields it sets, and
    the run's."""
    job = {"state": JobState.RUNNING, "last_transition_at": when}
    run = {"state": RunState.RUNNING, "started_at": when, "node": node}
    return job, {**run, "kubernetes_id": kubernetes_id}


def _on_succeeded(job: Job, e: event_pb2.JobSucceededEvent, when: datetime) -> Job:
    _require(job, "succeeded", *ACTIVE_JOB_STATES)
    run = _run_of(job, "succeeded", e.run_id)
    fields, changes = _succeeded_effects(when)
    return _with_run(job, _replace(run, **changes), **fields)


def _succeeded_effects(when: datetime) -> tuple[dict[str, Any], dict[str, Any]]:
    """What a run succeeding at `when` does: the job's fields it sets, and the run's. A run
    asked to stop that succeeded first did not end for the reason it was asked."""
    job = {"state": JobState.SUCCEEDED, "last_transition_at": when}
    return job, {"state": RunState.SUCCEEDED, "finished_at": when, "reason": ""}


def _on_failed(job: Job, e: event_pb2.JobFailedEvent, when: datetime) -> Job:
    if e.cause == event_pb2.Rejected:
        _require(job, "rejection", JobState.SUBMITTED, JobState.QUEUED)
        return _replace(
            job, state=JobState.REJECTED, failure_reason=e.reason, last_transition_at=when
        )
    new_state = JobState.QUEUED if e.retryable else JobState.FAILED
    if not e.run_id:  # the job failed before running, e.g. a gang member left unplaced
        _require(job, "failed", JobState.QUEUED)
        if e.retryable:
            raise IllegalTransition(f"a retryable failure of job {job.id} must name its run")
        return _replace(job, state=new_state, failure_reason=e.reason, last_transition_at=when)
    run = _run_of(job, "failed", e.run_id, active=False)
    just_expired = run.state == RunState.LEASE_EXPIRED and not run.category
    if not (run.state.active or just_expired):
        raise IllegalTransition(f"run {run.id} of job {job.id} already ended as {run.state.name}")
    containers = tuple(
        ContainerResult(
            name=c.name,
            exit_code=c.exitCode,
            message=c.message,
            reason=c.reason,
            init_container=c.init_container,
        )
        for c in e.container_statuses
    )
    run = _replace(
        run,
        state=RunState.FAILED if run.state.active else run.state,
        finished_at=run.finished_at or when,
        containers=containers,
        condition=e.condition,
        category=e.failure_category,
        subcategory=e.failure_subcategory,
        reason=e.reason,
    )
    return _with_run(job, run, state=new_state, failure_reason=e.reason, last_transition_at=when)


def _on_cancelling(job: Job, e: event_pb2.JobCancellingEvent, when: datetime) -> Job:
    return _replace(job, cancel_requested=True, cancel_reason=e.reason, cancel_user=e.requestor)


def _on_cancelled(job: Job, e: event_pb2.JobCancelledEvent, when: datetime) -> Job:
    runs = job.runs
    if job.active_run is not None:
        runs = (*runs[:-1], _replace(runs[-1], state=RunState.CANCELLED, finished_at=when))
    return _replace(
        job,
        state=JobState.CANCELLED,
        runs=runs,
        cancelled_at=when,
        cancel_reason=e.reason or job.cancel_reason,
        cancel_user=e.requestor or job.cancel_user,
        last_transition_at=when,
    )


def _on_preempting(job: Job, e: event_pb2.JobPreemptingEvent, when: datetime) -> Job:
    _require(job, "preempting", *ACTIVE_JOB_STATES)
    return _replace(job, preempt_requested=True)


def _on_preempted(job: Job, e: event_pb2.JobPreemptedEvent, when: datetime) -> Job:
    _require(job, "preempted", *ACTIVE_JOB_STATES)
    run = _run_of(job, "preempted", e.run_id)
    run = _replace(
        run, state=RunState.PREEMPTED, finished_at=when, condition="Preempted", reason=e.reason
    )
    return _with_run(job, run, state=JobState.PREEMPTED, last_transition_at=when)


def _on_reprioritizing(job: Job, e: event_pb2.JobReprioritizingEvent, when: datetime) -> Job:
    return job


def _on_reprioritized(job: Job, e: event_pb2.JobReprioritizedEvent, when: datetime) -> Job:
    return _replace(job, priority=e.new_priority)


def _on_run_report(
    job: Job, e: event_pb2.JobUtilisationEvent | event_pb2.JobIngressInfoEvent, when: datetime
) -> Job:
    _require(job, "a run report", *ACTIVE_JOB_STATES)
    return job


# Each handler takes its own event type; `apply` looks the body up by the oneof's name.
_HANDLERS: dict[str, Callable[[Job, Any, datetime], Job]] = {
    "queued": _on_queued,
    "leased": _on_leased,
    "lease_returned": _on_lease_returned,
    "lease_expired": _on_lease_expired,
    "pending": _on_pending,
    "running": _on_running,
    "succeeded": _on_succeeded,
    "failed": _on_failed,
    "cancelling": _on_cancelling,
    "cancelled": _on_cancelled,
    "preempting": _on_preempting,
    "preempted": _on_preempted,
    "reprioritizing": _on_reprioritizing,
    "reprioritized": _on_reprioritized,
    "utilisation": _on_run_report,
    "ingress_info": _on_run_report,
}


# --- commands -------------------------------------------------------------------------------

Transition = tuple[Job, list[EventMessage]]


def _do(job: Job | None, events: Sequence[EventMessage]) -> Transition:
    for event in events:
        job = apply(job, event)
    assert job is not None
    return job, list(events)


def submit(spec: submit_pb2.Job, now: datetime) -> Transition:
    """A new job: `submitted` (carrying the whole job) then `queued`."""
    return _do(None, submitted(spec, now))


def submitted(spec: submit_pb2.Job, now: datetime) -> list[EventMessage]:
    """The events of `submit`, without applying them: storage writes a new job's row from
    the job its `submitted` event carries (`rows.job_row`)."""
    if not spec.id:
        raise ValueError("a job needs an id before it is submitted")
    if not spec.HasField("created"):
        stamped = submit_pb2.Job()  # never mutate the caller's message
        stamped.CopyFrom(spec)
        stamped.created.CopyFrom(timestamp(now))
        spec = stamped
    # Filled in place: the keyword constructors copied the whole job twice (into the body,
    # then the body into the message), a cost per job that a request of thousands shows.
    event = EventMessage()
    body = event.submitted
    body.job_id, body.job_set_id, body.queue = spec.id, spec.job_set_id, spec.queue
    body.created.CopyFrom(timestamp(now))
    body.job.CopyFrom(spec)
    queued = EventMessage(queued=_base(spec, now))  # type: ignore[arg-type]  # a dict body
    return [event, queued]


def lease(
    job: Job, *, run_id: str, cluster_id: str, node: str, pool: str, now: datetime
) -> Transition:
    """The scheduler placed the job on a node of an executor's cluster."""
    event = _leased_event(
        job.id,
        job.job_set,
        job.queue,
        run_id=run_id,
        cluster_id=cluster_id,
        node=node,
        pool=pool,
        now=now,
    )
    return _do(job, [event])


# A lease is the one transition a scheduling cycle makes by the tens of thousands. Storage
# writes those without a Job each (its bulk lease reads a job's version, queue, job set and
# count of runs): `lease_queued` builds the same event as `lease` and derives the job's
# changes through the same `_lease_effects` as applying that event does, so the bulk lease
# writes exactly what leasing the Job would.


def _leased_event(
    job_id: str,
    job_set_id: str,
    queue: str,
    *,
    run_id: str,
    cluster_id: str,
    node: str,
    pool: str,
    now: datetime,
) -> EventMessage:
    """The event of a job's lease on a node of an executor's cluster (filled in place, as
    `_pod_event`'s)."""
    event = EventMessage()
    body = event.leased
    body.job_id = job_id
    body.job_set_id = job_set_id
    body.queue = queue
    body.created.CopyFrom(timestamp(now))
    body.cluster_id = cluster_id
    body.pool = pool
    body.run_id = run_id
    body.node_name = node
    return event


def lease_queued(
    job_id: str,
    job_set_id: str,
    queue: str,
    *,
    run_index: int,
    run_id: str,
    cluster_id: str,
    node: str,
    pool: str,
    now: datetime,
) -> tuple[EventMessage, dict[str, Any], Run]:
    """`lease` of a queued job known only by its id, job set, queue and count of runs so far
    (`run_index`, the index of the run it starts): the lease's event, the job's fields it
    sets (besides its runs) and the new run. The caller checked that the job is queued."""
    event = _leased_event(
        job_id,
        job_set_id,
        queue,
        run_id=run_id,
        cluster_id=cluster_id,
        node=node,
        pool=pool,
        now=now,
    )
    fields, run = _lease_effects(run_id, run_index, cluster_id, node, pool, _dt(timestamp(now)))
    return event, fields, run


# Every new run starts as this one, with its lease's values (see _replace).
_NEW_RUN = Run(id="", index=0, cluster_id="", node="", pool="", state=RunState.LEASED)


def _lease_effects(
    run_id: str, run_index: int, cluster_id: str, node: str, pool: str, when: datetime
) -> tuple[dict[str, Any], Run]:
    """What a lease at `when` does to the queued job: the fields it sets, besides its runs,
    and the run it starts."""
    fields = {
        "state": JobState.LEASED,
        "retry_after": None,
        "preempt_requested": False,
        "last_transition_at": when,
    }
    run = _replace(
        _NEW_RUN,
        id=run_id,
        index=run_index,
        cluster_id=cluster_id,
        node=node,
        pool=pool,
        leased_at=when,
    )
    return fields, run


def return_lease(job: Job, *, reason: str, run_attempted: bool, now: datetime) -> Transition:
    """The executor gave the lease back without the job failing; the job is queued again."""
    run = _run_of(job, "lease_returned", "")
    return _do(
        job,
        [
            EventMessage(
                lease_returned=event_pb2.JobLeaseReturnedEvent(
                    **_base(job, now),
                    cluster_id=run.cluster_id,
                    reason=reason,
                    kubernetes_id=run.kubernetes_id,
                    pod_number=0,
                    run_attempted=run_attempted,
                    run_id=run.id,
                )
            )
        ],
    )


def mark_pending(job: Job, *, now: datetime, kubernetes_id: str = "") -> Transition:
    run = _run_of(job, "pending", "")
    run = _replace(run, kubernetes_id=kubernetes_id or run.kubernetes_id)
    event, body = _job_pod_event("pending", job, run, now)
    body.pool = run.pool
    return _do(job, [event])


def mark_running(job: Job, *, now: datetime, node: str = "", kubernetes_id: str = "") -> Transition:
    run = _run_of(job, "running", "")
    run = _replace(run, kubernetes_id=kubernetes_id or run.kubernetes_id)
    event, body = _job_pod_event("running", job, run, now)
    body.node_name = node or run.node
    body.pool = run.pool
    return _do(job, [event])


# Executors report their runs pending, running and succeeded by the tens of thousands per
# sync. Storage applies the plain ones without a Job each (it reads what a `LiveRun` holds):
# `report_live` checks the transition as applying the event would, builds the same event as
# `mark_pending`, `mark_running` or `succeed`, and derives the changes through the same
# `_pending_effects`, `_running_effects` and `_succeeded_effects` as applying that event does.


@dataclasses.dataclass(frozen=True)
class LiveRun:
    """What reporting a job's latest run pending or running reads and changes of the job
    and of that run."""

    job_id: str
    job_set_id: str
    queue: str
    namespace: str
    state: JobState
    run_id: str
    run_index: int
    cluster_id: str
    node: str
    pool: str
    run_state: RunState
    kubernetes_id: str


def report_live(
    live: LiveRun, kind: str, *, now: datetime, node: str = "", kubernetes_id: str = ""
) -> tuple[EventMessage, LiveRun, dict[str, Any], dict[str, Any]]:
    """`mark_pending` (`kind` "pending"), `mark_running` ("running") or `succeed`
    ("succeeded") of the job and latest run `live` describes: the event, `live` after it,
    the job's fields it sets and the run's (IllegalTransition, changing nothing, where those
    would raise it)."""
    if not live.run_state.active:
        raise IllegalTransition(
            f"run {live.run_id} of job {live.job_id} is {live.run_state.name}: no {kind}"
        )
    if kind == "pending":
        _require_state(live.job_id, live.state, kind, JobState.LEASED)
    elif kind == "running":
        _require_state(live.job_id, live.state, kind, JobState.LEASED, JobState.PENDING)
    elif kind == "succeeded":
        _require_state(live.job_id, live.state, kind, *ACTIVE_JOB_STATES)
    else:
        raise ValueError(f"report_live: {kind!r} is none of pending, running, succeeded")
    kubernetes_id = kubernetes_id or live.kubernetes_id
    event, body = _pod_event(
        kind,
        live.job_id,
        live.job_set_id,
        live.queue,
        now,
        live.namespace,
        live.run_id,
        live.run_index,
        live.cluster_id,
        kubernetes_id,
    )
    # The event's time as the applied event gives it (a UTC time already is that).
    when = now if now.tzinfo is UTC else _dt(timestamp(now))
    if kind == "pending":
        body.pool = live.pool
        fields, changes = _pending_effects(kubernetes_id, when)
    elif kind == "running":
        body.node_name = node or live.node
        body.pool = live.pool
        fields, changes = _running_effects(node or live.node, kubernetes_id, when)
    else:
        body.node_name = live.node
        fields, changes = _succeeded_effects(when)
    after = _replace(
        live,
        state=fields["state"],
        run_state=changes["state"],
        node=changes.get("node", live.node),
        kubernetes_id=kubernetes_id,
    )
    return event, after, fields, changes


def succeed(job: Job, *, now: datetime) -> Transition:
    run = _run_of(job, "succeeded", "")
    event, body = _job_pod_event("succeeded", job, run, now)
    body.node_name = run.node
    return _do(job, [event])


def _failed_event(
    job: Job,
    run: Run | None,
    failure: Failure,
    *,
    retryable: bool,
    now: datetime,
    cause: event_pb2.Cause.ValueType | None = None,
) -> EventMessage:
    statuses = [
        event_pb2.ContainerStatus(
            name=c.name,
            exitCode=c.exit_code,
            message=c.message,
            reason=c.reason,
            cause=CONDITION_CAUSES.get(c.reason, event_pb2.Error),
            init_container=c.init_container,
        )
        for c in failure.containers
    ]
    body = event_pb2.JobFailedEvent(
        **_base(job, now),
        reason=failure.reason,
        container_statuses=statuses,
        cause=CONDITION_CAUSES.get(failure.condition, event_pb2.Error) if cause is None else cause,
        failure_category=failure.category,
        failure_subcategory=failure.subcategory,
        retryable=retryable,
        condition=failure.condition,
    )
    if run is not None:
        for key, value in _pod(job, run).items():
            setattr(body, key, value)
        body.node_name = run.node
        for c in failure.containers:
            if not c.init_container:
                body.exit_codes[c.name] = c.exit_code
    return EventMessage(failed=body)


def _requeue(job: Job, retry_after: datetime | None, now: datetime) -> EventMessage:
    queued = event_pb2.JobQueuedEvent(**_base(job, now))
    if retry_after is not None:
        queued.retry_after.CopyFrom(timestamp(retry_after))
    return EventMessage(queued=queued)


def fail(
    job: Job, failure: Failure, *, retry: bool, now: datetime, retry_after: datetime | None = None
) -> Transition:
    """The job's run failed. With `retry` the job is queued for a new run (same job id)."""
    run = job.active_run
    if run is None and retry:
        raise IllegalTransition(f"job {job.id} has no active run to retry")
    events = [_failed_event(job, run, failure, retryable=retry, now=now)]
    if retry:
        events.append(_requeue(job, retry_after, now))
    return _do(job, events)


def expire_lease(
    job: Job, *, retry: bool, now: datetime, retry_after: datetime | None = None
) -> Transition:
    """The executor stopped renewing the lease: an infrastructure failure of the run."""
    run = _run_of(job, "lease_expired", "")
    events = [
        EventMessage(lease_expired=event_pb2.JobLeaseExpiredEvent(**_base(job, now), run_id=run.id))
    ]
    failure = Failure(
        reason=f"lease of run {run.id} on {run.cluster_id} expired",
        category="internal",
        subcategory="lease_expired",
    )
    events.append(_failed_event(job, run, failure, retryable=retry, now=now))
    if retry:
        events.append(_requeue(job, retry_after, now))
    return _do(job, events)


def reject(job: Job, *, reason: str, now: datetime) -> Transition:
    """The job can never run as submitted."""
    return _do(
        job,
        [
            _failed_event(
                job,
                None,
                Failure(reason=reason),
                retryable=False,
                now=now,
                cause=event_pb2.Rejected,
            )
        ],
    )


def request_cancel(job: Job, *, requestor: str, reason: str, now: datetime) -> Transition:
    return _do(
        job,
        [
            EventMessage(
                cancelling=event_pb2.JobCancellingEvent(
                    **_base(job, now), requestor=requestor, reason=reason
                )
            )
        ],
    )


def cancel(job: Job, *, requestor: str, reason: str, now: datetime) -> Transition:
    """The job is cancelled; a running pod is killed with its grace period."""
    return _do(
        job,
        [
            EventMessage(
                cancelled=event_pb2.JobCancelledEvent(
                    **_base(job, now), requestor=requestor, reason=reason
                )
            )
        ],
    )


def request_preempt(job: Job, *, requestor: str, reason: str, now: datetime) -> Transition:
    return _do(
        job,
        [
            EventMessage(
                preempting=event_pb2.JobPreemptingEvent(
                    **_base(job, now), requestor=requestor, reason=reason
                )
            )
        ],
    )


def preempt(
    job: Job,
    *,
    reason: str,
    now: datetime,
    retry: bool = False,
    retry_after: datetime | None = None,
    preempting_job_id: str = "",
    requestor: str = "",
) -> Transition:
    """The job's run was preempted. Retried preemptions are retryable failures, not final."""
    run = _run_of(job, "preempted", "")
    if retry:
        failure = Failure(reason=reason, condition="Preempted")
        return _do(
            job,
            [
                _failed_event(job, run, failure, retryable=True, now=now),
                _requeue(job, retry_after, now),
            ],
        )
    return _do(
        job,
        [
            EventMessage(
                preempted=event_pb2.JobPreemptedEvent(
                    **_base(job, now),
                    cluster_id=run.cluster_id,
                    run_id=run.id,
                    reason=reason,
                    preempting_job_id=preempting_job_id,
                    requestor=requestor,
                )
            )
        ],
    )


def reprioritize(job: Job, *, priority: float, requestor: str, now: datetime) -> Transition:
    base = _base(job, now)
    return _do(
        job,
        [
            EventMessage(
                reprioritizing=event_pb2.JobReprioritizingEvent(
                    **base, new_priority=priority, requestor=requestor
                )
            ),
            EventMessage(
                reprioritized=event_pb2.JobReprioritizedEvent(
                    **base, new_priority=priority, requestor=requestor
                )
            ),
        ],
    )


def report_ingress(job: Job, *, addresses: Mapping[int, str], now: datetime) -> Transition:
    """Where the running pod's ingresses can be reached (container port -> address)."""
    run = _run_of(job, "ingress_info", "")
    body = event_pb2.JobIngressInfoEvent(
        **_base(job, now),
        cluster_id=run.cluster_id,
        kubernetes_id=run.kubernetes_id,
        node_name=run.node,
        pod_number=0,
        pod_name=pod_name(job.id, run.index),
        pod_namespace=job.spec.namespace,
    )
    for port, address in addresses.items():
        body.ingress_addresses[port] = address
    return _do(job, [EventMessage(ingress_info=body)])


def report_utilisation(job: Job, *, usage: Mapping[str, str], now: datetime) -> Transition:
    """Resource usage of the running pod (Kubernetes quantities by resource name)."""
    run = _run_of(job, "utilisation", "")
    body = event_pb2.JobUtilisationEvent(
        **_base(job, now),
        node_name=run.node,
        cluster_id=run.cluster_id,
        kubernetes_id=run.kubernetes_id,
        pod_name=pod_name(job.id, run.index),
        pod_namespace=job.spec.namespace,
    )
    for name, quantity in usage.items():
        body.MaxResourcesForPeriod[name].string = quantity
    return _do(job, [EventMessage(utilisation=body)])
