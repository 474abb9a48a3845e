"""How each run of a job ended, read from its job set's events: exit codes, termination
messages, the failure's reason, condition and category, and for a preemption who asked for it
and which job it made room for.

GetJobDetails' runs carry none of that (upstream's JobRunDetails has no such fields), the
events do: this is what `armada details` adds to each run and what `armada watch` says of a
preemption. Events without our run-id extension (upstream's) are matched to runs in order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from armada_core.api import event_pb2

#: Who requests the preemptions a scheduling cycle decides.
SCHEDULER = "scheduler"
# Reasons that say no more than that a preemption happened.
_PLAIN_REASONS = frozenset({"", "preempted", "preempted by the scheduler"})


@dataclass
class Preemption:
    """Who asked for a run's preemption, why, and the job placed in its room (the scheduler's
    preemptions name it; a requested one has none)."""

    requestor: str = ""
    reason: str = ""
    preempting_job_id: str = ""

    @property
    def kind(self) -> str:
        """ "requested" (by a user: `armada preempt`, a queue's preemption, the web UI) or
        "scheduler" (a scheduling cycle: room for another job, fair share, a pod group)."""
        return "requested" if self.requestor and self.requestor != SCHEDULER else "scheduler"

    @classmethod
    def requested(cls, event: event_pb2.JobPreemptingEvent) -> Preemption:
        return cls(requestor=event.requestor, reason=event.reason)

    def happened(self, event: event_pb2.JobPreemptedEvent) -> Preemption:
        """The preempted event completes the request: the preempting job, and the requestor
        and reason when no request was seen (the request's reason is the caller's own)."""
        self.preempting_job_id = event.preempting_job_id or self.preempting_job_id
        self.requestor = self.requestor or event.requestor
        if self.reason in _PLAIN_REASONS and event.reason not in _PLAIN_REASONS:
            self.reason = event.reason
        return self

    def describe(self) -> str:
        """`by the scheduler for job 01j...` or `requested by alice: 'maintenance'`."""
        if self.kind == "requested":
            text = f"requested by {self.requestor}"
        else:
            text = "by the scheduler"
            if self.preempting_job_id:
                text += f" for job {self.preempting_job_id}"
        if self.reason not in _PLAIN_REASONS:
            text += f": {self.reason!r}"
        return text

    def as_dict(self) -> dict[str, str]:
        out = {"kind": self.kind, "requestor": self.requestor, "reason": self.reason}
        if self.preempting_job_id:
            out["preemptingJobId"] = self.preempting_job_id
        return {k: v for k, v in out.items() if v}


@dataclass
class RunEnding:
    """How one run ended (`outcome`: succeeded, failed, preempted, cancelled or lease
    returned); `retried` when the server queued the job again after it."""

    run_id: str
    outcome: str
    retried: bool = False
    exit_codes: dict[str, int] = field(default_factory=dict)
    termination_messages: dict[str, str] = field(default_factory=dict)
    reason: str = ""
    condition: str = ""
    category: str = ""
    preemption: Preemption | None = None

    def as_dict(self) -> dict[str, Any]:
        """The fields `armada details` adds to a run (camelCase, empty ones left out)."""
        out: dict[str, Any] = {
            "outcome": self.outcome,
            "retried": self.retried,
            "exitCodes": self.exit_codes,
            "terminationMessages": self.termination_messages,
            "failureReason": self.reason,
            "condition": self.condition,
            "failureCategory": self.category,
        }
        if self.preemption is not None:
            out["preemption"] = self.preemption.as_dict()
        return {k: v for k, v in out.items() if v not in ("", {}, False)}


def _failed(event: event_pb2.JobFailedEvent, run_id: str) -> RunEnding:
    category = event.failure_category
    if event.failure_subcategory:
        category += f"/{event.failure_subcategory}"
    return RunEnding(
        run_id,
        "failed",
        retried=event.retryable,
        exit_codes={c.name: c.exitCode for c in event.container_statuses} or dict(event.exit_codes),
        termination_messages={c.name: c.message for c in event.container_statuses if c.message},
        reason=event.reason,
        condition=event.condition,
        category=category,
    )


@dataclass
class _JobRuns:
    """One job's runs as its events tell them."""

    endings: list[RunEnding] = field(default_factory=list)
    open_run: str | None = None  # the run leased and not ended yet ("" : id unknown)
    preemption: Preemption | None = None  # requested, not happened yet

    def ended(self, ending: RunEnding) -> None:
        self.endings.append(ending)
        self.open_run = None

    def apply(self, kind: str, event: Any) -> None:
        run_id = getattr(event, "run_id", "")
        if kind == "leased":
            self.open_run, self.preemption = run_id, None
        elif kind == "preempting":
            self.preemption = Preemption.requested(event)
        elif self.open_run is None and not run_id:
            return  # no run: a rejection, a cancel of a queued job, ...
        elif kind == "failed":  # also after lease_expired, which ends nothing by itself
            ending = _failed(event, run_id or self.open_run or "")
            if ending.condition == "Preempted":
                ending.preemption = self.preemption or Preemption()
            self.ended(ending)
        elif kind == "preempted":
            preemption = (self.preemption or Preemption()).happened(event)
            self.ended(
                RunEnding(
                    run_id or self.open_run or "",
                    "preempted",
                    reason=event.reason,
                    preemption=preemption,
                )
            )
        elif kind in ("succeeded", "cancelled", "lease_returned"):
            self.ended(
                RunEnding(
                    run_id or self.open_run or "",
                    kind.replace("_", " "),
                    retried=kind == "lease_returned",
                    reason=getattr(event, "reason", ""),
                )
            )


def run_endings(
    messages: Iterable[event_pb2.EventStreamMessage], job_ids: Iterable[str] | None = None
) -> dict[str, list[RunEnding]]:
    """job id -> how each of its runs ended, oldest first (a run still going is absent)."""
    wanted = None if job_ids is None else set(job_ids)
    jobs: dict[str, _JobRuns] = {}
    for message in messages:
        kind = message.message.WhichOneof("events")
        if kind is None:
            continue
        event = getattr(message.message, kind)
        if wanted is not None and event.job_id not in wanted:
            continue
        jobs.setdefault(event.job_id, _JobRuns()).apply(kind, event)
    return {job_id: runs.endings for job_id, runs in jobs.items()}
