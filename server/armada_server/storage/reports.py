"""What an executor's report of a run does to its job: the transition it makes, and for a
run that failed, was returned or stopped, the retry engine's decision.

A report is applied inside its executor's sync transaction (`sync.ExecutorSync`), to the job
as the sync's earlier reports left it.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, select

from armada_core.api import executor_pb2
from armada_core.jobs import ContainerResult, Failure, Job, lifecycle
from armada_core.jobs.lifecycle import EventMessage, IllegalTransition
from armada_core.jobs.text import MAX_CONDITION, MAX_FAILURE_TEXT, MAX_FAILURE_WORD, clean_text
from armada_server.storage import schema as t
from armada_server.storage.base import clean_reason, from_timestamp
from armada_server.storage.retries import Catalogue, Retries, run_failure

Transition = tuple[Job, list[EventMessage]]

# Run updates by which an executor says the run has ended on its side.
ENDED_UPDATES = frozenset({"succeeded", "failed", "returned", "stopped"})
# Run updates whose retry decision reads the retry policies (retries.Catalogue).
DECIDED_UPDATES = frozenset({"failed", "returned", "stopped"})


def apply_report(
    conn: Connection,
    retries: Retries,
    catalogue: Catalogue | None,
    job: Job,
    u: executor_pb2.RunUpdate,
    now: datetime,
) -> Transition:
    """The job after the executor's report `u` of its latest run (IllegalTransition when
    the report does not apply to the job as it is). `catalogue` is needed for the
    DECIDED_UPDATES only."""
    kind = u.WhichOneof("update")
    when = from_timestamp(u.time) if u.HasField("time") else now
    if kind == "pending":
        return lifecycle.mark_pending(job, now=when, kubernetes_id=u.pending.kubernetes_id)
    if kind == "running":
        return lifecycle.mark_running(
            job, now=when, node=u.running.node, kubernetes_id=u.running.kubernetes_id
        )
    if kind == "succeeded":
        return lifecycle.succeed(job, now=when)
    if kind == "ingress_info":
        return lifecycle.report_ingress(
            job,
            addresses={
                port: clean_text(address, MAX_FAILURE_WORD)
                for port, address in u.ingress_info.addresses.items()
            },
            now=when,
        )
    assert catalogue is not None
    if kind == "failed":
        return _failed(conn, retries, catalogue, job, u.failed, when)
    if kind == "returned":
        return _returned(conn, retries, catalogue, job, u.returned, when)
    if kind == "stopped":
        return _stopped(conn, retries, catalogue, job, when)
    raise IllegalTransition(f"unknown update {kind!r}")


def _failed(
    conn: Connection,
    retries: Retries,
    catalogue: Catalogue,
    job: Job,
    update: executor_pb2.RunUpdate.Failed,
    when: datetime,
) -> Transition:
    failure = _failure(update)
    decision = retries.decide(
        conn, catalogue, job, run_failure(job, failure, node=_node(job)), when
    )
    return lifecycle.fail(
        job, failure, retry=decision.retry, now=when, retry_after=decision.retry_after
    )


def _returned(
    conn: Connection,
    retries: Retries,
    catalogue: Catalogue,
    job: Job,
    update: executor_pb2.RunUpdate.Returned,
    when: datetime,
) -> Transition:
    """The executor gave the lease back: the job goes back to the queue, or fails when it
    has had all the runs it may."""
    failure = Failure(reason=clean_reason(update.reason) or "lease returned")
    decision = retries.decide(
        conn,
        catalogue,
        job,
        run_failure(job, failure, node=_node(job), returned_lease=True),
        when,
    )
    job2, events = lifecycle.return_lease(
        job, reason=failure.reason, run_attempted=update.run_attempted, now=when
    )
    if decision.retry:
        return job2, events
    job3, more = lifecycle.fail(
        job2,
        Failure(reason=decision.reason, category="internal", subcategory="max_runs_exceeded"),
        retry=False,
        now=when,
    )
    return job3, events + more


def _stopped(
    conn: Connection, retries: Retries, catalogue: Catalogue, job: Job, when: datetime
) -> Transition:
    """The run stopped for its preemption."""
    if not job.preempt_requested:
        raise IllegalTransition("stopped without a preemption request")
    run = job.latest_run
    assert run is not None
    # The reason a scheduling cycle kept on the run (apply_schedule), else plainly
    # preempted.
    reason = run.reason or "preempted"
    failure = Failure(reason=reason, condition="Preempted")
    decision = retries.decide(conn, catalogue, job, run_failure(job, failure, node=run.node), when)
    # The job the cycle that preempted the run made room for (none for a manual
    # preemption), as apply_schedule recorded it on the run.
    preempting: str = (
        conn.execute(
            select(t.runs.c.preempting_job_id).where(t.runs.c.id == run.id)
        ).scalar_one_or_none()
        or ""
    )
    return lifecycle.preempt(
        job,
        reason=reason,
        now=when,
        retry=decision.retry,
        retry_after=decision.retry_after,
        requestor="scheduler",
        preempting_job_id=preempting,
    )


def _node(job: Job) -> str:
    run = job.latest_run
    assert run is not None
    return run.node


def _failure(update: executor_pb2.RunUpdate.Failed) -> Failure:
    """The failure an executor reports, its texts cleaned and bounded: one NUL would make
    PostgreSQL refuse the executor's whole sync, and a huge text would be in every event."""

    def word(value: str) -> str:
        return clean_text(value, MAX_FAILURE_WORD)

    return Failure(
        reason=clean_text(update.reason, MAX_FAILURE_TEXT) or "failed",
        containers=tuple(
            ContainerResult(
                word(c.name),
                c.exit_code,
                clean_text(c.message, MAX_FAILURE_TEXT),
                word(c.reason),
                c.init_container,
            )
            for c in update.containers
        ),
        condition=clean_text(update.condition, MAX_CONDITION),
        category=word(update.category),
        subcategory=word(update.subcategory),
    )
