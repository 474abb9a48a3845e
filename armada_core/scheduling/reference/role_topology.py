"""Topology per sub-group (SEMANTICS.md, "Topology per sub-group"): a pod group's roles each
in the narrowest domain that holds them, then the group as a whole as close as it fits."""

from __future__ import annotations

from .. import subgroups, topology
from ..model import Job
from ..subgroups import RoleFailure, SubGroup
from .elastic import fail_unplaced
from .gang_trials import free_left, try_gang
from .nodes import Rank, place
from .state import CycleState

#: How a domain of the group compares: -members placed, worst stage, the roles' hops
#: (largest first), level rank, free left, key.
GroupKey = tuple[int, Rank, tuple[int, ...], int, list[int], topology.DomainKey]
#: How a domain of a role compares: worst stage, level rank, free left, key.
RoleKey = tuple[Rank, int, list[int], topology.DomainKey]
#: A trial of the group in one domain: the members placed, the worst stage, the roles' hops.
Trial = tuple[set[str], Rank, tuple[int, ...]]


def place_role_group(
    state: CycleState, members: list[Job], core: int, label: str | None
) -> set[str]:
    """Every domain of every level (the group as a whole has no maximum) is tried with each
    role in its best domain inside it; the winner has the most members placed, then the
    lowest worst stage, then the closest roles, then the narrowest level, the least free
    left and the smallest key. Returns the members placed."""
    levels = state.snapshot.config.topology_levels
    labels = topology.NodeLabels([ns.node for ns in state.nodes])
    groups = subgroups.subgroups(members, core, labels, levels, label)
    whole = topology.gang_topology(labels, levels, label, None)
    closest = subgroups.closest_key(levels, groups)
    best_key: GroupKey | None = None
    best: tuple[set[int], int] | None = None
    failures: list[RoleFailure] = []
    for rank, level in enumerate(whole.levels):
        for key, indices in zip(level.keys, level.members, strict=True):
            domain = set(indices)
            saved = state.save()
            attempt = _try_roles(state, members, groups, domain, level.hops, key, labels)
            if isinstance(attempt, RoleFailure):
                if level.label is None:
                    failures.append(attempt)
            else:
                placed, worst, hops = attempt
                candidate = (-len(placed), worst, hops, rank, free_left(state, indices), key)
                if best_key is None or candidate < best_key:
                    best_key, best = candidate, (domain, level.hops)
            state.restore(saved)
        if best_key is not None and best_key[:3] == (-len(members), (0, 0.0), closest):
            break
    if best is None:
        why = subgroups.failure_reason(members[0].gang_id or "", failures, label)
        for j in members:
            state.result.unscheduled[j.id] = why
        return set()
    assert best_key is not None
    attempt = _try_roles(state, members, groups, best[0], best[1], best_key[5], labels)
    assert not isinstance(attempt, RoleFailure)
    fail_unplaced(state, members, attempt[0], core)
    return attempt[0]


def _try_roles(
    state: CycleState,
    members: list[Job],
    groups: list[SubGroup],
    domain: set[int],
    domain_hops: int,
    domain_key: topology.DomainKey,
    labels: topology.NodeLabels,
) -> Trial | RoleFailure:
    """The group in one of its domains: each role's core in the role's best domain inside
    it (roles in ``groups`` order), then each elastic member (in placing order) in the
    nearest domain of its role that has room."""
    nodes_of: dict[str, list[int]] = {}
    placed: set[str] = set()
    worst: Rank = (0, 0.0)
    for g in groups:
        if not g.core:
            continue
        core = [members[k] for k in g.core]
        chosen = _role_domain(state, core, g, domain, domain_hops, domain_key)
        if isinstance(chosen, RoleFailure):
            return chosen
        attempt = try_gang(state, core, len(core), chosen)
        assert not isinstance(attempt, str)
        placed |= attempt[0]
        worst = max(worst, attempt[1])
        nodes_of[g.role] = [state.node_index[state.result.scheduled[j.id]] for j in core]
    role_of = {k: g for g in groups for k in g.elastic}
    for k in sorted(role_of):
        g, job = role_of[k], members[k]
        for near in subgroups.nearest(g, nodes_of.get(g.role, [])):
            outcome = place(state, job, domain & set(near))
            if not isinstance(outcome, str):
                placed.add(job.id)
                worst = max(worst, outcome)
                nodes_of.setdefault(g.role, []).append(
                    state.node_index[state.result.scheduled[job.id]]
                )
                break
    levels = state.snapshot.config.topology_levels
    return placed, worst, subgroups.hops_key(labels, levels, groups, nodes_of)


def _role_domain(
    state: CycleState,
    core: list[Job],
    group: SubGroup,
    domain: set[int],
    domain_hops: int,
    domain_key: topology.DomainKey,
) -> set[int] | RoleFailure:
    """The domain inside the group's for a role's core: the role's levels narrowest first
    (within its maximum hops), each domain tried; the winner has the lowest worst stage,
    then the narrowest level, the least free left, the smallest key. Once a level holds
    the core without displacing anything, no wider one is tried."""
    best_key: RoleKey | None = None
    best: set[int] | None = None
    reason: str | None = None
    for rank, level in subgroups.role_candidates(group, domain_hops):
        if level is None:
            tries = [(domain_key, domain)]
        else:
            tries = [
                (key, set(nodes))
                for key, nodes in zip(level.keys, level.members, strict=True)
                if nodes[0] in domain
            ]
        for key, nodes in tries:
            saved = state.save()
            attempt = try_gang(state, core, len(core), nodes)
            if isinstance(attempt, str):
                if level is None:
                    reason = attempt
            else:
                candidate = (attempt[1], rank, free_left(state, nodes), key)
                if best_key is None or candidate < best_key:
                    best_key, best = candidate, nodes
            state.restore(saved)
        if best_key is not None and best_key[0] == (0, 0.0):
            break
    if best is None:
        return RoleFailure(group, reason)
    return best
