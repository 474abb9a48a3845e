"""ExecutorApi: executors sync their nodes and runs, and take leases."""

from __future__ import annotations

from armada_core.api import executor_pb2_grpc
from armada_server.errors import InvalidArgument
from armada_server.services.common import Context, rpc


class ExecutorApiService(executor_pb2_grpc.ExecutorApiServicer):
    def __init__(self, ctx: Context, on_sync=None) -> None:  # type: ignore[no-untyped-def]
        self.ctx = ctx
        self.on_sync = on_sync

    @rpc
    async def Sync(self, request, context):  # type: ignore[no-untyped-def]
        self.ctx.require_admin("act as an executor")
        if not request.executor_id:
            raise InvalidArgument("executor_id: must not be empty")
        seen = set()
        for i, node in enumerate(request.nodes):
            if not node.name or node.name in seen:
                raise InvalidArgument(f"nodes[{i}].name: missing or repeated")
            seen.add(node.name)
        response = await self.ctx.run(self.ctx.store.executor_sync, request)
        response.sync_interval_seconds = self.ctx.config.executor_sync_interval
        if self.on_sync is not None and (request.updates or request.nodes):
            self.on_sync()
        return response
