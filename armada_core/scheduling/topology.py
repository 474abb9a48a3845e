"""Topology levels (SEMANTICS.md, "Topology"): the domains a gang may be confined to.

Shared by both implementations so that they enumerate the same domains, with the same keys,
in the same order; each implementation only decides how fast it tries them.

Levels are node labels naming the network's fat tree, widest first (``topology/block``,
``topology/rack``). A domain of a level is the set of nodes that agree on that label and on
every wider one (a rack is named within its block, so rack names need not be unique); a node
without one of those labels is in no domain of the level. ``kubernetes.io/hostname`` as the
last level is the node itself: each node is a domain of it, whatever its labels.

Hops are counted on the fat tree: members on one node are 0 hops apart, in one domain of the
narrowest switch level 2, and each wider level adds 2; members with no domain in common are
``2 * (switch levels + 1)`` apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .model import Node

#: Kubernetes' per-node label: as the narrowest level it stands for the node itself.
HOSTNAME = "kubernetes.io/hostname"

#: A domain's key: the values of its level and every wider one (the node id for the node
#: level), then the gang's uniformity label value when it names one. Domains of one level
#: are compared by it last.
DomainKey = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Level:
    """One level's domains for one gang: keys sorted, each with its node indices."""

    #: The level's label; None for the whole cluster.
    label: str | None
    #: Hops between members confined to one domain of this level.
    hops: int
    keys: tuple[DomainKey, ...]
    #: Node indices (positions in node order, ascending) of each domain, as ``keys``.
    members: tuple[tuple[int, ...], ...]


@dataclass(frozen=True, slots=True)
class GangTopology:
    """The levels a gang may be placed at, narrowest first."""

    levels: tuple[Level, ...]
    #: The gang's maximum hops rule out the whole cluster: failing every allowed level keeps
    #: the gang queued with ``reasons.gang_hops``.
    constrained: bool


def node_level(levels: Sequence[str]) -> bool:
    """Whether the narrowest level is the node itself."""
    return bool(levels) and levels[-1] == HOSTNAME


def switch_levels(levels: Sequence[str]) -> int:
    return len(levels) - (1 if node_level(levels) else 0)


def level_hops(levels: Sequence[str]) -> list[int]:
    """Hops within one domain of each level, widest first: ``2 * k`` for the switch level k
    levels above the nodes (the narrowest switch level: 2), 0 for the node level."""
    switches = switch_levels(levels)
    hops = [2 * (switches - i) for i in range(switches)]
    if node_level(levels):
        hops.append(0)
    return hops


def cluster_hops(levels: Sequence[str]) -> int:
    """Hops between members with no domain in common."""
    return 2 * (switch_levels(levels) + 1)


def applies(levels: Sequence[str], members: int) -> bool:
    """Topology decides a gang's placement: levels are configured and the gang has members
    that could be apart (a gang of one is placed like a single job)."""
    return bool(levels) and members >= 2


def gang_topology(
    nodes: Sequence[Node], levels: Sequence[str], uniformity: str | None, max_hops: int | None
) -> GangTopology:
    """The levels a gang may use, narrowest first: every configured level within its
    maximum hops, then the whole cluster if that is within them too (or no maximum is set).
    With a uniformity label each domain is split further by the label's value (nodes
    without the label are in none), so the cluster level is exactly the label's values."""
    hops = level_hops(levels)
    out: list[Level] = []
    for depth in range(len(levels) - 1, -1, -1):
        if max_hops is not None and hops[depth] > max_hops:
            break
        out.append(_level(nodes, levels, depth, uniformity, hops[depth]))
    wide = cluster_hops(levels)
    constrained = max_hops is not None and wide > max_hops
    if not constrained:
        out.append(_level(nodes, levels, -1, uniformity, wide))
    return GangTopology(tuple(out), constrained)


def _level(
    nodes: Sequence[Node], levels: Sequence[str], depth: int, uniformity: str | None, hops: int
) -> Level:
    """Domains of ``levels[depth]`` (-1: the whole cluster)."""
    groups: dict[DomainKey, list[int]] = {}
    by_node = depth == len(levels) - 1 and node_level(levels)
    wanted = levels[: depth + 1]
    for i, n in enumerate(nodes):
        labels = n.labels
        if by_node:
            key: DomainKey = (n.id,)
        else:
            path = tuple(labels.get(label) for label in wanted)
            if None in path:
                continue
            key = path  # type: ignore[assignment]
        if uniformity is not None:
            value = labels.get(uniformity)
            if value is None:
                continue
            key = (*key, value)
        groups.setdefault(key, []).append(i)
    if depth < 0 and uniformity is None:
        # The whole cluster is one domain, even without nodes (members then find none).
        groups = {(): list(range(len(nodes)))}
    keys = tuple(sorted(groups))
    return Level(
        levels[depth] if depth >= 0 else None,
        hops,
        keys,
        tuple(tuple(groups[k]) for k in keys),
    )


def widest_label(topology: GangTopology) -> str | None:
    """The label of the widest level a constrained gang may use (None: not even the
    narrowest level is within its maximum hops)."""
    if not topology.levels:
        return None
    return topology.levels[-1].label
