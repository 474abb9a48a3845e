"""Tasks: submit, wait for and cancel Armada jobs, and `execute_armada_job`, which does both
in one task run so that a Prefect retry (infrastructure failures only, by default)
submits a fresh job. Each has a synchronous and an `_async` variant.

They return the lifecycle's result payload (`armada_core.client.lifecycle.result_payload`):
outcome, summary, job ids, nodes, duration, and per job its state, exit codes and termination
messages. A job cancelled outside Prefect ends the waiting task Cancelled; user errors and
rejections fail it with exit code, termination message and category in the message.
"""

from __future__ import annotations

from typing import Any

from prefect import State, task
from prefect.states import Cancelled

from .exceptions import ArmadaJobCancelled
from .jobs import ArmadaJob, ArmadaJobRun, Payload, run_sync
from .retries import retry_infrastructure_failures

JobHandle = dict[str, Any]


def _run_for(armada_job: ArmadaJob, handle: JobHandle) -> ArmadaJobRun:
    return ArmadaJobRun(armada_job, handle["job_set_id"], handle["job_ids"])


@task(name="submit-armada-job")
async def submit_armada_job_async(armada_job: ArmadaJob) -> JobHandle:
    """Submit the job or gang (idempotently: a re-executed task run finds its job again);
    returns a handle `{"queue", "job_set_id", "job_ids"}` for the other tasks."""
    return (await armada_job.trigger()).handle()


@task(name="submit-armada-job")
def submit_armada_job(armada_job: ArmadaJob) -> JobHandle:
    """Synchronous `submit_armada_job_async`."""
    return armada_job.trigger_sync().handle()


@task(name="wait-for-armada-job")
async def wait_for_armada_job_async(
    armada_job: ArmadaJob, handle: JobHandle
) -> Payload | State[Any]:
    """Wait until the submitted jobs end, streaming their logs; returns the result payload.
    Raises on failure; a cancelled job ends this task Cancelled."""
    job_run = _run_for(armada_job, handle)
    try:
        await job_run.wait_for_completion()
    except ArmadaJobCancelled as e:
        return Cancelled(message=e.summary)
    return await job_run.fetch_result()


@task(name="wait-for-armada-job")
def wait_for_armada_job(armada_job: ArmadaJob, handle: JobHandle) -> Payload | State[Any]:
    """Synchronous `wait_for_armada_job_async`."""
    job_run = _run_for(armada_job, handle)
    try:
        job_run.wait_for_completion_sync()
    except ArmadaJobCancelled as e:
        return Cancelled(message=e.summary)
    assert job_run.payload is not None
    return job_run.payload


@task(name="cancel-armada-job")
async def cancel_armada_job_async(
    armada_job: ArmadaJob, handle: JobHandle, reason: str = "cancelled from Prefect"
) -> list[str]:
    """Cancel the submitted jobs; returns the ids actually cancelled."""
    return await _run_for(armada_job, handle).cancel(reason)


@task(name="cancel-armada-job")
def cancel_armada_job(
    armada_job: ArmadaJob, handle: JobHandle, reason: str = "cancelled from Prefect"
) -> list[str]:
    """Synchronous `cancel_armada_job_async`."""
    return run_sync(lambda: _run_for(armada_job, handle).cancel(reason))


async def _execute(armada_job: ArmadaJob) -> Payload | State[Any]:
    try:
        return await armada_job.run()
    except ArmadaJobCancelled as e:
        return Cancelled(message=e.summary)


@task(name="execute-armada-job", retry_condition_fn=retry_infrastructure_failures)
async def execute_armada_job_async(armada_job: ArmadaJob) -> Payload | State[Any]:
    """Submit and wait in one task run. Retries (set with `.with_options(retries=...)`)
    happen for infrastructure failures only, each with a new job."""
    return await _execute(armada_job)


@task(name="execute-armada-job", retry_condition_fn=retry_infrastructure_failures)
def execute_armada_job(armada_job: ArmadaJob) -> Payload | State[Any]:
    """Synchronous `execute_armada_job_async`."""
    return run_sync(lambda: _execute(armada_job))
