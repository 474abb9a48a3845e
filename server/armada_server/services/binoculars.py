"""Binoculars: container logs of a job's pods, and cordoning nodes.

Logs come from the executor that ran the job's latest run; this server can read them for the
executor running inside it (the local executor keeps every container's output on disk).
"""

from __future__ import annotations

from datetime import datetime

from google.protobuf import empty_pb2

from armada_core.api import binoculars_pb2, binoculars_pb2_grpc
from armada_core.jobs import pod_name
from armada_server.errors import FailedPrecondition, InvalidArgument, NotFound
from armada_server.services.common import Context, rpc


class BinocularsService(binoculars_pb2_grpc.BinocularsServicer):
    def __init__(self, ctx: Context, executors: dict) -> None:  # type: ignore[type-arg]
        self.ctx = ctx
        self.executors = executors  # executor id -> in-process backend

    @rpc
    async def Logs(self, request, context):  # type: ignore[no-untyped-def]
        if not request.job_id:
            raise InvalidArgument("job_id: must not be empty")
        [job] = await self.ctx.run(self.ctx.store.jobs, [request.job_id]) or [None]
        if job is None:
            raise NotFound(f"job {request.job_id!r} not found")
        await self.ctx.authorize(job.queue, "watch")
        run = job.latest_run
        if run is None:
            return binoculars_pb2.LogResponse()  # never ran: nothing logged yet
        backend = self.executors.get(run.cluster_id)
        if backend is None or not hasattr(backend, "logs"):
            raise FailedPrecondition(f"the logs of job {job.id} are on executor "
                                     f"{run.cluster_id!r}, which does not serve them here")
        options = request.log_options
        containers = [c.name for c in job.pod_spec.containers]
        container = options.container or containers[0]
        if container not in containers:
            raise InvalidArgument(f"log_options.container: {container!r} is not a container "
                                  f"of job {job.id} ({', '.join(containers)})")
        since = None
        if request.since_time:
            try:
                since = datetime.fromisoformat(request.since_time.replace("Z", "+00:00"))
            except ValueError:
                raise InvalidArgument(f"since_time: {request.since_time!r} is not an "
                                      "RFC 3339 time") from None
        tail = options.tailLines if options.HasField("tailLines") else None
        lines = await self.ctx.run(backend.logs, pod_name(job.id, run.index), run.id,
                                   container, since=since, tail=tail)
        return binoculars_pb2.LogResponse(log=[
            binoculars_pb2.LogLine(timestamp=line.timestamp, line=line.text) for line in lines])

    @rpc
    async def Cordon(self, request, context):  # type: ignore[no-untyped-def]
        self.ctx.require_admin("cordon nodes")
        for backend in self.executors.values():
            for node in backend.nodes():
                if node.name == request.node_name:
                    node.unschedulable = True
                    return empty_pb2.Empty()
        raise NotFound(f"node {request.node_name!r} is not a node of this server's executors")
