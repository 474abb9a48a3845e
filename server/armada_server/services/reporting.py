"""SchedulerReporting (upstream's package schedulerobjects): the scheduling, queue and job
reports as text, as upstream serves them, so armadactl's report commands work unchanged;
each also as JSON in an extension field, which `armada report -o json` prints.

Reads obey queue permissions as other reads do (reporting/compose.py)."""

from __future__ import annotations

import json
from typing import Any

from armada_core.api import scheduler_reporting_pb2 as pb
from armada_core.api import scheduler_reporting_pb2_grpc
from armada_server.auth import current_principal
from armada_server.guarded import RpcContext
from armada_server.reporting import text
from armada_server.reporting.compose import DEFAULT_CYCLES, Reports
from armada_server.services.common import Context, rpc


def _json(report: dict[str, Any]) -> str:
    return json.dumps(report, separators=(",", ":"))


class ReportingService(scheduler_reporting_pb2_grpc.SchedulerReportingServicer):
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def _reports(self) -> Reports:
        return Reports(
            cycles=self.ctx.cycle_reports,
            queues=self.ctx.queues,
            job_reads=self.ctx.job_reads,
            places=self.ctx.places,
            nodes=self.ctx.nodes,
            authorizer=self.ctx.authorizer,
            class_priorities={c.name: c.priority for c in self.ctx.config.priority_classes},
        )

    async def queue_report(self, name: str) -> dict[str, Any]:
        return await self.ctx.run(self._reports().queue, current_principal(), name)

    async def job_report(self, job_id: str) -> dict[str, Any]:
        return await self.ctx.run(self._reports().job, current_principal(), job_id)

    async def scheduling_report(self, pool: str, cycles: int) -> dict[str, Any]:
        reports = self._reports()
        return await self.ctx.run(
            reports.scheduling, current_principal(), pool, cycles or DEFAULT_CYCLES
        )

    @rpc
    async def GetSchedulingReport(
        self, request: pb.SchedulingReportRequest, context: RpcContext
    ) -> pb.SchedulingReport:
        # Upstream's deprecated filters answer with the queue's or the job's report.
        which = request.WhichOneof("filter")
        if which == "most_recent_for_queue":
            report = await self.queue_report(request.most_recent_for_queue.queue_name)
            return pb.SchedulingReport(report=text.queue(report), json=_json(report))
        if which == "most_recent_for_job":
            report = await self.job_report(request.most_recent_for_job.job_id)
            return pb.SchedulingReport(report=text.job(report), json=_json(report))
        report = await self.scheduling_report(request.pool, request.cycles)
        return pb.SchedulingReport(report=text.scheduling(report), json=_json(report))

    @rpc
    async def GetQueueReport(
        self, request: pb.QueueReportRequest, context: RpcContext
    ) -> pb.QueueReport:
        report = await self.queue_report(request.queue_name)
        return pb.QueueReport(report=text.queue(report), json=_json(report))

    @rpc
    async def GetJobReport(self, request: pb.JobReportRequest, context: RpcContext) -> pb.JobReport:
        report = await self.job_report(request.job_id)
        return pb.JobReport(report=text.job(report), json=_json(report))
