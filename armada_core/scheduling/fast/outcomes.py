"""Outcomes (SEMANTICS.md): recording decisions in the ``SchedulingResult`` as they are made,
and completing it at the end of the cycle."""

from __future__ import annotations

from operator import itemgetter

import numpy as np

from ..fairness import infinite_lifetime
from ..model import SchedulingResult
from .state import CycleState, Shape


def fail_rows(st: CycleState, rows: np.ndarray, reason: str) -> None:
    """Queued jobs left queued this cycle, all for one reason."""
    if len(rows) == 1:
        st.result.unscheduled[st.ids[int(rows[0])]] = reason
    elif len(rows):
        st.result.unscheduled.add_many(itemgetter(*rows.tolist())(st.ids), reason)


def commit_run(st: CycleState, q: int, sh: Shape, rows: np.ndarray, placed: list[int]) -> None:
    """Queued jobs of one shape placed on ``placed`` (node per job): record them, and charge
    their queue (cost, class, usage) and the cycle's limits (per-cycle and rate)."""
    p = len(placed)
    ids = st.ids
    if p == 1:
        st.result.scheduled[ids[int(rows[0])]] = st.nodes[placed[0]].id
    else:
        node_ids = [st.nodes[n].id for n in placed]
        st.result.scheduled.update(zip((ids[i] for i in rows.tolist()), node_ids, strict=True))
    if st.journal is not None:
        st.journal.extend(("sched", ids[i]) for i in rows.tolist())
    alloc = st.alloc[q]
    new_total = st.new_total
    by_class = st.alloc_class.get((q, sh.pc))
    if by_class is None:
        by_class = st.alloc_class[(q, sh.pc)] = [0] * len(alloc)
    usage = st.usage[q]
    for d, v in enumerate(sh.req_t):
        if v:
            v *= p
            alloc[d] += v
            new_total[d] += v
            by_class[d] += v
            usage[d] += v
    st.new_count += p
    st.new_by_q[q] += p
    if st.alloc_infinite is not None and not sh.preemptible:
        jobs = st.jobs
        n_inf = sum(1 for i in rows.tolist() if infinite_lifetime(False, jobs[i].lifetime))
        if n_inf:
            st.alloc_infinite[q] = [
                a + n_inf * b for a, b in zip(st.alloc_infinite[q], sh.req_t, strict=True)
            ]


def finish(st: CycleState) -> SchedulingResult:
    """Preempted jobs, rate-limit tokens taken, and every queue's cost once the decisions
    are applied (the next cycle's decayed usage)."""
    result = st.result
    ids = st.ids
    result.preempted = {ids[i] for i in st.preempted}
    result.rate_consumed = {st.qnames[k]: n for k, n in enumerate(st.new_by_q) if n}
    for q in st.queues:
        k = st.qnames.index(q)
        result.queue_costs[q] = st.costs.cost(st.alloc[k])
    return result
