"""Fairness (SEMANTICS.md): fair share, protection, decayed usage, and the queue keys of
progressive filling.

Keys repeat ``CostModel.cost`` with the same floating-point operations (element-wise in numpy
when many candidates are compared at once), so queues compare exactly as in the reference.
"""

from __future__ import annotations

from operator import attrgetter

import numpy as np

from ..fairness import (
    budget_units,
    fair_shares,
    infinite_lifetime,
    overshoot_limits,
    protected_queues,
    usage_offsets,
)
from .state import CycleState, pick, sum_by

#: Candidate prefixes a queue's first win check looks at; the window grows fourfold after.
_PROBE = 64


def fair_share(st: CycleState) -> np.ndarray:
    """Weights, decayed-usage offsets and usage of the active queues; returns which queues
    are protected from eviction (one flag per queue index)."""
    qidx, shape, req = st.qidx, st.shape_of_job, st.req
    held = st.running_rows[st.accounted[st.running_rows]]
    active_q = np.unique(np.concatenate([qidx[st.queued], qidx[held]])).tolist()
    names = [st.qnames[q] for q in active_q]
    weights = {name: st.queues[name].weight for name in names}
    nq = len(st.qnames)
    start = sum_by(qidx[held], shape[held], nq, req)
    demand = start + sum_by(qidx[st.queued], shape[st.queued], nq, req)
    shares = {
        name: st.costs.cost(start[q].tolist()) for q, name in zip(active_q, names, strict=True)
    }
    demands = {
        name: st.costs.cost(demand[q].tolist()) for q, name in zip(active_q, names, strict=True)
    }
    protected = protected_queues(shares, weights, demands, st.cfg.protected_fraction)
    offsets = usage_offsets(
        {name: st.queues[name].decayed_usage for name in names},
        shares,
        st.snap.usage_elapsed,
        st.cfg.usage_half_life,
    )
    st.q_weight = [weights.get(n, 1.0) for n in st.qnames]
    st.q_offset = [offsets.get(n, 0.0) for n in st.qnames]
    st.usage = start.tolist()
    fair = fair_shares(weights) if weights else {}
    st.fair = [fair.get(n, 0.0) for n in st.qnames]
    overshoot = st.cfg.non_preemptible_overshoot
    if overshoot is not None:
        limits = overshoot_limits(weights, overshoot) if weights else {}
        st.infinite_limit = [limits.get(n, 0.0) for n in st.qnames]
    st.budget = budget_units(st.cfg.excess_flow_budget)
    st.budget_used = [0] * nq
    if st.budget is not None and len(held):
        # What running jobs hold of the budget: few jobs carry a charge, so plain Python.
        charges = map(attrgetter("excess_flow"), pick(st.jobs, held))
        for q, charge in zip(qidx[held].tolist(), charges, strict=True):
            if charge:
                st.budget_used[q] += charge
    return np.array([n in protected for n in st.qnames], dtype=bool)


def charge_holders(st: CycleState, holding: np.ndarray) -> None:
    """Each queue's allocation, in total and per class, from the running jobs that hold
    their space (evicted jobs are charged again as they come back)."""
    qidx, shape, req = st.qidx, st.shape_of_job, st.req
    nq, nd = len(st.qnames), len(st.dims)
    acc = holding[st.accounted[holding]]
    st.alloc = sum_by(qidx[acc], shape[acc], nq, req).tolist()
    class_rank = {n: i for i, n in enumerate(st.class_names)}
    shape_class = np.array([class_rank.get(sh.pc, -1) for sh in st.shapes], dtype=np.int64)
    nc = max(len(st.class_names), 1)
    by_class = sum_by(qidx[acc] * nc + shape_class[shape[acc]], shape[acc], nq * nc, req)
    by_class = by_class.reshape(nq, nc, nd)
    st.alloc_class = {}
    for q, c in zip(*np.nonzero(by_class.any(axis=2)), strict=True):
        st.alloc_class[(int(q), st.class_names[int(c)])] = by_class[q, c].tolist()
    if st.infinite_limit is not None:
        # Jobs of infinite lifetime are never evicted: all of them are among the holders.
        fixed = np.array([not sh.preemptible for sh in st.shapes], dtype=bool)
        cand = acc[fixed[shape[acc]]]
        rows = [
            i
            for i, j in zip(cand.tolist(), pick(st.jobs, cand), strict=True)
            if infinite_lifetime(False, j.lifetime)
        ]
        inf_rows = np.array(rows, dtype=np.int64)
        st.alloc_infinite = sum_by(qidx[inf_rows], shape[inf_rows], nq, req).tolist()


def add_class(st: CycleState, q: int, pc: str, vec: list[int], sign: int = 1) -> None:
    """Charge (or refund) a queue's allocation in one class."""
    key = (q, pc)
    cur = st.alloc_class.get(key)
    if cur is None:
        cur = [0] * len(vec)
    st.alloc_class[key] = [a + sign * b for a, b in zip(cur, vec, strict=True)]


def use(st: CycleState, q: int, req: tuple[int, ...], sign: int) -> None:
    """Change what a queue holds or may get back (its fraction of fair share)."""
    st.usage[q] = [a + sign * b for a, b in zip(st.usage[q], req, strict=True)]


def fraction(st: CycleState, q: int) -> float:
    """The queue's fraction of its fair share, up to a common factor (see reference)."""
    return (st.costs.cost(st.usage[q]) + st.q_offset[q]) / st.q_weight[q]


def key(st: CycleState, q: int, extra: list[int] | np.ndarray | tuple[int, ...] | None) -> float:
    """The queue's key after adding ``extra``: ``(cost + decay) / weight``."""
    alloc = st.alloc[q]
    if extra is not None:
        alloc = [a + int(b) for a, b in zip(alloc, extra, strict=True)]
    return (st.costs.cost(alloc) + st.q_offset[q]) / st.q_weight[q]


def keys(st: CycleState, q: int, cum: np.ndarray) -> np.ndarray:
    """Keys after adding each prefix (rows of ``cum``), with the reference's float ops."""
    alloc = np.asarray(st.alloc[q], dtype=np.int64) + cum
    if not st.cost_cols.any():
        costs = np.zeros(len(cum))
    else:
        shares = alloc[:, st.cost_cols].astype(np.float64) * st.cost_mult / st.cost_tot
        costs = np.maximum(shares.max(axis=1), 0.0)
    return (costs + st.q_offset[q]) / st.q_weight[q]


def head(st: CycleState, q: int) -> tuple | None:
    """The queue's heap entry: (-class priority of its head, key with the head added, q, q)."""
    pos = st.pos[q]
    seq = st.seq[q]
    if pos >= len(seq):
        return None
    code = int(seq[pos])
    if code < 0:
        item = st.complex[-1 - code]
        return (-item.pcp, key(st, q, item.total), q, q)
    sh = st.shapes[st.shape_of_job[code]]
    return (-sh.pcp, key(st, q, sh.req_t), q, q)


def wins(st: CycleState, q: int, neg_p: int, bound: tuple | None, reqs) -> int:
    """How many of the next items (requests ``reqs``) q takes before another queue wins.

    The other queues' keys do not move meanwhile, so this is one vectorised comparison of
    q's growing key against the best other head (``bound``).
    """
    m = len(reqs)
    if bound is None or neg_p < bound[0]:
        return m
    bkey, brank = bound[1], bound[2]
    if m >= 2:
        # Most pops in a busy cluster win once: settle that without numpy.
        two = [int(x) for x in reqs[0] + reqs[1]]
        k = key(st, q, two)
        if not (k < bkey or (k == bkey and q < brank)):
            return 1
    done = 0
    base = np.zeros(st.db.d, dtype=np.int64)
    step = _PROBE
    while done < m:
        chunk = reqs[done : done + step]
        cum = np.cumsum(chunk, axis=0) + base
        won = keys(st, q, cum)
        win = (won < bkey) | ((won == bkey) & (q < brank))
        lost = np.flatnonzero(~win)
        if len(lost):
            return done + int(lost[0])
        done += len(chunk)
        base = cum[-1]
        step *= 4
    return m


class Repeat:
    """The same request ``count`` times, without materialising it unless sliced."""

    __slots__ = ("count", "req")

    def __init__(self, req: np.ndarray, count: int):
        self.req, self.count = req, count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, key):
        if isinstance(key, slice):
            start, stop, _ = key.indices(self.count)
            return np.broadcast_to(self.req, (max(0, stop - start), len(self.req)))
        return self.req
