"""Eviction (SEMANTICS.md): which running jobs are evicted, and at which priority the others
hold their nodes; the node state placing starts from; the steady-state shortcut.

Evicted jobs keep their node's space reserved (``FreeSpace.evicted``, per class priority)
until they are placed back or given up (``putback.py``).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from ..fairness import queue_figures, usage_offsets
from .free_space import INF, BoolArray, IntArray, scatter_add
from .order import running_orders_or_ids
from .state import (
    EVICTED,
    EXTRA,
    CycleState,
    Evictions,
    gang_sort_key,
    make_item,
    sum_requests,
)


def nothing_moves(state: CycleState) -> bool:
    """Decide a steady state in one vectorised step (then only queue costs are reported).

    With nothing queued, evicted jobs compete only for their own nodes. If every node holds
    all its running jobs and no queue exceeds a per-class cap with all of its jobs, each
    evicted job fits back whatever the order of re-placement, so nothing is scheduled or
    preempted, whichever queues are protected. Otherwise the full cycle decides.
    """
    jobs = state.jobs
    rows = jobs.running
    if len(rows) != len(jobs.records):
        return False
    shape, requests = jobs.shape, state.shapes.requests
    held = sum_requests(jobs.node[rows], shape[rows], len(state.nodes.records), requests)
    if (held > state.nodes.capacity).any():
        return False
    acc = rows[jobs.accounted[rows]]
    if _over_class_cap(state, acc):
        return False
    names = state.queues.names
    costs = sum_requests(jobs.queue[acc], shape[acc], len(names), requests).tolist()
    for k, name in enumerate(names):
        state.result.queue_costs[name] = state.costs.cost(costs[k])
    active = {names[q]: costs[q] for q in jobs.queue[acc].tolist()}
    _steady_figures(state, dict(sorted(active.items())))
    return True


def _steady_figures(state: CycleState, held: dict[str, list[int]]) -> None:
    """The queues' figures of a steady state: nothing queued, so demand is what each holds."""
    by_name, config = state.queues.by_name, state.snapshot.config
    weights = {name: by_name[name].weight for name in held}
    shares = {name: state.result.queue_costs[name] for name in held}
    usage = {name: by_name[name].decayed_usage for name in held}
    offsets = usage_offsets(usage, shares, state.snapshot.usage_elapsed, config.usage_half_life)
    costs = state.costs
    state.result.queue_figures = queue_figures(costs, weights, held, shares, usage, offsets)
    state.result.capacity = dict(zip(costs.dims, costs.totals, strict=True))


def _over_class_cap(state: CycleState, acc: IntArray) -> bool:
    """Whether some queue holds more of a class than the class's per-queue cap allows."""
    jobs, facts = state.jobs, state.shapes.facts
    shape, requests, nq = jobs.shape, state.shapes.requests, len(state.queues.names)
    for pc in state.classes.values():
        if not pc.max_fraction_per_queue:
            continue
        mine = acc[np.array([f.class_name == pc.name for f in facts], dtype=bool)[shape[acc]]]
        by_queue = sum_requests(jobs.queue[mine], shape[mine], nq, requests).tolist()
        for d, name in enumerate(state.dims):
            if name not in pc.max_fraction_per_queue:
                continue
            limit = pc.max_fraction_per_queue[name] * state.nodes.totals[d]
            if any(row[d] > limit for row in by_queue):
                return True
    return False


def evict(state: CycleState, protected: BoolArray) -> IntArray:
    """Evict the preemptible jobs and gangs of unprotected queues; protected preemptible ones
    hold at their class priority, everything else at +inf.

    Evicted gangs go to ``gangs.items`` (a core of the gang's minimum, then one item per
    extra member); the evicted single jobs are returned.
    """
    jobs = state.jobs
    nj = len(jobs.records)
    preemptible = _preemptible(state)
    state.evictions = evictions = Evictions(np.full(nj, INF), np.zeros(nj, dtype=bool))
    running = jobs.running
    singles = running[~jobs.in_gang[running]]
    ok = jobs.accounted[singles] & preemptible[singles]
    prot = protected[np.maximum(jobs.queue[singles], 0)]
    evicted = singles[ok & ~prot]
    keep = singles[ok & prot]
    evictions.hold[keep] = jobs.class_priority[keep].astype(np.float64)
    evictions.evicted[evicted] = True
    gang_running = running[jobs.in_gang[running]].tolist()
    if gang_running:
        _evict_gangs(state, gang_running, preemptible, protected)
    return evicted


def _preemptible(state: CycleState) -> BoolArray:
    """Running jobs of a preemptible class, or that have run at least their lifetime."""
    jobs = state.jobs
    running = jobs.running
    preemptible = np.zeros(len(jobs.records), dtype=bool)
    if not len(running):
        return preemptible
    by_class = np.array([f.preemptible for f in state.shapes.facts], dtype=bool)
    preemptible[running] = by_class[jobs.shape[running]]
    now = state.snapshot.now
    # Only jobs not preemptible by class can become so through their lifetime: those with
    # one (known by kind, where a busy cluster's thousands of running jobs were each read).
    for i in running[~preemptible[running] & jobs.has_lifetime[running]].tolist():
        job = jobs.records[i]
        if (
            job.lifetime is not None
            and job.start_time is not None
            and now - job.start_time >= job.lifetime
        ):
            preemptible[i] = True
    return preemptible


def _evict_gangs(
    state: CycleState, rows: list[int], preemptible: BoolArray, protected: BoolArray
) -> None:
    """Running gangs (same queue and gang id) move as one: preemptible only if every member
    is; held at the lowest member's class priority when protected."""
    jobs, evictions, items = state.jobs, state.evictions, state.gangs.items
    records, elastic = jobs.records, jobs.elastic
    units: dict[tuple[str, str | None], list[int]] = defaultdict(list)
    for i in rows:
        units[(records[i].queue, jobs.gang_ids[i])].append(i)
    order = running_orders_or_ids(state, rows)
    at = np.array(rows, dtype=np.int64)
    movable = dict(zip(rows, (jobs.accounted[at] & preemptible[at]).tolist(), strict=True))
    for key in sorted(units, key=gang_sort_key):
        members = units[key]
        members.sort(key=order.__getitem__)
        for i in members:
            # An elastic member gives way alone; any other member takes its whole group.
            evictions.unit_of[i] = [i] if elastic is not None and elastic[i] else members
        if not all(map(movable.__getitem__, members)):
            continue
        if protected[jobs.queue[members[0]]]:
            evictions.hold[members] = float(min(int(jobs.class_priority[i]) for i in members))
            continue
        evictions.evicted[members] = True
        minimum = max(1, min(records[members[0]].min_cardinality, len(members)))
        if elastic is not None and elastic[members].any():
            # A role group: its core is every role's minimum, its extras the elastic members.
            flags = elastic[members]
            members = [i for i, f in zip(members, flags, strict=True) if not f] + [
                i for i, f in zip(members, flags, strict=True) if f
            ]
            minimum = len(members) - int(flags.sum())
        core = make_item(state, EVICTED, members[:minimum], minimum, None)
        items.append(core)
        for extra in members[minimum:]:
            items.append(make_item(state, EXTRA, [extra], 1, None, core))


def load_nodes(state: CycleState) -> IntArray:
    """Node state placing starts from: jobs holding their space (displaceable by urgency per
    hold level), evicted jobs reserved per class priority, and the best-fit index.

    Returns the rows of the running jobs that hold their space.
    """
    jobs, evictions = state.jobs, state.evictions
    space, running, nn = state.nodes.space, jobs.running, len(state.nodes.records)
    shape, requests, hold = jobs.shape, state.shapes.requests, evictions.hold
    holding = running[~evictions.evicted[running]]
    space.held += sum_requests(jobs.node[holding], shape[holding], nn, requests)
    finite = holding[np.isfinite(hold[holding])]
    for h in np.unique(hold[finite]).tolist():
        rows = finite[hold[finite] == h]
        arr = space.displaceable.setdefault(
            float(h), np.zeros((nn, len(state.dims)), dtype=np.int64)
        )
        scatter_add(arr, jobs.node[rows], requests[shape[rows]])
    evictions.displaceable = finite
    ev = np.flatnonzero(evictions.evicted)
    space.add_evicted(jobs.node[ev], requests[shape[ev]], jobs.class_priority[ev])
    space.build_index()
    evictions.settled = np.zeros(len(jobs.records), dtype=bool)
    return holding
