"""Outcomes (SEMANTICS.md): recording decisions in the ``SchedulingResult`` as they are made,
and completing it at the end of the cycle."""

from __future__ import annotations

from ..fairness import infinite_lifetime
from ..model import SchedulingResult
from .free_space import IntArray
from .state import CycleState, Shape


def leave_queued(state: CycleState, rows: IntArray, reason: str) -> None:
    """Queued jobs left queued this cycle, all for one reason."""
    if len(rows) == 1:
        state.result.unscheduled[state.jobs.ids[int(rows[0])]] = reason
    elif len(rows):
        state.result.unscheduled.add_many(state.jobs.id_array[rows].tolist(), reason)


def record_placed(
    state: CycleState, q: int, shape: Shape, rows: IntArray, placed: list[int]
) -> None:
    """Queued jobs of one shape placed on ``placed`` (node per job): record them, and charge
    their queue (cost, class, usage) and the cycle's limits (per-cycle and rate)."""
    p = len(placed)
    ids = state.jobs.ids
    nodes = state.nodes.records
    if p == 1:
        state.result.scheduled[ids[int(rows[0])]] = nodes[placed[0]].id
    else:
        node_ids = [nodes[n].id for n in placed]
        state.result.scheduled.update(zip((ids[i] for i in rows.tolist()), node_ids, strict=True))
    journal = state.placing.journal
    if journal is not None:
        journal.scheduled.extend(ids[i] for i in rows.tolist())
    queues, limits = state.queues, state.limits
    alloc = queues.allocation[q]
    new_total = limits.new_total
    by_class = queues.allocation_by_class.get((q, shape.class_name))
    if by_class is None:
        by_class = queues.allocation_by_class[(q, shape.class_name)] = [0] * len(alloc)
    usage = queues.usage[q]
    for d, v in shape.charged:
        v *= p
        alloc[d] += v
        new_total[d] += v
        by_class[d] += v
        usage[d] += v
    limits.new_count += p
    limits.new_by_queue[q] += p
    infinite = limits.infinite_allocation
    if infinite is not None and not shape.preemptible:
        records = state.jobs.records
        n_inf = sum(1 for i in rows.tolist() if infinite_lifetime(False, records[i].lifetime))
        if n_inf:
            infinite[q] = [
                a + n_inf * b for a, b in zip(infinite[q], shape.request_tuple, strict=True)
            ]


def finish(state: CycleState) -> SchedulingResult:
    """Preempted jobs, rate-limit tokens taken, and every queue's cost once the decisions
    are applied (the next cycle's decayed usage)."""
    result = state.result
    ids = state.jobs.ids
    names = state.queues.names
    result.preempted = {ids[i] for i in state.placing.preempted}
    result.rate_consumed = {names[k]: n for k, n in enumerate(state.limits.new_by_queue) if n}
    for q in state.queues.by_name:
        k = names.index(q)
        result.queue_costs[q] = state.costs.cost(state.queues.allocation[k])
    return result
