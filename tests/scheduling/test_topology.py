"""Topology domains (``armada_core.scheduling.topology``): the levels and domains a gang may
use, checked against a plain grouping of the nodes by their label paths."""

from __future__ import annotations

import random

import pytest

from armada_core.scheduling import topology
from armada_core.scheduling.model import Node, Resources
from armada_core.scheduling.topology import HOSTNAME, NodeLabels, gang_topology


def _node(name: str, **labels: str) -> Node:
    return Node(name, Resources({"cpu": 1000}), {k.replace("_", "/"): v for k, v in labels.items()})


def _grouped(nodes, levels, depth, uniformity):
    """Domains of ``levels[depth]`` by hand: nodes grouped by their label path."""
    groups: dict[tuple, list[int]] = {}
    for i, n in enumerate(nodes):
        if depth == len(levels) - 1 and levels[-1] == HOSTNAME:
            key: tuple = (n.id,)
        else:
            key = tuple(n.labels.get(label) for label in levels[: depth + 1])
            if None in key:
                continue
        if uniformity is not None:
            if uniformity not in n.labels:
                continue
            key = (*key, n.labels[uniformity])
        groups.setdefault(key, []).append(i)
    if depth < 0 and uniformity is None:
        groups = {(): list(range(len(nodes)))}
    keys = sorted(groups)
    return tuple(keys), tuple(tuple(groups[k]) for k in keys)


LEVELS = ("topology/block", "topology/rack")

CASES = [
    (
        "racks are named within their block",
        [
            _node("a", topology_block="b2", topology_rack="r1"),
            _node("b", topology_block="b1", topology_rack="r1"),
            _node("c", topology_block="b1", topology_rack="r2"),
            _node("d", topology_block="b1", topology_rack="r1"),
        ],
        LEVELS,
        None,
        None,
        [
            ("topology/rack", 2, [("b1", "r1"), ("b1", "r2"), ("b2", "r1")], [(1, 3), (2,), (0,)]),
            ("topology/block", 4, [("b1",), ("b2",)], [(1, 2, 3), (0,)]),
            (None, 6, [()], [(0, 1, 2, 3)]),
        ],
    ),
    (
        "a node without a level's label is in no domain of it",
        [
            _node("a", topology_block="b1", topology_rack="r1"),
            _node("b", topology_rack="r1"),
            _node("c", topology_block="b1"),
        ],
        LEVELS,
        None,
        4,
        [
            ("topology/rack", 2, [("b1", "r1")], [(0,)]),
            ("topology/block", 4, [("b1",)], [(0, 2)]),
        ],
    ),
    (
        "a uniformity label splits each domain and the cluster by its value",
        [
            _node("a", topology_block="b1", topology_rack="r1", zone="z2"),
            _node("b", topology_block="b1", topology_rack="r1", zone="z1"),
            _node("c", topology_block="b1", topology_rack="r2"),
        ],
        LEVELS,
        "zone",
        None,
        [
            ("topology/rack", 2, [("b1", "r1", "z1"), ("b1", "r1", "z2")], [(1,), (0,)]),
            ("topology/block", 4, [("b1", "z1"), ("b1", "z2")], [(1,), (0,)]),
            (None, 6, [("z1",), ("z2",)], [(1,), (0,)]),
        ],
    ),
    (
        "the node level: each node a domain, named by its id, whatever its labels",
        [_node("n2"), _node("n1", topology_rack="r1"), _node("n3", topology_rack="r1")],
        ("topology/rack", HOSTNAME),
        None,
        2,
        [
            (HOSTNAME, 0, [("n1",), ("n2",), ("n3",)], [(1,), (0,), (2,)]),
            ("topology/rack", 2, [("r1",)], [(1, 2)]),
        ],
    ),
    (
        "no nodes: the cluster is still one (empty) domain",
        [],
        LEVELS,
        None,
        None,
        [("topology/rack", 2, [], []), ("topology/block", 4, [], []), (None, 6, [()], [()])],
    ),
    (
        "a maximum narrower than every level leaves none",
        [_node("a", topology_block="b1", topology_rack="r1")],
        LEVELS,
        None,
        1,
        [],
    ),
]


@pytest.mark.parametrize(
    "nodes,levels,uniformity,max_hops,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_gang_topology(nodes, levels, uniformity, max_hops, expected) -> None:
    got = gang_topology(NodeLabels(nodes), levels, uniformity, max_hops)
    assert [(lv.label, lv.hops, list(lv.keys), list(lv.members)) for lv in got.levels] == expected
    assert got.constrained == (max_hops is not None and topology.cluster_hops(levels) > max_hops)


@pytest.mark.parametrize("seed", range(30))
def test_domains_match_a_plain_grouping(seed: int) -> None:
    """Random clusters (labels missing at random, values reused across blocks, a hostname
    level sometimes): every level's domains, with and without a uniformity label, are the
    nodes grouped by their label path, keys sorted, node indices ascending."""
    rng = random.Random(seed)
    levels = rng.choice(
        [LEVELS, ("topology/rack",), (*LEVELS, HOSTNAME), ("topology/rack", HOSTNAME)]
    )
    nodes = []
    for i in range(rng.randint(0, 40)):
        labels = {}
        for label, values in (("topology/block", 3), ("topology/rack", 4), ("zone", 3)):
            if rng.random() < 0.85:
                labels[label] = f"{label[-1]}{rng.randrange(values)}"
        nodes.append(Node(f"node-{rng.randrange(10**6):06d}-{i}", Resources({"cpu": 1}), labels))
    shared = NodeLabels(nodes)
    for uniformity in (None, "zone", "topology/rack"):
        for depth in range(-1, len(levels)):
            want = _grouped(nodes, levels, depth, uniformity)
            assert shared.domains(levels, depth, uniformity) == want
            assert NodeLabels(nodes).domains(levels, depth, uniformity) == want
