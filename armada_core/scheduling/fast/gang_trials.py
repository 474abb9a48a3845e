"""Trying a gang (SEMANTICS.md, Placing): member by member on the live state, tentatively
(``begin_trial``/``rollback``), or for identical members that displace nothing, simulated
without touching the state until it is known to fit (``simulate_members``).

Trials are compared like the reference's: members placed, worst stage reached, free
resources left. A gang shape that fits nowhere is remembered until something is preempted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import reasons
from .elastic import leave_unplaced
from .free_space import INF, BoolArray, IntArray, SavedSpace, best_fit_order, fit_counts
from .limits import take_charges
from .nodes import place_job, static_constraints
from .outcomes import leave_queued, record_placed
from .state import CycleState, GangShapeKey, Item, Journal, Rank, Shape
from .victims import evicted_settled

#: Identical members placed: (node, how many), in placing order.
Placement = list[tuple[int, int]]


def identical_shape(state: CycleState, item: Item) -> tuple[int, Shape] | None:
    """The shape of a gang whose members are all alike (not a role group), with its static
    constraints computed; None for any other gang."""
    shapes = {int(state.jobs.shape[i]) for i in item.members}
    if len(shapes) != 1 or item.core:
        return None
    s = shapes.pop()
    shape = state.shapes.facts[s]
    static_constraints(state, shape, s)
    return s, shape


def failed_before(state: CycleState, item: Item, key: GangShapeKey) -> bool:
    """The same gang shape failed in this space epoch: fail with the same reason."""
    cached = state.gangs.failures.get(key)
    if cached is not None and cached[0] == state.placing.space_epoch:
        reason = cached[1]
        assert reason is not None  # only topology gangs remember a None
        leave_queued(state, np.array(item.members), reason)
        return True
    return False


def remember_failure(state: CycleState, item: Item, key: GangShapeKey, reason: str) -> None:
    state.gangs.failures[key] = (state.placing.space_epoch, reason)
    leave_queued(state, np.array(item.members), reason)


def room_per_value(
    shape: Shape, free: IntArray, value_of: IntArray, n_values: int, want: int
) -> IntArray:
    """How many members fit on each label value's (or domain's) candidate nodes, given
    their ``free`` resources (in candidate order)."""
    count = fit_counts(free, shape.request, want)
    candidates = shape.static_candidates()
    values = value_of[candidates]
    has = values >= 0
    room: IntArray = np.bincount(values[has], weights=count[has], minlength=n_values)
    return room


# --- identical members, nothing to displace by urgency: simulate, then apply --------------


def simulate_members(
    state: CycleState, shape: Shape, rows: IntArray, want: int
) -> tuple[Placement, Rank]:
    """Sequential placement of identical members on ``rows`` (nothing displaced, then evicted
    levels), without touching the state: [(node, count)], worst rank."""
    space = state.nodes.space
    placed: Placement = []
    taken = np.zeros((len(rows), space.n_dims), dtype=np.int64)
    worst: Rank = (0, 0.0)
    levels: list[tuple[Rank, int | None]] = [((0, 0.0), None)]
    levels += [((1, float(level)), level) for level in sorted(space.evicted)]
    got = 0
    for rank, level in levels:
        if got == want:
            break
        free = space.free(rows) if level is None else space.free_evicted_giving_way(rows, level)
        free = free - taken
        counts = fit_counts(free, shape.request, want - got)
        ok = np.flatnonzero(counts > 0)
        if len(ok) == 0:
            continue
        order = ok[best_fit_order(free[ok], rows[ok])]
        for k in order.tolist():
            c = min(int(counts[k]), want - got)
            placed.append((int(rows[k]), c))
            taken[k] += shape.request * c
            got += c
            worst = max(worst, rank)
            if got == want:
                break
    return placed, worst


def apply_simulated(
    state: CycleState,
    q: int,
    members: list[int],
    placed: Placement,
    charges: dict[int, int],
) -> None:
    """Commit a simulated placement; members beyond it (an elastic gang's rest) fail; the
    members placed take their budget charges."""
    nodes: list[int] = []
    for n, c in placed:
        nodes.extend([n] * c)
    s = state.jobs.shape[members[0]]
    req = state.shapes.requests[s]
    space = state.nodes.space
    for n, c in placed:
        space.place(n, req, INF, c)
    p = len(nodes)
    record_placed(state, q, state.shapes.facts[s], np.array(members[:p]), nodes)
    take_charges(state, q, members[:p], charges)
    ids = state.jobs.ids
    for i in members[p:]:
        state.result.failed[ids[i]] = reasons.GANG_ELASTIC_REST


# --- any gang: member by member, tentatively ------------------------------------------------


def try_members(
    state: CycleState,
    q: int,
    members: list[int],
    minimum: int,
    allowed: BoolArray | None,
    core: int = 0,
) -> tuple[set[int], Rank] | str:
    """Place members in order; the placed set and worst stage rank, or the first reason
    (also when a member of a role group's ``core`` does not fit)."""
    placed: set[int] = set()
    worst: Rank = (0, 0.0)
    first_reason = None
    for k, i in enumerate(members):
        outcome = place_job(state, q, i, allowed)
        if isinstance(outcome, str):
            first_reason = first_reason or outcome
            if minimum == len(members) or k < core:
                return outcome
            continue
        placed.add(i)
        worst = max(worst, outcome)
    if len(placed) < minimum:
        return first_reason or reasons.NO_CAPACITY
    return placed, worst


def place_members(
    state: CycleState, q: int, item: Item, allowed: BoolArray | None, charges: dict[int, int]
) -> None:
    """Place a gang on nodes a trial showed it fits (``allowed``): the members left out fail
    or wait, the members placed take their budget ``charges``."""
    members = item.members
    attempt = try_members(state, q, members, item.minimum, allowed, item.core)
    assert not isinstance(attempt, str)
    placed = attempt[0]
    leave_unplaced(state, members, placed, item.core)
    take_charges(state, q, [i for i in members if i in placed], charges)


@dataclass(slots=True)
class SavedTrial:
    """Everything placing changes, copied when tentative work starts."""

    space_epoch: int
    space: SavedSpace
    allocation: list[list[int]]
    allocation_by_class: dict[tuple[int, str], list[int]]
    usage: list[list[int]]
    new_total: list[int]
    new_count: int
    new_by_queue: list[int]
    infinite_allocation: list[list[int]] | None
    heap_stale: bool
    #: The journal of the tentative work this one is part of (None: none), and how much it
    #: held when this one began: trials nest (a pod group's roles are tried inside each
    #: domain tried for the group).
    outer: Journal | None
    scheduled_mark: int
    preempted_mark: int


def begin_trial(state: CycleState) -> SavedTrial:
    """Start tentative work: a copy of everything placing changes, and a journal for the
    result's entries (the enclosing trial's, when there is one)."""
    queues, limits, placing = state.queues, state.limits, state.placing
    outer = placing.journal
    journal = placing.journal = outer if outer is not None else Journal()
    infinite = limits.infinite_allocation
    return SavedTrial(
        space_epoch=placing.new_space_epoch(),
        space=state.nodes.space.save(),
        allocation=[list(a) for a in queues.allocation],
        allocation_by_class={k: list(v) for k, v in queues.allocation_by_class.items()},
        usage=[list(u) for u in queues.usage],
        new_total=list(limits.new_total),
        new_count=limits.new_count,
        new_by_queue=list(limits.new_by_queue),
        infinite_allocation=None if infinite is None else [list(a) for a in infinite],
        heap_stale=placing.heap_stale,
        outer=outer,
        scheduled_mark=len(journal.scheduled),
        preempted_mark=len(journal.preempted),
    )


def end_trial(state: CycleState, saved: SavedTrial | None = None) -> None:
    """Keep tentative work (as part of the enclosing trial's, if any)."""
    state.nodes.space.keep()
    state.placing.journal = None if saved is None else saved.outer


def rollback(state: CycleState, saved: SavedTrial) -> None:
    """Undo tentative work: the free space is again what it was at ``begin_trial``, and so
    are the answers remembered then (``Placing.space_epoch``)."""
    queues, limits, placing, evictions = state.queues, state.limits, state.placing, state.evictions
    state.nodes.space.restore(saved.space)
    evictions.held_version += 1
    queues.allocation = saved.allocation
    queues.allocation_by_class = saved.allocation_by_class
    queues.usage = saved.usage
    limits.new_total = saved.new_total
    limits.new_count = saved.new_count
    limits.new_by_queue = saved.new_by_queue
    limits.infinite_allocation = saved.infinite_allocation
    placing.heap_stale = saved.heap_stale
    journal = placing.journal
    if journal is not None:
        for job_id in reversed(journal.scheduled[saved.scheduled_mark :]):
            del state.result.scheduled[job_id]
        for row in reversed(journal.preempted[saved.preempted_mark :]):
            placing.preempted.discard(row)
        # Evicted jobs that gave way in the trial wait to go back again.
        undone = [r for r in journal.preempted[saved.preempted_mark :] if evictions.evicted[r]]
        if undone:
            evicted_settled(state, np.array(undone, dtype=np.int64), +1)
        del journal.scheduled[saved.scheduled_mark :]
        del journal.preempted[saved.preempted_mark :]
    placing.journal = saved.outer
    placing.space_epoch = saved.space_epoch
