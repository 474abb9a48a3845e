"""Limits a queued gang must pass before any member is placed (SEMANTICS.md, "Rate limits",
"Placing", "Lifetimes"): jobs per cycle, fraction of the cluster per cycle, global rate limit,
queue rate limit, per-queue class cap, non-preemptible overshoot, excess-flow budget. Each is
checked for the gang as a whole; the first that fails names the reason. Evicted gangs going
back are checked against the class cap only.
"""

from __future__ import annotations

from .. import reasons
from ..fairness import budget_units
from ..model import Job
from ..ratelimit import allowance
from .state import CycleState, Item, add


def first_limit(state: CycleState, item: Item) -> str | None:
    """The reason of the first limit the queued gang would exceed, or None."""
    return (
        cycle_limit(state, item)
        or rate_limit(state, item)
        or class_limit(state, item)
        or overshoot_limit(state, item)
        or budget_limit(state, item)
    )


def cycle_limit(state: CycleState, item: Item) -> str | None:
    """Jobs per cycle, then the fraction of each resource's cluster total per cycle."""
    cfg = state.snapshot.config
    cap = cfg.max_jobs_per_cycle
    if cap is not None and state.new_count + len(item.members) > cap:
        return reasons.MAX_JOBS_PER_CYCLE
    limits = cfg.max_fraction_per_cycle
    for i, d in enumerate(state.dims):
        if d in limits and state.new_total[i] + item.total[i] > limits[d] * state.totals[i]:
            return reasons.MAX_RESOURCES_PER_CYCLE
    return None


def rate_limit(state: CycleState, item: Item) -> str | None:
    """Token buckets, global then the queue's: the whole gang must fit in what is left."""
    snap, cfg = state.snapshot, state.snapshot.config
    size = len(item.members)
    overall = allowance(cfg.scheduling_rate, cfg.scheduling_burst, snap.rate_tokens)
    if overall is not None and state.new_count + size > overall:
        return reasons.GLOBAL_RATE_LIMIT
    own = allowance(
        cfg.queue_scheduling_rate,
        cfg.queue_scheduling_burst,
        snap.queue_rate_tokens.get(item.queue),
    )
    if own is not None and state.new_by_queue.get(item.queue, 0) + size > own:
        return reasons.QUEUE_RATE_LIMIT
    return None


def class_limit(state: CycleState, item: Item) -> str | None:
    """Per-queue class cap: what the queue holds of each class, with the gang, must stay
    within the class's fraction of the cluster."""
    by_class: dict[str, list[int]] = {}
    for j in item.members:
        have = by_class.get(j.priority_class, state.zeros())
        by_class[j.priority_class] = add(have, state.vec(j))
    for pc_name in sorted(by_class):
        limits = state.classes[pc_name].max_fraction_per_queue
        have = add(state.alloc_by_class[(item.queue, pc_name)], by_class[pc_name])
        for i, d in enumerate(state.dims):
            if d in limits and have[i] > limits[d] * state.totals[i]:
                return reasons.queue_class_limit(pc_name)
    return None


def overshoot_limit(state: CycleState, item: Item) -> str | None:
    """The queue's infinite-lifetime jobs, with the gang's, must cost at most (1 +
    ``non_preemptible_overshoot``) times its fair share."""
    if state.snapshot.config.non_preemptible_overshoot is None:
        return None
    extra = None
    for j in item.members:
        if state.infinite(j):
            extra = add(extra or state.zeros(), state.vec(j))
    if extra is None:
        return None
    have = add(state.alloc_infinite[item.queue], extra)
    if state.costs.cost(have) > state.infinite_limit[item.queue]:
        return reasons.NON_PREEMPTIBLE_OVERSHOOT
    return None


def above_fair_share(state: CycleState, item: Item) -> bool:
    """Whether the queue's cost with the whole gang added exceeds its plain fair share."""
    return state.costs.cost(add(state.alloc[item.queue], item.total)) > state.fair[item.queue]


def budget_limit(state: CycleState, item: Item) -> str | None:
    """A gang placed above the queue's fair share needs its members' charges to fit in what
    is left of the queue's excess-flow budget; charge-free gangs are exempt."""
    budget = budget_units(state.snapshot.config.excess_flow_budget)
    if budget is None:
        return None
    charge = sum(state.charge(j) for j in item.members)
    if charge == 0 or not above_fair_share(state, item):
        return None
    if state.budget_used[item.queue] + charge > budget:
        return reasons.EXCESS_FLOW_BUDGET
    return None


def budget_charges(state: CycleState, item: Item) -> dict[str, int]:
    """What each member takes from the budget if placed (decided before placing, on the
    queue's cost then): nothing unless the gang goes above the queue's fair share."""
    if state.snapshot.config.excess_flow_budget is None or not above_fair_share(state, item):
        return {}
    return {j.id: c for j in item.members if (c := state.charge(j))}


def charge_placed(state: CycleState, placed: list[Job], charges: dict[str, int]) -> None:
    """Placed members take their charge from their queue's budget until they leave."""
    for j in placed:
        charge = charges.get(j.id, 0)
        if charge:
            state.budget_used[j.queue] += charge
            state.result.excess_flow[j.id] = charge
