"""ExecutorApi: executors sync their nodes and runs, and take leases."""

from __future__ import annotations

from collections.abc import Callable

from armada_core.api import executor_pb2, executor_pb2_grpc
from armada_server.errors import InvalidArgument
from armada_server.guarded import RpcContext
from armada_server.services.common import Context, rpc
from armada_server.storage.nodes import encode_request_nodes
from armada_server.storage.sync import MIN_RESPONSE_BYTES

# Run updates after which the scheduler may place something new.
ENDED = frozenset({"succeeded", "failed", "returned", "stopped"})


class ExecutorApiService(executor_pb2_grpc.ExecutorApiServicer):
    def __init__(self, ctx: Context, on_sync: Callable[[], None] | None = None) -> None:
        self.ctx = ctx
        self.on_sync = on_sync
        self._nodes: dict[str, bytes] = {}  # each executor's nodes as last reported
        # Each executor's control address and token as this replica last stored them.
        self._controls: dict[str, tuple[str, str]] = {}

    @rpc
    async def Sync(
        self, request: executor_pb2.SyncRequest, context: RpcContext
    ) -> executor_pb2.SyncResponse:
        self.ctx.require_admin("act as an executor")
        if not request.executor_id:
            raise InvalidArgument("executor_id: must not be empty")
        declared = request.max_response_bytes
        if 0 < declared < MIN_RESPONSE_BYTES:
            raise InvalidArgument(
                f"max_response_bytes: must be 0 (gRPC's default of 4 MiB) or at least "
                f"{MIN_RESPONSE_BYTES} (a lease carries a job of up to 1 MiB), got {declared}"
            )
        seen = set()
        for i, node in enumerate(request.nodes):
            if not node.name or node.name in seen:
                raise InvalidArgument(f"nodes[{i}].name: missing or repeated")
            seen.add(node.name)
        nodes = encode_request_nodes(request)
        response = await self.ctx.run(self.ctx.executors.executor_sync, request, nodes=nodes)
        response.sync_interval_seconds = self.ctx.config.executor_sync_interval
        response.lease_timeout_seconds = self.ctx.config.lease_timeout
        control = (request.control_address, request.control_token)
        if self._controls.get(request.executor_id) != control:
            await self.ctx.run(
                self.ctx.nodes.record_executor_control, request.executor_id, *control
            )
            self._controls[request.executor_id] = control
        if self.on_sync is not None and self._news(request, nodes):
            self.on_sync()
        return response

    def _news(self, request: executor_pb2.SyncRequest, nodes: bytes) -> bool:
        """Whether the sync changed what the scheduler could do: a run ended (capacity
        freed, or a job queued again) or the executor's nodes changed. Runs starting change
        nothing for it, and a cycle per sync while thousands of runs start kept the
        scheduler busy redoing the same decisions."""
        changed = self._nodes.get(request.executor_id) != nodes
        self._nodes[request.executor_id] = nodes
        return changed or any(u.WhichOneof("update") in ENDED for u in request.updates)
