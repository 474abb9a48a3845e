"""Submit: submit, cancel, reprioritize and preempt jobs (and the legacy queue calls)."""

from __future__ import annotations

from google.protobuf import empty_pb2

from armada_core.api import health_pb2, submit_pb2, submit_pb2_grpc
from armada_core.jobs import validate_request
from armada_server.errors import InvalidArgument
from armada_server.services.common import Context, principal_of, rpc
from armada_server.services.queues import QueueService, states_from_filter


def _require(field: str, value: str) -> None:
    if not value:
        raise InvalidArgument(f"{field}: must not be empty")


class SubmitService(submit_pb2_grpc.SubmitServicer):
    def __init__(self, ctx: Context, queues: QueueService) -> None:
        self.ctx = ctx
        self.queues = queues
        self.submission = ctx.config.submission()
        # Upstream kept the queue calls on Submit for older clients: same behaviour.
        for name in ("CreateQueue", "CreateQueues", "UpdateQueue", "UpdateQueues",
                     "DeleteQueue", "GetQueue", "GetQueues"):
            setattr(self, name, getattr(queues, name))

    @rpc
    async def SubmitJobs(self, request, context):  # type: ignore[no-untyped-def]
        items = validate_request(request, self.submission)
        await self.ctx.authorize(request.queue, "submit")
        who = principal_of(context)
        ids = await self.ctx.run(self.ctx.store.submit, request.queue, request.job_set_id,
                                 items, owner=who.name, groups=who.groups)
        self.ctx.metrics.jobs_submitted.labels(request.queue).inc(len(ids))
        return submit_pb2.JobSubmitResponse(
            job_response_items=[submit_pb2.JobSubmitResponseItem(job_id=i) for i in ids])

    @rpc
    async def CancelJobs(self, request, context):  # type: ignore[no-untyped-def]
        _require("queue", request.queue)
        _require("job_set_id", request.job_set_id)
        ids = list(request.job_ids) + ([request.job_id] if request.job_id else [])
        if not ids:
            raise InvalidArgument("job_ids: name at least one job (CancelJobSet cancels a set)")
        await self.ctx.authorize(request.queue, "cancel")
        cancelled = await self.ctx.run(self.ctx.store.cancel, request.queue,
                                       request.job_set_id, ids, reason=request.reason,
                                       requestor=principal_of(context).name)
        return submit_pb2.CancellationResult(cancelled_ids=cancelled)

    @rpc
    async def CancelJobSet(self, request, context):  # type: ignore[no-untyped-def]
        _require("queue", request.queue)
        _require("job_set_id", request.job_set_id)
        states = states_from_filter(request.filter.states)
        await self.ctx.authorize(request.queue, "cancel")
        await self.ctx.run(self.ctx.store.cancel, request.queue, request.job_set_id, None,
                           states=states, reason=request.reason,
                           requestor=principal_of(context).name)
        return empty_pb2.Empty()

    @rpc
    async def ReprioritizeJobs(self, request, context):  # type: ignore[no-untyped-def]
        _require("queue", request.queue)
        _require("job_set_id", request.job_set_id)
        if request.new_priority < 0:
            raise InvalidArgument("new_priority: must not be negative")
        await self.ctx.authorize(request.queue, "reprioritize")
        results = await self.ctx.run(self.ctx.store.reprioritize, request.queue,
                                     request.job_set_id, list(request.job_ids),
                                     request.new_priority,
                                     requestor=principal_of(context).name)
        return submit_pb2.JobReprioritizeResponse(reprioritization_results=results)

    @rpc
    async def PreemptJobs(self, request, context):  # type: ignore[no-untyped-def]
        _require("queue", request.queue)
        _require("job_set_id", request.job_set_id)
        await self.ctx.authorize(request.queue, "preempt")
        results = await self.ctx.run(self.ctx.store.request_preemption, request.queue,
                                     request.job_set_id, list(request.job_ids),
                                     reason=request.reason,
                                     requestor=principal_of(context).name)
        return submit_pb2.PreemptionResult(preemption_results=results)

    @rpc
    async def Health(self, request, context):  # type: ignore[no-untyped-def]
        return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)
