"""Topology (SEMANTICS.md, "Topology"): a gang in one domain of the narrowest topology level
that holds it, within its maximum hops, chosen exactly as the reference does: by most members
placed, lowest worst stage, narrowest level, least free left on the domain's nodes, smallest
key.

Domains that could not hold the gang even if everything that may give way did are not tried.
Identical members that displace nothing are simulated; any other gang is tried member by
member, tentatively. When no narrower domain holds the gang and the whole cluster is
allowed, the gang is placed as without topology (the cluster level is exactly that).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from .. import reasons, topology
from .free_space import BoolArray, IntArray
from .gang_trials import (
    Placement,
    apply_simulated,
    begin_trial,
    identical_shape,
    place_members,
    remember_failure,
    rollback,
    room_per_value,
    simulate_members,
    try_members,
)
from .outcomes import leave_queued
from .state import CycleState, Item, Rank, Shape, TopologyDomains
from .victims import urgency_possible

#: How a domain's trial compares: -members placed, worst stage, level rank, free left, key.
TrialKey = tuple[int, Rank, int, list[int], topology.DomainKey]


@dataclass(slots=True)
class _DomainTrial:
    """The best domain so far: how it compares, and how to place the gang there (the
    simulated placement, or the domain's nodes to place it on member by member)."""

    key: TrialKey
    placement: Placement | None
    allowed: BoolArray | None


def topology_gang(state: CycleState, q: int, item: Item, charges: dict[int, int]) -> bool:
    """Place the gang in its best domain, or leave it queued with the reason; the members
    placed take their budget ``charges``. False when no domain narrower than the cluster
    holds it and the whole cluster is allowed: the caller places it as without topology."""
    members = item.members
    want = len(members)
    max_hops = state.jobs.records[members[0]].gang_max_hops
    domains = topology_domains(state, item.uniformity_label, max_hops)
    identical = identical_shape(state, item)
    s, shape = identical if identical is not None else (-1, None)
    simulated = (
        shape if shape is not None and not urgency_possible(state, shape.class_priority) else None
    )
    failure_key = (s, want, item.minimum, item.uniformity_label, "topology", max_hops)
    if simulated is not None:
        known = state.gangs.failures.get(failure_key)
        if known is not None and known[0] == state.placing.space_epoch:
            # Failed before, or no narrower domain held it: as then.
            if known[1] is None:
                return False
            leave_queued(state, np.array(members), known[1])
            return True
    best = _search_levels(state, q, item, charges, domains, shape, simulated)
    if best == "placed":
        return True
    if best == "cluster":
        if simulated is not None:
            state.gangs.failures[failure_key] = (state.placing.space_epoch, None)
        return False
    if best is None:
        assert domains.topology.constrained and max_hops is not None
        reason = reasons.gang_hops(want, max_hops, topology.widest_label(domains.topology))
        if simulated is not None:
            remember_failure(state, item, failure_key, reason)
        else:
            leave_queued(state, np.array(members), reason)
        return True
    if best.placement is not None:
        apply_simulated(state, q, members, best.placement, charges)
    else:
        place_members(state, q, item, best.allowed, charges)
    return True


def _search_levels(
    state: CycleState,
    q: int,
    item: Item,
    charges: dict[int, int],
    domains: TopologyDomains,
    shape: Shape | None,
    simulated: Shape | None,
) -> _DomainTrial | Literal["cluster", "placed"] | None:
    """The best domain, narrowest level first, until a level holds the whole gang without
    displacing anything. "placed": a domain held the identical members without displacing
    anything, and they were placed there; "cluster": the search reached the cluster level
    with no narrower domain found; None: no allowed domain holds the gang."""
    want = len(item.members)
    best: _DomainTrial | None = None
    for rank, level in enumerate(domains.topology.levels):
        if level.label is None and best is None:
            return "cluster"
        domain_of = domains.domain_of[rank]
        if shape is not None:
            d = _whole_without_displacing(state, shape, domain_of, len(level.keys), want)
            if d is not None:
                # Beats every other domain of this level, and the narrower levels had no
                # such placement (or they would have stopped the search).
                candidates = shape.static_candidates()
                rows = candidates[domain_of[candidates] == d]
                placed, _ = simulate_members(state, shape, rows, want)
                apply_simulated(state, q, item.members, placed, charges)
                return "placed"
        for d in np.flatnonzero(_may_hold(state, item, shape, domain_of, len(level.keys))).tolist():
            trial = _try_domain(state, q, item, simulated, domain_of, d, domains.rows[rank][d])
            if trial is None:
                continue
            got, worst, leftover, placement, allowed = trial
            key = (-got, worst, rank, leftover, level.keys[d])
            if best is None or key < best.key:
                best = _DomainTrial(key, placement, allowed)
        if best is not None and best.key[0] == -want and best.key[1] == (0, 0.0):
            break
    return best


def _try_domain(
    state: CycleState,
    q: int,
    item: Item,
    simulated: Shape | None,
    domain_of: IntArray,
    d: int,
    rows: IntArray,
) -> tuple[int, Rank, list[int], Placement | None, BoolArray | None] | None:
    """The gang tried in domain ``d`` (whose nodes are ``rows``): members placed, worst
    stage, free left on the domain's nodes, and the placement (simulated) or the domain's
    node mask (tried tentatively, and taken back); None when it does not fit."""
    space = state.nodes.space
    if simulated is not None:
        candidates = simulated.static_candidates()
        want = len(item.members)
        placed, worst = simulate_members(
            state, simulated, candidates[domain_of[candidates] == d], want
        )
        got = sum(c for _, c in placed)
        if got < item.minimum:
            return None
        leftover = (space.free(rows).sum(axis=0) - simulated.request * got).tolist()
        return got, worst, leftover, placed, None
    allowed = domain_of == d
    saved = begin_trial(state)
    attempt = try_members(state, q, item.members, item.minimum, allowed, item.core)
    found = None
    if not isinstance(attempt, str):
        leftover = space.free(rows).sum(axis=0).tolist()
        found = (len(attempt[0]), attempt[1], leftover, None, allowed)
    rollback(state, saved)
    return found


def topology_domains(state: CycleState, label: str | None, max_hops: int | None) -> TopologyDomains:
    """The gang's levels (``topology.gang_topology``), each level's domain per node (-1:
    none) and each domain's node rows; built once per cycle for each label and maximum."""
    key = (label, max_hops)
    found = state.gangs.topologies.get(key)
    if found is None:
        nodes = state.nodes
        topo = topology.gang_topology(nodes.labels, state.config.topology_levels, label, max_hops)
        domain_of, rows_of = [], []
        for level in topo.levels:
            of = np.full(len(nodes.records), -1, dtype=np.int64)
            rows = []
            for d, indices in enumerate(level.members):
                arr = np.array(indices, dtype=np.int64)
                of[arr] = d
                rows.append(arr)
            domain_of.append(of)
            rows_of.append(rows)
        found = state.gangs.topologies[key] = TopologyDomains(topo, domain_of, rows_of)
    return found


def _whole_without_displacing(
    state: CycleState, shape: Shape, domain_of: IntArray, n_domains: int, want: int
) -> int | None:
    """The domain of a level that the reference would pick when some domain holds the whole
    gang of identical members without displacing anything: members go to stage 1 while any
    node of the domain has room, and a node's room does not depend on the others, so such a
    domain is one whose nodes' stage-1 counts add up to the gang. Among them: the least free
    left on the domain's nodes, then the smallest key (domains are numbered in key order)."""
    space = state.nodes.space
    candidates = shape.static_candidates()
    room = room_per_value(shape, space.free(candidates), domain_of, n_domains, want)
    ok = np.flatnonzero(room >= want)
    if len(ok) == 0:
        return None
    nodes = np.flatnonzero(domain_of >= 0)
    total = np.zeros((n_domains, space.n_dims), dtype=np.int64)
    np.add.at(total, domain_of[nodes], space.free(nodes))
    left = total[ok] - shape.request * want
    order = np.lexsort([ok] + [left[:, k] for k in range(space.n_dims - 1, -1, -1)])
    return int(ok[order[0]])


def _may_hold(
    state: CycleState, item: Item, shape: Shape | None, domain_of: IntArray, n_domains: int
) -> BoolArray:
    """Per domain, whether the gang's minimum could fit if everything that may give way to
    it did (an upper bound: a domain failing it cannot hold the gang)."""
    space = state.nodes.space
    if shape is not None:
        candidates = shape.static_candidates()
        free = space.free_held_giving_way(candidates, shape.class_priority - 0.5)
        room = room_per_value(shape, free, domain_of, n_domains, len(item.members))
        holds: BoolArray = room >= item.minimum
        return holds
    jobs = state.jobs
    top = max(int(jobs.class_priority[i]) for i in item.members)
    nodes = np.flatnonzero(domain_of >= 0)
    free = np.maximum(space.free_held_giving_way(nodes, top - 0.5), 0)
    total = np.zeros((n_domains, space.n_dims), dtype=np.int64)
    np.add.at(total, domain_of[nodes], free)
    requests = state.shapes.requests[jobs.shape[item.members]]
    need = np.sort(requests, axis=0)[: item.minimum].sum(axis=0)
    fits: BoolArray = (total >= need).all(axis=1)
    return fits
