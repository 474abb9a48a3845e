"""Limits (SEMANTICS.md, Rate limits and Placing): per-cycle limits, rate limits and
per-queue class caps, checked for a gang as a whole or counted for a run of identical jobs.

When several limits stop a run, the reason is the first that fails in this order: jobs per
cycle, fraction per cycle, global rate, queue rate, class cap, non-preemptible overshoot,
excess-flow budget. A run never mixes lifetimes when the last two are on (``order``), so its
jobs are all of infinite lifetime, or all charge the same to the budget.
"""

from __future__ import annotations

from fractions import Fraction

from .. import reasons
from ..fairness import budget_charge, infinite_lifetime, weighted_request
from ..ratelimit import allowance
from .state import CycleState, Item, Shape


def allowances(st: CycleState) -> None:
    """Nothing new scheduled yet; the rate limits' allowances for this cycle."""
    cfg, snap = st.cfg, st.snap
    st.new_total = [0] * len(st.dims)
    st.new_count = 0
    st.new_by_q = [0] * len(st.qnames)
    st.rate_global = allowance(cfg.scheduling_rate, cfg.scheduling_burst, snap.rate_tokens)
    st.q_rate = [
        allowance(
            cfg.queue_scheduling_rate,
            cfg.queue_scheduling_burst,
            snap.queue_rate_tokens.get(name),
        )
        for name in st.qnames
    ]


def cycle_limit(st: CycleState, q: int, item: Item) -> str | None:
    """Per-cycle limits, then the rate limits: a gang must fit whole in each."""
    cfg = st.cfg
    size = len(item.members)
    if cfg.max_jobs_per_cycle is not None and st.new_count + size > cfg.max_jobs_per_cycle:
        return reasons.MAX_JOBS_PER_CYCLE
    for d, name in enumerate(st.dims):
        if (
            name in cfg.max_fraction_per_cycle
            and st.new_total[d] + item.total[d] > cfg.max_fraction_per_cycle[name] * st.totals[d]
        ):
            return reasons.MAX_RESOURCES_PER_CYCLE
    if st.rate_global is not None and st.new_count + size > st.rate_global:
        return reasons.GLOBAL_RATE_LIMIT
    own = st.q_rate[q]
    if own is not None and st.new_by_q[q] + size > own:
        return reasons.QUEUE_RATE_LIMIT
    return None


def class_limit(st: CycleState, q: int, members: list[int]) -> str | None:
    """The queue's per-class caps, with all of ``members`` added."""
    nd = len(st.dims)
    by_class: dict[str, list[int]] = {}
    for i in members:
        sh = st.shapes[st.shape_of_job[i]]
        cur = by_class.get(sh.pc, [0] * nd)
        by_class[sh.pc] = [a + b for a, b in zip(cur, sh.req_t, strict=True)]
    for pc_name in sorted(by_class):
        limits = st.pcs[pc_name].max_fraction_per_queue
        if not limits:
            continue
        base = st.alloc_class.get((q, pc_name), [0] * nd)
        for d, name in enumerate(st.dims):
            if name in limits and base[d] + by_class[pc_name][d] > limits[name] * st.totals[d]:
                return reasons.queue_class_limit(pc_name)
    return None


def run_limits(
    st: CycleState,
    q: int,
    sh: Shape,
    m: int,
    lifetime: float | None,
    plan: tuple[int, int] | None,
) -> tuple[int, str | None]:
    """How many of ``m`` identical queued jobs (of one ``lifetime``; ``plan`` from
    ``budget_plan``) the limits let through, and the reason that stops the rest (None when
    all pass)."""
    cfg = st.cfg
    c_jobs = m
    if cfg.max_jobs_per_cycle is not None:
        c_jobs = max(0, min(m, cfg.max_jobs_per_cycle - st.new_count))
    c_res = m
    for d, name in enumerate(st.dims):
        if name in cfg.max_fraction_per_cycle:
            limit = cfg.max_fraction_per_cycle[name] * st.totals[d]
            c_res = min(c_res, _count_within(st.new_total[d], sh.req_t[d], limit, m))
    c_cls = m
    limits = st.pcs[sh.pc].max_fraction_per_queue
    if limits:
        base = st.alloc_class.get((q, sh.pc), [0] * len(st.dims))
        for d, name in enumerate(st.dims):
            if name in limits:
                limit = limits[name] * st.totals[d]
                c_cls = min(c_cls, _count_within(base[d], sh.req_t[d], limit, m))
    c_rate = m
    if st.rate_global is not None:
        c_rate = max(0, min(m, st.rate_global - st.new_count))
    c_qrate = m
    own = st.q_rate[q]
    if own is not None:
        c_qrate = max(0, min(m, own - st.new_by_q[q]))
    c_inf = m
    if st.infinite_limit is not None and infinite_lifetime(sh.preemptible, lifetime):
        assert st.alloc_infinite is not None
        c_inf = count_cost_within(st, st.alloc_infinite[q], sh.req_t, st.infinite_limit[q], m)
    c_budget = m
    if plan is not None:
        assert st.budget is not None
        below, charge = plan
        left = st.budget - st.budget_used[q]
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
        return b, reasons.queue_class_limit(sh.pc)
    if c_inf == b:
        return b, reasons.NON_PREEMPTIBLE_OVERSHOOT
    return b, reasons.EXCESS_FLOW_BUDGET


def count_cost_within(
    st: CycleState, base: list[int], req: tuple[int, ...], limit: float, m: int
) -> int:
    """Largest c <= m with cost(base + c * req) <= limit, each cost computed as the reference
    computes it (cost only grows with c, so a bisection finds it)."""
    cost = st.costs.cost

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


def charge_of(st: CycleState, sh: Shape, lifetime: float | None) -> int:
    """What one job of the shape and lifetime takes from the budget above fair share."""
    if sh.weighted is None:
        sh.weighted = weighted_request(st.dims, sh.req_t, st.cfg.excess_flow_weights)
    return budget_charge(sh.preemptible, lifetime, sh.weighted)


def budget_plan(
    st: CycleState, q: int, sh: Shape, lifetime: float | None, m: int
) -> tuple[int, int] | None:
    """For a run of ``m`` identical jobs that charge the budget: how many of them keep the
    queue at or below its fair share (those take nothing; the rest each take the charge),
    and the charge. None when the run takes nothing from the budget."""
    if st.budget is None:
        return None
    charge = charge_of(st, sh, lifetime)
    if charge == 0:
        return None
    return count_cost_within(st, st.alloc[q], sh.req_t, st.fair[q], m), charge


def gang_limit(st: CycleState, q: int, item: Item) -> str | None:
    """Non-preemptible overshoot, then the excess-flow budget, for a queued gang as a whole."""
    jobs, members = st.jobs, item.members
    if st.infinite_limit is not None:
        assert st.alloc_infinite is not None
        extra: list[int] | None = None
        for i in members:
            sh = st.shapes[st.shape_of_job[i]]
            if infinite_lifetime(sh.preemptible, jobs[i].lifetime):
                extra = [a + b for a, b in zip(extra or [0] * len(sh.req_t), sh.req_t, strict=True)]
        if extra is not None:
            have = [a + b for a, b in zip(st.alloc_infinite[q], extra, strict=True)]
            if st.costs.cost(have) > st.infinite_limit[q]:
                return reasons.NON_PREEMPTIBLE_OVERSHOOT
    if st.budget is not None:
        charges = gang_charges(st, q, item)
        if charges and st.budget_used[q] + sum(charges.values()) > st.budget:
            return reasons.EXCESS_FLOW_BUDGET
    return None


def gang_charges(st: CycleState, q: int, item: Item) -> dict[int, int]:
    """What each member takes from the budget if placed: nothing unless the queue's cost with
    the whole gang is above its fair share (decided before placing)."""
    if st.budget is None:
        return {}
    alloc = [a + b for a, b in zip(st.alloc[q], item.total, strict=True)]
    if not st.costs.cost(alloc) > st.fair[q]:
        return {}
    out = {}
    for i in item.members:
        charge = charge_of(st, st.shapes[st.shape_of_job[i]], st.jobs[i].lifetime)
        if charge:
            out[i] = charge
    return out


def take_charges(st: CycleState, q: int, rows: list[int], charge: int | dict[int, int]) -> None:
    """Placed jobs take their charge (one for all, or per row) from the queue's budget."""
    for i in rows:
        c = charge if isinstance(charge, int) else charge.get(i, 0)
        if c:
            st.budget_used[q] += c
            st.result.excess_flow[st.ids[i]] = c


def _count_within(have: int, step: int, limit: float, m: int) -> int:
    """Largest c <= m with have + c * step <= limit, compared exactly like Python does."""
    if step == 0:
        return m if have <= limit else 0
    room = Fraction(limit) - have
    if room < 0:
        return 0
    return min(m, int(room // step))
