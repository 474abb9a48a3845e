"""One result payload for every integration."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from armada_core.api import job_pb2
from armada_core.retry import map_outcome

from ..tracking import JobResult


def _seconds(ts: Any) -> float | None:
    return ts.ToNanoseconds() / 1e9 if ts is not None and ts.ToNanoseconds() else None


def result_payload(
    queue: str,
    job_set_id: str,
    results: Sequence[JobResult],
    details: Mapping[str, job_pb2.JobDetails],
) -> dict[str, Any]:
    """The task's result, the same for every integration (JSON-serialisable): outcome
    (`armada_core.retry.map_outcome`), summary text, and per job its state, run, node, exit
    codes, termination messages, failure, server-side retries and duration."""

    report = map_outcome([r.job_end() for r in results])
    jobs: list[dict[str, Any]] = []
    for r in results:
        started = finished = None
        d = details.get(r.job_id)
        if d is not None:
            for run in d.job_runs:
                if run.run_id == (r.run_id or d.latest_run_id):
                    started, finished = _seconds(run.started_ts), _seconds(run.finished_ts)
        jobs.append(
            {
                "job_id": r.job_id,
                "state": r.state_name,
                "run_id": r.run_id,
                "node": r.node,
                "cluster": r.cluster,
                "exit_codes": dict(r.exit_codes),
                "termination_messages": dict(r.termination_messages),
                "failure_reason": r.failure_reason,
                "failure_category": r.failure_category,
                "failure_subcategory": r.failure_subcategory,
                "condition": r.condition,
                "cancel_reason": r.cancel_reason,
                "server_retries": len(r.retryable_failures),
                "duration_seconds": (
                    round(finished - started, 3)
                    if started is not None and finished is not None
                    else None
                ),
            }
        )
    durations = [j["duration_seconds"] for j in jobs if j["duration_seconds"] is not None]
    return {
        "outcome": report.outcome.value,
        "summary": report.summary,
        "queue": queue,
        "job_set_id": job_set_id,
        "job_ids": [j["job_id"] for j in jobs],
        "run_ids": [j["run_id"] for j in jobs],
        "nodes": [j["node"] for j in jobs],
        "duration_seconds": max(durations) if durations else None,
        "jobs": jobs,
    }
