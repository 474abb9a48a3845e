"""Limits (SEMANTICS.md, Rate limits and Placing): per-cycle limits, rate limits and
per-queue class caps, checked for a gang as a whole or counted for a run of identical jobs.

When several limits stop a run, the reason is the first that fails in this order: jobs per
cycle, fraction per cycle, global rate, queue rate, class cap.
"""

from __future__ import annotations

from fractions import Fraction

from .. import reasons
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


def run_limits(st: CycleState, q: int, sh: Shape, m: int) -> tuple[int, str | None]:
    """How many of ``m`` identical queued jobs the limits let through, and the reason that
    stops the rest (None when all pass)."""
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
    b = min(c_jobs, c_res, c_rate, c_qrate, c_cls, m)
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
    return b, reasons.queue_class_limit(sh.pc)


def _count_within(have: int, step: int, limit: float, m: int) -> int:
    """Largest c <= m with have + c * step <= limit, compared exactly like Python does."""
    if step == 0:
        return m if have <= limit else 0
    room = Fraction(limit) - have
    if room < 0:
        return 0
    return min(m, int(room // step))
