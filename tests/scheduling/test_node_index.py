"""The fast cycle keeps what it derives from the nodes alone for the next cycle: reused only
while the snapshot holds the very same node objects with the same gang labels, topology levels
and resource dimensions, and every cycle decides as the reference does either way."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from armada_core.scheduling import Queue, SchedulingConfig, Snapshot
from armada_core.scheduling.fast import fast_schedule, inputs
from armada_core.scheduling.fast import nodes as fast_nodes
from armada_core.scheduling.reference import reference_schedule

from .helpers import PRIORITY_CLASSES, gang, job, node
from .helpers import jobs as make_jobs

LEVELS = ("rack",)


def _nodes() -> tuple:
    return tuple(
        node(f"n{i}", cpu=4, labels={"rack": f"r{i % 2}", "zone": f"z{i // 2}"}) for i in range(4)
    )


def _snapshot(nodes: tuple, jobs: list, levels: tuple[str, ...] = LEVELS) -> Snapshot:
    config = SchedulingConfig(topology_levels=levels)
    return Snapshot((Queue("A", 1.0), Queue("B", 1.0)), PRIORITY_CLASSES, nodes, jobs, config)


def _decide(snap: Snapshot):
    fast = fast_schedule(snap)
    assert fast.decisions() == reference_schedule(snap).decisions()
    return fast


def test_reused_while_the_nodes_are_the_same_objects() -> None:
    nodes = _nodes()
    _decide(_snapshot(nodes, make_jobs("a", 3)))
    kept = inputs._last_index
    assert kept is not None
    _decide(_snapshot(nodes, make_jobs("b", 5, queue="B")))
    assert inputs._last_index is kept
    # Equal but not the same objects: made again (an object's identity is what is checked).
    _decide(_snapshot(tuple(replace(n) for n in nodes), make_jobs("c", 2)))
    assert inputs._last_index is not kept


@pytest.mark.parametrize(
    "change",
    [
        "cordon",  # the node a job would take is cordoned in a new object
        "capacity",  # a node reported smaller
        "gang_label",  # a gang uniform on a label the last cycle did not order by
        "levels",  # the topology levels changed
        "dimension",  # a job requests a resource the last cycle's jobs did not
        "order",  # the same objects in another order
    ],
)
def test_made_again_when_what_it_depends_on_changed(change: str) -> None:
    nodes = _nodes()
    first = _decide(_snapshot(nodes, [job("a0", cpu=4)]))
    assert first.scheduled == {"a0": "n0"}
    kept = inputs._last_index
    levels = LEVELS
    jobs = [job("x0", cpu=4)]
    if change == "cordon":
        nodes = (replace(nodes[0], cordoned=True), *nodes[1:])
    elif change == "capacity":
        nodes = (node("n0", cpu=2, labels=dict(nodes[0].labels)), *nodes[1:])
    elif change == "gang_label":
        jobs = gang("g", 2, cpu=4, gang_uniformity_label="zone")
    elif change == "levels":
        levels = ()
    elif change == "dimension":
        jobs = [job("x0", cpu=4), job("x1", cpu=1, extra={"fpga": 1})]
    elif change == "order":
        nodes = tuple(reversed(nodes))
    result = _decide(_snapshot(nodes, jobs, levels))
    assert inputs._last_index is not kept
    if change in ("cordon", "capacity"):
        assert result.scheduled["x0"] != "n0"


def test_a_shapes_static_constraints_are_kept_with_the_nodes() -> None:
    """Computed in the first cycle that places the shape, taken from the index in later
    cycles over the same nodes: a shape that differs only in a selector or a node to avoid
    is a shape of its own, and every cycle decides as the reference does."""
    nodes = _nodes()
    _decide(_snapshot(nodes, [job("a0", cpu=4, node_selector={"zone": "z1"})]))
    kept = inputs._last_index
    assert kept is not None and len(kept.static) == 1
    [(key, fit)] = kept.static.items()
    assert [kept.records[i].id for i in fit.candidates] == ["n2", "n3"]
    second = _decide(_snapshot(nodes, [job("b0", cpu=4, node_selector={"zone": "z1"})]))
    assert inputs._last_index is kept and kept.static[key] is fit  # taken, not made again
    assert second.scheduled["b0"] in ("n2", "n3")
    third = _decide(_snapshot(nodes, [job("c0", cpu=4, node_selector={"zone": "z0"})]))
    assert third.scheduled["c0"] in ("n0", "n1") and len(kept.static) == 2
    avoiding = _decide(
        _snapshot(nodes, [job("d0", cpu=4, node_selector={"zone": "z1"}, avoid_node="n2")])
    )
    assert avoiding.scheduled == {"d0": "n3"} and len(kept.static) == 3
    # New node objects (n3 cordoned): a new index, whose shapes are computed afresh.
    cordoned = (*nodes[:3], replace(nodes[3], cordoned=True))
    fresh = _decide(_snapshot(cordoned, [job("e0", cpu=4, node_selector={"zone": "z1"})]))
    assert inputs._last_index is not kept and fresh.scheduled == {"e0": "n2"}


def test_the_shapes_kept_are_bounded_by_shapes_times_nodes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past the bound the index forgets every shape kept and starts again; decisions do
    not change."""
    monkeypatch.setattr(fast_nodes, "_STATIC_KEPT", 2 * 4)  # two shapes of four nodes
    nodes = _nodes()
    for i, zone in enumerate(["z0", "z1", "z0", "z1", "z0"]):
        selector = {"zone": zone} if i != 4 else {"rack": "r1"}
        _decide(_snapshot(nodes, [job(f"a{i}", cpu=4, node_selector=selector)]))
        kept = inputs._last_index
        assert kept is not None and 1 <= len(kept.static) <= 2
    assert len(kept.static) == 1  # the third shape came past the bound


def test_kept_arrays_are_read_only() -> None:
    nodes = _nodes()
    _decide(_snapshot(nodes, make_jobs("a", 2)))
    kept = inputs._last_index
    assert kept is not None and kept.partition is not None
    [fit] = kept.static.values()
    for array in (kept.capacity, kept.cordoned, kept.partition, fit.candidates):
        with pytest.raises(ValueError):
            array[0] = np.zeros_like(array[0])
