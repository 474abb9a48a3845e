"""Nodes (our extension service `api.Nodes`): every executor's nodes with their capacity,
what the jobs on them use, and their cordons, as the web UI's nodes page shows them.

A read like GetJobDetails and GetActiveQueues: any authenticated caller may list nodes. It
counts the jobs on each node without naming them (they may be in queues the caller may not
watch).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from armada_core.api import nodes_pb2, nodes_pb2_grpc
from armada_core.scheduling import parse_quantity
from armada_server.guarded import RpcContext
from armada_server.services.common import Context, rpc
from armada_server.storage.nodes import NodeInfo, NodeLoad

_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def format_quantity(name: str, value: int) -> str:
    """A quantity as Kubernetes writes it: cpu from millicores ("2", "1500m"), the rest
    from base units in the largest binary unit that divides it ("8Gi", "100")."""
    if name == "cpu":
        return str(value // 1000) if value % 1000 == 0 else f"{value}m"
    for suffix, size in _BINARY:
        if value and value % size == 0:
            return f"{value // size}{suffix}"
    return str(value)


def _allocatable(node: NodeInfo) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, text in node.node.allocatable.items():
        try:
            out[name] = parse_quantity(text, milli=(name == "cpu"))
        except ValueError:
            continue  # an executor's unreadable figure: left out rather than guessed
    return out


def _quantities(values: Mapping[str, int]) -> dict[str, str]:
    return {name: format_quantity(name, value) for name, value in sorted(values.items())}


def node_status(node: NodeInfo, load: NodeLoad, *, live: bool) -> nodes_pb2.NodeStatus:
    allocatable = _allocatable(node)
    free = {name: max(0, total - load.requests.get(name, 0)) for name, total in allocatable.items()}
    status = nodes_pb2.NodeStatus(
        executor=node.executor,
        pool=node.pool,
        name=node.name,
        allocatable=_quantities(allocatable),
        used=_quantities(load.requests),
        free=_quantities(free),
        jobs=load.jobs,
        cordoned=node.cordoned,
        cordoned_by=node.cordoned_by,
        unschedulable=node.node.unschedulable,
        executor_live=live,
    )
    if node.cordoned_at is not None:
        status.cordoned_at.FromDatetime(node.cordoned_at)
    status.last_seen.FromDatetime(node.last_seen)
    return status


class NodesService(nodes_pb2_grpc.NodesServicer):
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    @rpc
    async def GetNodes(
        self, request: nodes_pb2.NodeListRequest, context: RpcContext
    ) -> nodes_pb2.NodeListResponse:
        nodes = await self.ctx.run(self.ctx.nodes.nodes_with_cordons)
        loads = await self.ctx.run(self.ctx.nodes.node_loads)
        now = datetime.now(UTC)
        out = nodes_pb2.NodeListResponse()
        for node in nodes:
            if request.executor and node.executor != request.executor:
                continue
            live = (now - node.last_seen).total_seconds() <= self.ctx.config.lease_timeout
            load = loads.get((node.executor, node.name), NodeLoad())
            out.nodes.append(node_status(node, load, live=live))
        return out
