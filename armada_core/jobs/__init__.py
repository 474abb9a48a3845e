"""Jobs: identity, state machine and events, gangs, and submission validation."""

from armada_core.jobs.gangs import GangAnnotationError, GangSpec, gang_of
from armada_core.jobs.ids import new_job_id, new_job_ids, new_run_id, new_run_ids
from armada_core.jobs.lifecycle import Failure, IllegalTransition, apply, rebuild, rebuild_job_set
from armada_core.jobs.model import (
    TERMINAL_STATES,
    ContainerResult,
    Job,
    JobState,
    Run,
    RunState,
    pod_name,
)
from armada_core.jobs.submission import (
    SubmissionConfig,
    SubmissionError,
    job_from_item,
    job_requests,
    validate_request,
)

__all__ = [
    "TERMINAL_STATES",
    "ContainerResult",
    "Failure",
    "GangAnnotationError",
    "GangSpec",
    "IllegalTransition",
    "Job",
    "JobState",
    "Run",
    "RunState",
    "SubmissionConfig",
    "SubmissionError",
    "apply",
    "gang_of",
    "job_from_item",
    "job_requests",
    "new_job_id",
    "new_job_ids",
    "new_run_id",
    "new_run_ids",
    "pod_name",
    "rebuild",
    "rebuild_job_set",
    "validate_request",
]
