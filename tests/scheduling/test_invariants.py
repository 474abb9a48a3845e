"""Properties every cycle must have, checked over random multi-cycle runs."""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from armada_core.scheduling import Job, Node, PriorityClass, Queue, Resources, Snapshot
from armada_core.scheduling.fairness import (
    CostModel,
    protected_queues,
    resource_dims,
    water_fill,
)
from armada_core.scheduling.fast import fast_schedule
from armada_core.scheduling.reference import reference_schedule
from armada_core.scheduling.roles import minimums, role_of, succeeded

from .helpers import check_basic
from .randomized import Knobs, apply_result, random_world


def _settings(examples: int) -> settings:
    return settings(
        derandomize=True,
        deadline=None,
        database=None,
        max_examples=examples,
        suppress_health_check=[HealthCheck.too_slow],
    )


def _preemptible(job: Job, pcs: dict[str, PriorityClass], now: float) -> bool:
    if pcs[job.priority_class].preemptible:
        return True
    return (
        job.lifetime is not None
        and job.start_time is not None
        and now - job.start_time >= job.lifetime
    )


def _protected(snap: Snapshot) -> set[str]:
    """Queues the cycle does not evict, recomputed from the documented rule."""
    dims = resource_dims(snap)
    nodes = {n.id for n in snap.nodes}
    totals = [sum(n.capacity.get(d, 0) for n in snap.nodes if not n.cordoned) for d in dims]
    costs = CostModel.build(dims, totals, snap.config.resource_multipliers)
    queues = {q.name: q for q in snap.queues}
    pcs = {p.name for p in snap.priority_classes}
    run: dict[str, list[int]] = defaultdict(lambda: [0] * len(dims))
    dem: dict[str, list[int]] = defaultdict(lambda: [0] * len(dims))
    for j in snap.jobs:
        if j.queue not in queues or j.priority_class not in pcs:
            continue
        if j.node is not None and j.node not in nodes:
            continue
        vec = [j.requests.get(d, 0) for d in dims]
        dem[j.queue] = [a + b for a, b in zip(dem[j.queue], vec, strict=True)]
        if j.node is not None:
            run[j.queue] = [a + b for a, b in zip(run[j.queue], vec, strict=True)]
    active = sorted(dem)
    weights = {q: queues[q].weight for q in active}
    shares = {q: costs.cost(run[q]) for q in active}
    demands = {q: costs.cost(dem[q]) for q in active}
    return protected_queues(shares, weights, demands, snap.config.protected_fraction)


def check_invariants(snap: Snapshot, result) -> None:
    check_basic(snap, result)
    pcs = {p.name: p for p in snap.priority_classes}
    by_id = {j.id: j for j in snap.jobs}
    protected = _protected(snap)
    new_on_node: dict[str, list[Job]] = defaultdict(list)
    for jid, node in result.scheduled.items():
        new_on_node[node].append(by_id[jid])

    units: dict[tuple, list[Job]] = defaultdict(list)
    for j in snap.jobs:
        if j.node is not None:
            units[(j.queue, j.gang_id) if j.gang_id else ("", j.id)].append(j)

    class_limits = any(p.max_fraction_per_queue for p in snap.priority_classes)
    for jid in result.preempted:
        job = by_id[jid]
        key = (job.queue, job.gang_id)
        group = [j for j in snap.jobs if (j.queue, j.gang_id) == key]
        if job.gang_role is not None and _role_below_minimum(units[key], group):
            continue  # a group with a role below its minimum is preempted whole, for nothing
        # Non-preemptible jobs are never preempted.
        assert _preemptible(job, pcs, snap.now), f"{jid} is not preemptible"
        unit = units[(job.queue, job.gang_id) if job.gang_id else ("", job.id)]
        unit_nodes = {m.node for m in unit}
        # Every preemption makes room for something placed this cycle.
        if not class_limits:
            assert any(new_on_node[n] for n in unit_nodes), f"{jid} preempted for nothing"
        # A protected queue loses jobs only to strictly more urgent ones.
        if job.queue in protected:
            own = pcs[job.priority_class].priority
            assert any(
                pcs[k.priority_class].priority > own for n in unit_nodes for k in new_on_node[n]
            ), f"{jid} preempted by urgency of a job that is not more urgent"

    # Gangs: whole (at least the minimum) and uniform.
    gangs: dict[tuple, list[Job]] = defaultdict(list)
    for jid in result.scheduled:
        j = by_id[jid]
        if j.gang_id is not None:
            gangs[(j.queue, j.gang_id)].append(j)
    for key, members in gangs.items():
        first = members[0]
        if first.gang_role is not None:
            _check_role_group(key, members, units, snap)
            continue
        assert first.min_cardinality <= len(members) <= first.gang_cardinality
        label = first.gang_uniformity_label
        if label is not None:
            nodes = {n.id: n for n in snap.nodes}
            values = {nodes[result.scheduled[m.id]].labels.get(label) for m in members}
            assert len(values) == 1 and None not in values
    for (queue, gang_id), unit in units.items():
        if not queue and gang_id:
            continue
        if unit[0].gang_id is None:
            continue
        left = [m for m in unit if m.id not in result.preempted]
        if unit[0].gang_role is not None:
            if left and len(left) < len(unit):
                assert not _role_below_minimum(left, unit), "role group cut below a minimum"
            continue
        if left and len(left) < len(unit):
            assert len(left) >= unit[0].min_cardinality, "gang cut below its minimum"


def _role_below_minimum(running: list[Job], group: list[Job] | None = None) -> bool:
    """Whether some role of the group (roles known from ``group``) has fewer running
    members, plus members that succeeded, than its minimum."""
    mins = minimums(group or running)
    counts = Counter(role_of(j) for j in running) + Counter(succeeded(group or running))
    return any(counts[r] < m for r, m in mins.items())


def _check_role_group(key: tuple, members: list[Job], units: dict, snap: Snapshot) -> None:
    """Members of a role group placed this cycle: with nothing of the group running, every
    role's minimum at once; with members running, the group stays healthy."""
    run = units.get(key, [])
    if not run:
        queued = [j for j in snap.jobs if (j.queue, j.gang_id) == key and j.node is None]
        assert not _role_below_minimum(members, queued), "role group placed below a minimum"


@_settings(250)
@given(st.integers(min_value=0, max_value=2**40))
def test_invariants_over_cycles(seed: int) -> None:
    snap = random_world(seed)
    rng = random.Random(seed)
    for _ in range(4):
        result = fast_schedule(snap)
        check_invariants(snap, result)
        jobs = apply_result(snap, result, snap.now, rng, finish=0.15)
        snap = replace(snap, jobs=jobs, now=snap.now + 10.0)


#: Where a repeat cycle has nothing left to do: unit jobs, any mix of classes (preemptible or
#: not, urgency preemption, per-queue class caps, lifetimes), cordoned queues, no protection.
#: Outside it a repeat cycle can legitimately move a few jobs; SEMANTICS.md ("Steady state")
#: explains each case: jobs of different sizes and gangs (a large head unit that does not fit
#: defers its queue's smaller jobs until others have filled the space), node constraints
#: (greedy best fit does not foresee them), per-cycle limits (the rest comes next cycle),
#: decayed usage (keys depend on the cost at the start of the cycle), and the protected
#: fraction with several classes (protection is decided on the start-of-cycle share).
STABLE = Knobs(
    limits=False,
    decay=False,
    gangs=False,
    constraints=False,
    unit_jobs=True,
    extras={"protected": [None]},
)

#: With a single preemptible class the protected fraction keeps repeat cycles steady too.
STABLE_PROTECTED = Knobs(
    limits=False,
    decay=False,
    gangs=False,
    constraints=False,
    class_limits=False,
    single_class=True,
    unit_jobs=True,
)


def _repeat_changes_nothing(knobs: Knobs, seed: int) -> None:
    snap = random_world(seed, knobs)
    first = fast_schedule(snap)
    after = replace(snap, jobs=apply_result(snap, first, snap.now))
    second = fast_schedule(after)
    assert not second.preempted, "a repeat cycle preempted"
    assert not second.scheduled, "a repeat cycle scheduled"


@_settings(400)
@given(st.integers(min_value=0, max_value=2**40))
def test_repeat_cycle_changes_nothing(seed: int) -> None:
    """Once decisions are applied, the same world is a steady state (seed 000)."""
    _repeat_changes_nothing(STABLE, seed)


@_settings(300)
@given(st.integers(min_value=0, max_value=2**40))
def test_repeat_cycle_changes_nothing_with_protection(seed: int) -> None:
    _repeat_changes_nothing(STABLE_PROTECTED, seed)


def test_resubmitted_preempted_jobs_almost_never_preempt() -> None:
    """Preemption stability (seed 000): resubmitting what was preempted preempts nothing.

    Exact in the table scenarios. In random worlds it can fail in rare cases: an evicted job may
    only return to its own node, so a queue can end a cycle one job below what its fair-share
    key entitled it to, and the resubmitted job, free to go to any node, then takes the place
    it lost only through node locality (always from another queue). The measured rate is
    about 1% of worlds (20 of 2,000, 546 of which preempt at all); this guards it from growing.
    """
    worlds = 400
    violations = 0
    for seed in range(worlds):
        snap = random_world(seed * 7919 + 3, STABLE)
        first = fast_schedule(snap)
        jobs = list(apply_result(snap, first, snap.now))
        for j in snap.jobs:
            if j.id in first.preempted:
                jobs.append(replace(j, id=j.id + "-again", node=None, start_time=None))
        violations += bool(fast_schedule(replace(snap, jobs=tuple(jobs))).preempted)
    assert violations <= worlds // 50


@_settings(300)
@given(st.integers(min_value=0, max_value=2**40))
def test_input_order_does_not_matter(seed: int) -> None:
    snap = random_world(seed)
    rng = random.Random(seed)
    shuffled = [list(snap.queues), list(snap.priority_classes), list(snap.nodes), list(snap.jobs)]
    for part in shuffled:
        rng.shuffle(part)
    other = replace(
        snap,
        queues=tuple(shuffled[0]),
        priority_classes=tuple(shuffled[1]),
        nodes=tuple(shuffled[2]),
        jobs=tuple(shuffled[3]),
    )
    assert fast_schedule(other).decisions() == fast_schedule(snap).decisions()
    assert reference_schedule(other).decisions() == fast_schedule(snap).decisions()


@_settings(200)
@given(st.integers(min_value=0, max_value=2**40))
def test_queue_names_only_matter_through_their_order(seed: int) -> None:
    snap = random_world(seed)
    rename = {
        q.name: f"team-{i:02d}-{q.name.lower()}"
        for i, q in enumerate(sorted(snap.queues, key=lambda q: q.name))
    }
    other = replace(
        snap,
        queues=tuple(replace(q, name=rename[q.name]) for q in snap.queues),
        jobs=tuple(replace(j, queue=rename.get(j.queue, j.queue)) for j in snap.jobs),
    )
    a, b = fast_schedule(snap), fast_schedule(other)
    assert a.scheduled == b.scheduled
    assert a.preempted == b.preempted
    assert a.failed == b.failed
    assert a.unscheduled == b.unscheduled
    assert {rename[q]: c for q, c in a.queue_costs.items()} == b.queue_costs


@_settings(300)
@given(
    st.lists(st.sampled_from([1.0, 2.0, 3.0, 5.0, 10.0]), min_size=1, max_size=6),
    st.lists(st.integers(min_value=0, max_value=80), min_size=6, max_size=6),
    st.integers(min_value=1, max_value=8),
    st.booleans(),
)
def test_unit_jobs_match_weighted_water_filling(
    factors: list[float], demands: list[int], node_count: int, equal: bool
) -> None:
    """With unit-sized jobs, allocations are weighted max-min fair within one job."""
    if equal:
        factors = [1.0] * len(factors)
    nodes = tuple(Node(f"n{i}", Resources(cpu=8000)) for i in range(node_count))
    slots = 8 * node_count
    queues = tuple(Queue(f"q{i}", f) for i, f in enumerate(factors))
    jobs = tuple(
        Job(f"q{i}-{k:03d}", f"q{i}", "low", Resources(cpu=1000), submit_time=float(k))
        for i in range(len(factors))
        for k in range(demands[i])
    )
    snap = Snapshot(queues, (PriorityClass("low", 0, True),), nodes, jobs)
    got: dict[str, int] = defaultdict(int)
    for jid in fast_schedule(snap).scheduled:
        got[jid.split("-")[0]] += 1
    weight = {q.name: q.weight for q in queues if demands[int(q.name[1:])] > 0}
    demand = {q: demands[int(q[1:])] for q in weight}
    if not weight:
        return
    assert sum(got.values()) == min(slots, sum(demand.values()))
    want = water_fill(weight, {q: demand[q] / slots for q in weight})
    w_min = min(weight.values())
    for q in weight:
        # One job of the lightest queue moves the water level by 1 / w_min, which is
        # w_q / w_min jobs of queue q; with equal weights that is exactly one job.
        assert abs(got[q] - want[q] * slots) <= max(1.0, weight[q] / w_min) + 1e-9
        # The discrete form of max-min fairness: no queue is more than one job ahead of a
        # queue that still wants more, measured in cost per weight.
        for p in weight:
            if got[p] < demand[p]:
                assert got[q] / weight[q] <= (got[p] + 1) / weight[p] + 1e-9


@pytest.mark.slow
@_settings(800)
@given(st.integers(min_value=0, max_value=2**40))
def test_invariants_over_many_cycles(seed: int) -> None:
    snap = random_world(seed, Knobs(max_nodes=10, max_jobs=40))
    rng = random.Random(seed)
    for _ in range(6):
        result = fast_schedule(snap)
        check_invariants(snap, result)
        snap = replace(snap, jobs=apply_result(snap, result, snap.now, rng, 0.2), now=snap.now + 10)
