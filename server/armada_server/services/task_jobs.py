"""TaskJobs (our extension service `api.TaskJobs`): the live jobs of orchestrator tasks, for the
reconciler that cancels the jobs of tasks their orchestrator ended behind the integration's
back (armada_core.client.lifecycle.reaping).

A read of whole jobs (their annotations), so it lists only queues the caller may watch, as
GetJobSetEvents does.
"""

from __future__ import annotations

from armada_core.api import submit_pb2, tasks_pb2, tasks_pb2_grpc
from armada_server.auth import current_principal
from armada_server.errors import InvalidArgument
from armada_server.guarded import RpcContext
from armada_server.services.common import Context, rpc


class TaskJobsService(tasks_pb2_grpc.TaskJobsServicer):
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    @rpc
    async def GetLiveTaskJobs(
        self, request: tasks_pb2.LiveTaskJobsRequest, context: RpcContext
    ) -> tasks_pb2.LiveTaskJobsResponse:
        """Extension: the live jobs of orchestrator tasks in the queues the caller may watch."""
        if "\x00" in request.queue + request.orchestrator:
            raise InvalidArgument("queue and orchestrator must not contain NUL characters")
        if request.orchestrator and not request.orchestrator.replace("-", "").isalnum():
            raise InvalidArgument(
                f"orchestrator: {request.orchestrator!r} is not a name of letters, digits and -"
            )
        if request.queue:
            await self.ctx.authorize(request.queue, "watch")
            queues = [request.queue]
        else:
            who = current_principal()
            every = await self.ctx.run(self.ctx.queues.list_queues)
            queues = [q.name for q in every if self.ctx.authorizer.may(who, q, "watch")]
        prefix = f"{request.orchestrator}://" if request.orchestrator else ""
        rows = await self.ctx.run(self.ctx.job_reads.live_task_jobs, queues, prefix)
        out = tasks_pb2.LiveTaskJobsResponse()
        for job_id, queue, job_set, state, uri, spec in rows:
            if not uri:
                continue
            out.jobs.add(
                job_id=job_id,
                queue=queue,
                jobset=job_set,
                state=submit_pb2.JobState.ValueType(int(state)),
                external_job_uri=uri,
                annotations=submit_pb2.Job.FromString(spec).annotations,
            )
        return out
