"""Topology per sub-group (SEMANTICS.md, "Topology per sub-group"): the rules both
implementations share for placing a pod group when topology levels are configured.

Seed 004 minimises, and lets users bound, the hops between the pods of each sub-group: a
role of a pod group. So a role's members go in the narrowest domain that holds them, within
the role's maximum hops, and only then is the group as a whole kept close. A plain gang is
one sub-group and keeps the rules of "Topology". What is decided here depends only on the
members and the nodes' labels; each implementation tries the domains on its own state.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from . import reasons, topology
from .model import Job
from .roles import role_max_hops, role_of


@dataclass(frozen=True, slots=True)
class SubGroup:
    """One role of a queued pod group, as placing sees it."""

    role: str
    #: Positions (in the group's placing order) of the role's core members: they go all
    #: together into one domain of ``topology``.
    core: tuple[int, ...]
    #: Positions of the role's elastic members: each as near its role as it fits.
    elastic: tuple[int, ...]
    #: The role's maximum hops (its own, else the group's); None: as close as it fits.
    max_hops: int | None
    #: The levels the role may use, narrowest first (``topology.gang_topology``).
    topology: topology.GangTopology

    @property
    def size(self) -> int:
        return len(self.core) + len(self.elastic)


@dataclass(frozen=True, slots=True)
class RoleFailure:
    """Why a role's core found no domain inside a domain of the group: ``reason`` is the
    placing reason at the group's domain itself; None when the role's maximum hops kept it
    out of that domain and no narrower one held it."""

    group: SubGroup
    reason: str | None


def subgroups(
    members: Sequence[Job],
    core: int,
    labels: topology.NodeLabels,
    levels: Sequence[str],
    uniformity: str | None,
) -> list[SubGroup]:
    """The group's roles (``members`` in placing order, the first ``core`` the minimums) in
    the order their cores are placed: the most core members first (the hardest to keep
    close), then by role name."""
    cores: dict[str, list[int]] = {}
    extras: dict[str, list[int]] = {}
    first: dict[str, Job] = {}
    for k, job in enumerate(members):
        role = role_of(job)
        first.setdefault(role, job)
        (cores if k < core else extras).setdefault(role, []).append(k)
    out = []
    for role in sorted(first, key=lambda r: (-len(cores.get(r, ())), r)):
        # One member is 0 hops from itself: a maximum cannot constrain it (as a gang of one).
        alone = len(cores.get(role, ())) + len(extras.get(role, ())) < 2
        limit = None if alone else role_max_hops(first[role])
        out.append(
            SubGroup(
                role,
                tuple(cores.get(role, ())),
                tuple(extras.get(role, ())),
                limit,
                topology.gang_topology(labels, levels, uniformity, limit),
            )
        )
    return out


def spread_hops(labels: topology.NodeLabels, levels: Sequence[str], nodes: Sequence[int]) -> int:
    """Most hops between members placed on the given node indices (one per member), counted
    at the levels' grain as placing compares them: 0 for fewer than two members, else the
    hops of the narrowest level with one domain holding them all (the node itself only when
    ``kubernetes.io/hostname`` is a level)."""
    if len(nodes) <= 1:
        return 0
    where = sorted(set(nodes))
    hops = topology.level_hops(levels)
    for depth in range(len(levels) - 1, -1, -1):
        if depth == len(levels) - 1 and topology.node_level(levels):
            if len(where) == 1:
                return 0
            continue
        codes = {tuple(int(labels.column(lv)[1][i]) for lv in levels[: depth + 1]) for i in where}
        if len(codes) == 1 and min(codes.pop()) >= 0:
            return hops[depth]
    return topology.cluster_hops(levels)


def hops_key(
    labels: topology.NodeLabels,
    levels: Sequence[str],
    groups: Sequence[SubGroup],
    nodes_of: dict[str, list[int]],
) -> tuple[int, ...]:
    """How close each role is (``nodes_of``: node indices of its placed members), for
    comparing placements: the roles' hops, largest first."""
    return tuple(
        sorted(
            (spread_hops(labels, levels, nodes_of.get(g.role, ())) for g in groups), reverse=True
        )
    )


def closest_key(levels: Sequence[str], groups: Sequence[SubGroup]) -> tuple[int, ...]:
    """The best ``hops_key`` any placement can reach: a role of one member is 0 hops
    apart, any other at least one domain of the narrowest level (0 for the node itself)."""
    narrowest = topology.level_hops(levels)[-1]
    return tuple(sorted((0 if g.size <= 1 else narrowest for g in groups), reverse=True))


def role_candidates(
    group: SubGroup, domain_hops: int
) -> Iterable[tuple[int, topology.Level | None]]:
    """The role's levels to try inside a domain of the group whose level is ``domain_hops``
    apart, narrowest first, with their rank: each level narrower than the domain (its
    domains inside it), then the domain itself (None) when the role's maximum allows it."""
    for rank, level in enumerate(group.topology.levels):
        if level.hops >= domain_hops:
            yield rank, None
            return
        yield rank, level


def nearest(group: SubGroup, anchors: Sequence[int]) -> Iterable[tuple[int, ...]]:
    """Where an elastic member of the role may go, nearest first: the domain of each of the
    role's levels that holds every node its members were placed on (``anchors``); without
    anchors, any node of a domain of the widest level the role may use."""
    levels = group.topology.levels
    if not anchors:
        if levels:
            yield tuple(sorted({i for members in levels[-1].members for i in members}))
        return
    for level in levels:
        for members in level.members:
            if all(i in members for i in anchors):
                yield members
                break


def failure_reason(gang_id: str, failures: Sequence[RoleFailure], uniformity: str | None) -> str:
    """Why no domain held the group, from the failures in the domains of the cluster level
    (one, or one per value of the uniformity label, in key order): a role kept out by its
    maximum hops is named; otherwise the reason placing gave."""
    for failure in failures:
        if failure.reason is None:
            g = failure.group
            assert g.max_hops is not None
            return reasons.role_hops(
                gang_id, g.role, len(g.core), g.max_hops, topology.widest_label(g.topology)
            )
    if uniformity is not None:
        return reasons.gang_uniformity_failed(uniformity)
    reason = failures[0].reason if failures else None
    return reasons.gang_failed(reason or reasons.NO_CAPACITY)
