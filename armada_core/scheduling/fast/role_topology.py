"""Topology per sub-group (SEMANTICS.md, "Topology per sub-group"): a pod group's roles each
in the narrowest domain that holds them, then the group as a whole as close as it fits,
chosen exactly as the reference does.

Domains narrower than the cluster (of the group, or of a role inside the group's domain)
whose room, with everything that may give way taken away, is too small for the core are
not tried: they could not hold it. The domains whose failures make the reason (the
cluster's, and the group's domain itself for a role) are always tried.

A group whose first role (its core of one shape) fits in no domain fails as any later group
with that first role does while free space only shrinks: that failure is remembered for the
space epoch, as a gang shape's is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import subgroups, topology
from ..subgroups import RoleFailure, SubGroup
from .elastic import leave_unplaced
from .free_space import BoolArray, IntArray
from .gang_topology import topology_domains
from .gang_trials import begin_trial, rollback, try_members
from .limits import take_charges
from .nodes import place_job, static_constraints
from .outcomes import leave_queued
from .state import CycleState, GangShapeKey, Item, Rank
from .victims import urgency_possible

#: How a domain of the group compares: -members placed, worst stage, the roles' hops
#: (largest first), level rank, free left, key.
GroupKey = tuple[int, Rank, tuple[int, ...], int, list[int], topology.DomainKey]
#: How a domain of a role compares: worst stage, level rank, free left, key.
RoleKey = tuple[Rank, int, list[int], topology.DomainKey]
#: A trial of the group in one domain: the members placed, the worst stage, the roles' hops.
Trial = tuple[set[int], Rank, tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class _Domain:
    """A domain of the group: its node mask and rows, its level's hops and its key."""

    mask: BoolArray
    rows: IntArray
    hops: int
    key: topology.DomainKey


def role_group(state: CycleState, q: int, item: Item, charges: dict[int, int]) -> None:
    """Place the pod group in its best domain, each role in its best domain inside it, or
    leave it queued with the reason; the members placed take their budget ``charges``."""
    members = item.members
    records = state.jobs.records
    levels = state.config.topology_levels
    label = item.uniformity_label
    labels = state.nodes.labels
    groups = subgroups.subgroups([records[i] for i in members], item.core, labels, levels, label)
    whole = topology_domains(state, label, None)
    first = groups[0]
    memo = _first_role_key(state, item, first)
    if memo is not None:
        known = state.gangs.failures.get(memo)
        if known is not None and known[0] == state.placing.space_epoch:
            _leave_queued(state, members, [RoleFailure(first, known[1])], label)
            return
    closest = subgroups.closest_key(levels, groups)
    best_key: GroupKey | None = None
    best: _Domain | None = None
    failures: list[RoleFailure] = []
    for rank, level in enumerate(whole.topology.levels):
        domain_of, rows_of = whole.domain_of[rank], whole.rows[rank]
        tried = list(range(len(level.keys)))
        if level.label is not None:
            may = _may_hold(state, members[: item.core], domain_of, len(tried))
            tried = np.flatnonzero(may).tolist()
        for d in tried:
            domain = _Domain(domain_of == d, rows_of[d], level.hops, level.keys[d])
            saved = begin_trial(state)
            attempt = _try_roles(state, q, item, groups, domain)
            if isinstance(attempt, RoleFailure):
                if level.label is None:
                    failures.append(attempt)
            else:
                placed, worst, hops = attempt
                leftover = state.nodes.space.free(domain.rows).sum(axis=0).tolist()
                candidate = (-len(placed), worst, hops, rank, leftover, domain.key)
                if best_key is None or candidate < best_key:
                    best_key, best = candidate, domain
            rollback(state, saved)
        if best_key is not None and best_key[:3] == (-len(members), (0, 0.0), closest):
            break
    if best is None:
        if memo is not None and failures and failures[0].group is first:
            state.gangs.failures[memo] = (state.placing.space_epoch, failures[0].reason)
        _leave_queued(state, members, failures, label)
        return
    attempt = _try_roles(state, q, item, groups, best)
    assert not isinstance(attempt, RoleFailure)
    leave_unplaced(state, members, attempt[0], item.core)
    take_charges(state, q, [i for i in members if i in attempt[0]], charges)


def _first_role_key(state: CycleState, item: Item, first: SubGroup) -> GangShapeKey | None:
    """The key a failure of the group's first role is remembered by, or None when it cannot
    be: a uniformity label (one cluster domain per value), a core of several shapes (which
    member fails first, so the reason, depends on the space left), or urgency preemption
    possible (a failure would not stay one)."""
    if item.uniformity_label is not None or not first.core:
        return None
    shapes = {int(state.jobs.shape[item.members[k]]) for k in first.core}
    if len(shapes) != 1:
        return None
    s = shapes.pop()
    if urgency_possible(state, state.shapes.facts[s].class_priority):
        return None
    return (s, len(first.core), first.max_hops, "first role")


def _leave_queued(
    state: CycleState, members: list[int], failures: list[RoleFailure], label: str | None
) -> None:
    gang_id = state.jobs.records[members[0]].gang_id or ""
    leave_queued(state, np.array(members), subgroups.failure_reason(gang_id, failures, label))


def _try_roles(
    state: CycleState, q: int, item: Item, groups: list[SubGroup], domain: _Domain
) -> Trial | RoleFailure:
    """The group in one of its domains: each role's core in the role's best domain inside
    it, then each elastic member in the nearest domain of its role that has room."""
    members = item.members
    nodes_of: dict[str, list[int]] = {}
    placed: set[int] = set()
    worst: Rank = (0, 0.0)
    for g in groups:
        if not g.core:
            continue
        core = [members[k] for k in g.core]
        chosen = _role_domain(state, q, item, core, g, domain)
        if isinstance(chosen, RoleFailure):
            return chosen
        attempt = try_members(state, q, core, len(core), chosen)
        assert not isinstance(attempt, str)
        placed |= attempt[0]
        worst = max(worst, attempt[1])
        nodes_of[g.role] = [_node_row(state, i) for i in core]
    role_of = {k: g for g in groups for k in g.elastic}
    n = len(state.nodes.records)
    for k in sorted(role_of):
        g, i = role_of[k], members[k]
        for near in subgroups.nearest(g, nodes_of.get(g.role, [])):
            allowed = np.zeros(n, dtype=bool)
            allowed[list(near)] = True
            outcome = place_job(state, q, i, allowed & domain.mask)
            if not isinstance(outcome, str):
                placed.add(i)
                worst = max(worst, outcome)
                nodes_of.setdefault(g.role, []).append(_node_row(state, i))
                break
    levels = state.config.topology_levels
    return placed, worst, subgroups.hops_key(state.nodes.labels, levels, groups, nodes_of)


def _role_domain(
    state: CycleState, q: int, item: Item, core: list[int], group: SubGroup, domain: _Domain
) -> BoolArray | RoleFailure:
    """The node mask of the domain inside the group's for a role's core, as the reference
    chooses it (``reference.role_topology._role_domain``)."""
    topo = topology_domains(state, item.uniformity_label, group.max_hops)
    space = state.nodes.space
    best_key: RoleKey | None = None
    best: BoolArray | None = None
    reason: str | None = None
    for rank, level in subgroups.role_candidates(group, domain.hops):
        if level is None:
            tries = [(domain.key, domain.mask, domain.rows)]
        else:
            domain_of, rows_of = topo.domain_of[rank], topo.rows[rank]
            may = _may_hold(state, core, domain_of, len(level.keys))
            inside = [d for d in np.flatnonzero(may).tolist() if domain.mask[rows_of[d][0]]]
            tries = [(level.keys[d], domain_of == d, rows_of[d]) for d in inside]
        for key, mask, rows in tries:
            saved = begin_trial(state)
            attempt = try_members(state, q, core, len(core), mask)
            if isinstance(attempt, str):
                if level is None:
                    reason = attempt
            else:
                candidate = (attempt[1], rank, space.free(rows).sum(axis=0).tolist(), key)
                if best_key is None or candidate < best_key:
                    best_key, best = candidate, mask
            rollback(state, saved)
        if best_key is not None and best_key[0] == (0, 0.0):
            break
    if best is None:
        return RoleFailure(group, reason)
    return best


def _may_hold(state: CycleState, rows: list[int], domain_of: IntArray, n_domains: int) -> BoolArray:
    """Per domain, whether the members could fit on its nodes that admit one of them, if
    everything that may give way to them did (an upper bound)."""
    jobs, space = state.jobs, state.nodes.space
    candidates = _candidates(state, frozenset(jobs.shape[rows].tolist()))
    nodes = candidates[domain_of[candidates] >= 0]
    top = max(int(jobs.class_priority[i]) for i in rows)
    free = np.maximum(space.free_held_giving_way(nodes, top - 0.5), 0)
    total = np.zeros((n_domains, space.n_dims), dtype=np.int64)
    np.add.at(total, domain_of[nodes], free)
    need = state.shapes.requests[jobs.shape[rows]].sum(axis=0)
    fits: BoolArray = (total >= need).all(axis=1)
    return fits


def _candidates(state: CycleState, shapes: frozenset[int]) -> IntArray:
    """The nodes admitting a job of any of the shapes, sorted."""
    known = state.gangs.candidates.get(shapes)
    if known is None:
        each = [static_constraints(state, state.shapes.facts[s], s) for s in sorted(shapes)]
        known = each[0] if len(each) == 1 else np.unique(np.concatenate(each))
        state.gangs.candidates[shapes] = known
    return known


def _node_row(state: CycleState, i: int) -> int:
    """The row of the node a member was just placed on."""
    return state.nodes.index.rows[state.result.scheduled[state.jobs.ids[i]]]
