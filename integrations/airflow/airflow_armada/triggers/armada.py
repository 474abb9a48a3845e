"""`ArmadaJobTrigger`: waits for Armada jobs in the triggerer, holding no worker slot."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_armada.hooks.armada import ArmadaHook, ConnectionNotDefined, kill_reason
from armada_core.client import ArmadaError


class ArmadaJobTrigger(BaseTrigger):
    """Follows a job set's event stream until every listed job (a job or a gang) has ended,
    then fires one event carrying the result payload: the task lifecycle's one wait
    (`ArmadaHook.await_jobs`: log lines, progress, and while a job waits to run why, on
    change and every minute). One event-stream task and one coroutine: cheap in the
    triggerer.

    Everything it needs is in its serialized kwargs, so after a triggerer restart a new
    instance replays the job set's log from the start and picks up where the jobs are; a user
    killing the task (mark failed/success, clear) calls `on_kill`, which cancels the jobs
    unless the operator said `cancel_on_kill=False`.
    """

    def __init__(
        self,
        *,
        queue: str,
        job_set_id: str,
        job_ids: Sequence[str],
        armada_conn_id: str = ArmadaHook.default_conn_name,
        stream_logs: bool = True,
        log_interval: float = 5.0,
        poll_interval: float = 5.0,
        member_labels: Sequence[str] | None = None,
        cancel_on_kill: bool = True,
        try_number: int | None = None,
    ) -> None:
        super().__init__()
        self.queue = queue
        self.job_set_id = job_set_id
        self.job_ids = list(job_ids)
        self.armada_conn_id = armada_conn_id
        self.stream_logs = stream_logs
        self.log_interval = log_interval
        self.poll_interval = poll_interval
        self.member_labels = list(member_labels) if member_labels else None
        self.cancel_on_kill = cancel_on_kill
        self.try_number = try_number

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "queue": self.queue,
                "job_set_id": self.job_set_id,
                "job_ids": self.job_ids,
                "armada_conn_id": self.armada_conn_id,
                "stream_logs": self.stream_logs,
                "log_interval": self.log_interval,
                "poll_interval": self.poll_interval,
                "member_labels": self.member_labels,
                "cancel_on_kill": self.cancel_on_kill,
                "try_number": self.try_number,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        hook = ArmadaHook(self.armada_conn_id)
        try:
            payload = await hook.await_jobs(
                self.queue,
                self.job_set_id,
                self.job_ids,
                log=self.log,
                stream_logs=self.stream_logs,
                log_interval=self.log_interval,
                poll_interval=self.poll_interval,
                member_labels=self.member_labels,
            )
        except ArmadaError as e:  # NotFound, vanished jobs...: let the task decide
            payload = self._error(f"{type(e).__name__}: {e.details}")
        except ConnectionNotDefined as e:  # the worker had it, the triggerer has not
            payload = {**self._error(f"in the triggerer: {e}"), "retryable": False}
        yield TriggerEvent(payload)

    def _error(self, reason: str) -> dict[str, Any]:
        """The event of a wait that broke: the task fails (retried unless `retryable` is
        False), its jobs untouched."""
        return {
            "outcome": "error",
            "queue": self.queue,
            "job_set_id": self.job_set_id,
            "job_ids": self.job_ids,
            "summary": f"waiting for Armada jobs {', '.join(self.job_ids)} failed: {reason}",
        }

    async def on_kill(self) -> None:
        """The user killed the deferred task: cancel every job (the whole gang), unless the
        operator asked to leave them running."""
        if not self.cancel_on_kill:
            self.log.info(
                "Task killed: leaving Armada jobs %s running (cancel_on_kill=False)",
                ", ".join(self.job_ids),
            )
            return
        self.log.info("Task killed: cancelling Armada jobs %s", ", ".join(self.job_ids))
        await ArmadaHook(self.armada_conn_id).acancel(
            self.queue, self.job_set_id, self.job_ids, reason=kill_reason(self.try_number)
        )
