"""Quantities, resources, Kubernetes matching and the fairness arithmetic."""

from __future__ import annotations

import dataclasses
import sys
import threading

import pytest

from armada_core.scheduling import (
    Job,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PriorityClass,
    Queue,
    Resources,
    Snapshot,
    Taint,
    Toleration,
    fast_schedule,
    parse_quantity,
    reference_schedule,
    resources,
)
from armada_core.scheduling import reasons as why
from armada_core.scheduling.constraints import (
    affinity_matches,
    node_admits,
    requirement_matches,
    taints_tolerated,
    tolerates,
)
from armada_core.scheduling.fairness import (
    CostModel,
    adjusted_fair_shares,
    decay_usage,
    fair_shares,
    protected_queues,
    usage_offsets,
    water_fill,
)
from armada_core.scheduling.model import _Interned, kinds_of

GI = 2**30


@pytest.mark.parametrize(
    ("text", "milli", "want"),
    [
        ("500m", True, 500),
        ("1", True, 1000),
        ("1.5", True, 1500),
        ("0.0001", True, 1),  # rounded up, never under-counted
        ("4Gi", False, 4 * GI),
        ("1Ti", False, 2**40),
        ("1Ki", False, 1024),
        ("100M", False, 10**8),
        ("1e3", False, 1000),
        ("2E", False, 2 * 10**18),
        ("0.1", False, 1),
        (3, False, 3),
        (2.5, True, 2500),
    ],
)
def test_parse_quantity(text, milli: bool, want: int) -> None:
    assert parse_quantity(text, milli=milli) == want


@pytest.mark.parametrize("text", ["", "abc", "1Gb", "-1", "1 Gi", "Gi"])
def test_parse_quantity_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("resource", "amount", "want"),
    [
        ("cpu", 8000, "8"),
        ("cpu", 500, "500m"),
        ("cpu", 1500, "1500m"),
        ("memory", 32 * GI, "32Gi"),
        ("memory", 1536 * 2**20, "1536Mi"),
        ("memory", 1000, "1000"),  # no binary suffix divides it: plain bytes
        ("memory", 2**60, "1Ei"),
        ("ephemeral-storage", 10 * 2**10, "10Ki"),
        ("hugepages-2Mi", 4 * 2**20, "4Mi"),
        ("nvidia.com/gpu", 8, "8"),
        ("example.com/fpga", 1024, "1024"),  # not bytes: as it is
    ],
)
def test_quantities_read_as_kubernetes_writes_them(resource: str, amount: int, want: str) -> None:
    assert why.quantity(resource, amount) == want
    if resource == "cpu":
        assert parse_quantity(want, milli=True) == amount
    else:
        assert parse_quantity(want) == amount


def test_no_room_names_matching_nodes_and_the_request_in_dimension_order() -> None:
    dims = ("cpu", "memory", "nvidia.com/gpu", "ephemeral-storage")
    assert (
        why.no_room(40, dims, (8000, 32 * GI, 8, 0))
        == "0 of 40 matching nodes have 8 cpu, 32Gi memory, 8 nvidia.com/gpu free"
    )
    assert why.no_room(1, dims, (250, 0, 0, 0)) == "0 of 1 matching node has 250m cpu free"
    assert why.no_room(2, dims, (0, 0, 0, 0)) == (
        "0 of 2 matching nodes have room for a job that requests nothing"
    )


def test_resources_are_exact_hashable_and_drop_zeros() -> None:
    a = Resources({"cpu": 1000, "memory": 0})
    assert dict(a) == {"cpu": 1000}
    assert a == {"cpu": 1000, "nvidia.com/gpu": 0}
    assert hash(a) == hash(Resources(cpu=1000))
    assert a.get("memory") == 0
    assert (a + {"cpu": 500, "memory": 2}) == Resources(cpu=1500, memory=2)
    assert resources(cpu="250m", memory="1Gi", gpu=2) == Resources(
        {"cpu": 250, "memory": GI, "nvidia.com/gpu": 2}
    )
    with pytest.raises(TypeError):
        Resources(cpu=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Resources(cpu=-1)


def test_job_shapes_are_interned() -> None:
    a = Job("a", "q", "low", Resources(cpu=1000), node_selector={"x": "1", "y": "2"})
    b = Job("b", "r", "low", Resources(cpu=1000), node_selector={"y": "2", "x": "1"})
    c = Job("c", "q", "low", Resources(cpu=2000))
    assert a.shape_id == b.shape_id != c.shape_id


def test_interning_from_many_threads_gives_each_key_its_own_number() -> None:
    """Jobs are made on several threads: two new keys must never share a number."""
    table: _Interned[tuple[int, int]] = _Interned()
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can
    try:
        barrier = threading.Barrier(8)

        def intern_many(t: int) -> None:
            barrier.wait()
            for k in range(2000):
                table.intern((k % 500, (k * 7 + t) % 3))

        threads = [threading.Thread(target=intern_many, args=(t,)) for t in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(before)
    assert len(table.keys) == len(table.ids) == len(set(table.keys)) == 1500
    assert all(table.keys[number] == key for key, number in table.ids.items())


def test_job_kinds_are_interned() -> None:
    """A kind is the shape, queue, and whether the job runs, is in a gang and has a
    lifetime; nothing else."""
    base = Job("a", "q", "low", Resources(cpu=1000), priority=1, submit_time=1.0)
    same = [
        Job("b", "q", "low", Resources(cpu=1000), priority=9, submit_time=5.0),
        dataclasses.replace(base, id="c", start_time=3.0),
    ]
    other = [
        dataclasses.replace(base, queue="r"),
        dataclasses.replace(base, requests=Resources(cpu=2000)),
        dataclasses.replace(base, node="n1"),
        dataclasses.replace(base, gang_id="g", gang_cardinality=1),
        dataclasses.replace(base, node="n1", gang_id="g", gang_cardinality=1),
        dataclasses.replace(base, lifetime=60.0),
    ]
    assert {j.kind_id for j in same} == {base.kind_id}
    kinds = [base.kind_id] + [j.kind_id for j in other]
    assert len(set(kinds)) == len(kinds)
    assert kinds_of([base.kind_id, other[3].kind_id, other[5].kind_id]) == [
        (base.shape_id, "q", False, False, False),
        (base.shape_id, "q", False, True, False),
        (base.shape_id, "q", False, False, True),
    ]
    assert dataclasses.replace(base, lifetime=5.0).kind_id == other[5].kind_id


def test_tolerations() -> None:
    taint = Taint("gpu", "true", "NoSchedule")
    assert tolerates(Toleration("gpu", "Equal", "true"), taint)
    assert not tolerates(Toleration("gpu", "Equal", "false"), taint)
    assert tolerates(Toleration("gpu", "Exists"), taint)
    assert tolerates(Toleration("", "Exists"), taint)
    assert not tolerates(Toleration("gpu", "Exists", effect="NoExecute"), taint)
    assert taints_tolerated((Taint("soft", "", "PreferNoSchedule"),), ())
    assert not taints_tolerated((taint,), ())


def test_node_affinity_operators() -> None:
    labels = {"zone": "a", "cores": "16"}

    def req(op: str, *values: str, key: str = "zone") -> NodeSelectorRequirement:
        return NodeSelectorRequirement(key, op, values)

    assert requirement_matches(req("In", "a", "b"), labels)
    assert not requirement_matches(req("NotIn", "a"), labels)
    assert requirement_matches(req("NotIn", "a", key="missing"), labels)
    assert requirement_matches(req("Exists"), labels)
    assert requirement_matches(req("DoesNotExist", key="gpu"), labels)
    assert requirement_matches(req("Gt", "8", key="cores"), labels)
    assert not requirement_matches(req("Lt", "8", key="cores"), labels)
    assert not requirement_matches(req("Gt", "x", key="cores"), labels)
    assert affinity_matches((), labels)
    assert not affinity_matches((NodeSelectorTerm(()),), labels)
    with pytest.raises(ValueError):
        requirement_matches(req("Near", "a"), labels)


def test_node_admits_checks_everything_but_resources() -> None:
    node = Node("n", Resources(cpu=1), {"zone": "a"}, (Taint("t", "v"),))
    job = Job("j", "q", "low", Resources(cpu=5), tolerations=(Toleration("t", "Equal", "v"),))
    assert node_admits(job, node)
    assert not node_admits(Job("j", "q", "low"), node)
    assert not node_admits(Job("j", "q", "low", avoid_node="n"), node)
    cordoned = Node("n", Resources(cpu=1), cordoned=True)
    assert not node_admits(Job("j", "q", "low"), cordoned)


def test_cost_is_dominant_weighted_share() -> None:
    model = CostModel.build(("cpu", "memory", "gpu"), (100, 1000, 0), {"memory": 2.0})
    assert model.cost([10, 10, 5]) == pytest.approx(0.1)
    assert model.cost([10, 100, 0]) == pytest.approx(0.2)
    assert model.cost([0, 0, 0]) == 0.0


def test_fair_and_adjusted_shares() -> None:
    weights = {"a": 1.0, "b": 1.0, "c": 2.0}
    assert fair_shares(weights) == {"a": 0.25, "b": 0.25, "c": 0.5}
    adjusted = adjusted_fair_shares(weights, {"a": 0.05, "b": 1.0, "c": 1.0})
    assert adjusted["a"] == pytest.approx(0.05)
    assert adjusted["b"] == pytest.approx((1 - 0.05) / 3, rel=0.02)
    assert adjusted["c"] == pytest.approx(2 * (1 - 0.05) / 3, rel=0.02)


def test_protected_fraction() -> None:
    weights = {"a": 1.0, "b": 1.0}
    demands = {"a": 1.0, "b": 1.0}
    assert protected_queues({"a": 0.5, "b": 0.5}, weights, demands, 1.0) == {"a", "b"}
    assert protected_queues({"a": 0.75, "b": 0.25}, weights, demands, 1.0) == {"b"}
    assert protected_queues({"a": 0.75, "b": 0.25}, weights, demands, 2.0) == {"a", "b"}
    assert protected_queues({"a": 0.75, "b": 0.25}, weights, demands, None) == set()


def test_decayed_usage() -> None:
    assert decay_usage(1.0, 0.0, 100.0, 100.0) == pytest.approx(0.5)
    assert decay_usage(0.2, 0.6, 100.0, 100.0) == pytest.approx(0.6)  # never below usage
    offsets = usage_offsets({"a": 1.0}, {"a": 0.25}, 0.0, 50.0)
    assert offsets == {"a": pytest.approx(0.75)}
    assert usage_offsets({"a": 1.0}, {"a": 0.0}, 10.0, None) == {"a": 0.0}


def test_water_fill() -> None:
    alloc = water_fill({"a": 1.0, "b": 1.0, "c": 2.0}, {"a": 0.1, "b": 1.0, "c": 1.0})
    assert alloc["a"] == pytest.approx(0.1)
    assert alloc["b"] == pytest.approx(0.3)
    assert alloc["c"] == pytest.approx(0.6)


CLASSES = (PriorityClass("low", 0, True),)


@pytest.mark.parametrize("impl", [reference_schedule, fast_schedule])
def test_degenerate_snapshots(impl) -> None:
    assert impl(Snapshot((), CLASSES, (), ())).decisions() == ({}, [], {}, {}, {}, {}, {}, {}, {})
    lonely = Snapshot((Queue("q"),), CLASSES, (), (Job("j", "q", "low", Resources(cpu=1)),))
    result = impl(lonely)
    assert result.unscheduled == {"j": why.NO_MATCHING_NODE}
    assert result.queue_costs == {"q": 0.0}
    zero = Snapshot(
        (Queue("q"),),
        CLASSES,
        (Node("n", Resources(cpu=1000)),),
        (Job("j", "q", "low"),),  # requests nothing
    )
    assert impl(zero).scheduled == {"j": "n"}
