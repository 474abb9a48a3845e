"""The scheduler's reports (SchedulerReporting) for both clients, as mixins: each calls the
client's own `_run` with the calls of operations.py."""

from __future__ import annotations

from typing import TypeVar

from . import operations as ops

R = TypeVar("R")


class ReportCalls:
    """`ArmadaClient`'s report methods."""

    def _run(self, call: ops.Call[R], timeout: float | None = None) -> R:
        raise NotImplementedError  # the client's own

    def scheduling_report(self, pool: str = "", cycles: int = 0) -> ops.Report:
        """The latest scheduling cycles: what they did and why, the limits that bound, each
        queue's fair share and usage (SchedulerReporting, as upstream serves it)."""
        return self._run(ops.scheduling_report(pool, cycles))

    def queue_report(self, queue: str) -> ops.Report:
        """A queue's standing, its waiting jobs by reason and what holds it back."""
        return self._run(ops.queue_report(queue))

    def job_report(self, job_id: str) -> ops.Report:
        """A job's reasons over the cycles, its place in line, the nodes closest to it."""
        return self._run(ops.job_report(job_id))


class AsyncReportCalls:
    """`AsyncArmadaClient`'s report methods."""

    async def _run(self, call: ops.Call[R], timeout: float | None = None) -> R:
        raise NotImplementedError  # the client's own

    async def scheduling_report(self, pool: str = "", cycles: int = 0) -> ops.Report:
        """The latest scheduling cycles (see `ReportCalls.scheduling_report`)."""
        return await self._run(ops.scheduling_report(pool, cycles))

    async def queue_report(self, queue: str) -> ops.Report:
        """A queue's standing, its waiting jobs by reason and what holds it back."""
        return await self._run(ops.queue_report(queue))

    async def job_report(self, job_id: str) -> ops.Report:
        """A job's reasons over the cycles, its place in line, the nodes closest to it."""
        return await self._run(ops.job_report(job_id))
