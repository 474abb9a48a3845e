"""Errors a run of an Armada job ends with, one class per outcome of
`armada_core.retry.map_outcome`, so retry conditions can tell them apart by type."""

from __future__ import annotations

from armada_core.client import JobResult
from armada_core.retry import Outcome, OutcomeReport


class ArmadaJobError(Exception):
    """An Armada job or gang did not succeed. `summary` names each failed member's exit code,
    termination message, condition and category; `results` holds every member's JobResult."""

    outcome: Outcome = Outcome.USER_ERROR

    def __init__(self, summary: str, results: dict[str, JobResult] | None = None) -> None:
        super().__init__(summary)
        self.summary = summary
        self.results = dict(results or {})

    @property
    def job_ids(self) -> list[str]:
        return list(self.results)

    @property
    def retry_may_help(self) -> bool:
        return self.outcome is Outcome.INFRASTRUCTURE_FAILURE


class ArmadaInfrastructureError(ArmadaJobError):
    """Preempted, evicted, lease lost, node failure, or the server's retries on an
    infrastructure rule ran out: running the job again may well succeed."""

    outcome = Outcome.INFRASTRUCTURE_FAILURE


class ArmadaUserError(ArmadaJobError):
    """The job itself failed (exit code, termination message, OOMKilled, deadline): running
    it again unchanged will not help."""

    outcome = Outcome.USER_ERROR


class ArmadaJobRejected(ArmadaJobError):
    """The server rejected the job as invalid; it can never run as it is."""

    outcome = Outcome.REJECTED


class ArmadaJobCancelled(ArmadaJobError):
    """The job was cancelled (by someone else, or because the Prefect run was cancelled)."""

    outcome = Outcome.CANCELLED


_BY_OUTCOME: dict[Outcome, type[ArmadaJobError]] = {
    cls.outcome: cls
    for cls in (ArmadaInfrastructureError, ArmadaUserError, ArmadaJobRejected, ArmadaJobCancelled)
}


def error_for(report: OutcomeReport, results: dict[str, JobResult]) -> ArmadaJobError | None:
    """The exception for a terminal, unsuccessful outcome; None for success or waiting."""
    cls = _BY_OUTCOME.get(report.outcome)
    return cls(report.summary, results) if cls is not None else None
