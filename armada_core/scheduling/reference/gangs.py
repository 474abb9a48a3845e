"""Placing queued gangs (SEMANTICS.md, "Placing"): all or nothing (down to
``gang_min_cardinality``), on one value of ``gang_uniformity_label`` if they name one, in
one topology domain when levels are configured (``gang_topology``; a pod group's roles each
in one, ``role_topology``). A single job is a gang of one.
"""

from __future__ import annotations

from .. import reasons, topology
from ..model import Job
from .elastic import elastic_reason, fail_unplaced
from .gang_topology import place_topology_gang
from .gang_trials import free_left, try_gang
from .limits import budget_charges, charge_placed, first_limit
from .nodes import Rank, no_room, place
from .role_topology import place_role_group
from .state import CycleState, Item

#: How a label value's trial compares: -members placed, worst stage, free left, value.
ValueKey = tuple[int, Rank, list[int], str]


def schedule_queued(state: CycleState, item: Item) -> None:
    """Limits first, then the members; every job of the gang ends scheduled, unscheduled
    (with the reason) or, above an elastic gang's placement, failed."""
    members = item.members
    reason = first_limit(state, item)
    if reason is not None:
        for j in members:
            state.result.unscheduled[j.id] = reason
        return
    charges = budget_charges(state, item)
    if item.late:
        outcome = place(state, members[0], item.allowed)
        if isinstance(outcome, str):
            state.result.unscheduled[members[0].id] = elastic_reason(members[0])
        else:
            charge_placed(state, members, charges)
        return
    if len(members) == 1 and members[0].gang_id is None:
        outcome = place(state, members[0], None)
        if outcome == reasons.NO_CAPACITY:
            outcome = no_room(state, members[0])
        if isinstance(outcome, str):
            state.result.unscheduled[members[0].id] = outcome
        else:
            charge_placed(state, members, charges)
        return
    minimum = max(1, min(members[0].min_cardinality, len(members)))
    core = item.core
    if core:
        minimum = core
    label = members[0].gang_uniformity_label
    if topology.applies(state.snapshot.config.topology_levels, len(members)):
        if core:
            placed = place_role_group(state, members, core, label)
        else:
            placed = place_topology_gang(state, members, minimum, label)
    elif label is None:
        placed = place_gang(state, members, minimum, core)
    else:
        placed = place_uniform_gang(state, members, minimum, label, core)
    charge_placed(state, [j for j in members if j.id in placed], charges)


def place_gang(state: CycleState, members: list[Job], minimum: int, core: int = 0) -> set[str]:
    """A gang on any nodes, or none of it; returns the members placed."""
    saved = state.save()
    attempt = try_gang(state, members, minimum, None, core)
    if isinstance(attempt, str):
        state.restore(saved)
        for j in members:
            state.result.unscheduled[j.id] = reasons.gang_failed(attempt)
        return set()
    fail_unplaced(state, members, attempt[0], core)
    return attempt[0]


def place_uniform_gang(
    state: CycleState, members: list[Job], minimum: int, label: str, core: int = 0
) -> set[str]:
    """A gang on the nodes of the best value of its uniformity label, or none of it; returns
    the members placed."""
    value = best_value(state, members, minimum, label, core)
    if value is None:
        for j in members:
            state.result.unscheduled[j.id] = reasons.gang_uniformity_failed(label)
        return set()
    attempt = try_gang(state, members, minimum, nodes_with(state, label, value), core)
    assert not isinstance(attempt, str)
    fail_unplaced(state, members, attempt[0], core)
    return attempt[0]


def best_value(
    state: CycleState, members: list[Job], minimum: int, label: str, core: int = 0
) -> str | None:
    """Try every value of the label; the winner has the most members placed, then the
    lowest worst stage, then the least free resources left on its nodes, then the smallest
    value. Each trial is taken back."""
    values = sorted({ns.node.labels[label] for ns in state.nodes if label in ns.node.labels})
    best_key: ValueKey | None = None
    best = None
    for value in values:
        allowed = nodes_with(state, label, value)
        saved = state.save()
        attempt = try_gang(state, members, minimum, allowed, core)
        if not isinstance(attempt, str):
            placed, worst = attempt
            key = (-len(placed), worst, free_left(state, allowed), value)
            if best_key is None or key < best_key:
                best_key, best = key, value
        state.restore(saved)
    return best


def nodes_with(state: CycleState, label: str, value: str) -> set[int]:
    return {ns.index for ns in state.nodes if ns.node.labels.get(label) == value}
