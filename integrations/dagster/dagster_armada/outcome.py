"""Armada's job outcome (armada_core.retry.map_outcome) as Dagster's exceptions.

The mapping itself lives in armada_core so that Airflow, Dagster and Prefect agree; this
module only chooses the Dagster spelling: RetryRequested for infrastructure failures (with the
op's RetryPolicy limits and delay), Failure(allow_retries=False) for user errors, rejections
and cancellations, with exit code, termination message and category in the metadata.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dagster import Failure, RetryPolicy, RetryRequested

from armada_core.api import submit_pb2
from armada_core.client import JobResult
from armada_core.client.lifecycle import JobsVanished
from armada_core.retry import Outcome, OutcomeReport, map_outcome

_FAILED_STATES = (submit_pb2.FAILED, submit_pb2.REJECTED, submit_pb2.PREEMPTED)

#: The server no longer knows a job that was submitted: the lifecycle's `JobsVanished`.
ArmadaJobDisappeared = JobsVanished


def outcome_of(results: Mapping[str, JobResult]) -> OutcomeReport:
    """The outcome of a job, or of a whole gang."""
    return map_outcome([r.job_end() for r in results.values()])


def _first_failed(results: Sequence[JobResult]) -> JobResult | None:
    failed = [r for r in results if r.state in _FAILED_STATES]
    failed += [r for r in results if r.failure is not None and r not in failed]
    return failed[0] if failed else (results[0] if results else None)


def failure_metadata(report: OutcomeReport, results: Mapping[str, JobResult]) -> dict[str, Any]:
    """What a failed step shows: outcome, exit code, termination message, category, node."""
    members = list(results.values())
    culprit = _first_failed(members)
    metadata: dict[str, Any] = {
        "armada/outcome": report.outcome.value,
        "armada/job_ids": [r.job_id for r in members],
        "armada/states": {r.job_id: r.state_name for r in members},
    }
    if culprit is not None:
        failed = {name: code for name, code in culprit.exit_codes.items() if code != 0}
        codes = failed or culprit.exit_codes
        if codes:
            metadata["armada/exit_code"] = next(iter(codes.values()))
            metadata["armada/exit_codes"] = dict(codes)
        message = "\n".join(m.strip() for m in culprit.termination_messages.values() if m.strip())
        if message:
            metadata["armada/termination_message"] = message
        if culprit.failure_category:
            metadata["armada/category"] = culprit.failure_category
        if culprit.failure_subcategory:
            metadata["armada/subcategory"] = culprit.failure_subcategory
        if culprit.condition:
            metadata["armada/condition"] = culprit.condition
        if culprit.failure_reason:
            metadata["armada/failure_reason"] = culprit.failure_reason
        if culprit.cancel_reason:
            metadata["armada/cancel_reason"] = culprit.cancel_reason
        if culprit.node:
            metadata["armada/node"] = culprit.node
        metadata["armada/job_id"] = culprit.job_id
    retried = sum(len(r.retryable_failures) for r in members)
    if retried:
        metadata["armada/server_retries"] = retried
    return metadata


def raise_for_outcome(
    results: Mapping[str, JobResult],
    *,
    retry_policy: RetryPolicy | None,
    retry_number: int,
    max_infrastructure_retries: int,
) -> OutcomeReport:
    """Return the report when every job succeeded; otherwise raise what Dagster should do.

    An infrastructure failure raises RetryRequested with the op's RetryPolicy limit and delay
    (or `max_infrastructure_retries` and no delay without one); its cause is a Failure carrying
    the metadata, which Dagster shows if the retries run out. Anything else raises
    Failure(allow_retries=False): rerunning the same spec will not help.
    """
    report = outcome_of(results)
    if report.outcome is Outcome.SUCCEEDED:
        return report
    failure = Failure(
        description=report.summary, metadata=failure_metadata(report, results), allow_retries=False
    )
    if report.outcome is Outcome.INFRASTRUCTURE_FAILURE:
        if retry_policy is not None:
            retry = RetryRequested(
                max_retries=retry_policy.max_retries,
                seconds_to_wait=retry_policy.calculate_delay(retry_number + 1),
            )
        else:
            retry = RetryRequested(max_retries=max_infrastructure_retries)
        raise retry from failure
    if report.outcome is Outcome.WAIT:  # cannot happen after the wait; never hang on it
        raise Failure(description=report.summary, allow_retries=True)
    raise failure
