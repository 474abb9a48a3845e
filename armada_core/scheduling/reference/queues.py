"""Fairness (SEMANTICS.md, "Fairness"): each active queue's weight and usage offset, which
queues are protected, and the two costs queues are compared by: the progressive-filling key
and, for victims, the fraction of fair share.
"""

from __future__ import annotations

from ..fairness import (
    fair_shares,
    lifetime_weights,
    overshoot_limits,
    protected_queues,
    queue_figures,
    usage_offsets,
)
from ..model import Job
from .state import CycleState, add


def weigh_queues(state: CycleState, running: list[Job], queued: list[Job]) -> set[str]:
    """Set the weights and usage offsets of the active queues (those with a valid queued or
    running job); return the protected ones, whose preemptible jobs are not evicted."""
    accounted = [j for j in running if state.accounted(j)]
    active = sorted({j.queue for j in queued} | {j.queue for j in accounted})
    state.weights = {q: state.queues[q].weight for q in active}
    start = {q: state.zeros() for q in active}
    for job in accounted:
        start[job.queue] = add(start[job.queue], state.vec(job))
    demand = {q: list(start[q]) for q in active}
    for job in queued:
        demand[job.queue] = add(demand[job.queue], state.vec(job))
    shares = {q: state.costs.cost(start[q]) for q in active}
    demands = {q: state.costs.cost(demand[q]) for q in active}
    cfg = state.snapshot.config
    usage = {q: state.queues[q].decayed_usage for q in active}
    state.offsets = usage_offsets(usage, shares, state.snapshot.usage_elapsed, cfg.usage_half_life)
    costs = state.costs
    state.result.queue_figures = queue_figures(
        costs, state.weights, start, demands, usage, state.offsets
    )
    state.result.capacity = dict(zip(costs.dims, costs.totals, strict=True))
    weights = lifetime_weights(
        state.weights, state.queues.values(), cfg.lifetime_limits_count_all_queues
    )
    state.fair = fair_shares(weights) if weights else {}
    if cfg.non_preemptible_overshoot is not None and weights:
        state.infinite_limit = overshoot_limits(weights, cfg.non_preemptible_overshoot)
    state.budget_used = {q: 0 for q in active}
    for job in accounted:
        state.budget_used[job.queue] += job.excess_flow
    return protected_queues(shares, state.weights, demands, cfg.protected_fraction)


def queue_key(state: CycleState, queue: str, extra: list[int]) -> float:
    """Progressive filling: the queue's cost once ``extra`` (its head gang) is added, plus
    its decayed usage, per weight."""
    alloc = add(state.alloc[queue], extra)
    return (state.costs.cost(alloc) + state.offsets[queue]) / state.weights[queue]


def fair_share_fraction(state: CycleState, queue: str) -> float:
    """The queue's fraction of its fair share (up to a common factor): cost of what it
    holds or may still get back (its evicted jobs not yet back), per weight."""
    usage = state.alloc[queue]
    for ns in state.nodes:
        for jid, (vec, _) in ns.evicted.items():
            if state.running[jid].queue == queue:
                usage = add(usage, vec)
    return (state.costs.cost(usage) + state.offsets[queue]) / state.weights[queue]
