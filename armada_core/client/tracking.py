"""Folding a job set's events into each job's latest state and, at the end, its result.

The tracker only knows events: it works the same on our server and on upstream Armada (whose
events lack our run-id and node extensions). A `failed` event with `retryable=true` is not an
end: the server will run the job again, so the tracker counts it and keeps waiting.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from armada_core.api import event_pb2, job_pb2, submit_pb2
from armada_core.retry import FailureInfo, JobEnd

from .endings import Preemption

TERMINAL = frozenset(
    {
        submit_pb2.SUCCEEDED,
        submit_pb2.FAILED,
        submit_pb2.CANCELLED,
        submit_pb2.PREEMPTED,
        submit_pb2.REJECTED,
    }
)

_STATE_OF_EVENT = {
    "submitted": submit_pb2.SUBMITTED,
    "queued": submit_pb2.QUEUED,
    "leased": submit_pb2.LEASED,
    "lease_returned": submit_pb2.QUEUED,
    "pending": submit_pb2.PENDING,
    "running": submit_pb2.RUNNING,
    "succeeded": submit_pb2.SUCCEEDED,
    "cancelled": submit_pb2.CANCELLED,
    "preempted": submit_pb2.PREEMPTED,
}


def state_name(state: int) -> str:
    """`CANCELLED` for submit_pb2.CANCELLED, and so on."""
    return submit_pb2.JobState.Name(submit_pb2.JobState.ValueType(state))


@dataclass
class JobResult:
    """What a client knows about one job: its state and, once ended, how it ended."""

    job_id: str
    state: int = submit_pb2.UNKNOWN
    run_id: str = ""
    node: str = ""
    cluster: str = ""
    exit_codes: dict[str, int] = field(default_factory=dict)
    termination_messages: dict[str, str] = field(default_factory=dict)
    failure_reason: str = ""
    failure_category: str = ""
    failure_subcategory: str = ""
    condition: str = ""
    cancel_reason: str = ""
    #: Who asked for the latest run's preemption, why, and the job placed in its room.
    preemption: Preemption | None = None
    #: The JobFailedEvent of the final failure (also rejection), None otherwise.
    failure: FailureInfo | None = None
    #: Failures the server retried (retryable=true), oldest first.
    retryable_failures: list[FailureInfo] = field(default_factory=list)
    #: "status" when polling GetJobStatus saw the end first (the stream was down; details
    #: then come from catching up on events, GetJobDetails and GetJobErrors), else "events".
    source: str = "events"

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    @property
    def state_name(self) -> str:
        return state_name(self.state)

    def job_end(self) -> JobEnd:
        """For armada_core.retry.map_outcome, which every integration uses."""
        return JobEnd(self.job_id, self.state, self.failure)


class JobTracker:
    """Per-job state from events; `wanted` restricts it to some jobs (None: every job)."""

    def __init__(self, wanted: Iterable[str] | None = None) -> None:
        self.wanted = None if wanted is None else list(dict.fromkeys(wanted))
        self.jobs: dict[str, JobResult] = {}
        if self.wanted is not None:
            self.jobs = {j: JobResult(j) for j in self.wanted}
        self.last_message_id = ""

    def done(self) -> bool:
        """True when every wanted job (or, with none wanted, every job seen, at least one)
        has ended."""
        return bool(self.jobs) and all(r.terminal for r in self.jobs.values())

    def pending(self) -> list[str]:
        return [j for j, r in self.jobs.items() if not r.terminal]

    def counts(self) -> dict[str, int]:
        """How many jobs are in each state, e.g. {"QUEUED": 2, "CANCELLED": 1}."""
        out: dict[str, int] = {}
        for r in self.jobs.values():
            out[r.state_name] = out.get(r.state_name, 0) + 1
        return out

    def apply(self, message: event_pb2.EventStreamMessage) -> JobResult | None:
        """Fold one message in; returns the job it changed (None if not tracked)."""
        if message.id:
            self.last_message_id = message.id
        kind = message.message.WhichOneof("events")
        if kind is None:
            return None
        event = getattr(message.message, kind)
        result = self.jobs.get(event.job_id)
        if result is None:
            if self.wanted is not None:
                return None
            result = self.jobs[event.job_id] = JobResult(event.job_id)
        if result.terminal and result.source == "status":
            # Catching up on events after polling saw the end: they add the details; the
            # polled end stands unless the events reach an end themselves.
            polled = result.state
            self._apply(result, kind, event)
            if not result.terminal:
                result.state = polled
            return result
        if result.terminal:
            # Nothing follows an end on our server; upstream may add a `failed` after
            # `preempted`, whose details are worth keeping.
            if kind == "failed" and result.failure is None:
                self._record_failure(result, event)
            return result
        self._apply(result, kind, event)
        return result

    def _apply(self, result: JobResult, kind: str, event: Any) -> None:
        """Fold in one event body (`kind` names its oneof field, which holds it)."""
        if kind in _STATE_OF_EVENT:
            result.state = _STATE_OF_EVENT[kind]
        if kind in ("leased", "pending", "running", "succeeded", "preempted"):
            result.run_id = getattr(event, "run_id", "") or result.run_id
            result.cluster = getattr(event, "cluster_id", "") or result.cluster
            result.node = getattr(event, "node_name", "") or result.node
        if kind == "leased":
            result.exit_codes, result.termination_messages = {}, {}
            result.preemption = None
        elif kind == "preempting":
            result.preemption = Preemption.requested(event)
        elif kind == "preempted":
            result.condition = "Preempted"
            result.failure_reason = event.reason
            result.preemption = (result.preemption or Preemption()).happened(event)
        elif kind == "cancelled":
            result.cancel_reason = event.reason or result.cancel_reason
        elif kind == "cancelling":
            result.cancel_reason = event.reason
        elif kind == "failed":
            info = self._record_failure(result, event)
            if event.retryable:
                result.retryable_failures.append(info)
                result.state = submit_pb2.QUEUED
            else:
                result.state = (
                    submit_pb2.REJECTED if event.cause == event_pb2.Rejected else submit_pb2.FAILED
                )
                result.failure = info

    @staticmethod
    def _record_failure(result: JobResult, event: event_pb2.JobFailedEvent) -> FailureInfo:
        info = FailureInfo.from_event(
            event,
            rejected=event.cause == event_pb2.Rejected,
            preempted=event.condition == "Preempted",
        )
        result.run_id = event.run_id or result.run_id
        result.node = event.node_name or result.node
        result.cluster = event.cluster_id or result.cluster
        result.exit_codes = {c.name: c.exitCode for c in event.container_statuses} or dict(
            event.exit_codes
        )
        result.termination_messages = {
            c.name: c.message for c in event.container_statuses if c.message
        }
        result.failure_reason = event.reason
        result.failure_category = event.failure_category
        result.failure_subcategory = event.failure_subcategory
        result.condition = event.condition
        if result.state == submit_pb2.PREEMPTED and result.failure is None:
            result.failure = info
        return info

    def apply_status(self, states: dict[str, int]) -> list[JobResult]:
        """Fold a GetJobStatus answer in (the polling fallback); returns jobs that ended."""
        ended: list[JobResult] = []
        for job_id, state in states.items():
            result = self.jobs.get(job_id)
            if result is None or result.terminal:
                continue
            if state in TERMINAL:
                result.state = state
                result.source = "status"
                ended.append(result)
            elif state != submit_pb2.UNKNOWN:
                result.state = state
        return ended

    def from_status(self) -> list[str]:
        """Jobs whose end only polling has seen."""
        return [j for j, r in self.jobs.items() if r.source == "status"]

    def enrich(self, details: Mapping[str, job_pb2.JobDetails], errors: Mapping[str, str]) -> None:
        """Fill in, for jobs whose end came from polling, what GetJobDetails (latest run,
        its node and cluster, cancel reason) and GetJobErrors (the failure text) tell."""
        for job_id in self.from_status():
            result = self.jobs[job_id]
            d = details.get(job_id)
            if d is not None:
                result.run_id = d.latest_run_id or result.run_id
                for run in d.job_runs:
                    if run.run_id == result.run_id:
                        result.node = run.node or result.node
                        result.cluster = run.cluster or result.cluster
                result.cancel_reason = d.cancel_reason or result.cancel_reason
            if errors.get(job_id) and not result.failure_reason:
                result.failure_reason = errors[job_id]
