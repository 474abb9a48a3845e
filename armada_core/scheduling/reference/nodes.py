"""Node selection for one queued job (SEMANTICS.md, "Placing").

Among the nodes the job's static constraints admit, the job goes at the first stage that
fits: (1) no displacement; (2) fair share: evicted jobs of class priority <= L give way, for
L ascending; (3) urgency: held jobs of priority <= L < own class priority give way, for L
ascending. Where jobs of a lower class give way (stage 2 below the job's class, stage 3) the
node is chosen by its victims and a minimal set of them is preempted at once
(``victims.py``); elsewhere by best fit: the least free resources (in dimension order), then
node order.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import NamedTuple

from .. import reasons
from ..constraints import node_admits
from ..model import Job
from .state import INF, CycleState, NodeState, add, fits
from .victims import by_victims, evicted_give_way, preempt_for

#: How deep a placement went: (stage - 1, level), (0, 0.0) without displacement. A gang
#: placed across label values compares its worst.
Rank = tuple[int, float]


class Choice(NamedTuple):
    node: NodeState
    rank: Rank
    #: The level urgency preempts up to on the node (stage 3), else None.
    urgency_level: float | None
    #: The level up to which evicted jobs of a lower class give way on the node (stage 2
    #: below the job's class), else None.
    evicted_level: float | None = None


def place(state: CycleState, job: Job, allowed: set[int] | None) -> Rank | str:
    """Place one queued job (on a node whose index is in ``allowed``, if given), preempting
    by urgency if needed; returns how deep it went, or the reason it did not fit."""
    chosen = select_node(state, job, allowed)
    if isinstance(chosen, str):
        return chosen
    vec = state.vec(job)
    if chosen.urgency_level is not None:
        preempt_for(state, chosen.node, vec, chosen.urgency_level)
    elif chosen.evicted_level is not None:
        evicted_give_way(state, chosen.node, vec, chosen.evicted_level)
    chosen.node.held[job.id] = (vec, INF)
    state.account(job, vec, +1)
    state.result.scheduled[job.id] = chosen.node.node.id
    state.new_count += 1
    state.new_by_queue[job.queue] = state.new_by_queue.get(job.queue, 0) + 1
    state.new_total = add(state.new_total, vec)
    return chosen.rank


def select_node(state: CycleState, job: Job, allowed: set[int] | None) -> Choice | str:
    """The node for the job at the first stage that fits, or the reason none does."""
    vec = state.vec(job)
    candidates = [
        ns
        for ns in state.nodes
        if (allowed is None or ns.index in allowed) and node_admits(job, ns.node)
    ]
    if not candidates:
        return reasons.NO_MATCHING_NODE
    if not any(fits(ns.capacity, vec) for ns in candidates):
        return reasons.TOO_LARGE
    found = best_fit(candidates, vec, NodeState.free)
    if found is not None:
        return Choice(found, (0, 0.0), None)
    own = state.priority(job)
    for level in sorted({pcp for ns in state.nodes for _, pcp in ns.evicted.values()}):
        if level < own:
            found = by_victims(state, candidates, vec, level, evicted=True)
            if found is not None:
                return Choice(found, (1, float(level)), None, float(level))
            continue
        found = best_fit(candidates, vec, partial(NodeState.free_evicted_giving_way, level=level))
        if found is not None:
            return Choice(found, (1, float(level)), None)
    for hold in sorted({h for ns in state.nodes for _, h in ns.held.values() if h < own}):
        found = by_victims(state, candidates, vec, hold, evicted=False)
        if found is not None:
            return Choice(found, (2, float(hold)), hold)
    return reasons.NO_CAPACITY


def no_room(state: CycleState, job: Job) -> str:
    """Why a single job found no room: how many nodes match it, and its request."""
    matching = sum(1 for ns in state.nodes if node_admits(job, ns.node))
    return reasons.no_room(matching, state.dims, state.vec(job))


def best_fit(
    candidates: list[NodeState], vec: list[int], free_of: Callable[[NodeState], list[int]]
) -> NodeState | None:
    """The fitting node with the least free resources (lexicographic), then node order."""
    chosen, chosen_key = None, None
    for ns in candidates:
        free = free_of(ns)
        if fits(free, vec):
            key = (free, ns.index)
            if chosen_key is None or key < chosen_key:
                chosen, chosen_key = ns, key
    return chosen
