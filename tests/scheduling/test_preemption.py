"""Seed 000's node-selection principles for preemption, on random snapshots.

Each snapshot is a random world (``randomized.random_world``) reduced to its running jobs and
one queued job, so that every preemption in the cycle is made for that job and the queues'
fractions of fair share at the moment of the decision are those at the start of the cycle.
Two properties must hold:

1. minimal victims: no preempted job (with the rest of its running gang) could be put back,
   everything else decided kept, without some node going over capacity;
2. fair victims: among jobs of equal class priority, no job of a queue at a lower fraction
   of its fair share is preempted while a job of a queue at a higher fraction stays on a
   node where preempting it instead would also have made room.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from armada_core.scheduling import Job, SchedulingConfig, SchedulingResult, Snapshot
from armada_core.scheduling.constraints import node_admits
from armada_core.scheduling.fairness import CostModel, resource_dims

from .helpers import IMPLEMENTATIONS, check_basic
from .randomized import Knobs, random_world

#: Class caps preempt evicted jobs for a reason other than room, and decayed usage adds to a
#: queue's fraction: both are left out so that the properties are exact. So are role groups:
#: one with a role below its minimum is preempted for no room, and elastic members give way
#: before fairer victims.
KNOBS = Knobs(class_limits=False, decay=False, roles=False)

#: No fair-share preemption (every queue protected): every victim is an urgency victim.
NEVER_EVICT = float("inf")


def _settings(examples: int) -> settings:
    return settings(
        derandomize=True,
        deadline=None,
        database=None,
        max_examples=examples,
        suppress_health_check=[HealthCheck.too_slow],
    )


def one_queued(seed: int, protected_fraction: float | None) -> Snapshot | None:
    """A random world's running jobs and its most urgent queued job outside a gang."""
    snap = random_world(seed, KNOBS)
    pcs = {p.name: p.priority for p in snap.priority_classes}
    queued = [
        j for j in snap.jobs if j.node is None and j.gang_id is None and j.priority_class in pcs
    ]
    if not queued:
        return None
    rng = random.Random(seed)
    top = max(pcs[j.priority_class] for j in queued)
    chosen = rng.choice([j for j in queued if pcs[j.priority_class] == top])
    running = tuple(j for j in snap.jobs if j.node is not None)
    config = SchedulingConfig(
        protected_fraction=protected_fraction,
        resource_multipliers=snap.config.resource_multipliers,
    )
    return replace(snap, jobs=(*running, chosen), config=config)


class World:
    """Capacity and usage of a snapshot once a cycle's decisions are applied."""

    def __init__(self, snap: Snapshot, result: SchedulingResult):
        self.snap, self.result = snap, result
        self.dims = resource_dims(snap)
        self.nodes = {n.id: n for n in snap.nodes}
        self.pcs = {p.name: p for p in snap.priority_classes}
        self.used: dict[str, list[int]] = defaultdict(lambda: [0] * len(self.dims))
        for j in snap.jobs:
            where = result.scheduled.get(j.id, j.node)
            if where in self.nodes and j.id not in result.preempted:
                self.used[where] = self._plus(self.used[where], j, 1)
        totals = [
            sum(n.capacity.get(d, 0) for n in snap.nodes if not n.cordoned) for d in self.dims
        ]
        costs = CostModel.build(self.dims, totals, snap.config.resource_multipliers)
        queues = {q.name: q for q in snap.queues}
        start: dict[str, list[int]] = defaultdict(lambda: [0] * len(self.dims))
        for j in snap.jobs:
            if j.node in self.nodes and j.queue in queues and j.priority_class in self.pcs:
                start[j.queue] = self._plus(start[j.queue], j, 1)
        #: Fraction of fair share at the start of the cycle, up to a common factor.
        self.fraction = {q: costs.cost(start[q]) / queues[q].weight for q in start}

    def _plus(self, vec: list[int], job: Job, sign: int) -> list[int]:
        return [v + sign * job.requests.get(d, 0) for v, d in zip(vec, self.dims, strict=True)]

    def fits(self, node: str, back: list[Job] = (), out: list[Job] = ()) -> bool:
        """Whether node ``node`` is within capacity with ``back`` added and ``out`` removed."""
        vec = self.used[node]
        for j in back:
            vec = self._plus(vec, j, 1)
        for j in out:
            vec = self._plus(vec, j, -1)
        cap = self.nodes[node].capacity
        return all(v <= cap.get(d, 0) for v, d in zip(vec, self.dims, strict=True))


def check_minimal(snap: Snapshot, result: SchedulingResult) -> None:
    world = World(snap, result)
    units: dict[tuple, list[Job]] = defaultdict(list)
    for j in snap.jobs:
        if j.id in result.preempted:
            units[(j.queue, j.gang_id) if j.gang_id else ("", j.id)].append(j)
    for unit in units.values():
        nodes = {j.node for j in unit}
        fits = all(world.fits(n, back=[j for j in unit if j.node == n]) for n in nodes)
        assert not fits, f"{sorted(j.id for j in unit)} preempted but could be put back"


def check_fair(snap: Snapshot, result: SchedulingResult) -> None:
    """Property 2 for urgency victims held on their nodes (every queue protected)."""
    world = World(snap, result)
    pcs = world.pcs
    (placed_id,) = result.scheduled or (None,)
    if placed_id is None or not result.preempted:
        return
    placed = next(j for j in snap.jobs if j.id == placed_id)
    target = result.scheduled[placed_id]

    def priority(j: Job) -> int:
        return pcs[j.priority_class].priority

    def may_go(j: Job) -> bool:
        if j.priority_class not in pcs or j.gang_id is not None:
            return False
        if pcs[j.priority_class].preemptible:
            return True
        return j.lifetime is not None and snap.now - (j.start_time or 0.0) >= j.lifetime

    singles = [j for j in snap.jobs if j.node in world.nodes and may_go(j)]
    for v in (j for j in singles if j.id in result.preempted):
        for w in singles:
            if w.id in result.preempted or priority(w) != priority(v):
                continue
            if not world.fraction[w.queue] > world.fraction[v.queue]:
                continue
            if w.node == target:
                swapped = world.fits(target, back=[v], out=[w])
            else:
                # x on w's node, giving way: w and every job there of a lower class.
                lower = [
                    j
                    for j in singles
                    if j.node == w.node and j.id != w.id and priority(j) < priority(v)
                ]
                swapped = node_admits(placed, world.nodes[w.node]) and world.fits(
                    w.node, back=[placed], out=[w, *lower]
                )
            assert not swapped, (
                f"{v.id} ({v.queue}) preempted while {w.id} ({w.queue}, further above its "
                f"fair share) stays on {w.node}, where preempting it would also make room"
            )


@pytest.mark.parametrize("impl", sorted(IMPLEMENTATIONS))
@_settings(300)
@given(st.integers(min_value=0, max_value=2**40))
def test_urgency_victims_are_minimal_and_fair(impl: str, seed: int) -> None:
    snap = one_queued(seed, NEVER_EVICT)
    if snap is None:
        return
    result = IMPLEMENTATIONS[impl](snap)
    check_basic(snap, result)
    check_minimal(snap, result)
    check_fair(snap, result)


@pytest.mark.parametrize("impl", sorted(IMPLEMENTATIONS))
@_settings(300)
@given(
    st.integers(min_value=0, max_value=2**40),
    st.sampled_from([None, 0.0, 0.5, 1.0, 2.0]),
)
def test_no_preempted_job_could_be_put_back(
    impl: str, seed: int, protected_fraction: float | None
) -> None:
    """With eviction too: evicted jobs that do not return had no room left."""
    snap = one_queued(seed, protected_fraction)
    if snap is None:
        return
    result = IMPLEMENTATIONS[impl](snap)
    check_basic(snap, result)
    check_minimal(snap, result)


def test_worlds_exercise_urgency() -> None:
    """Enough of the reduced worlds preempt for the properties to mean something."""
    seeds = range(200)
    preempting = 0
    for seed in seeds:
        snap = one_queued(seed, NEVER_EVICT)
        if snap is not None and IMPLEMENTATIONS["fast"](snap).preempted:
            preempting += 1
    assert preempting >= 20, preempting
