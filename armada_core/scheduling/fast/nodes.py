"""Placing queued jobs (SEMANTICS.md, Placing): static constraints, then each job at the first
stage that fits: no displacement, fair share (evicted jobs give way), urgency.

Identical jobs are placed by filling the best-fit node until full, then the next: for
identical requests that equals placing them one by one. Displacing nothing uses the sorted
free-space index (``NodeDb.best_free``); a long run uses one vectorised fill instead.
"""

from __future__ import annotations

import numpy as np

from .. import reasons
from ..constraints import node_admits, taints_tolerated
from ..model import Job
from ..nodedb import INF, best_fit_order, fit_counts
from .limits import budget_plan, run_limits, take_charges
from .outcomes import commit_run, fail_rows
from .queues import Repeat, wins
from .state import CycleState, Shape
from .victims import by_victims, preempt_for, urgency

#: Runs at least this long are placed with one vectorised fill.
_BULK = 256


def static(st: CycleState, sh: Shape, s: int) -> None:
    """Static constraints of shape ``s``: candidate nodes (not cordoned, taints tolerated,
    selector, affinity, not avoided), the index partitions to scan, and a reason when no
    node can ever take it."""
    requests, selector, tolerations, affinity, avoid, pc = st.shape_keys[s]
    parts = [p for p, (taints, _) in st.part_info.items() if taints_tolerated(taints, tolerations)]
    base = np.isin(st.db.partition, np.array(parts, dtype=np.int64)) & st.db.indexed
    constrained = bool(selector) or bool(affinity) or avoid is not None
    if constrained:
        probe = Job(
            "",
            "",
            pc,
            requests,
            node_selector=dict(selector),
            tolerations=tolerations,
            affinity=affinity,
            avoid_node=avoid,
        )
        mask = base.copy()
        for i in np.flatnonzero(base).tolist():
            mask[i] = node_admits(probe, st.nodes[i])
    else:
        mask = base
    sh.constrained = constrained
    sh.mask = mask if constrained else None
    sh.cands = np.flatnonzero(mask)
    needed = {d for d, v in zip(st.dims, sh.req_t, strict=True) if v > 0}
    sh.parts = [p for p in parts if needed <= st.part_info[p][1]]
    if len(sh.cands) == 0:
        sh.static_reason = reasons.NO_MATCHING_NODE
    elif not (st.cap[sh.cands] >= sh.req).all(axis=1).any():
        sh.static_reason = reasons.TOO_LARGE
    else:
        sh.static_reason = None


def queued_run(st: CycleState, q: int, neg_p: int, bound: tuple | None, pos: int) -> int:
    """Place the run of identical queued jobs at the queue's head, as many as the queue wins
    and the limits allow; returns how many items of the queue were decided."""
    end = int(st.seg_end[q][pos])
    rows = st.seq[q][pos:end]
    m = len(rows)
    s = int(st.shape_of_job[rows[0]])
    sh = st.shapes[s]
    if sh.cands is None:
        static(st, sh, s)
    # With the lifetime limits on, a run's jobs share their lifetime (``order._cut_runs``).
    lifetime = None
    if st.infinite_limit is not None or st.budget is not None:
        lifetime = st.jobs[int(rows[0])].lifetime
    plan = budget_plan(st, q, sh, lifetime, m)
    c_lim, lim_reason = run_limits(st, q, sh, m, lifetime, plan)
    if c_lim == 0:
        fail_rows(st, rows, lim_reason)  # type: ignore[arg-type]
        return m
    if sh.fail is not None and sh.fail[0] == st.shrink_epoch:
        # Failures change nothing, so every job of the run passes the limits and fails.
        fail_rows(st, rows, sh.fail[1])
        return m
    k = max(1, wins(st, q, neg_p, bound, Repeat(sh.req, min(m, c_lim))))
    n_try = min(k, c_lim, m)
    placed, reason, stopped = place_identical(st, sh, rows[:n_try])
    p = len(placed)
    if p:
        commit_run(st, q, sh, rows[:p], placed)
        if plan is not None and p > plan[0]:
            # Jobs past the first ``plan[0]`` took the queue above its fair share.
            take_charges(st, q, rows[plan[0] : p].tolist(), plan[1])
    if stopped:
        # Either an urgency preemption changed other queues' costs, or placement paused
        # before one: re-evaluate every queue from here.
        st.rebuild = True
        return p
    if p < n_try:
        sh.fail = (st.shrink_epoch, reason)
        fail_rows(st, rows[p:], reason)  # type: ignore[arg-type]
        return m
    if n_try == m:
        return m
    if n_try == k:
        return p
    fail_rows(st, rows[p:], lim_reason)  # type: ignore[arg-type]
    return m


def place_identical(
    st: CycleState, sh: Shape, rows: np.ndarray
) -> tuple[list[int], str | None, bool]:
    """Place up to len(rows) identical jobs as the reference would one by one.

    Returns the nodes used (in order), the reason the rest failed, and whether placement
    stopped early because a displacement changed queue costs (the caller re-evaluates).
    """
    if sh.static_reason is not None:
        return [], sh.static_reason, False
    want = len(rows)
    db = st.db
    placed = _place_free(st, sh, want)
    if len(placed) < want and db.evicted and _place_evicted(st, sh, want, placed):
        return placed, None, True
    if len(placed) == want:
        return placed, None, False
    if placed:
        # Urgency victims are ordered by their queues' current cost, which must include
        # the jobs just placed: commit those first and come back for the rest.
        return placed, None, True
    chosen = urgency(st, sh, sh.cands)
    if chosen is None:
        return placed, no_room(st, sh), False
    preempt_for(st, sh, chosen[0], chosen[1])
    db.add_fixed(chosen[0], sh.req, INF)
    placed.append(chosen[0])
    return placed, None, True


def no_room(st: CycleState, sh: Shape) -> str:
    """Why a single job of the shape found no room: its matching nodes (the candidates, known
    since ``static``) and its request. Built once per shape, and only for a shape some job
    of which is left without room."""
    if sh.no_room is None:
        sh.no_room = reasons.no_room(len(sh.cands), st.dims, sh.req_t)
    return sh.no_room


def _place_free(st: CycleState, sh: Shape, want: int) -> list[int]:
    """Stage 1 for identical jobs: best fit with nothing displaced."""
    db = st.db
    placed: list[int] = []
    if sh.a_exhausted != db.grow_epoch and want >= _BULK and sh.mask is None:
        # Many identical jobs: one vectorised best-fit fill instead of index lookups.
        placed = _bulk_fill(st, sh, want)
        if len(placed) < want:
            sh.a_exhausted = db.grow_epoch
    if sh.a_exhausted != db.grow_epoch:
        while len(placed) < want:
            entry = db.best_free(sh.req_t, sh.parts, sh.mask, sh.memo)
            if entry is None:
                sh.a_exhausted = db.grow_epoch
                break
            n = entry[-1]
            c = _fit_count(entry, sh.req_t, want - len(placed))
            db.add_fixed(n, sh.req, INF, c, sh.req_t)
            placed.extend([n] * c)
    return placed


def _bulk_fill(st: CycleState, sh: Shape, want: int) -> list[int]:
    db = st.db
    cands = sh.cands
    free = db.free_all(cands)
    counts = fit_counts(free, sh.req, want)
    ok = np.flatnonzero(counts > 0)
    if not len(ok):
        return []
    order = ok[best_fit_order(free[ok], cands[ok])]
    taken = np.minimum(np.cumsum(counts[order]), want)
    used = np.diff(np.concatenate(([0], taken)))
    keep = used > 0
    nodes, used = cands[order][keep], used[keep]
    db.add_fixed_many(nodes, used, sh.req)
    return np.repeat(nodes, used).tolist()


def _place_evicted(st: CycleState, sh: Shape, want: int, placed: list[int]) -> bool:
    """Stage 2 for identical jobs, appending to ``placed``; True when it displaced evicted
    jobs of a lower class (one job at a time: the caller re-evaluates after it)."""
    db = st.db
    for level in sorted(db.evicted):
        if level < sh.pcp:
            # Displacing less urgent evicted jobs: one job at a time, on the node chosen by
            # its victims, whose order depends on the queues' usage.
            n = by_victims(st, sh, sh.cands, level, evicted=True)
            if n is None:
                continue
            db.add_fixed(n, sh.req, INF)
            placed.append(n)
            return True
        placed.extend(fill_level(st, sh, want - len(placed), level))
        if len(placed) == want:
            break
    return False


def fill_level(st: CycleState, sh: Shape, want: int, level: float) -> list[int]:
    """Fill best-fit nodes at one evicted level; returns the nodes used, in order."""
    db = st.db
    cands = sh.cands
    free = db.free_evicted_level(cands, level)
    counts = fit_counts(free, sh.req, want)
    ok = counts > 0
    if not ok.any():
        return []
    sub = cands[ok]
    order = best_fit_order(free[ok], sub)
    out: list[int] = []
    for n, c in zip(sub[order].tolist(), counts[ok][order].tolist(), strict=True):
        c = min(c, want - len(out))
        db.add_fixed(n, sh.req, INF, c)
        out.extend([n] * c)
        if len(out) == want:
            break
    return out


def _fit_count(entry: tuple[int, ...], req: tuple[int, ...], limit: int) -> int:
    """How many copies of ``req`` fit in an index entry's free resources (up to ``limit``)."""
    count = limit
    for f, r in zip(entry, req, strict=False):
        if r > 0:
            count = min(count, f // r)
        elif f < 0:
            return 0
    return max(count, 0)


def select(
    st: CycleState, i: int, allowed: np.ndarray | None
) -> tuple[int, tuple, float | None] | str:
    """The node for job ``i`` (restricted to ``allowed`` nodes when given): the node, the
    stage's rank (stage, level), and the hold level of an urgency preemption, or a reason."""
    s = int(st.shape_of_job[i])
    sh = st.shapes[s]
    if sh.cands is None:
        static(st, sh, s)
    cands = sh.cands
    if allowed is not None:
        cands = cands[allowed[cands]]
        if len(cands) == 0:
            return reasons.NO_MATCHING_NODE
        if not (st.cap[cands] >= sh.req).all(axis=1).any():
            return reasons.TOO_LARGE
    elif sh.static_reason is not None:
        return sh.static_reason
    db = st.db
    if allowed is None:
        entry = db.best_free(sh.req_t, sh.parts, sh.mask, sh.memo)
        if entry is not None:
            return entry[-1], (0, 0.0), None
    else:
        free = db.free_all(cands)
        ok = (free >= sh.req).all(axis=1)
        if ok.any():
            return int(cands[ok][best_fit_order(free[ok], cands[ok])[0]]), (0, 0.0), None
    for level in sorted(db.evicted):
        if level < sh.pcp:
            found = by_victims(st, sh, cands, level, evicted=True)
            if found is not None:
                return found, (1, float(level)), None
            continue
        free = db.free_evicted_level(cands, level)
        ok = (free >= sh.req).all(axis=1)
        if ok.any():
            n = int(cands[ok][best_fit_order(free[ok], cands[ok])[0]])
            return n, (1, float(level)), None
    chosen = urgency(st, sh, cands)
    if chosen is not None:
        return chosen[0], (2, float(chosen[1])), chosen[1]
    return reasons.NO_CAPACITY


def place_one(st: CycleState, q: int, i: int, allowed: np.ndarray | None) -> tuple | str:
    """Place one queued job at its first stage that fits; its stage rank, or a reason."""
    chosen = select(st, i, allowed)
    if isinstance(chosen, str):
        return chosen
    n, rank, level = chosen
    sh = st.shapes[st.shape_of_job[i]]
    if level is not None:
        preempt_for(st, sh, n, level)
        st.rebuild = True
    st.db.add_fixed(n, sh.req, INF)
    commit_run(st, q, sh, np.array([i]), [n])
    return rank
