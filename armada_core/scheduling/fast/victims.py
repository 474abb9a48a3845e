"""Placing with displacement (SEMANTICS.md, stages 2 and 3): choosing a node by the victims
it needs, and preemption of a minimal set of them (held jobs by urgency, evicted jobs of a
lower class in stage 2).

Victims are taken by class priority (a held gang: its hold priority), then their queue's
fraction of fair share, highest first, then queue name, then the most recently ordered job.
A victim group is what one (priority, queue) holds; elastic members of role groups form
groups of their own, taken first (``victim_group``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from functools import partial
from operator import itemgetter

import numpy as np

from .free_space import FloatArray, IntArray, scatter_add
from .order import running_order
from .queues import change_usage, charge_class, fair_share_fraction
from .state import CycleState, Shape, sum_requests

#: A victim group's place in the order: (priority, group // queues, -fraction of fair share,
#: queue name).
GroupKey = tuple[float, int, float, str]


def urgency_possible(state: CycleState, own: int) -> bool:
    """Whether a job of class priority ``own`` may displace anything by urgency: held jobs
    or evicted jobs of a lower class priority (chosen by victims, one at a time)."""
    space = state.nodes.space
    return any(h < own and arr.any() for h, arr in space.displaceable.items()) or any(
        p < own and arr.any() for p, arr in space.evicted.items()
    )


def urgency_node(state: CycleState, shape: Shape, candidates: IntArray) -> tuple[int, float] | None:
    """Stage 3: the node and the hold level at which held jobs give way to this job."""
    for level in sorted(h for h in state.nodes.space.displaceable if h < shape.class_priority):
        n = by_victims(state, shape, candidates, level, evicted=False)
        if n is not None:
            return n, level
    return None


def by_victims(
    state: CycleState, shape: Shape, candidates: IntArray, level: float, evicted: bool
) -> int | None:
    """The node to displace on at ``level``, chosen by the victims it needs: the node whose
    last victim comes earliest in victim order, then least free, then node order."""
    space = state.nodes.space
    free_at = space.free_evicted_giving_way if evicted else space.free_held_giving_way
    free = free_at(candidates, level)
    req = shape.request
    ok = (free >= req).all(axis=1)
    if not ok.any():
        return None
    sub = candidates[ok]
    free = free[ok]
    room = space.free(sub) if evicted else space.capacity[sub] - space.held[sub]
    worst = np.where((room >= req).all(axis=1), -1, len(sub) + 10**9)
    for k, (_, arr) in enumerate(_victim_groups(state, level, evicted)):
        room = room + arr[sub]
        fits = (room >= req).all(axis=1)
        worst = np.where(fits & (worst > k), np.minimum(worst, k), worst)
    keys = [sub] + [free[:, d] for d in range(free.shape[1] - 1, -1, -1)] + [worst]
    return int(sub[np.lexsort(keys)[0]])


def _victim_groups(
    state: CycleState, level: float, evicted: bool
) -> list[tuple[GroupKey, IntArray]]:
    """Per node, what each victim group that may give way at ``level`` holds, in the order
    victims are taken: lowest priority, the queue furthest above its fair share, then
    queue name."""
    jobs, evictions, space = state.jobs, state.evictions, state.nodes.space
    nn = len(state.nodes.records)
    found: list[tuple[float, int, IntArray]] = []
    if evicted:
        for priority in sorted(p for p in space.evicted if p <= level):
            groups = evictions.evicted_victims.get(priority)
            if groups is None:
                rows = np.flatnonzero(
                    evictions.evicted & ~evictions.settled & (jobs.class_priority == priority)
                )
                groups = evictions.evicted_victims[priority] = _held_per_group(state, rows, nn)
            found += [(float(priority), g, arr) for g, arr in groups.items()]
    else:
        held = evictions.held_victims
        if held is None or held[0] != evictions.held_version:
            held = evictions.held_victims = (evictions.held_version, _held_victims(state, nn))
        found += [(h, g, arr) for (h, g), arr in held[1].items() if h <= level]
    names = state.queues.names
    nq = len(names)
    keyed = [
        ((p, g // nq, -fair_share_fraction(state, g % nq), names[g % nq]), arr)
        for p, g, arr in found
    ]
    keyed.sort(key=itemgetter(0))
    return keyed


def _held_victims(state: CycleState, nn: int) -> dict[tuple[float, int], IntArray]:
    """Per (hold, victim group): what the displaceable jobs not yet preempted hold per node."""
    evictions, preempted = state.evictions, state.placing.preempted
    rows = evictions.displaceable
    if preempted:
        rows = rows[~np.isin(rows, np.fromiter(preempted, dtype=np.int64))]
    by_hold: dict[tuple[float, int], IntArray] = {}
    for h in np.unique(evictions.hold[rows]).tolist():
        sel = rows[evictions.hold[rows] == h]
        for g, arr in _held_per_group(state, sel, nn).items():
            by_hold[(float(h), g)] = arr
    return by_hold


def victim_group(state: CycleState, rows: IntArray) -> IntArray:
    """Per row, its victim group besides priority: ``queue + queues * flag``, where the flag
    is 0 for an elastic member of a role group (taken first) and 1 for any other job."""
    nq = len(state.queues.names)
    jobs = state.jobs
    if jobs.elastic is None:
        return jobs.queue[rows] + nq
    return jobs.queue[rows] + nq * (~jobs.elastic[rows]).astype(np.int64)


def _held_per_group(state: CycleState, rows: IntArray, nn: int) -> dict[int, IntArray]:
    """What each victim group (``victim_group``) of ``rows`` holds per node."""
    jobs = state.jobs
    out: dict[int, IntArray] = {}
    groups = victim_group(state, rows)
    for g in np.unique(groups).tolist():
        sel = rows[groups == g]
        out[int(g)] = sum_requests(jobs.node[sel], jobs.shape[sel], nn, state.shapes.requests)
    return out


def preempt_for(state: CycleState, shape: Shape, n: int, level: float) -> None:
    """Urgency preemption on node ``n``: a minimal set of the held jobs that give way."""
    space, preempted = state.nodes.space, state.placing.preempted
    room = space.capacity[n] - space.held[n]
    victims = _victims_on(state, n, level)
    for unit in _minimal_set(state, shape.request, n, room, victims, preempted.__contains__):
        for member in unit:
            _preempt(state, member)
    state.placing.new_space_epoch()


def evicted_give_way(state: CycleState, shape: Shape, n: int, level: float) -> None:
    """Stage 2 below the job's class on node ``n``: a minimal set of the evicted jobs that
    give way is preempted at once, each with its whole gang, so their space is free."""
    space, settled = state.nodes.space, state.evictions.settled
    room = space.capacity[n] - space.held[n] - space.evicted_total[n]
    victims = _evicted_on(state, n, level)
    for unit in _minimal_set(state, shape.request, n, room, victims, settled.__getitem__):
        for member in unit:
            _drop_evicted(state, member)


def _minimal_set(
    state: CycleState,
    req: IntArray,
    n: int,
    room: IntArray,
    victims: list[int],
    gone: Callable[[int], bool],
) -> list[list[int]]:
    """Victims' gangs in order until the job fits in ``room``, then every one but the last,
    latest first, put back if the job still fits without it. ``gone``: a member already
    preempted (or settled)."""
    unit_of = state.evictions.unit_of
    taken: list[list[int]] = []
    seen: set[int] = set()
    for v in victims:
        if (room >= req).all():
            break
        if v in seen:
            continue
        # A victim's whole gang goes, but for members already taken (an elastic member gives
        # way alone, before its group).
        whole = unit_of.get(v, [v])
        unit = [m for m in whole if m not in seen and not gone(m)]
        seen.update(unit)
        room = room + _unit_on_node(state, unit, n)
        if len(whole) > 1:
            # The group goes: its elastic members taken before go with it (put back alone,
            # they would run on without their group).
            rows = set(whole)
            for k, earlier in enumerate(taken):
                if earlier and all(m in rows for m in earlier):
                    unit, taken[k] = earlier + unit, []
        taken.append(unit)
    keep = [True] * len(taken)
    for k in range(len(taken) - 2, -1, -1):
        back = room - _unit_on_node(state, taken[k], n)
        if (back >= req).all():
            room = back
            keep[k] = False
    return [unit for unit, kept in zip(taken, keep, strict=True) if kept]


def _victims_on(state: CycleState, n: int, level: float) -> list[int]:
    """Held jobs on node ``n`` that give way at ``level``, in victim order."""
    jobs, evictions, preempted = state.jobs, state.evictions, state.placing.preempted
    if evictions.displaceable_by_node is None:
        evictions.displaceable_by_node = defaultdict(list)
        for i in evictions.displaceable.tolist():
            evictions.displaceable_by_node[int(jobs.node[i])].append(i)
    hold = evictions.hold
    victims = [
        i for i in evictions.displaceable_by_node[n] if hold[i] <= level and i not in preempted
    ]
    return _in_victim_order(state, victims, hold)


def _evicted_on(state: CycleState, n: int, level: float) -> list[int]:
    """Evicted jobs on node ``n`` not yet back, of class priority <= ``level``, in victim
    order."""
    jobs, evictions = state.jobs, state.evictions
    if evictions.evicted_by_node is None:
        evictions.evicted_by_node = defaultdict(list)
        for i in np.flatnonzero(evictions.evicted).tolist():
            evictions.evicted_by_node[int(jobs.node[i])].append(i)
    priority, settled = jobs.class_priority, evictions.settled
    victims = [i for i in evictions.evicted_by_node[n] if priority[i] <= level and not settled[i]]
    return _in_victim_order(state, victims, priority)


def _in_victim_order(
    state: CycleState, victims: list[int], priority: FloatArray | IntArray
) -> list[int]:
    """Victims by (class or hold ``priority``, elastic first, queue furthest above its fair
    share, queue name), the most recently ordered first within each."""
    queue, elastic, names = state.jobs.queue, state.jobs.elastic, state.queues.names
    victims.sort(key=partial(running_order, state), reverse=True)
    fractions: dict[int, float] = {}
    for i in victims:
        q = int(queue[i])
        if q not in fractions:
            fractions[q] = fair_share_fraction(state, q)
    victims.sort(
        key=lambda i: (
            priority[i],
            0 if elastic is not None and elastic[i] else 1,
            -fractions[int(queue[i])],
            names[int(queue[i])],
        )
    )
    return victims


def _drop_evicted(state: CycleState, member: int) -> None:
    """An evicted job gives way: it will not go back, its space is free, its queue's usage
    no longer counts it."""
    jobs, placing = state.jobs, state.placing
    s = jobs.shape[member]
    state.nodes.space.drop_evicted(
        int(jobs.node[member]), state.shapes.requests[s], int(jobs.class_priority[member])
    )
    evicted_settled(state, np.array([member]))
    change_usage(state, int(jobs.queue[member]), state.shapes.facts[s].request_tuple, -1)
    placing.preempted.add(member)
    if placing.journal is not None:
        placing.journal.preempted.append(member)


def evicted_settled(state: CycleState, rows: IntArray, sign: int = -1) -> None:
    """Evicted jobs placed back or preempted: no longer victims of displacement (``sign``
    +1: tentative work undone, they are again)."""
    jobs, evictions = state.jobs, state.evictions
    evictions.settled[rows] = sign < 0
    by_priority = evictions.evicted_victims
    if not by_priority:
        return
    requests = state.shapes.requests
    if len(rows) == 1:
        i = int(rows[0])
        groups = by_priority.get(int(jobs.class_priority[i]))
        if groups is not None:
            group = int(victim_group(state, rows)[0])
            groups[group][int(jobs.node[i])] += sign * requests[jobs.shape[i]]
        return
    priorities = jobs.class_priority[rows]
    for priority in np.unique(priorities).tolist():
        groups = by_priority.get(int(priority))
        if groups is None:
            continue
        sel = rows[priorities == priority]
        group_of = victim_group(state, sel)
        for g in np.unique(group_of).tolist():
            mine = sel[group_of == g]
            scatter_add(groups[g], jobs.node[mine], requests[jobs.shape[mine]], sign)


def _preempt(state: CycleState, member: int) -> None:
    """A held job stops: its space, its queue's allocation and usage, its hold group."""
    jobs, evictions, placing = state.jobs, state.evictions, state.placing
    s = jobs.shape[member]
    shape = state.shapes.facts[s]
    req = state.shapes.requests[s]
    n, h, q = int(jobs.node[member]), float(evictions.hold[member]), int(jobs.queue[member])
    state.nodes.space.release(n, req, h)
    queues = state.queues
    queues.allocation[q] = [
        a - b for a, b in zip(queues.allocation[q], shape.request_tuple, strict=True)
    ]
    change_usage(state, q, shape.request_tuple, -1)
    held = evictions.held_victims
    if held is not None and held[0] == evictions.held_version:
        group = int(victim_group(state, np.array([member]))[0])
        held[1][(h, group)][n] -= req
    charge_class(state, q, shape.class_name, shape.request_tuple, -1)
    placing.preempted.add(member)
    if placing.journal is not None:
        placing.journal.preempted.append(member)


def _unit_on_node(state: CycleState, unit: list[int], n: int) -> IntArray:
    """What the members of a running gang hold on node ``n``."""
    jobs, requests = state.jobs, state.shapes.requests
    out = np.zeros(len(state.dims), dtype=np.int64)
    for m in unit:
        if int(jobs.node[m]) == n:
            out = out + requests[jobs.shape[m]]
    return out
