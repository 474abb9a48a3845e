"""Virtual nodes for the local and simulated executors, from the server's node groups."""

from __future__ import annotations

from collections.abc import Sequence

from armada_core.api import executor_pb2
from armada_server.config import NodeGroup

GPU = "nvidia.com/gpu"


def virtual_nodes(groups: Sequence[NodeGroup], prefix: str) -> list[executor_pb2.Node]:
    """`COUNT` nodes per group, named `<prefix>-<i>`, labelled with their own name."""
    nodes: list[executor_pb2.Node] = []
    for group in groups:
        for _ in range(group.count):
            name = f"{prefix}-{len(nodes)}"
            allocatable = {"cpu": group.cpu, "memory": group.memory}
            if group.gpus:
                allocatable[GPU] = str(group.gpus)
            labels = {"kubernetes.io/hostname": name, **dict(group.labels)}
            nodes.append(
                executor_pb2.Node(
                    name=name,
                    allocatable=allocatable,
                    labels=labels,
                    taints=[
                        executor_pb2.Taint(key=t.key, value=t.value, effect=t.effect)
                        for t in group.taints
                    ],
                )
            )
    return nodes
