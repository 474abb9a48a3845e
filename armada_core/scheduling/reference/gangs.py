"""Placing gangs (SEMANTICS.md, "Placing"): evicted gangs back on their own nodes, queued
gangs all or nothing (down to ``gang_min_cardinality``), on one value of
``gang_uniformity_label`` if they name one. A single job is a gang of one.

A gang is tried on the live state; a failed or trial attempt is taken back with
``CycleState.save``/``restore``.
"""

from __future__ import annotations

from .. import reasons, topology
from ..model import Job
from .limits import budget_charges, charge_placed, class_limit, first_limit
from .nodes import Rank, no_room, place
from .state import INF, CycleState, Item, NodeState, add, fits


def return_evicted(state: CycleState, item: Item) -> None:
    """Every member back on its own node, all or nothing, if the node's capacity minus
    everything now holding space fits it and the queue's class cap allows; otherwise the
    members are preempted (an extra member too, once its core failed)."""
    ok = not (item.parent is not None and item.parent.failed)
    if ok and class_limit(state, item) is not None:
        ok = False
    placed: list[tuple[NodeState, Job, list[int]]] = []
    if ok:
        for job in item.members:
            ns, vec = state.node_of(job), state.vec(job)
            if not fits(ns.free_held_giving_way(-INF), vec):
                ok = False
                break
            ns.held[job.id] = (vec, INF)
            placed.append((ns, job, vec))
    if ok:
        for ns, job, vec in placed:
            del ns.evicted[job.id]
            state.account(job, vec, +1)
        return
    for ns, job, _ in placed:
        del ns.held[job.id]
    item.failed = True
    for job in item.members:
        del state.node_of(job).evicted[job.id]
        state.result.preempted.add(job.id)


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
        placed = place_topology_gang(state, members, minimum, label, core)
    elif label is None:
        placed = place_gang(state, members, minimum, core)
    else:
        placed = place_uniform_gang(state, members, minimum, label, core)
    charge_placed(state, [j for j in members if j.id in placed], charges)


def elastic_reason(job: Job) -> str:
    """Why an elastic member of a role group was left queued."""
    return reasons.elastic_waits(job.gang_id or "", job.gang_role or "")


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


def place_topology_gang(
    state: CycleState, members: list[Job], minimum: int, label: str | None, core: int = 0
) -> set[str]:
    """A gang in one domain of the narrowest topology level that holds it, within its
    maximum hops (SEMANTICS.md, "Topology"). Every domain of a level is tried (split by
    the uniformity label's value when the gang names one); the winner has the most members
    placed, then the lowest worst stage, then the narrowest level, then the least free
    resources left on its nodes, then the smallest key. Once a level places the whole gang
    without displacing anything, no wider level can win and none is tried. Returns the
    members placed."""
    levels = state.snapshot.config.topology_levels
    max_hops = members[0].gang_max_hops
    topo = topology.gang_topology(
        topology.NodeLabels([ns.node for ns in state.nodes]), levels, label, max_hops
    )
    best_key: tuple | None = None
    best: set[int] | None = None
    cluster_reason = reasons.NO_CAPACITY
    for rank, level in enumerate(topo.levels):
        for key, indices in zip(level.keys, level.members, strict=True):
            allowed = set(indices)
            saved = state.save()
            attempt = try_gang(state, members, minimum, allowed, core)
            if isinstance(attempt, str):
                if level.label is None and label is None:
                    cluster_reason = attempt
            else:
                placed, worst = attempt
                leftover = state.zeros()
                for i in indices:
                    leftover = add(leftover, state.nodes[i].free())
                candidate = (-len(placed), worst, rank, leftover, key)
                if best_key is None or candidate < best_key:
                    best_key, best = candidate, allowed
            state.restore(saved)
        if best_key is not None and best_key[0] == -len(members) and best_key[1] == (0, 0.0):
            break
    if best is None:
        if topo.constrained:
            assert max_hops is not None
            why = reasons.gang_hops(len(members), max_hops, topology.widest_label(topo))
        elif label is not None:
            why = reasons.gang_uniformity_failed(label)
        else:
            why = reasons.gang_failed(cluster_reason)
        for j in members:
            state.result.unscheduled[j.id] = why
        return set()
    attempt = try_gang(state, members, minimum, best, core)
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
    best_key, best = None, None
    for value in values:
        allowed = nodes_with(state, label, value)
        saved = state.save()
        attempt = try_gang(state, members, minimum, allowed, core)
        if not isinstance(attempt, str):
            placed, worst = attempt
            leftover = state.zeros()
            for ns in state.nodes:
                if ns.index in allowed:
                    leftover = add(leftover, ns.free())
            key = (-len(placed), worst, leftover, value)
            if best_key is None or key < best_key:
                best_key, best = key, value
        state.restore(saved)
    return best


def nodes_with(state: CycleState, label: str, value: str) -> set[int]:
    return {ns.index for ns in state.nodes if ns.node.labels.get(label) == value}


def try_gang(
    state: CycleState,
    members: list[Job],
    minimum: int,
    allowed: set[int] | None,
    core: int = 0,
) -> tuple[set[str], Rank] | str:
    """Place members in order; with fewer than ``minimum`` placed, or a member of a role
    group's ``core`` not placed, the attempt fails (the caller takes it back). Returns the
    members placed and the worst stage, or a reason."""
    placed: set[str] = set()
    worst = (0, 0.0)
    first_reason: str | None = None
    for k, job in enumerate(members):
        outcome = place(state, job, allowed)
        if isinstance(outcome, str):
            first_reason = first_reason or outcome
            if minimum == len(members) or k < core:
                return outcome
            continue
        placed.add(job.id)
        worst = max(worst, outcome)
    if len(placed) < minimum:
        return first_reason or reasons.NO_CAPACITY
    return placed, worst


def fail_unplaced(state: CycleState, members: list[Job], placed: set[str], core: int = 0) -> None:
    """The gang runs with the members placed; the others fail, or in a role group wait
    for capacity in later cycles."""
    for j in members:
        if j.id not in placed:
            if core:
                state.result.unscheduled[j.id] = elastic_reason(j)
            else:
                state.result.failed[j.id] = reasons.GANG_ELASTIC_REST
