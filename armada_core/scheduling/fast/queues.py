"""Fairness (SEMANTICS.md): fair share, protection, decayed usage, and the queue keys of
progressive filling.

Keys repeat ``CostModel.cost`` with the same floating-point operations (element-wise in numpy
when many candidates are compared at once), so queues compare exactly as in the reference.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter

import numpy as np

from ..fairness import (
    budget_units,
    fair_shares,
    infinite_lifetime,
    lifetime_weights,
    overshoot_limits,
    protected_queues,
    queue_figures,
    usage_offsets,
)
from .free_space import BoolArray, FloatArray, IntArray
from .state import CycleState, HeapEntry, gather, sum_requests

#: Candidate prefixes a queue's first win check looks at; the window grows fourfold after.
_PROBE = 64


def weigh_queues(state: CycleState) -> BoolArray:
    """Weights, decayed-usage offsets and usage of the active queues, and the limits that
    follow from fair share; returns which queues are protected from eviction (one flag per
    queue index)."""
    jobs, queues, limits, config = state.jobs, state.queues, state.limits, state.config
    queue, shape, requests = jobs.queue, jobs.shape, state.shapes.requests
    held = jobs.running[jobs.accounted[jobs.running]]
    active_q = np.unique(np.concatenate([queue[jobs.queued], queue[held]])).tolist()
    names = [queues.names[q] for q in active_q]
    weights = {name: queues.by_name[name].weight for name in names}
    nq = len(queues.names)
    start = sum_requests(queue[held], shape[held], nq, requests)
    demand = start + sum_requests(queue[jobs.queued], shape[jobs.queued], nq, requests)
    costs = state.costs
    shares = {name: costs.cost(start[q].tolist()) for q, name in zip(active_q, names, strict=True)}
    demands = {
        name: costs.cost(demand[q].tolist()) for q, name in zip(active_q, names, strict=True)
    }
    protected = protected_queues(shares, weights, demands, config.protected_fraction)
    usage = {name: queues.by_name[name].decayed_usage for name in names}
    offsets = usage_offsets(usage, shares, state.snapshot.usage_elapsed, config.usage_half_life)
    held_by = {name: start[q].tolist() for q, name in zip(active_q, names, strict=True)}
    state.result.queue_figures = queue_figures(costs, weights, held_by, demands, usage, offsets)
    state.result.capacity = dict(zip(costs.dims, costs.totals, strict=True))
    queues.weight = [weights.get(n, 1.0) for n in queues.names]
    queues.usage_offset = [offsets.get(n, 0.0) for n in queues.names]
    queues.usage = start.tolist()
    lifetime = lifetime_weights(
        weights, queues.by_name.values(), config.lifetime_limits_count_all_queues
    )
    fair = fair_shares(lifetime) if lifetime else {}
    queues.fair_share = [fair.get(n, 0.0) for n in queues.names]
    overshoot = config.non_preemptible_overshoot
    if overshoot is not None:
        overshoot_of = overshoot_limits(lifetime, overshoot) if lifetime else {}
        limits.infinite_limit = [overshoot_of.get(n, 0.0) for n in queues.names]
    limits.budget = budget_units(config.excess_flow_budget)
    limits.budget_used = [0] * nq
    if limits.budget is not None and len(held):
        # What running jobs hold of the budget: few jobs carry a charge, so plain Python.
        charges = map(attrgetter("excess_flow"), gather(jobs.records, held))
        for q, charge in zip(queue[held].tolist(), charges, strict=True):
            if charge:
                limits.budget_used[q] += charge
    return np.array([n in protected for n in queues.names], dtype=bool)


def charge_holders(state: CycleState, holding: IntArray) -> None:
    """Each queue's allocation, in total and per class, from the running jobs that hold
    their space (evicted jobs are charged again as they come back)."""
    jobs, queues, shapes = state.jobs, state.queues, state.shapes
    queue, shape, requests = jobs.queue, jobs.shape, shapes.requests
    nq, nd = len(queues.names), len(state.dims)
    acc = holding[jobs.accounted[holding]]
    queues.allocation = sum_requests(queue[acc], shape[acc], nq, requests).tolist()
    class_rank = {n: i for i, n in enumerate(state.class_names)}
    shape_class = np.array([class_rank.get(f.class_name, -1) for f in shapes.facts], np.int64)
    nc = max(len(state.class_names), 1)
    by_class = sum_requests(
        queue[acc] * nc + shape_class[shape[acc]], shape[acc], nq * nc, requests
    )
    by_class = by_class.reshape(nq, nc, nd)
    queues.allocation_by_class = {}
    for q, c in zip(*np.nonzero(by_class.any(axis=2)), strict=True):
        queues.allocation_by_class[(int(q), state.class_names[int(c)])] = by_class[q, c].tolist()
    if state.limits.infinite_limit is not None:
        # Jobs of infinite lifetime are never evicted: all of them are among the holders.
        fixed = np.array([not f.preemptible for f in shapes.facts], dtype=bool)
        cand = acc[fixed[shape[acc]]]
        rows = [
            i
            for i, j in zip(cand.tolist(), gather(jobs.records, cand), strict=True)
            if infinite_lifetime(False, j.lifetime)
        ]
        inf_rows = np.array(rows, dtype=np.int64)
        state.limits.infinite_allocation = sum_requests(
            queue[inf_rows], shape[inf_rows], nq, requests
        ).tolist()


def charge_class(
    state: CycleState, q: int, class_name: str, vec: Sequence[int], sign: int = 1
) -> None:
    """Charge (or refund) a queue's allocation in one class."""
    by_class = state.queues.allocation_by_class
    key = (q, class_name)
    cur = by_class.get(key)
    if cur is None:
        cur = [0] * len(vec)
    by_class[key] = [a + sign * b for a, b in zip(cur, vec, strict=True)]


def change_usage(state: CycleState, q: int, req: Sequence[int], sign: int) -> None:
    """Change what a queue holds or may get back (its fraction of fair share)."""
    usage = state.queues.usage
    usage[q] = [a + sign * b for a, b in zip(usage[q], req, strict=True)]


def fair_share_fraction(state: CycleState, q: int) -> float:
    """The queue's fraction of its fair share, up to a common factor (see reference)."""
    queues = state.queues
    return (state.costs.cost(queues.usage[q]) + queues.usage_offset[q]) / queues.weight[q]


def queue_key(state: CycleState, q: int, extra: Sequence[int]) -> float:
    """The queue's key after adding ``extra``: ``(cost + decay) / weight``, the cost
    computed as ``CostModel.cost`` does, on the most frequent path of placing."""
    queues = state.queues
    alloc = queues.allocation[q]
    cost = 0.0
    for d, mult, total in state.cost_columns.terms:
        share = float(alloc[d] + extra[d]) * mult / total
        if share > cost:
            cost = share
    return (cost + queues.usage_offset[q]) / queues.weight[q]


def queue_keys(state: CycleState, q: int, cum: IntArray) -> FloatArray:
    """Keys after adding each prefix (rows of ``cum``), with the reference's float ops."""
    queues, columns = state.queues, state.cost_columns
    alloc = np.asarray(queues.allocation[q], dtype=np.int64) + cum
    if not columns.any_counted:
        costs = np.zeros(len(cum))
    else:
        shares = alloc[:, columns.counted].astype(np.float64) * columns.multipliers / columns.totals
        costs = np.maximum(shares.max(axis=1), 0.0)
    keys: FloatArray = (costs + queues.usage_offset[q]) / queues.weight[q]
    return keys


def heap_entry(state: CycleState, q: int) -> HeapEntry | None:
    """The queue's heap entry: (-class priority of its head, key with the head added, q, q)."""
    order = state.order
    pos = order.position[q]
    sequence = order.sequence[q]
    if pos >= len(sequence):
        return None
    code = int(sequence[pos])
    if code < 0:
        item = state.gangs.items[-1 - code]
        return (-item.class_priority, queue_key(state, q, item.total), q, q)
    shape = state.shapes.facts[state.jobs.shape[code]]
    return (-shape.class_priority, queue_key(state, q, shape.request_tuple), q, q)


def consecutive_wins(
    state: CycleState, q: int, neg_priority: int, bound: HeapEntry | None, reqs: Requests
) -> int:
    """How many of the next items (requests ``reqs``) q takes before another queue wins.

    The other queues' keys do not move meanwhile, so this is one vectorised comparison of
    q's growing key against the best other head (``bound``).
    """
    m = len(reqs)
    if bound is None or neg_priority < bound[0]:
        return m
    bound_key, bound_rank = bound[1], bound[2]
    if m >= 2:
        # Most pops in a busy cluster win once: settle that without numpy.
        if isinstance(reqs, RepeatedRequest):
            k = reqs.key_of_two = queue_key(state, q, [v + v for v in reqs.req_tuple])
        else:
            k = queue_key(state, q, (reqs[0] + reqs[1]).tolist())
        if not beats(k, q, bound):
            return 1
    done = 0
    base = np.zeros(len(state.dims), dtype=np.int64)
    step = _PROBE
    while done < m:
        chunk = reqs[done : done + step]
        cum = np.cumsum(chunk, axis=0) + base
        won = queue_keys(state, q, cum)
        win = (won < bound_key) | ((won == bound_key) & (q < bound_rank))
        lost = np.flatnonzero(~win)
        if len(lost):
            return done + int(lost[0])
        done += len(chunk)
        base = cum[-1]
        step *= 4
    return m


def beats(key: float, q: int, bound: HeapEntry) -> bool:
    """Whether queue ``q`` with ``key`` comes before the heap entry ``bound`` of the same
    class priority."""
    return key < bound[1] or (key == bound[1] and q < bound[2])


class RepeatedRequest:
    """The same request ``count`` times, without materialising it unless sliced.

    ``key_of_two`` is the queue's key with two of them added, once ``consecutive_wins`` has
    computed it: after one is placed, that is the key of the queue's next head.
    """

    __slots__ = ("count", "key_of_two", "req", "req_tuple")

    def __init__(self, req: IntArray, count: int, req_tuple: tuple[int, ...]):
        self.req, self.count, self.req_tuple = req, count, req_tuple
        self.key_of_two: float | None = None

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, key: int | slice) -> IntArray:
        if isinstance(key, slice):
            start, stop, _ = key.indices(self.count)
            return np.broadcast_to(self.req, (max(0, stop - start), len(self.req)))
        return self.req


#: The requests of the next items of a queue: rows of an array, or one request repeated.
Requests = IntArray | RepeatedRequest
