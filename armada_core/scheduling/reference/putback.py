"""Placing evicted jobs (SEMANTICS.md, "Placing"): an evicted gang (a single job is a gang of
one) goes back on its own nodes, all or nothing, or is preempted. Exempt from per-cycle
limits.
"""

from __future__ import annotations

from ..model import Job
from .limits import class_limit
from .state import INF, CycleState, Item, NodeState, fits


def return_evicted(state: CycleState, item: Item) -> None:
    """Every member back on its own node, all or nothing, if the node's capacity minus
    everything now holding space fits it and the queue's class cap allows; otherwise the
    members are preempted (an extra member too, once its core failed). Members that gave
    way to a job of a higher class earlier in the cycle are preempted already."""
    if any(j.id not in state.node_of(j).evicted for j in item.members):
        item.failed = True
        return
    ok = not (item.parent is not None and item.parent.failed)
    if ok and class_limit(state, item) is not None:
        ok = False
    placed: list[tuple[NodeState, Job, list[int]]] = []
    if ok:
        for job in item.members:
            ns, vec = state.node_of(job), state.vec(job)
            if not fits(ns.free_held_giving_way(-INF), vec):
                ok = False
                break
            ns.held[job.id] = (vec, INF)
            placed.append((ns, job, vec))
    if ok:
        for ns, job, vec in placed:
            del ns.evicted[job.id]
            state.account(job, vec, +1)
        return
    for ns, job, _ in placed:
        del ns.held[job.id]
    item.failed = True
    for job in item.members:
        del state.node_of(job).evicted[job.id]
        state.result.preempted.add(job.id)
