"""Limits (SEMANTICS.md, Rate limits and Placing): per-cycle limits, rate limits and
per-queue class caps, checked for a gang as a whole or counted for a run of identical jobs.

When several limits stop a run, the reason is the first that fails in this order: jobs per
cycle, fraction per cycle, global rate, queue rate, class cap, non-preemptible overshoot,
excess-flow budget. A run never mixes lifetimes when the last two are on (``order``), so its
jobs are all of infinite lifetime, or all charge the same to the budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from .. import reasons
from ..fairness import budget_charge, infinite_lifetime, weighted_request
from ..ratelimit import allowance
from .state import CycleState, Item, Shape

#: For a run that charges the excess-flow budget: how many of its jobs keep the queue at or
#: below its fair share (they take nothing), and what each of the others takes.
BudgetPlan = tuple[int, int]


def allowances(state: CycleState) -> None:
    """Nothing new scheduled yet; the rate limits' allowances for this cycle."""
    config, snapshot, limits = state.config, state.snapshot, state.limits
    limits.new_total = [0] * len(state.dims)
    limits.new_count = 0
    limits.new_by_queue = [0] * len(state.queues.names)
    limits.global_allowance = allowance(
        config.scheduling_rate, config.scheduling_burst, snapshot.rate_tokens
    )
    limits.queue_allowance = [
        allowance(
            config.queue_scheduling_rate,
            config.queue_scheduling_burst,
            snapshot.queue_rate_tokens.get(name),
        )
        for name in state.queues.names
    ]
    limits.counted = (
        config.max_jobs_per_cycle is not None
        or bool(config.max_fraction_per_cycle)
        or limits.global_allowance is not None
        or any(own is not None for own in limits.queue_allowance)
    )


def cycle_limit(state: CycleState, q: int, item: Item) -> str | None:
    """Per-cycle limits, then the rate limits: a gang must fit whole in each."""
    config, limits = state.config, state.limits
    size = len(item.members)
    if (
        config.max_jobs_per_cycle is not None
        and limits.new_count + size > config.max_jobs_per_cycle
    ):
        return reasons.MAX_JOBS_PER_CYCLE
    fractions, totals = config.max_fraction_per_cycle, state.nodes.totals
    for d, name in enumerate(state.dims):
        if name in fractions and limits.new_total[d] + item.total[d] > fractions[name] * totals[d]:
            return reasons.MAX_RESOURCES_PER_CYCLE
    if limits.global_allowance is not None and limits.new_count + size > limits.global_allowance:
        return reasons.GLOBAL_RATE_LIMIT
    own = limits.queue_allowance[q]
    if own is not None and limits.new_by_queue[q] + size > own:
        return reasons.QUEUE_RATE_LIMIT
    return None


def class_limit(state: CycleState, q: int, members: list[int]) -> str | None:
    """The queue's per-class caps, with all of ``members`` added."""
    if not state.class_caps:
        return None
    nd = len(state.dims)
    facts, shape_of = state.shapes.facts, state.jobs.shape
    by_class: dict[str, list[int]] = {}
    for i in members:
        shape = facts[shape_of[i]]
        cur = by_class.get(shape.class_name, [0] * nd)
        by_class[shape.class_name] = [a + b for a, b in zip(cur, shape.request_tuple, strict=True)]
    totals = state.nodes.totals
    for class_name in sorted(by_class):
        caps = state.classes[class_name].max_fraction_per_queue
        if not caps:
            continue
        base = state.queues.allocation_by_class.get((q, class_name), [0] * nd)
        for d, name in enumerate(state.dims):
            if name in caps and base[d] + by_class[class_name][d] > caps[name] * totals[d]:
                return reasons.queue_class_limit(class_name)
    return None


def run_limits(
    state: CycleState,
    q: int,
    shape: Shape,
    m: int,
    lifetime: float | None,
    plan: BudgetPlan | None,
) -> tuple[int, str | None]:
    """How many of ``m`` identical queued jobs (of one ``lifetime``; ``plan`` from
    ``budget_plan``) the limits let through, and the reason that stops the rest (None when
    all pass)."""
    config, limits, totals = state.config, state.limits, state.nodes.totals
    caps = state.classes[shape.class_name].max_fraction_per_queue
    if not (limits.counted or caps or plan is not None or limits.infinite_limit is not None):
        return m, None
    c_jobs = m
    if config.max_jobs_per_cycle is not None:
        c_jobs = max(0, min(m, config.max_jobs_per_cycle - limits.new_count))
    c_res = m
    fractions = config.max_fraction_per_cycle
    for d, name in enumerate(state.dims if fractions else ()):
        if name in fractions:
            limit = fractions[name] * totals[d]
            c_res = min(c_res, _count_within(limits.new_total[d], shape.request_tuple[d], limit, m))
    c_cls = m
    if caps:
        base = state.queues.allocation_by_class.get((q, shape.class_name), [0] * len(state.dims))
        for d, name in enumerate(state.dims):
            if name in caps:
                limit = caps[name] * totals[d]
                c_cls = min(c_cls, _count_within(base[d], shape.request_tuple[d], limit, m))
    c_rate = m
    if limits.global_allowance is not None:
        c_rate = max(0, min(m, limits.global_allowance - limits.new_count))
    c_qrate = m
    own = limits.queue_allowance[q]
    if own is not None:
        c_qrate = max(0, min(m, own - limits.new_by_queue[q]))
    c_inf = m
    if limits.infinite_limit is not None and infinite_lifetime(shape.preemptible, lifetime):
        assert limits.infinite_allocation is not None
        c_inf = count_cost_within(
            state, limits.infinite_allocation[q], shape.request_tuple, limits.infinite_limit[q], m
        )
    c_budget = m
    if plan is not None:
        assert limits.budget is not None
        below, charge = plan
        left = limits.budget - limits.budget_used[q]
        c_budget = min(m, below + (left // charge if left >= 0 else 0))
    b = min(c_jobs, c_res, c_rate, c_qrate, c_cls, c_inf, c_budget, m)
    if b >= m:
        return m, None
    if c_jobs == b:
        return b, reasons.MAX_JOBS_PER_CYCLE
    if c_res == b:
        return b, reasons.MAX_RESOURCES_PER_CYCLE
    if c_rate == b:
        return b, reasons.GLOBAL_RATE_LIMIT
    if c_qrate == b:
        return b, reasons.QUEUE_RATE_LIMIT
    if c_cls == b:
        return b, reasons.queue_class_limit(shape.class_name)
    if c_inf == b:
        return b, reasons.NON_PREEMPTIBLE_OVERSHOOT
    return b, reasons.EXCESS_FLOW_BUDGET


def count_cost_within(
    state: CycleState, base: Sequence[int], req: Sequence[int], limit: float, m: int
) -> int:
    """Largest c <= m with cost(base + c * req) <= limit, each cost computed as the reference
    computes it (cost only grows with c, so a bisection finds it)."""
    cost = state.costs.cost

    def within(c: int) -> bool:
        return cost([b + c * r for b, r in zip(base, req, strict=True)]) <= limit

    if within(m):
        return m
    if not within(0):
        return 0
    lo, hi = 0, m
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if within(mid):
            lo = mid
        else:
            hi = mid
    return lo


def budget_charge_of(state: CycleState, shape: Shape, lifetime: float | None) -> int:
    """What one job of the shape and lifetime takes from the budget above fair share."""
    if shape.weighted_request is None:
        shape.weighted_request = weighted_request(
            state.dims, shape.request_tuple, state.config.excess_flow_weights
        )
    return budget_charge(shape.preemptible, lifetime, shape.weighted_request)


def budget_plan(
    state: CycleState, q: int, shape: Shape, lifetime: float | None, m: int
) -> BudgetPlan | None:
    """For a run of ``m`` identical jobs that charge the budget: how many of them keep the
    queue at or below its fair share (those take nothing; the rest each take the charge),
    and the charge. None when the run takes nothing from the budget."""
    if state.limits.budget is None:
        return None
    charge = budget_charge_of(state, shape, lifetime)
    if charge == 0:
        return None
    queues = state.queues
    fitting = count_cost_within(
        state, queues.allocation[q], shape.request_tuple, queues.fair_share[q], m
    )
    return fitting, charge


def gang_limit(state: CycleState, q: int, item: Item) -> str | None:
    """Non-preemptible overshoot, then the excess-flow budget, for a queued gang as a whole."""
    limits, records = state.limits, state.jobs.records
    facts, shape_of = state.shapes.facts, state.jobs.shape
    if limits.infinite_limit is not None:
        assert limits.infinite_allocation is not None
        extra: list[int] | None = None
        for i in item.members:
            shape = facts[shape_of[i]]
            if infinite_lifetime(shape.preemptible, records[i].lifetime):
                start = extra or [0] * len(shape.request_tuple)
                extra = [a + b for a, b in zip(start, shape.request_tuple, strict=True)]
        if extra is not None:
            have = [a + b for a, b in zip(limits.infinite_allocation[q], extra, strict=True)]
            if state.costs.cost(have) > limits.infinite_limit[q]:
                return reasons.NON_PREEMPTIBLE_OVERSHOOT
    if limits.budget is not None:
        charges = gang_charges(state, q, item)
        if charges and limits.budget_used[q] + sum(charges.values()) > limits.budget:
            return reasons.EXCESS_FLOW_BUDGET
    return None


def gang_charges(state: CycleState, q: int, item: Item) -> dict[int, int]:
    """What each member takes from the budget if placed: nothing unless the queue's cost with
    the whole gang is above its fair share (decided before placing)."""
    if state.limits.budget is None:
        return {}
    queues = state.queues
    alloc = [a + b for a, b in zip(queues.allocation[q], item.total, strict=True)]
    if not state.costs.cost(alloc) > queues.fair_share[q]:
        return {}
    facts, shape_of, records = state.shapes.facts, state.jobs.shape, state.jobs.records
    out = {}
    for i in item.members:
        charge = budget_charge_of(state, facts[shape_of[i]], records[i].lifetime)
        if charge:
            out[i] = charge
    return out


def take_charges(state: CycleState, q: int, rows: list[int], charge: int | dict[int, int]) -> None:
    """Placed jobs take their charge (one for all, or per row) from the queue's budget."""
    limits, ids = state.limits, state.jobs.ids
    for i in rows:
        c = charge if isinstance(charge, int) else charge.get(i, 0)
        if c:
            limits.budget_used[q] += c
            state.result.excess_flow[ids[i]] = c


def _count_within(have: int, step: int, limit: float, m: int) -> int:
    """Largest c <= m with have + c * step <= limit, compared exactly like Python does."""
    if step == 0:
        return m if have <= limit else 0
    room = Fraction(limit) - have
    if room < 0:
        return 0
    return min(m, int(room // step))
