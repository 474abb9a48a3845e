"""What a job is: its submitted spec, its state, and its runs.

A Job is immutable; lifecycle.py derives every new Job from an event, so a job's state is
always exactly what its events say (seed 003: job sets whose events reconstruct every job).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import IntEnum

from armada_core.api import job_pb2, submit_pb2
from armada_core.api.k8s import core_v1_pb2
from armada_core.jobs import annotations as ann
from armada_core.jobs.gangs import GangSpec, gang_of


class JobState(IntEnum):
    """The public job states (api.JobState), with the same numbers."""

    QUEUED = submit_pb2.QUEUED
    PENDING = submit_pb2.PENDING
    RUNNING = submit_pb2.RUNNING
    SUCCEEDED = submit_pb2.SUCCEEDED
    FAILED = submit_pb2.FAILED
    UNKNOWN = submit_pb2.UNKNOWN
    SUBMITTED = submit_pb2.SUBMITTED
    LEASED = submit_pb2.LEASED
    PREEMPTED = submit_pb2.PREEMPTED
    CANCELLED = submit_pb2.CANCELLED
    REJECTED = submit_pb2.REJECTED

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATES


TERMINAL_STATES = frozenset(
    {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.PREEMPTED, JobState.REJECTED}
)


class RunState(IntEnum):
    """The public run states (api.JobRunState), with the same numbers."""

    UNKNOWN = job_pb2.RUN_STATE_UNKNOWN
    LEASED = job_pb2.RUN_STATE_LEASED
    PENDING = job_pb2.RUN_STATE_PENDING
    RUNNING = job_pb2.RUN_STATE_RUNNING
    SUCCEEDED = job_pb2.RUN_STATE_SUCCEEDED
    FAILED = job_pb2.RUN_STATE_FAILED
    PREEMPTED = job_pb2.RUN_STATE_PREEMPTED
    CANCELLED = job_pb2.RUN_STATE_CANCELLED
    LEASE_EXPIRED = job_pb2.RUN_STATE_LEASE_EXPIRED
    LEASE_RETURNED = job_pb2.RUNS_STATE_LEASE_RETURNED

    @property
    def active(self) -> bool:
        return self in (RunState.LEASED, RunState.PENDING, RunState.RUNNING)


@dataclass(frozen=True)
class ContainerResult:
    """How one container of a run ended."""

    name: str
    exit_code: int
    message: str = ""  # the termination message
    reason: str = ""  # e.g. "OOMKilled", "Error", "Completed"
    init_container: bool = False


@dataclass(frozen=True)
class Run:
    """One attempt at running a job: a lease on a node of an executor's cluster."""

    id: str
    index: int
    cluster_id: str
    node: str
    pool: str
    state: RunState = RunState.LEASED
    leased_at: datetime | None = None
    pending_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    kubernetes_id: str = ""
    containers: tuple[ContainerResult, ...] = ()
    condition: str = ""  # OOMKilled, Evicted, Preempted, DeadlineExceeded, Unschedulable
    category: str = ""
    subcategory: str = ""
    reason: str = ""


def pod_name(job_id: str, run_index: int, *, unique_per_run: bool = True) -> str:
    """Name of a run's pod: `armada-<jobId>-0`, and `armada-<jobId>-0-<runIndex>` for retries.

    A name per run means a retry never collides with its predecessor's still-terminating pod
    (seed 001); `unique_per_run=False` is the legacy naming, one name for every run.
    """
    if run_index < 0:
        raise ValueError(f"run index must be non-negative, not {run_index}")
    base = f"armada-{job_id}-0"
    return base if run_index == 0 or not unique_per_run else f"{base}-{run_index}"


@dataclass(frozen=True)
class Job:
    """A job: its spec as submitted (an api.Job) and everything its events said since."""

    spec: submit_pb2.Job = field(compare=True)
    state: JobState
    priority: float
    submitted_at: datetime
    last_transition_at: datetime
    runs: tuple[Run, ...] = ()
    retry_after: datetime | None = None
    cancel_requested: bool = False
    cancel_reason: str = ""
    cancel_user: str = ""
    cancelled_at: datetime | None = None
    preempt_requested: bool = False
    failure_reason: str = ""
    # The stored row's version when this job was read: storage writes a transition only
    # where the row still has it (compare-and-set). Not part of what the events say.
    version: int = field(default=0, compare=False)

    __hash__ = None  # type: ignore[assignment]  # holds a mutable protobuf message

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def queue(self) -> str:
        return self.spec.queue

    @property
    def job_set(self) -> str:
        return self.spec.job_set_id

    @property
    def annotations(self) -> dict[str, str]:
        return dict(self.spec.annotations)

    @property
    def pod_spec(self) -> core_v1_pb2.PodSpec:
        return self.spec.pod_specs[0] if self.spec.pod_specs else self.spec.pod_spec

    @property
    def priority_class(self) -> str:
        return self.pod_spec.priorityClassName

    @property
    def gang(self) -> GangSpec | None:
        return gang_of(self.spec.annotations)

    @property
    def lifetime_seconds(self) -> int | None:
        value = self.spec.annotations.get(ann.LIFETIME)
        return int(value) if value else None

    @property
    def at_most_once(self) -> bool:
        return self.spec.annotations.get(ann.AT_MOST_ONCE, "").lower() == "true"

    @property
    def latest_run(self) -> Run | None:
        return self.runs[-1] if self.runs else None

    @property
    def active_run(self) -> Run | None:
        run = self.latest_run
        return run if run is not None and run.state.active else None

    @property
    def terminal(self) -> bool:
        return self.state.terminal
