"""Binoculars: container logs of a job's pods, and cordoning nodes.

Logs stay with the executor that ran the job's run (in the server process or an
`armada-executor` elsewhere): this service, on any replica, asks that executor over
`executor.ExecutorControl` at the address and with the token it reported in its last sync, and
relays the lines: of the job's latest run, or (our extension, `LogRequest.run_id`) of an
earlier one, since executors keep each run's log. Cordons are stored (node_cordons) and read
by every scheduling cycle, so they apply to nodes of every executor on every replica.
"""

from __future__ import annotations

import asyncio

import grpc
from google.protobuf import empty_pb2

from armada_core.api import binoculars_pb2, binoculars_pb2_grpc, executor_pb2, executor_pb2_grpc
from armada_core.jobs import Job, Run, pod_name
from armada_server.auth import current_principal
from armada_server.errors import InvalidArgument, NotFound, Unavailable
from armada_server.executors.logs import parse_time_ns
from armada_server.guarded import RpcContext
from armada_server.services.common import Context, rpc
from armada_server.services.jobs import storable
from armada_server.storage.nodes import NodeInfo

# How long a log read from an executor may take.
LOGS_TIMEOUT = 30.0
# Channels kept open to executors (each restart of an executor may bring a new address).
MAX_CHANNELS = 64
MAX_LOG_MESSAGE = 64 * 1024 * 1024


class ExecutorChannels:
    """One channel per executor address, reused across calls; closed with the server."""

    def __init__(self) -> None:
        self._channels: dict[str, grpc.aio.Channel] = {}

    def stub(self, address: str) -> executor_pb2_grpc.ExecutorControlAsyncStub:
        channel = self._channels.get(address)
        if channel is None:
            if len(self._channels) >= MAX_CHANNELS:  # the oldest: most likely a stale address
                oldest = self._channels.pop(next(iter(self._channels)))
                asyncio.get_running_loop().create_task(oldest.close())
            channel = self._channels[address] = grpc.aio.insecure_channel(
                address, options=[("grpc.max_receive_message_length", MAX_LOG_MESSAGE)]
            )
        return executor_pb2_grpc.ExecutorControlStub(channel)

    async def close(self) -> None:
        channels, self._channels = list(self._channels.values()), {}
        await asyncio.gather(*(c.close() for c in channels), return_exceptions=True)


class BinocularsService(binoculars_pb2_grpc.BinocularsServicer):
    def __init__(self, ctx: Context, channels: ExecutorChannels | None = None) -> None:
        self.ctx = ctx
        self.channels = channels or ExecutorChannels()

    @rpc
    async def Logs(
        self, request: binoculars_pb2.LogRequest, context: RpcContext
    ) -> binoculars_pb2.LogResponse:
        job, run = await self._job_and_run(request)
        await self.ctx.authorize(job.queue, "watch")
        options = request.log_options
        containers = [c.name for c in job.pod_spec.containers]
        container = options.container or containers[0]
        if container not in containers:
            raise InvalidArgument(
                f"log_options.container: {container!r} is not a container "
                f"of job {job.id} ({', '.join(containers)})"
            )
        if request.since_time:
            try:
                parse_time_ns(request.since_time)
            except ValueError:
                raise InvalidArgument(
                    f"since_time: {request.since_time!r} is not an RFC 3339 time"
                ) from None
        if run is None:
            return binoculars_pb2.LogResponse()  # never ran: nothing logged yet
        ask = executor_pb2.ExecutorLogsRequest(
            run_id=run.id,
            job_id=job.id,
            pod_name=pod_name(job.id, run.index),
            namespace=job.spec.namespace,
            container=container,
            since_time=request.since_time,
        )
        if options.HasField("tailLines"):
            ask.tail_lines = options.tailLines
        return binoculars_pb2.LogResponse(log=await self._ask_executor(job.id, run, ask))

    async def _job_and_run(self, request: binoculars_pb2.LogRequest) -> tuple[Job, Run | None]:
        """The job whose logs are asked for, and its run: the one named by `run_id` (our
        extension), else the latest (None when the job has not run yet)."""
        job_id = request.job_id
        run_id = request.run_id
        if not job_id and not run_id:
            raise InvalidArgument("job_id: must not be empty")
        if run_id:
            found = await self.ctx.run(self.ctx.job_reads.runs, storable([run_id]))
            if not found:
                raise NotFound(f"run {run_id!r} not found")
            [(owner, _)] = found
            if job_id and owner != job_id:
                raise InvalidArgument(f"run_id: run {run_id} is not a run of job {job_id}")
            job_id = owner
        jobs = await self.ctx.run(self.ctx.job_reads.jobs, [job_id])
        if not jobs:
            raise NotFound(f"job {job_id!r} not found")
        job = jobs[0]
        if not run_id:
            return job, job.latest_run
        return job, next(r for r in job.runs if r.id == run_id)

    async def _ask_executor(
        self, job_id: str, run: Run, ask: executor_pb2.ExecutorLogsRequest
    ) -> list[binoculars_pb2.LogLine]:
        """The lines of `ask` from the executor that ran `run`."""
        executor = run.cluster_id
        control = await self.ctx.run(self.ctx.nodes.executor_control, executor)
        if control is None:
            raise Unavailable(
                f"the logs of job {job_id} are on executor {executor!r}, which "
                "has not said where it serves them (is it running?)"
            )
        try:
            answer = await self.channels.stub(control.address).Logs(
                ask, timeout=LOGS_TIMEOUT, metadata=(("authorization", f"Bearer {control.token}"),)
            )
        except grpc.aio.AioRpcError as e:
            if e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise Unavailable(
                    f"executor {executor!r} at {control.address}, which has the "
                    f"logs of job {job_id}, is unreachable: {e.details()}"
                ) from None
            if e.code() == grpc.StatusCode.NOT_FOUND:
                raise NotFound(f"executor {executor!r}: {e.details()}") from None
            if e.code() == grpc.StatusCode.INVALID_ARGUMENT:
                raise InvalidArgument(e.details() or "invalid") from None
            raise Unavailable(
                f"executor {executor!r} at {control.address} could not read "
                f"the logs of job {job_id}: {e.code().name} {e.details()}"
            ) from None
        return list(answer.log)

    @rpc
    async def Cordon(
        self, request: binoculars_pb2.CordonRequest, context: RpcContext
    ) -> empty_pb2.Empty:
        """Cordon `node_name`, or (extension field 100) uncordon `uncordon_node_name`. A node
        is named `NODE`, or `EXECUTOR/NODE` when several executors have a node of that name."""
        uncordon = bool(request.uncordon_node_name)
        if uncordon and request.node_name:
            raise InvalidArgument("node_name and uncordon_node_name: give one of them")
        name = request.uncordon_node_name or request.node_name
        field = "uncordon_node_name" if uncordon else "node_name"
        if not name:
            raise InvalidArgument(f"{field}: must not be empty")
        self.ctx.require_admin("uncordon nodes" if uncordon else "cordon nodes")
        node = await self._resolve(name, field)
        changed = await self.ctx.run(
            self.ctx.nodes.set_node_cordon,
            node.executor,
            node.name,
            not uncordon,
            current_principal().name,
        )
        if changed:
            self.ctx.wake_scheduler()
        return empty_pb2.Empty()

    async def _resolve(self, name: str, field: str) -> NodeInfo:
        nodes = await self.ctx.run(self.ctx.nodes.nodes_with_cordons)
        executor, _, node = name.rpartition("/")
        found = [n for n in nodes if n.name == node and (not executor or n.executor == executor)]
        if not found:
            raise NotFound(f"{field}: {name!r} is not a node of any executor")
        if len(found) > 1:
            owners = ", ".join(sorted(n.executor for n in found))
            raise InvalidArgument(
                f"{field}: executors {owners} each have a node {node!r}: name it as EXECUTOR/{node}"
            )
        return found[0]
