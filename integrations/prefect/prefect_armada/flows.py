"""Flows that run an Armada job or gang to completion."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from prefect import State, flow

from .jobs import ArmadaJob, Payload
from .tasks import execute_armada_job, execute_armada_job_async


@flow(name="run-armada-job")
async def run_armada_job_async(
    armada_job: ArmadaJob, infrastructure_retries: int = 2, retry_delay_seconds: float = 0
) -> Payload | State[Any]:
    """Run the job or gang until it ends: infrastructure failures are retried with a new
    job (up to `infrastructure_retries` times), user errors and rejections fail the flow
    run, a job cancelled elsewhere ends it Cancelled. Returns the result payload.

    Example:
        ```python
        from prefect_armada import ArmadaJob, run_armada_job

        run_armada_job(ArmadaJob.load("nightly-etl"))
        ```
    """
    # Called in an async flow, an async task gives a coroutine, with return_state too (Prefect's
    # overloads type that call as the State itself).
    execute: Callable[..., Awaitable[Payload | State[Any]]] = execute_armada_job_async.with_options(
        retries=infrastructure_retries,
        retry_delay_seconds=retry_delay_seconds,
    )
    return await execute(armada_job, return_state=True)


@flow(name="run-armada-job")
def run_armada_job(
    armada_job: ArmadaJob, infrastructure_retries: int = 2, retry_delay_seconds: float = 0
) -> Payload | State[Any]:
    """Synchronous `run_armada_job_async`."""
    return execute_armada_job.with_options(
        retries=infrastructure_retries,
        retry_delay_seconds=retry_delay_seconds,
    )(armada_job, return_state=True)
