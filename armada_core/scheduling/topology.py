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

import numpy as np
from numpy.typing import NDArray

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


class NodeLabels:
    """The nodes' labels read once, as columns, and the domains built from them: one
    instance serves every gang of a cycle, whatever its label and maximum hops."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.nodes = nodes
        self._columns: dict[str | None, tuple[list[str], NDArray[np.int64]]] = {}
        self._levels: dict[
            tuple[int, str | None], tuple[tuple[DomainKey, ...], tuple[tuple[int, ...], ...]]
        ] = {}

    def column(self, label: str | None) -> tuple[list[str], NDArray[np.int64]]:
        """The label's values, sorted, and each node's value index (-1 without the label);
        ``None``: the node ids (each node its own value)."""
        found = self._columns.get(label)
        if found is None:
            if label is None:
                raw: list[str | None] = [n.id for n in self.nodes]
            else:
                raw = [n.labels.get(label) for n in self.nodes]
            values = sorted({v for v in raw if v is not None})
            pos: dict[str | None, int] = {v: k for k, v in enumerate(values)}
            of = np.array([pos.get(v, -1) for v in raw], dtype=np.int64)
            found = self._columns[label] = (values, of)
        return found

    def domains(
        self, levels: Sequence[str], depth: int, uniformity: str | None
    ) -> tuple[tuple[DomainKey, ...], tuple[tuple[int, ...], ...]]:
        """Keys (sorted) and node indices of the domains of ``levels[depth]`` (-1: the
        whole cluster), split by the uniformity label's value when given."""
        cache_key = (depth, uniformity)
        found = self._levels.get(cache_key)
        if found is None:
            found = self._levels[cache_key] = self._domains(levels, depth, uniformity)
        return found

    def _domains(
        self, levels: Sequence[str], depth: int, uniformity: str | None
    ) -> tuple[tuple[DomainKey, ...], tuple[tuple[int, ...], ...]]:
        n = len(self.nodes)
        if depth == len(levels) - 1 and node_level(levels):
            wanted: list[str | None] = [None]
        else:
            wanted = list(levels[: depth + 1])
        if uniformity is not None:
            wanted.append(uniformity)
        if not wanted:
            # The whole cluster is one domain, even without nodes (members then find none).
            return ((),), (tuple(range(n)),)
        columns = [self.column(label) for label in wanted]
        codes = np.stack([of for _, of in columns], axis=1).reshape(n, len(columns))
        rows = np.flatnonzero((codes >= 0).all(axis=1))
        if len(rows) == 0:
            return (), ()
        # Value indices follow the values' sorted order, so sorting rows of indices sorts
        # the keys.
        uniq, inverse = np.unique(codes[rows], axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        grouped = rows[np.argsort(inverse, kind="stable")]
        bounds = np.cumsum(np.bincount(inverse, minlength=len(uniq)))[:-1]
        members = tuple(tuple(chunk.tolist()) for chunk in np.split(grouped, bounds))
        keys = tuple(tuple(columns[c][0][v] for c, v in enumerate(row)) for row in uniq.tolist())
        return keys, members


def gang_topology(
    labels: NodeLabels, levels: Sequence[str], uniformity: str | None, max_hops: int | None
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
        keys, members = labels.domains(levels, depth, uniformity)
        out.append(Level(levels[depth], hops[depth], keys, members))
    wide = cluster_hops(levels)
    constrained = max_hops is not None and wide > max_hops
    if not constrained:
        keys, members = labels.domains(levels, -1, uniformity)
        out.append(Level(None, wide, keys, members))
    return GangTopology(tuple(out), constrained)


def widest_label(topology: GangTopology) -> str | None:
    """The label of the widest level a constrained gang may use (None: not even the
    narrowest level is within its maximum hops)."""
    if not topology.levels:
        return None
    return topology.levels[-1].label
