"""Placing queued jobs (SEMANTICS.md, Placing): static constraints, then each job at the first
stage that fits: no displacement, fair share (evicted jobs give way), urgency.

Identical jobs are placed by filling the best-fit node until full, then the next: for
identical requests that equals placing them one by one. Displacing nothing uses the sorted
free-space index (``FreeSpace.best_fit``); a long run uses one vectorised fill instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import reasons
from ..constraints import node_admits, taints_tolerated
from ..model import Job
from .free_space import INF, BoolArray, IntArray, best_fit_order, fit_counts
from .limits import budget_plan, run_limits, take_charges
from .outcomes import leave_queued, record_placed
from .queues import RepeatedRequest, consecutive_wins
from .state import CycleState, HeapEntry, Rank, Shape, StaticFit
from .victims import by_victims, evicted_give_way, preempt_for, urgency_node

#: Runs at least this long are placed with one vectorised fill.
_BULK = 256


def static_constraints(state: CycleState, shape: Shape, s: int) -> IntArray:
    """Static constraints of shape ``s``, computed once (on first use): candidate nodes
    (not cordoned, taints tolerated, selector, affinity, not avoided), the index partitions
    to scan, and a reason when no node can ever take it. Returns the candidates. They
    depend on the nodes alone, so later cycles over the same nodes (``NodeIndex``) take
    them from the index: a cycle of a few new jobs among thousands running computed each
    shape's anew."""
    if shape.candidates is not None:
        return shape.candidates
    key = state.shapes.keys[s]
    kept = state.nodes.index.static
    fit = kept.get(key)
    if fit is None:
        if (len(kept) + 1) * len(state.nodes.records) > _STATIC_KEPT:
            kept.clear()
        fit = kept[key] = _static_fit(state, shape, key)
    shape.candidates = fit.candidates
    shape.node_mask = fit.node_mask
    shape.constrained = fit.constrained
    shape.partitions = fit.partitions
    shape.static_reason = fit.static_reason
    return fit.candidates


# Shapes times nodes whose static constraints a node index keeps: at most about 40 MB of
# candidates and masks (4,000 shapes of 1,000 nodes, 400 of 10,000). A shape that avoids a
# node is a shape of its own, so a cluster's retried jobs make many.
_STATIC_KEPT = 4_000_000


def _static_fit(state: CycleState, shape: Shape, key: tuple[Any, ...]) -> StaticFit:
    nodes = state.nodes
    requests, selector, tolerations, affinity, avoid, pc = key
    parts = [
        p for p, (taints, _) in nodes.partitions.items() if taints_tolerated(taints, tolerations)
    ]
    base = np.isin(nodes.space.partition, np.array(parts, dtype=np.int64)) & nodes.space.indexed
    constrained = bool(selector) or bool(affinity) or avoid is not None
    mask = None
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
            mask[i] = node_admits(probe, nodes.records[i])
        mask.flags.writeable = False
    candidates = np.flatnonzero(base if mask is None else mask)
    candidates.flags.writeable = False
    needed = {d for d, v in zip(state.dims, shape.request_tuple, strict=True) if v > 0}
    partitions = [p for p in parts if needed <= nodes.partitions[p][1]]
    reason: str | None = None
    if len(candidates) == 0:
        reason = reasons.NO_MATCHING_NODE
    elif not (nodes.capacity[candidates] >= shape.request).all(axis=1).any():
        reason = reasons.TOO_LARGE
    return StaticFit(candidates, mask, constrained, partitions, reason)


def queued_run(
    state: CycleState, q: int, neg_priority: int, bound: HeapEntry | None, pos: int
) -> int:
    """Place the run of identical queued jobs at the queue's head, as many as the queue wins
    and the limits allow; returns how many items of the queue were decided."""
    order, jobs, limits = state.order, state.jobs, state.limits
    end = int(order.run_end[q][pos])
    rows = order.sequence[q][pos:end]
    m = len(rows)
    s = int(jobs.shape[rows[0]])
    shape = state.shapes.facts[s]
    if shape.candidates is None:
        static_constraints(state, shape, s)
    # With the lifetime limits on, a run's jobs share their lifetime (``order._cut_runs``).
    lifetime = None
    if limits.infinite_limit is not None or limits.budget is not None:
        lifetime = jobs.records[int(rows[0])].lifetime
    plan = budget_plan(state, q, shape, lifetime, m)
    allowed, limit_reason = run_limits(state, q, shape, m, lifetime, plan)
    if allowed == 0:
        assert limit_reason is not None
        leave_queued(state, rows, limit_reason)
        return m
    failed_at = shape.failed_at
    if failed_at is not None and failed_at[0] == state.placing.space_epoch:
        # Failures change nothing, so every job of the run passes the limits and fails.
        leave_queued(state, rows, failed_at[1])
        return m
    repeated = RepeatedRequest(shape.request, min(m, allowed), shape.request_tuple)
    k = max(1, consecutive_wins(state, q, neg_priority, bound, repeated))
    n_try = min(k, allowed, m)
    placed, reason, stopped = place_identical(state, shape, rows[:n_try])
    p = len(placed)
    if p:
        record_placed(state, q, shape, rows[:p], placed)
        if plan is not None and p > plan[0]:
            # Jobs past the first ``plan[0]`` took the queue above its fair share.
            take_charges(state, q, rows[plan[0] : p].tolist(), plan[1])
    if stopped:
        # Either an urgency preemption changed other queues' costs, or placement paused
        # before one: re-evaluate every queue from here.
        state.placing.heap_stale = True
        return p
    if p < n_try:
        assert reason is not None  # not stopped, so the rest found no room
        shape.failed_at = (state.placing.space_epoch, reason)
        leave_queued(state, rows[p:], reason)
        return m
    if n_try == m:
        return m
    if n_try == k:
        if p == 1 and repeated.key_of_two is not None:
            # The next head is this run's next job, on top of the one just placed.
            state.placing.next_entry = (neg_priority, repeated.key_of_two, q, q)
        return p
    assert limit_reason is not None
    leave_queued(state, rows[p:], limit_reason)
    return m


def place_identical(
    state: CycleState, shape: Shape, rows: IntArray
) -> tuple[list[int], str | None, bool]:
    """Place up to len(rows) identical jobs as the reference would one by one.

    Returns the nodes used (in order), the reason the rest failed, and whether placement
    stopped early because a displacement changed queue costs (the caller re-evaluates).
    """
    if shape.static_reason is not None:
        return [], shape.static_reason, False
    want = len(rows)
    space = state.nodes.space
    placed = _place_without_displacing(state, shape, want)
    if len(placed) < want and space.evicted and _place_over_evicted(state, shape, want, placed):
        return placed, None, True
    if len(placed) == want:
        return placed, None, False
    if placed:
        # Urgency victims are ordered by their queues' current cost, which must include
        # the jobs just placed: commit those first and come back for the rest.
        return placed, None, True
    chosen = urgency_node(state, shape, shape.static_candidates())
    if chosen is None:
        return placed, no_room(state, shape), False
    preempt_for(state, shape, chosen[0], chosen[1])
    space.place(chosen[0], shape.request, INF)
    placed.append(chosen[0])
    return placed, None, True


def no_room(state: CycleState, shape: Shape) -> str:
    """Why a single job of the shape found no room: its matching nodes (the candidates, known
    since ``static_constraints``) and its request. Built once per shape, and only for a shape
    some job of which is left without room."""
    if shape.no_room_reason is None:
        candidates = shape.static_candidates()
        shape.no_room_reason = reasons.no_room(len(candidates), state.dims, shape.request_tuple)
    return shape.no_room_reason


def _place_without_displacing(state: CycleState, shape: Shape, want: int) -> list[int]:
    """Stage 1 for identical jobs: best fit with nothing displaced."""
    space = state.nodes.space
    placed: list[int] = []
    if shape.free_exhausted_at != space.grow_epoch and want >= _BULK and shape.node_mask is None:
        # Many identical jobs: one vectorised best-fit fill instead of index lookups.
        placed = _bulk_fill(state, shape, want)
        if len(placed) < want:
            shape.free_exhausted_at = space.grow_epoch
    if shape.free_exhausted_at != space.grow_epoch:
        # Usually one pass: binding the shape's fields to locals would cost more than it saves.
        while len(placed) < want:
            entry = space.best_fit(
                shape.request_tuple, shape.partitions, shape.node_mask, shape.scan_memo
            )
            if entry is None:
                shape.free_exhausted_at = space.grow_epoch
                break
            n = entry[-1]
            left = want - len(placed)
            # The entry fits one copy: only more than one is worth counting.
            c = 1 if left == 1 else _copies_fitting(entry, shape.request_tuple, left)
            space.place(n, shape.request, INF, c, shape.request_tuple)
            placed.extend([n] * c)
    return placed


def _bulk_fill(state: CycleState, shape: Shape, want: int) -> list[int]:
    space = state.nodes.space
    candidates = shape.static_candidates()
    free = space.free(candidates)
    counts = fit_counts(free, shape.request, want)
    ok = np.flatnonzero(counts > 0)
    if not len(ok):
        return []
    order = ok[best_fit_order(free[ok], candidates[ok])]
    taken = np.minimum(np.cumsum(counts[order]), want)
    used = np.diff(np.concatenate(([0], taken)))
    keep = used > 0
    nodes, used = candidates[order][keep], used[keep]
    space.place_many(nodes, used, shape.request)
    filled: list[int] = np.repeat(nodes, used).tolist()
    return filled


def _place_over_evicted(state: CycleState, shape: Shape, want: int, placed: list[int]) -> bool:
    """Stage 2 for identical jobs, appending to ``placed``; True when it displaced evicted
    jobs of a lower class (one job at a time: the caller re-evaluates after it)."""
    space = state.nodes.space
    candidates = shape.static_candidates()
    for level in sorted(space.evicted):
        if level < shape.class_priority:
            # Displacing less urgent evicted jobs: one job at a time, on the node chosen by
            # its victims, whose order depends on the queues' usage.
            n = by_victims(state, shape, candidates, level, evicted=True)
            if n is None:
                continue
            evicted_give_way(state, shape, n, level)
            space.place(n, shape.request, INF)
            placed.append(n)
            return True
        placed.extend(fill_evicted_level(state, shape, want - len(placed), level))
        if len(placed) == want:
            break
    return False


def fill_evicted_level(state: CycleState, shape: Shape, want: int, level: float) -> list[int]:
    """Fill best-fit nodes at one evicted level; returns the nodes used, in order."""
    space = state.nodes.space
    candidates = shape.static_candidates()
    free = space.free_evicted_giving_way(candidates, level)
    counts = fit_counts(free, shape.request, want)
    ok = counts > 0
    if not ok.any():
        return []
    sub = candidates[ok]
    order = best_fit_order(free[ok], sub)
    out: list[int] = []
    for n, c in zip(sub[order].tolist(), counts[ok][order].tolist(), strict=True):
        c = min(c, want - len(out))
        space.place(n, shape.request, INF, c)
        out.extend([n] * c)
        if len(out) == want:
            break
    return out


def _copies_fitting(entry: tuple[int, ...], req: tuple[int, ...], limit: int) -> int:
    """How many copies of ``req`` fit in an index entry's free resources (up to ``limit``)."""
    count = limit
    for f, r in zip(entry, req, strict=False):
        if r > 0:
            count = min(count, f // r)
        elif f < 0:
            return 0
    return max(count, 0)


def select_node(
    state: CycleState, i: int, allowed: BoolArray | None
) -> tuple[int, Rank, float | None] | str:
    """The node for job ``i`` (restricted to ``allowed`` nodes when given): the node, the
    stage's rank (stage, level), and the hold level of an urgency preemption, or a reason."""
    s = int(state.jobs.shape[i])
    shape = state.shapes.facts[s]
    candidates = shape.candidates
    if candidates is None:
        candidates = static_constraints(state, shape, s)
    req = shape.request
    if allowed is not None:
        candidates = candidates[allowed[candidates]]
        if len(candidates) == 0:
            return reasons.NO_MATCHING_NODE
        if not (state.nodes.capacity[candidates] >= req).all(axis=1).any():
            return reasons.TOO_LARGE
    elif shape.static_reason is not None:
        return shape.static_reason
    space = state.nodes.space
    if allowed is None:
        entry = space.best_fit(
            shape.request_tuple, shape.partitions, shape.node_mask, shape.scan_memo
        )
        if entry is not None:
            return entry[-1], (0, 0.0), None
    else:
        free = space.free(candidates)
        ok = (free >= req).all(axis=1)
        if ok.any():
            return int(candidates[ok][best_fit_order(free[ok], candidates[ok])[0]]), (0, 0.0), None
    for level in sorted(space.evicted):
        if level < shape.class_priority:
            found = by_victims(state, shape, candidates, level, evicted=True)
            if found is not None:
                return found, (1, float(level)), None
            continue
        free = space.free_evicted_giving_way(candidates, level)
        ok = (free >= req).all(axis=1)
        if ok.any():
            n = int(candidates[ok][best_fit_order(free[ok], candidates[ok])[0]])
            return n, (1, float(level)), None
    chosen = urgency_node(state, shape, candidates)
    if chosen is not None:
        return chosen[0], (2, float(chosen[1])), chosen[1]
    return reasons.NO_CAPACITY


def place_job(state: CycleState, q: int, i: int, allowed: BoolArray | None) -> Rank | str:
    """Place one queued job at its first stage that fits; its stage rank, or a reason."""
    chosen = select_node(state, i, allowed)
    if isinstance(chosen, str):
        return chosen
    n, rank, level = chosen
    shape = state.shapes.facts[state.jobs.shape[i]]
    if level is not None:
        preempt_for(state, shape, n, level)
        state.placing.heap_stale = True
    elif rank[0] == 1 and rank[1] < shape.class_priority:
        evicted_give_way(state, shape, n, rank[1])
    state.nodes.space.place(n, shape.request, INF)
    record_placed(state, q, shape, np.array([i]), [n])
    return rank
