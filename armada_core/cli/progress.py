"""What `armada watch` prints: one line per event, each with a running summary."""

from __future__ import annotations

from armada_core.api import event_pb2
from armada_core.client import JobResult, JobTracker

_ORDER = (
    "SUBMITTED",
    "QUEUED",
    "LEASED",
    "PENDING",
    "RUNNING",
    "SUCCEEDED",
    "FAILED",
    "CANCELLED",
    "PREEMPTED",
    "REJECTED",
    "UNKNOWN",
)


def summary(tracker: JobTracker) -> str:
    """`3 jobs: 1 queued, 2 cancelled`."""
    counts = tracker.counts()
    parts = [f"{counts[s]} {s.lower()}" for s in _ORDER if counts.get(s)]
    total = len(tracker.jobs)
    return f"{total} job{'s' if total != 1 else ''}: " + ", ".join(parts)


def describe(message: event_pb2.EventStreamMessage, result: JobResult) -> str:
    """The interesting part of one event."""
    kind = message.message.WhichOneof("events") or ""
    event = getattr(message.message, kind)
    details: list[str] = []
    if kind == "failed":
        if event.retryable:
            details.append("will be retried")
        codes = ", ".join(f"{n}={c}" for n, c in result.exit_codes.items())
        if codes:
            details.append(f"exit codes {codes}")
        if event.reason:
            details.append(f"reason {event.reason!r}")
        if event.failure_category:
            details.append(f"category {event.failure_category}")
        if event.condition == "Preempted" and result.preemption is not None:
            details.append(f"preemption {result.preemption.describe()}")
    elif kind in ("leased", "running", "succeeded") and result.node:
        details.append(f"node {result.node}")
    elif kind in ("preempting", "preempted") and result.preemption is not None:
        # Who asked, why, and (the scheduler's) the job placed in the run's room.
        details.append(result.preemption.describe())
    elif kind in ("cancelling", "cancelled") and event.reason:
        details.append(f"reason {event.reason!r}")
    elif kind in ("reprioritizing", "reprioritized"):
        details.append(f"priority {event.new_priority:g}")
    when = event.created.ToDatetime().strftime("%H:%M:%S") if event.HasField("created") else ""
    text = f"{when} {message.id:>6} {event.job_id} {kind}"
    return text + (f" ({'; '.join(details)})" if details else "")
