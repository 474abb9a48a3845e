"""How a job's end maps to an orchestrator outcome (DESIGN.md, "How integrations map
outcomes"). Airflow, Dagster and Prefect all call ``map_outcome`` so they agree exactly."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from armada_core.api import event_pb2, submit_pb2

from .classification import INTERNAL


class Outcome(StrEnum):
    SUCCEEDED = "succeeded"
    WAIT = "wait"
    INFRASTRUCTURE_FAILURE = "infrastructure_failure"
    USER_ERROR = "user_error"
    REJECTED = "rejected"
    CANCELLED = "cancelled"


#: When members disagree, the first of these present decides for the gang: a rejected member
#: makes the gang invalid; an infrastructure failure (e.g. one preempted member whose peers
#: were then torn down) is worth retrying; a user error is not; waiting beats success.
_PRECEDENCE = (
    Outcome.REJECTED,
    Outcome.INFRASTRUCTURE_FAILURE,
    Outcome.USER_ERROR,
    Outcome.CANCELLED,
    Outcome.WAIT,
    Outcome.SUCCEEDED,
)

#: Failure categories that mean "the infrastructure failed", besides ``internal``.
DEFAULT_INFRASTRUCTURE_CATEGORIES: frozenset[str] = frozenset(
    {INTERNAL, "infrastructure", "node_failure", "preempted", "evicted", "lease_expired"}
)

_CAUSE_CONDITION: dict[int, str] = {
    event_pb2.OOM: "OOMKilled",
    event_pb2.Evicted: "Evicted",
    event_pb2.DeadlineExceeded: "DeadlineExceeded",
    event_pb2.Rejected: "Rejected",
}
_WAITING_STATES = frozenset(
    {
        submit_pb2.QUEUED,
        submit_pb2.PENDING,
        submit_pb2.RUNNING,
        submit_pb2.SUBMITTED,
        submit_pb2.LEASED,
        submit_pb2.UNKNOWN,
    }
)


@dataclass(frozen=True)
class ContainerEnd:
    name: str
    exit_code: int = 0
    message: str = ""
    reason: str = ""
    cause: int = event_pb2.Error


@dataclass(frozen=True)
class FailureInfo:
    """The JobFailedEvent fields a client sees, plus what other events told it: whether the
    failure was a preemption, lease loss, eviction or rejection."""

    retryable: bool = False
    cause: int = event_pb2.Error
    reason: str = ""
    containers: tuple[ContainerEnd, ...] = ()
    category: str = ""
    subcategory: str = ""
    node: str = ""
    preempted: bool = False
    lease_lost: bool = False
    evicted: bool = False
    rejected: bool = False

    @classmethod
    def from_event(
        cls,
        event: event_pb2.JobFailedEvent,
        *,
        preempted: bool = False,
        lease_lost: bool = False,
        evicted: bool = False,
        rejected: bool = False,
    ) -> FailureInfo:
        return cls(
            retryable=event.retryable,
            cause=event.cause,
            reason=event.reason,
            containers=tuple(
                ContainerEnd(c.name, c.exitCode, c.message, c.reason, c.cause)
                for c in event.container_statuses
            ),
            category=event.failure_category,
            subcategory=event.failure_subcategory,
            node=event.node_name,
            preempted=preempted,
            lease_lost=lease_lost,
            evicted=evicted,
            rejected=rejected,
        )


@dataclass(frozen=True)
class JobEnd:
    """One job (or gang member) as last seen: its JobState and, if it failed, why."""

    job_id: str
    state: int
    failure: FailureInfo | None = None


@dataclass(frozen=True)
class OutcomeReport:
    outcome: Outcome
    summary: str

    @property
    def terminal(self) -> bool:
        return self.outcome is not Outcome.WAIT

    @property
    def retry_may_help(self) -> bool:
        return self.outcome is Outcome.INFRASTRUCTURE_FAILURE


def condition_of(failure: FailureInfo) -> str:
    """The most specific condition name a client can tell."""
    if failure.preempted:
        return "Preempted"
    if failure.lease_lost:
        return "LeaseLost"
    for container in failure.containers:
        if container.reason in ("OOMKilled", "Evicted", "DeadlineExceeded"):
            return container.reason
    if failure.evicted:
        return "Evicted"
    return _CAUSE_CONDITION.get(failure.cause, "")


def _member_outcome(end: JobEnd, infrastructure: frozenset[str]) -> Outcome:
    if end.state == submit_pb2.SUCCEEDED:
        return Outcome.SUCCEEDED
    if end.state == submit_pb2.CANCELLED:
        return Outcome.CANCELLED
    if end.state == submit_pb2.REJECTED:
        return Outcome.REJECTED
    if end.state == submit_pb2.PREEMPTED:
        return Outcome.INFRASTRUCTURE_FAILURE
    if end.state in _WAITING_STATES:
        return Outcome.WAIT
    failure = end.failure
    if failure is None:
        return Outcome.USER_ERROR
    if failure.rejected or failure.cause == event_pb2.Rejected:
        return Outcome.REJECTED
    if failure.retryable:
        return Outcome.WAIT
    if (
        failure.preempted
        or failure.lease_lost
        or failure.evicted
        or failure.cause == event_pb2.Evicted
        or failure.category in infrastructure
        or any(c.reason == "Evicted" or c.cause == event_pb2.Evicted for c in failure.containers)
    ):
        return Outcome.INFRASTRUCTURE_FAILURE
    return Outcome.USER_ERROR


def describe_failure(job_id: str, failure: FailureInfo | None) -> str:
    """One line naming exit code, termination message, condition and category."""
    if failure is None:
        return f"job {job_id} failed (no failure details)"
    parts: list[str] = []
    failed = [
        c for c in failure.containers if c.exit_code != 0 or c.reason not in ("", "Completed")
    ]
    for c in failed or failure.containers[:1]:
        text = f"container {c.name} exit code {c.exit_code}"
        if c.reason:
            text += f" ({c.reason})"
        if c.message:
            text += f", termination message {c.message.strip()!r}"
        parts.append(text)
    condition = condition_of(failure)
    if condition:
        parts.append(f"condition {condition}")
    if failure.category:
        label = failure.category + (f"/{failure.subcategory}" if failure.subcategory else "")
        parts.append(f"category {label}")
    if failure.reason:
        parts.append(f"reason {failure.reason.strip()!r}")
    if failure.node:
        parts.append(f"node {failure.node}")
    return f"job {job_id} failed: " + ("; ".join(parts) if parts else "no details reported")


_HEADLINE = {
    Outcome.SUCCEEDED: "succeeded",
    Outcome.WAIT: "not finished",
    Outcome.INFRASTRUCTURE_FAILURE: "failed because of the infrastructure (a retry may help)",
    Outcome.USER_ERROR: "failed (a retry will not help by default)",
    Outcome.REJECTED: "was rejected as invalid",
    Outcome.CANCELLED: "was cancelled",
}


def map_outcome(
    ends: JobEnd | Iterable[JobEnd],
    *,
    infrastructure_categories: frozenset[str] = DEFAULT_INFRASTRUCTURE_CATEGORIES,
) -> OutcomeReport:
    """The outcome of a job, or of a gang given all its members, with a summary that names
    each failed member's exit code, termination message, condition and category."""
    members: Sequence[JobEnd] = [ends] if isinstance(ends, JobEnd) else list(ends)
    if not members:
        raise ValueError("map_outcome needs at least one job")
    outcomes = [_member_outcome(m, infrastructure_categories) for m in members]
    outcome = next(o for o in _PRECEDENCE if o in outcomes)
    ids = ", ".join(m.job_id for m in members)
    noun = "job" if len(members) == 1 else "gang of jobs"
    lines = [f"Armada {noun} {ids} {_HEADLINE[outcome]}"]
    for member, member_outcome in zip(members, outcomes, strict=True):
        if member.state == submit_pb2.FAILED or member.failure is not None:
            if member_outcome is not Outcome.WAIT or outcome is Outcome.WAIT:
                lines.append(describe_failure(member.job_id, member.failure))
        elif member.state == submit_pb2.PREEMPTED:
            lines.append(f"job {member.job_id} was preempted")
        elif member.state == submit_pb2.CANCELLED:
            lines.append(f"job {member.job_id} was cancelled")
        elif member.state == submit_pb2.REJECTED:
            lines.append(f"job {member.job_id} was rejected")
    return OutcomeReport(outcome, "\n".join(lines))
