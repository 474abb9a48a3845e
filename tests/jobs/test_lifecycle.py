"""The job state machine: legal paths, illegal transitions, and rebuilding from events."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from armada_core.api import event_pb2, submit_pb2
from armada_core.jobs import (
    ContainerResult,
    Failure,
    IllegalTransition,
    Job,
    JobState,
    RunState,
    lifecycle,
    new_job_id,
    new_run_id,
    rebuild,
    rebuild_job_set,
)
from armada_core.jobs.lifecycle import EventMessage

from .factories import at


def spec(job_id: str | None = None) -> submit_pb2.Job:
    job = submit_pb2.Job(
        id=job_id or new_job_id(), queue="q", job_set_id="set", namespace="default", priority=1
    )
    job.pod_specs.add(priorityClassName="armada-default").containers.add(name="main")
    return job


def submitted(job_id: str | None = None) -> tuple[Job, list[EventMessage]]:
    return lifecycle.submit(spec(job_id), at(0))


def leased(job: Job, t: float = 1) -> tuple[Job, list[EventMessage]]:
    return lifecycle.lease(
        job, run_id=new_run_id(), cluster_id="c1", node="n1", pool="default", now=at(t)
    )


def kinds(events: list[EventMessage]) -> list[str]:
    return [e.WhichOneof("events") for e in events]


def run_path(*steps: Callable[[Job], tuple[Job, list[EventMessage]]]):
    job, events = submitted()
    for step in steps:
        job, more = step(job)
        events += more
    return job, events


OOM = Failure(
    reason="OOMKilled",
    condition="OOMKilled",
    category="oom",
    containers=(ContainerResult("main", 137, "killed", "OOMKilled"),),
)
USER = Failure(reason="Error", containers=(ContainerResult("main", 3, "bad input", "Error"),))

PATHS = [
    (
        "success",
        [
            leased,
            lambda j: lifecycle.mark_pending(j, now=at(2)),
            lambda j: lifecycle.mark_running(j, now=at(3)),
            lambda j: lifecycle.succeed(j, now=at(4)),
        ],
        ["submitted", "queued", "leased", "pending", "running", "succeeded"],
        JobState.SUCCEEDED,
        [RunState.SUCCEEDED],
    ),
    (
        "user error",
        [
            leased,
            lambda j: lifecycle.mark_running(j, now=at(3)),
            lambda j: lifecycle.fail(j, USER, retry=False, now=at(4)),
        ],
        ["submitted", "queued", "leased", "running", "failed"],
        JobState.FAILED,
        [RunState.FAILED],
    ),
    (
        "oom retried then success",
        [
            leased,
            lambda j: lifecycle.mark_running(j, now=at(2)),
            lambda j: lifecycle.fail(j, OOM, retry=True, now=at(3), retry_after=at(13)),
            lambda j: leased(j, 14),
            lambda j: lifecycle.mark_running(j, now=at(15)),
            lambda j: lifecycle.succeed(j, now=at(16)),
        ],
        [
            "submitted",
            "queued",
            "leased",
            "running",
            "failed",
            "queued",
            "leased",
            "running",
            "succeeded",
        ],
        JobState.SUCCEEDED,
        [RunState.FAILED, RunState.SUCCEEDED],
    ),
    (
        "lease returned then cancelled",
        [
            leased,
            lambda j: lifecycle.return_lease(j, reason="no pod", run_attempted=False, now=at(2)),
            lambda j: lifecycle.request_cancel(j, requestor="alice", reason="stop", now=at(3)),
            lambda j: lifecycle.cancel(j, requestor="alice", reason="stop", now=at(3)),
        ],
        ["submitted", "queued", "leased", "lease_returned", "cancelling", "cancelled"],
        JobState.CANCELLED,
        [RunState.LEASE_RETURNED],
    ),
    (
        "lease expired and failed",
        [leased, lambda j: lifecycle.expire_lease(j, retry=False, now=at(60))],
        ["submitted", "queued", "leased", "lease_expired", "failed"],
        JobState.FAILED,
        [RunState.LEASE_EXPIRED],
    ),
    (
        "lease expired and retried",
        [leased, lambda j: lifecycle.expire_lease(j, retry=True, now=at(60)), leased],
        ["submitted", "queued", "leased", "lease_expired", "failed", "queued", "leased"],
        JobState.LEASED,
        [RunState.LEASE_EXPIRED, RunState.LEASED],
    ),
    (
        "preempted",
        [
            leased,
            lambda j: lifecycle.mark_running(j, now=at(2)),
            lambda j: lifecycle.request_preempt(j, requestor="bob", reason="x", now=at(3)),
            lambda j: lifecycle.preempt(j, reason="urgent job", now=at(4)),
        ],
        ["submitted", "queued", "leased", "running", "preempting", "preempted"],
        JobState.PREEMPTED,
        [RunState.PREEMPTED],
    ),
    (
        "preempted and retried",
        [
            leased,
            lambda j: lifecycle.mark_running(j, now=at(2)),
            lambda j: lifecycle.preempt(j, reason="fair share", retry=True, now=at(4)),
        ],
        ["submitted", "queued", "leased", "running", "failed", "queued"],
        JobState.QUEUED,
        [RunState.FAILED],
    ),
    (
        "rejected",
        [lambda j: lifecycle.reject(j, reason="gang too large", now=at(1))],
        ["submitted", "queued", "failed"],
        JobState.REJECTED,
        [],
    ),
    (
        "gang member left unplaced",
        [lambda j: lifecycle.fail(j, Failure("unschedulable"), retry=False, now=at(1))],
        ["submitted", "queued", "failed"],
        JobState.FAILED,
        [],
    ),
    (
        "reprioritized while queued",
        [lambda j: lifecycle.reprioritize(j, priority=5, requestor="a", now=at(1))],
        ["submitted", "queued", "reprioritizing", "reprioritized"],
        JobState.QUEUED,
        [],
    ),
    (
        "cancel while running kills the run",
        [
            leased,
            lambda j: lifecycle.mark_running(j, now=at(2)),
            lambda j: lifecycle.report_utilisation(j, usage={"cpu": "1"}, now=at(3)),
            lambda j: lifecycle.cancel(j, requestor="a", reason="r", now=at(4)),
        ],
        ["submitted", "queued", "leased", "running", "utilisation", "cancelled"],
        JobState.CANCELLED,
        [RunState.CANCELLED],
    ),
]


@pytest.mark.parametrize(
    ("steps", "expected_kinds", "state", "run_states"),
    [p[1:] for p in PATHS],
    ids=[p[0] for p in PATHS],
)
def test_paths(steps, expected_kinds, state, run_states) -> None:
    job, events = run_path(*steps)
    assert kinds(events) == expected_kinds
    assert job.state == state
    assert [r.state for r in job.runs] == run_states
    assert rebuild(events) == job


def test_failed_event_carries_exit_codes_condition_and_retryable() -> None:
    job, events = run_path(
        leased, lambda j: lifecycle.fail(j, OOM, retry=True, now=at(3), retry_after=at(30))
    )
    failed = events[-2].failed
    assert failed.retryable and failed.cause == event_pb2.OOM and failed.condition == "OOMKilled"
    assert failed.container_statuses[0].exitCode == 137
    assert failed.failure_category == "oom" and failed.run_id == job.runs[0].id
    assert failed.pod_name == f"armada-{job.id}-0"
    assert job.retry_after == at(30) and job.state == JobState.QUEUED


def test_retry_runs_get_their_own_pod_names() -> None:
    job, events = run_path(
        leased,
        lambda j: lifecycle.fail(j, OOM, retry=True, now=at(3)),
        lambda j: leased(j, 4),
        lambda j: lifecycle.mark_pending(j, now=at(5)),
    )
    assert events[-1].pending.pod_name == f"armada-{job.id}-0-1"
    assert [r.index for r in job.runs] == [0, 1]


def test_leasing_a_queued_job_by_its_ids_is_leasing_the_job() -> None:
    """lease_queued (storage's bulk lease, without the Job) makes the event, fields and run
    that lease makes of the Job: here a retried job, waiting out its backoff, whose failed
    run had been asked to stop."""
    queued, _ = run_path(
        leased,
        lambda j: lifecycle.request_preempt(j, requestor="u", reason="room", now=at(2)),
        lambda j: lifecycle.fail(j, OOM, retry=True, now=at(3), retry_after=at(13)),
    )
    assert queued.retry_after is not None and queued.preempt_requested
    place = {"run_id": new_run_id(), "cluster_id": "c1", "node": "n2", "pool": "p"}
    after, [event] = lifecycle.lease(queued, **place, now=at(14.5))
    bulk_event, fields, run = lifecycle.lease_queued(
        queued.id, "set", "q", run_index=len(queued.runs), **place, now=at(14.5)
    )
    assert bulk_event == event
    assert replace(queued, runs=(*queued.runs, run), **fields) == after
    assert run.index == 1 and after.state == JobState.LEASED and not after.preempt_requested


def live(job: Job) -> lifecycle.LiveRun:
    run = job.runs[-1]
    return lifecycle.LiveRun(
        job.id, job.job_set, job.queue, job.spec.namespace, job.state, run.id, run.index,
        run.cluster_id, run.node, run.pool, run.state, run.kubernetes_id,
    )  # fmt: skip


def test_reporting_a_live_run_is_marking_the_job() -> None:
    """report_live (storage's bulk path of a sync, without the Job) makes the event and
    changes that mark_pending, mark_running then succeed make of the Job, and refuses what
    they refuse: here a retried job's second run, pending with one pod id, running with
    another on a node the lease did not name, then succeeded."""
    first, _ = run_path(
        leased, lambda j: lifecycle.fail(j, OOM, retry=True, now=at(2)), lambda j: leased(j, 3)
    )
    state, job, changes = live(first), first, {}
    steps = (
        ("pending", at(4), {"kubernetes_id": "pod-a"}, lifecycle.mark_pending),
        ("running", at(5.5), {"kubernetes_id": "pod-b", "node": "n7"}, lifecycle.mark_running),
        ("succeeded", at(7), {}, lifecycle.succeed),
    )
    for kind, when, reported, mark in steps:
        job, [event] = mark(job, now=when, **reported)
        bulk_event, state, fields, run_changes = lifecycle.report_live(
            state, kind, now=when, **reported
        )
        assert bulk_event == event
        changes.update(run_changes)
        assert (
            replace(first, runs=(*first.runs[:-1], replace(first.runs[-1], **changes)), **fields)
            == job
        )
        assert state == live(job)
    assert job.runs[-1].index == 1 and job.runs[-1].node == "n7"
    assert job.state == JobState.SUCCEEDED and job.runs[-1].finished_at == at(7)
    for kind in ("pending", "running", "succeeded"):
        with pytest.raises(IllegalTransition):
            lifecycle.report_live(state, kind, now=at(8))
    with pytest.raises(IllegalTransition):
        lifecycle.succeed(job, now=at(8))
    # A job still leased may succeed at once (an executor's first report of a short run).
    short, _ = run_path(leased)
    succeeded, [event] = lifecycle.succeed(short, now=at(2))
    bulk_event, state, fields, run_changes = lifecycle.report_live(
        live(short), "succeeded", now=at(2)
    )
    assert bulk_event == event and state == live(succeeded)
    assert replace(short, runs=(replace(short.runs[-1], **run_changes),), **fields) == succeeded


ILLEGAL = [
    ("run before lease", [], lambda j: lifecycle.mark_running(j, now=at(1))),
    ("lease twice", [leased], lambda j: leased(j)),
    ("succeed when queued", [], lambda j: lifecycle.succeed(j, now=at(1))),
    (
        "pending after running",
        [leased, lambda j: lifecycle.mark_running(j, now=at(2))],
        lambda j: lifecycle.mark_pending(j, now=at(3)),
    ),
    (
        "anything after success",
        [leased, lambda j: lifecycle.succeed(j, now=at(2))],
        lambda j: lifecycle.cancel(j, requestor="a", reason="", now=at(3)),
    ),
    (
        "preempt a queued job",
        [],
        lambda j: lifecycle.request_preempt(j, requestor="a", reason="", now=at(1)),
    ),
    ("reject a running job", [leased], lambda j: lifecycle.reject(j, reason="", now=at(1))),
    ("retry without a run", [], lambda j: lifecycle.fail(j, USER, retry=True, now=at(1))),
    ("expire a queued job", [], lambda j: lifecycle.expire_lease(j, retry=True, now=at(1))),
    (
        "reprioritize a finished job",
        [lambda j: lifecycle.cancel(j, requestor="", reason="", now=at(1))],
        lambda j: lifecycle.reprioritize(j, priority=2, requestor="", now=at(2)),
    ),
]


@pytest.mark.parametrize(("before", "step"), [i[1:] for i in ILLEGAL], ids=[i[0] for i in ILLEGAL])
def test_illegal_transitions_raise_and_change_nothing(before, step) -> None:
    job, _ = run_path(*before)
    snapshot = job
    with pytest.raises(IllegalTransition):
        step(job)
    assert job == snapshot


def test_events_of_another_job_or_before_submission_are_refused() -> None:
    job, _ = submitted()
    _, other_events = submitted()
    with pytest.raises(IllegalTransition, match="applied to job"):
        lifecycle.apply(job, other_events[1])
    with pytest.raises(IllegalTransition, match="before it was submitted"):
        lifecycle.apply(None, other_events[1])
    with pytest.raises(IllegalTransition, match="already submitted"):
        lifecycle.apply(job, other_events[0])
    with pytest.raises(IllegalTransition, match="empty event"):
        lifecycle.apply(job, EventMessage())


def test_a_stale_run_id_is_refused() -> None:
    job, events = run_path(leased)
    running = EventMessage(
        running=event_pb2.JobRunningEvent(
            job_id=job.id,
            job_set_id="set",
            queue="q",
            run_id="not-this-run",
            created=events[-1].leased.created,
        )
    )
    with pytest.raises(IllegalTransition, match="names run not-this-run"):
        lifecycle.apply(job, running)


def test_a_run_that_succeeds_while_asked_to_stop_keeps_no_reason() -> None:
    """The scheduler may note why it asks a run to stop (a pod group below a role's minimum)
    on the run; if the run succeeds first, that is not why it ended."""
    job, _ = run_path(
        leased,
        lambda j: lifecycle.mark_running(j, now=at(2)),
        lambda j: lifecycle.request_preempt(
            j, requestor="scheduler", reason="role below", now=at(3)
        ),
    )
    job = replace(job, runs=(replace(job.runs[-1], reason="role below"),))
    job, _ = lifecycle.succeed(job, now=at(4))
    assert job.state == JobState.SUCCEEDED and job.runs[-1].reason == ""


# --- property: a job is exactly what its events say ----------------------------------------

COMMANDS: list[tuple[str, Callable[[Job, float], tuple[Job, list[EventMessage]]]]] = [
    ("lease", lambda j, t: leased(j, t)),
    ("pending", lambda j, t: lifecycle.mark_pending(j, now=at(t), kubernetes_id="uid")),
    ("running", lambda j, t: lifecycle.mark_running(j, now=at(t), node="n2")),
    ("succeed", lambda j, t: lifecycle.succeed(j, now=at(t))),
    ("fail", lambda j, t: lifecycle.fail(j, USER, retry=False, now=at(t))),
    ("retry", lambda j, t: lifecycle.fail(j, OOM, retry=True, now=at(t), retry_after=at(t + 5))),
    ("return", lambda j, t: lifecycle.return_lease(j, reason="r", run_attempted=True, now=at(t))),
    ("expire", lambda j, t: lifecycle.expire_lease(j, retry=t % 2 == 0, now=at(t))),
    ("cancelling", lambda j, t: lifecycle.request_cancel(j, requestor="u", reason="r", now=at(t))),
    ("cancel", lambda j, t: lifecycle.cancel(j, requestor="u", reason="r", now=at(t))),
    ("preempting", lambda j, t: lifecycle.request_preempt(j, requestor="u", reason="r", now=at(t))),
    ("preempt", lambda j, t: lifecycle.preempt(j, reason="r", retry=t % 3 == 0, now=at(t))),
    ("reprioritize", lambda j, t: lifecycle.reprioritize(j, priority=t, requestor="u", now=at(t))),
    ("reject", lambda j, t: lifecycle.reject(j, reason="r", now=at(t))),
    ("utilisation", lambda j, t: lifecycle.report_utilisation(j, usage={"cpu": "1"}, now=at(t))),
]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.integers(0, len(COMMANDS) - 1), max_size=40))
def test_rebuild_from_events_equals_the_job(choices: list[int]) -> None:
    job, events = submitted()
    for t, choice in enumerate(choices, start=1):
        _, command = COMMANDS[choice]
        try:
            job, more = command(job, t)
        except IllegalTransition:
            continue
        events += more
    assert rebuild(events) == job
    # ... also after the events cross the wire.
    wire = [EventMessage.FromString(e.SerializeToString()) for e in events]
    assert rebuild(wire) == job
    # Invariants: at most one active run, and only while the job is leased/pending/running.
    active = [r for r in job.runs if r.state.active]
    assert len(active) <= 1
    assert bool(active) == (job.state in lifecycle.ACTIVE_JOB_STATES)
    assert [r.index for r in job.runs] == list(range(len(job.runs)))


def test_rebuild_job_set_separates_jobs() -> None:
    a, ea = submitted()
    b, eb = submitted()
    a, more = leased(a)
    jobs = rebuild_job_set([ea[0], eb[0], ea[1], eb[1], *more])
    assert jobs == {a.id: a, b.id: b}
