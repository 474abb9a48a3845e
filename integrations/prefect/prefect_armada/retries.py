"""A ready-made `retry_condition_fn`: Prefect retries every exception unless told otherwise,
and only infrastructure failures are worth retrying (DESIGN.md, "How integrations map
outcomes")."""

from __future__ import annotations

from typing import Any

from prefect.client.schemas.objects import State, TaskRun

from .exceptions import ArmadaJobError


def _exception_of(state: State[Any]) -> BaseException | None:
    if isinstance(state.data, BaseException):
        return state.data
    try:
        value = state.result(raise_on_failure=False)
    except Exception as e:  # the result could not be read; judge by what was raised
        return e
    return value if isinstance(value, BaseException) else None


def retry_infrastructure_failures(task: Any, task_run: TaskRun, state: State[Any]) -> bool:
    """Retry when an Armada job failed because of the infrastructure (preempted, evicted,
    lease lost, node failure); never for user errors, rejections, cancellations or any
    other exception.

        @task(retries=3, retry_delay_seconds=10,
              retry_condition_fn=retry_infrastructure_failures)
        def train(): ...
    """
    error = _exception_of(state)
    return isinstance(error, ArmadaJobError) and error.retry_may_help
