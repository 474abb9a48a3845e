"""Topology (SEMANTICS.md, "Topology"): a gang in one domain of the narrowest topology level
that holds it, within its maximum hops."""

from __future__ import annotations

from .. import reasons, topology
from ..model import Job
from .elastic import fail_unplaced
from .gang_trials import free_left, try_gang
from .nodes import Rank
from .state import CycleState

#: How a domain's trial compares: -members placed, worst stage, level rank, free left, key.
TrialKey = tuple[int, Rank, int, list[int], topology.DomainKey]


def place_topology_gang(
    state: CycleState, members: list[Job], minimum: int, label: str | None
) -> set[str]:
    """Every domain of a level is tried (split by the uniformity label's value when the
    gang names one); the winner has the most members placed, then the lowest worst stage,
    then the narrowest level, then the least free resources left on its nodes, then the
    smallest key. Once a level places the whole gang without displacing anything, no wider
    level can win and none is tried. Returns the members placed."""
    levels = state.snapshot.config.topology_levels
    max_hops = members[0].gang_max_hops
    topo = topology.gang_topology(
        topology.NodeLabels([ns.node for ns in state.nodes]), levels, label, max_hops
    )
    best_key: TrialKey | None = None
    best: set[int] | None = None
    cluster_reason = reasons.NO_CAPACITY
    for rank, level in enumerate(topo.levels):
        for key, indices in zip(level.keys, level.members, strict=True):
            allowed = set(indices)
            saved = state.save()
            attempt = try_gang(state, members, minimum, allowed)
            if isinstance(attempt, str):
                if level.label is None and label is None:
                    cluster_reason = attempt
            else:
                placed, worst = attempt
                candidate = (-len(placed), worst, rank, free_left(state, indices), key)
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
    attempt = try_gang(state, members, minimum, best)
    assert not isinstance(attempt, str)
    fail_unplaced(state, members, attempt[0])
    return attempt[0]
