"""The nodes that came closest to holding a waiting job, and what each lacked.

Read when asked, from the nodes the executors last reported and what the runs on them
request (as a cycle counts them: storage/nodes.py), matched by the scheduler's own rules
(`node_admits`); closest is the smallest shortfall, each resource's shortfall taken as a
fraction of the node's capacity of it, the largest of them first, then their sum.
"""

from __future__ import annotations

from typing import Any

from armada_core.jobs import Job
from armada_core.scheduling.constraints import node_admits
from armada_core.scheduling.reasons import quantity
from armada_server.scheduling.snapshot import node_view, spec_view
from armada_server.storage.nodes import Nodes

#: Nodes a job report names.
NEAREST = 3


def nearest_nodes(job: Job, nodes: Nodes, count: int = NEAREST) -> list[dict[str, Any]]:
    """Up to `count` nodes that match `job` (ignoring room), closest first, with what each
    lacks (nothing: it has room now, and the job waits for another reason)."""
    wanted = spec_view(job.spec)
    loads = nodes.node_loads()
    scored = []
    for info in nodes.nodes_with_cordons():
        if info.cordoned or not info.pool:
            continue
        node = node_view(info.executor, info.pool, info.node)
        if not node_admits(wanted, node):
            continue
        load = loads.get((info.executor, info.name))
        used = load.requests if load is not None else {}
        lacks: dict[str, int] = {}
        fractions = []
        for name, asked in wanted.requests.items():
            free = node.capacity.get(name, 0) - used.get(name, 0)
            if asked > free:
                lacks[name] = asked - max(free, 0)
                capacity = node.capacity.get(name, 0)
                fractions.append(lacks[name] / capacity if capacity else float("inf"))
        key = (max(fractions, default=0.0), sum(fractions), info.executor, info.name)
        scored.append((key, info, lacks))
    scored.sort(key=lambda item: item[0])
    return [
        {
            "executor": info.executor,
            "pool": info.pool,
            "node": info.name,
            "lacks": {name: quantity(name, amount) for name, amount in sorted(lacks.items())},
        }
        for _, info, lacks in scored[:count]
    ]
