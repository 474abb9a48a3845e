"""The outcome mapping of DESIGN.md ("How integrations map outcomes"), row by row."""

from __future__ import annotations

import pytest

from armada_core.api import event_pb2, submit_pb2
from armada_core.retry import (
    ContainerEnd,
    FailureInfo,
    JobEnd,
    Outcome,
    map_outcome,
)

S = submit_pb2
USER = FailureInfo(containers=(ContainerEnd("main", 1, "KeyError: 'x'", "Error"),))
OOM = FailureInfo(
    cause=event_pb2.OOM, containers=(ContainerEnd("main", 137, "", "OOMKilled", event_pb2.OOM),)
)

TABLE = [
    # (row, ends, outcome)
    ("succeeded", [JobEnd("j", S.SUCCEEDED)], Outcome.SUCCEEDED),
    (
        "all gang members succeeded",
        [JobEnd("a", S.SUCCEEDED), JobEnd("b", S.SUCCEEDED)],
        Outcome.SUCCEEDED,
    ),
    ("gang member still running", [JobEnd("a", S.SUCCEEDED), JobEnd("b", S.RUNNING)], Outcome.WAIT),
    *[
        (f"not terminal: {S.JobState.Name(s)}", [JobEnd("j", s)], Outcome.WAIT)
        for s in (S.QUEUED, S.SUBMITTED, S.LEASED, S.PENDING, S.RUNNING, S.UNKNOWN)
    ],
    (
        "failed, server will retry",
        [JobEnd("j", S.FAILED, FailureInfo(retryable=True, preempted=True))],
        Outcome.WAIT,
    ),
    (
        "retryable user error still waits",
        [JobEnd("j", S.FAILED, FailureInfo(retryable=True, containers=USER.containers))],
        Outcome.WAIT,
    ),
    ("preempted state", [JobEnd("j", S.PREEMPTED)], Outcome.INFRASTRUCTURE_FAILURE),
    (
        "preempted failure",
        [JobEnd("j", S.FAILED, FailureInfo(preempted=True))],
        Outcome.INFRASTRUCTURE_FAILURE,
    ),
    (
        "evicted flag",
        [JobEnd("j", S.FAILED, FailureInfo(evicted=True))],
        Outcome.INFRASTRUCTURE_FAILURE,
    ),
    (
        "evicted cause",
        [JobEnd("j", S.FAILED, FailureInfo(cause=event_pb2.Evicted))],
        Outcome.INFRASTRUCTURE_FAILURE,
    ),
    (
        "lease lost",
        [JobEnd("j", S.FAILED, FailureInfo(lease_lost=True))],
        Outcome.INFRASTRUCTURE_FAILURE,
    ),
    (
        "node failure category",
        [JobEnd("j", S.FAILED, FailureInfo(category="node_failure"))],
        Outcome.INFRASTRUCTURE_FAILURE,
    ),
    (
        "server retries exhausted on an infra rule",
        [JobEnd("j", S.FAILED, FailureInfo(category="internal", subcategory="max_runs_exceeded"))],
        Outcome.INFRASTRUCTURE_FAILURE,
    ),
    ("user error: exit code", [JobEnd("j", S.FAILED, USER)], Outcome.USER_ERROR),
    ("user error: OOM is not infrastructure", [JobEnd("j", S.FAILED, OOM)], Outcome.USER_ERROR),
    (
        "user error: deadline",
        [JobEnd("j", S.FAILED, FailureInfo(cause=event_pb2.DeadlineExceeded))],
        Outcome.USER_ERROR,
    ),
    (
        "user error: unclassified category",
        [JobEnd("j", S.FAILED, FailureInfo(category="app_error"))],
        Outcome.USER_ERROR,
    ),
    ("failed without details", [JobEnd("j", S.FAILED)], Outcome.USER_ERROR),
    ("rejected state", [JobEnd("j", S.REJECTED)], Outcome.REJECTED),
    ("rejected failure", [JobEnd("j", S.FAILED, FailureInfo(rejected=True))], Outcome.REJECTED),
    (
        "rejected cause",
        [JobEnd("j", S.FAILED, FailureInfo(cause=event_pb2.Rejected))],
        Outcome.REJECTED,
    ),
    ("cancelled", [JobEnd("j", S.CANCELLED)], Outcome.CANCELLED),
    (
        "gang: preempted member outranks torn-down peers",
        [
            JobEnd("a", S.FAILED, FailureInfo(preempted=True)),
            JobEnd("b", S.FAILED, FailureInfo(containers=(ContainerEnd("w", 143),))),
        ],
        Outcome.INFRASTRUCTURE_FAILURE,
    ),
    (
        "gang: user error with peers still running",
        [JobEnd("a", S.FAILED, USER), JobEnd("b", S.RUNNING)],
        Outcome.USER_ERROR,
    ),
    (
        "gang: failure outranks cancelled peers",
        [JobEnd("a", S.FAILED, USER), JobEnd("b", S.CANCELLED)],
        Outcome.USER_ERROR,
    ),
    (
        "gang: one rejected member",
        [JobEnd("a", S.REJECTED), JobEnd("b", S.FAILED, USER)],
        Outcome.REJECTED,
    ),
]


@pytest.mark.parametrize(
    ("ends", "outcome"), [row[1:] for row in TABLE], ids=[row[0] for row in TABLE]
)
def test_outcome_table(ends: list[JobEnd], outcome: Outcome) -> None:
    report = map_outcome(ends)
    assert report.outcome is outcome
    assert report.terminal == (outcome is not Outcome.WAIT)
    assert report.retry_may_help == (outcome is Outcome.INFRASTRUCTURE_FAILURE)


def test_single_job_end_is_accepted() -> None:
    assert map_outcome(JobEnd("j", S.SUCCEEDED)).outcome is Outcome.SUCCEEDED


def test_infrastructure_categories_are_configurable() -> None:
    end = JobEnd("j", S.FAILED, FailureInfo(category="cuda_error"))
    assert map_outcome(end).outcome is Outcome.USER_ERROR
    assert (
        map_outcome(end, infrastructure_categories=frozenset({"cuda_error"})).outcome
        is Outcome.INFRASTRUCTURE_FAILURE
    )


def test_summary_names_each_failed_member() -> None:
    ends = [
        JobEnd(
            "a",
            S.FAILED,
            FailureInfo(
                category="oom",
                subcategory="kernel",
                node="node-7",
                reason="pod failed",
                containers=(
                    ContainerEnd("main", 137, "out of memory\n", "OOMKilled", event_pb2.OOM),
                    ContainerEnd("sidecar", 0, "", "Completed"),
                ),
            ),
        ),
        JobEnd("b", S.FAILED, USER),
        JobEnd("c", S.SUCCEEDED),
    ]
    report = map_outcome(ends)
    lines = report.summary.splitlines()
    assert lines[0] == "Armada gang of jobs a, b, c failed (a retry will not help by default)"
    assert lines[1] == (
        "job a failed: container main exit code 137 (OOMKilled), termination "
        "message 'out of memory'; condition OOMKilled; category oom/kernel; "
        "reason 'pod failed'; node node-7"
    )
    assert lines[2] == (
        "job b failed: container main exit code 1 (Error), termination message \"KeyError: 'x'\""
    )
    assert len(lines) == 3


def test_summary_for_preemption_and_cancellation() -> None:
    report = map_outcome(
        [JobEnd("a", S.FAILED, FailureInfo(preempted=True)), JobEnd("b", S.CANCELLED)]
    )
    assert "job a failed: condition Preempted" in report.summary
    assert "job b was cancelled" in report.summary
    assert "infrastructure" in report.summary.splitlines()[0]


def test_from_failed_event() -> None:
    event = event_pb2.JobFailedEvent(
        job_id="j",
        reason="Pod failed",
        node_name="n1",
        cause=event_pb2.OOM,
        failure_category="oom",
        failure_subcategory="kernel",
        retryable=False,
        container_statuses=[
            event_pb2.ContainerStatus(
                name="main", exitCode=137, message="killed", reason="OOMKilled", cause=event_pb2.OOM
            )
        ],
    )
    info = FailureInfo.from_event(event, evicted=False)
    assert info == FailureInfo(
        cause=event_pb2.OOM,
        reason="Pod failed",
        node="n1",
        category="oom",
        subcategory="kernel",
        containers=(ContainerEnd("main", 137, "killed", "OOMKilled", event_pb2.OOM),),
    )
    assert map_outcome(JobEnd("j", S.FAILED, info)).outcome is Outcome.USER_ERROR
    retrying = FailureInfo.from_event(event_pb2.JobFailedEvent(retryable=True), preempted=True)
    assert map_outcome(JobEnd("j", S.FAILED, retrying)).outcome is Outcome.WAIT


def test_empty_input_is_an_error() -> None:
    with pytest.raises(ValueError):
        map_outcome([])
