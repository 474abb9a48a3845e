"""Placing queued gangs (SEMANTICS.md, Placing): all or nothing down to the gang's minimum
cardinality, on one value of the uniformity label when it has one, in one topology domain
when levels are configured (``gang_topology``; a pod group's roles each in one,
``role_topology``).

A gang of identical members that cannot displace anything is placed by simulation, without
touching the state until it is known to fit. Any other gang is placed member by member like
the reference, tentatively when it may not fit or when label values are compared
(``gang_trials``). A gang shape that fits nowhere is remembered until something is preempted.
"""

from __future__ import annotations

import numpy as np

from .. import reasons, topology
from .elastic import elastic_reason, leave_unplaced
from .free_space import fit_counts
from .gang_topology import topology_gang
from .gang_trials import (
    Placement,
    apply_simulated,
    begin_trial,
    end_trial,
    failed_before,
    identical_shape,
    place_members,
    remember_failure,
    rollback,
    room_per_value,
    simulate_members,
    try_members,
)
from .limits import class_limit, cycle_limit, gang_charges, gang_limit, take_charges
from .nodes import place_job
from .outcomes import leave_queued
from .role_topology import role_group
from .state import CycleState, Item, Rank, Shape
from .victims import urgency_possible

#: How a label value's trial compares: -members placed, worst stage, free left, value.
ValueKey = tuple[int, Rank, list[int], str]


def queued_gang(state: CycleState, q: int, item: Item) -> None:
    """Limits for the gang as a whole, then its placement (or its jobs' reason)."""
    members = item.members
    reason = (
        cycle_limit(state, q, item) or class_limit(state, q, members) or gang_limit(state, q, item)
    )
    if reason is not None:
        leave_queued(state, np.array(members), reason)
        return
    charges = gang_charges(state, q, item)
    if item.late:
        # A late member of a running role group: alone, near the running members.
        i = members[0]
        if isinstance(place_job(state, q, i, item.allowed), str):
            state.result.unscheduled[state.jobs.ids[i]] = elastic_reason(state, i)
        else:
            take_charges(state, q, members, charges)
        return
    if topology.applies(state.config.topology_levels, len(members)):
        if item.core:
            role_group(state, q, item, charges)
            return
        if topology_gang(state, q, item, charges):
            return
    _plain_gang(state, q, item, charges)


def _plain_gang(state: CycleState, q: int, item: Item, charges: dict[int, int]) -> None:
    """A gang placed without topology: anywhere, or on one value of its uniformity label;
    the members placed take their budget ``charges``."""
    identical = identical_shape(state, item)
    if identical is not None:
        s, shape = identical
        if not urgency_possible(state, shape.class_priority):
            _identical_gang(state, q, item, s, shape, charges)
            return
        if _cannot_fit(state, item, s, shape):
            return
    _generic_gang(state, q, item, charges)


def _cannot_fit(state: CycleState, item: Item, s: int, shape: Shape) -> bool:
    """Fail a gang of identical members at once when even displacing everything that
    may be displaced leaves too little room (for each label value, if uniform)."""
    want = len(item.members)
    label = item.uniformity_label
    failure_key = (s, want, item.minimum, label, "urgent")
    if failed_before(state, item, failure_key):
        return True
    space = state.nodes.space
    candidates = shape.static_candidates()
    if label is None:
        if shape.static_reason is not None:
            reason = reasons.gang_failed(shape.static_reason)
        else:
            free = space.free_held_giving_way(candidates, shape.class_priority - 0.5)
            if int(fit_counts(free, shape.request, want).sum()) >= item.minimum:
                return False
            reason = reasons.gang_failed(reasons.NO_CAPACITY)
    else:
        values, value_of = state.nodes.labels.column(label)
        if len(values) and len(candidates):
            free = space.free_held_giving_way(candidates, shape.class_priority - 0.5)
            room = room_per_value(shape, free, value_of, len(values), want)
            if (room >= item.minimum).any():
                return False
        reason = reasons.gang_uniformity_failed(label)
    remember_failure(state, item, failure_key, reason)
    return True


def _identical_gang(
    state: CycleState, q: int, item: Item, s: int, shape: Shape, charges: dict[int, int]
) -> None:
    """Identical members that cannot displace anything: simulated, then applied."""
    failure_key = (s, len(item.members), item.minimum, item.uniformity_label)
    if failed_before(state, item, failure_key):
        return
    if item.uniformity_label is None:
        found = _anywhere(state, item, shape)
    else:
        found = _best_value(state, item, item.uniformity_label, shape)
    if isinstance(found, str):
        remember_failure(state, item, failure_key, found)
        return
    apply_simulated(state, q, item.members, found, charges)


def _anywhere(state: CycleState, item: Item, shape: Shape) -> Placement | str:
    """A placement on any candidate nodes (node, count), or the reason there is none."""
    if shape.static_reason is not None:
        return reasons.gang_failed(shape.static_reason)
    placed, _ = simulate_members(state, shape, shape.static_candidates(), len(item.members))
    if sum(c for _, c in placed) < item.minimum:
        return reasons.gang_failed(reasons.NO_CAPACITY)
    return placed


def _best_value(state: CycleState, item: Item, label: str, shape: Shape) -> Placement | str:
    """A placement on one label value (or the reason there is none): the value with the most
    members placed, then the lowest worst stage, then the least free resources left on the
    value's nodes, then the smallest value."""
    values, value_of = state.nodes.labels.column(label)
    want = len(item.members)
    best_key: ValueKey | None = None
    best_placed: Placement | None = None
    candidates = shape.static_candidates()
    space = state.nodes.space
    if len(values) and len(candidates):
        free = space.capacity[candidates] - space.held[candidates]
        room = room_per_value(shape, free, value_of, len(values), want)
        candidate_value = value_of[candidates]
        for v in np.flatnonzero(room >= item.minimum).tolist():
            placed, worst = simulate_members(state, shape, candidates[candidate_value == v], want)
            got = sum(c for _, c in placed)
            if got < item.minimum:
                continue
            value_nodes = np.flatnonzero(value_of == v)
            leftover = (space.free(value_nodes).sum(axis=0) - shape.request * got).tolist()
            key = (-got, worst, leftover, values[v])
            if best_key is None or key < best_key:
                best_key, best_placed = key, placed
    if best_placed is None:
        return reasons.gang_uniformity_failed(label)
    return best_placed


def _generic_gang(state: CycleState, q: int, item: Item, charges: dict[int, int]) -> None:
    """Any other gang, member by member: on any nodes, or on the best value of its label."""
    members, minimum, label = item.members, item.minimum, item.uniformity_label
    if label is None:
        saved = begin_trial(state)
        attempt = try_members(state, q, members, minimum, None, item.core)
        if isinstance(attempt, str):
            rollback(state, saved)
            leave_queued(state, np.array(members), reasons.gang_failed(attempt))
            return
        end_trial(state)
        leave_unplaced(state, members, attempt[0], item.core)
        take_charges(state, q, [i for i in members if i in attempt[0]], charges)
        return
    values, value_of = state.nodes.labels.column(label)
    best_key: ValueKey | None = None
    best_value = None
    space = state.nodes.space
    for v, value in enumerate(values):
        allowed = value_of == v
        saved = begin_trial(state)
        attempt = try_members(state, q, members, minimum, allowed, item.core)
        if not isinstance(attempt, str):
            placed, worst = attempt
            leftover = space.free(np.flatnonzero(allowed)).sum(axis=0).tolist()
            key = (-len(placed), worst, leftover, value)
            if best_key is None or key < best_key:
                best_key, best_value = key, v
        rollback(state, saved)
    if best_value is None:
        leave_queued(state, np.array(members), reasons.gang_uniformity_failed(label))
        return
    place_members(state, q, item, value_of == best_value, charges)
