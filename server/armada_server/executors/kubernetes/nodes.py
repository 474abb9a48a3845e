"""The cluster's nodes as the executor protocol reports them.

A node offers its allocatable resources minus what pods not run by this executor request
(daemon sets, system pods, other workloads: the server does not know about those); the runs
of this executor are the server's own bookkeeping. A cordoned node, or one that is not Ready,
is reported unschedulable. The nodes are listed again every `node_refresh_interval`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from armada_core.api import executor_pb2
from armada_core.scheduling.model import parse_quantity
from armada_server.executors.kubernetes import labels as lb
from armada_server.executors.kubernetes.api import ClusterApi
from armada_server.executors.kubernetes.settings import KubernetesSettings

log = logging.getLogger("armada_server.executor.kubernetes")

_DONE = ("Succeeded", "Failed")


def pod_requests(pod: Any, *, lenient: bool = False) -> dict[str, int]:
    """What a pod (V1Pod) takes from its node: the sum over containers, at least any init
    container; a limit stands in for a missing request, as in Kubernetes. CPU in millicores.
    A quantity that does not parse raises ValueError, or is left out when `lenient`."""

    def of(container: Any) -> dict[str, int]:
        res = container.resources
        raw = {**((res.limits if res else None) or {}), **((res.requests if res else None) or {})}
        out: dict[str, int] = {}
        for k, v in raw.items():
            try:
                out[k] = parse_quantity(str(v), milli=k == "cpu")
            except ValueError:
                if not lenient:
                    raise
        return out

    total: dict[str, int] = {}
    for c in pod.spec.containers or []:
        for k, v in of(c).items():
            total[k] = total.get(k, 0) + v
    for c in pod.spec.init_containers or []:
        for k, v in of(c).items():
            total[k] = max(total.get(k, 0), v)
    return total


def _format(name: str, value: int) -> str:
    return f"{value}m" if name == "cpu" else str(value)


def _ready(node: Any) -> bool:
    for c in (node.status.conditions if node.status else None) or []:
        if c.type == "Ready":
            return bool(c.status == "True")
    return False


def executor_nodes(
    nodes: Iterable[Any], pods: Iterable[Any], executor_id: str, *, subtract_foreign: bool = True
) -> list[executor_pb2.Node]:
    """Nodes (V1Node) as protocol nodes; `pods` are the cluster's pods (V1Pod)."""
    used: dict[str, dict[str, int]] = {}
    if subtract_foreign:
        for pod in pods:
            labels = pod.metadata.labels or {}
            node = pod.spec.node_name
            if (
                not node
                or labels.get(lb.EXECUTOR) == executor_id
                or (pod.status and pod.status.phase in _DONE)
            ):
                continue
            bucket = used.setdefault(node, {})
            for k, v in pod_requests(pod).items():
                bucket[k] = bucket.get(k, 0) + v
    out: list[executor_pb2.Node] = []
    for node in nodes:
        name = node.metadata.name
        allocatable: dict[str, str] = {}
        for k, v in ((node.status.allocatable if node.status else None) or {}).items():
            try:
                have = parse_quantity(str(v), milli=k == "cpu")
            except ValueError:
                continue
            allocatable[k] = _format(k, max(0, have - used.get(name, {}).get(k, 0)))
        out.append(
            executor_pb2.Node(
                name=name,
                labels=node.metadata.labels or {},
                allocatable=allocatable,
                unschedulable=bool(node.spec and node.spec.unschedulable) or not _ready(node),
                taints=[
                    executor_pb2.Taint(key=t.key, value=t.value or "", effect=t.effect)
                    for t in (node.spec.taints if node.spec else None) or []
                ],
            )
        )
    return out


class ClusterNodes:
    """The cluster's nodes as last listed, and each node's labels; `on_listed` hears of
    every new listing."""

    def __init__(
        self,
        cluster: ClusterApi,
        executor_id: str,
        settings: KubernetesSettings,
        *,
        clock: Callable[[], float],
        on_listed: Callable[[Sequence[executor_pb2.Node]], None],
    ) -> None:
        self.cluster = cluster
        self.executor_id = executor_id
        self.settings = settings
        self.clock = clock
        self.on_listed = on_listed
        self.nodes: list[executor_pb2.Node] = []
        self.labels: dict[str, dict[str, str]] = {}
        self._listed_at = -float("inf")
        self._refreshing = False

    def due(self, now: float) -> bool:
        """Whether to list them again."""
        return not self._refreshing and now - self._listed_at >= self.settings.node_refresh_interval

    async def refresh(self) -> None:
        """List the nodes (and, to subtract what they request, the other pods) again."""
        self._refreshing = True
        core = self.cluster.core
        try:
            nodes = await self.cluster.call(core.list_node)
            pods: list[Any] = []
            if self.settings.subtract_foreign_pods:
                pods = (
                    await self.cluster.call(
                        core.list_pod_for_all_namespaces,
                        field_selector="status.phase!=Succeeded,status.phase!=Failed",
                    )
                ).items
            self.nodes = executor_nodes(
                nodes.items,
                pods,
                self.executor_id,
                subtract_foreign=self.settings.subtract_foreign_pods,
            )
            self.on_listed(self.nodes)
            self.labels = {n.metadata.name: dict(n.metadata.labels or {}) for n in nodes.items}
        except Exception as e:
            log.warning("could not read the cluster's nodes: %s", e)
        finally:
            self._listed_at = self.clock()
            self._refreshing = False
