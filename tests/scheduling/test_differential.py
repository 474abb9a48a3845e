"""The fast implementation makes exactly the reference's decisions on random snapshots."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from armada_core.scheduling.fast import fast_schedule
from armada_core.scheduling.reference import reference_schedule

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


def _same(snap) -> None:
    ref = reference_schedule(snap)
    fast = fast_schedule(snap)
    check_basic(snap, ref)
    assert fast.decisions() == ref.decisions()


@_settings(1500)
@given(st.integers(min_value=0, max_value=2**40))
def test_single_cycle_matches_reference(seed: int) -> None:
    _same(random_world(seed))


@_settings(300)
@given(st.integers(min_value=0, max_value=2**40))
def test_multi_cycle_matches_reference(seed: int) -> None:
    snap = random_world(seed)
    rng = random.Random(seed)
    for cycle in range(4):
        ref = reference_schedule(snap)
        assert fast_schedule(snap).decisions() == ref.decisions(), f"cycle {cycle}"
        now = snap.now + 10.0
        jobs = apply_result(snap, ref, snap.now, rng, finish=0.2)
        extra = random_world(seed * 7 + cycle, Knobs(max_nodes=1)).jobs
        fresh = tuple(
            j.__class__(**{**_fields(j), "id": f"c{cycle}-{j.id}", "node": None})
            for j in extra
            if j.node is None and j.queue in {q.name for q in snap.queues}
        )
        snap = snap.__class__(
            snap.queues, snap.priority_classes, snap.nodes, jobs + fresh, snap.config, now=now
        )


@_settings(400)
@given(st.integers(min_value=0, max_value=2**40))
def test_nothing_queued_matches_reference(seed: int) -> None:
    """Only running jobs: the vectorised steady-state decision, and its fallback when a node
    is over capacity (it shrank) or a queue is over a class cap, agree with the reference."""
    import dataclasses

    from armada_core.scheduling import PriorityClass, Resources

    rng = random.Random(seed)
    snap = random_world(seed)
    jobs = tuple(j for j in snap.jobs if j.node is not None)
    nodes = snap.nodes
    if nodes and rng.random() < 0.3:
        shrunk = rng.choice(nodes)
        smaller = Resources({k: v // 2 for k, v in shrunk.capacity.items()})
        nodes = tuple(dataclasses.replace(n, capacity=smaller) if n is shrunk else n for n in nodes)
    classes = snap.priority_classes
    if rng.random() < 0.3:
        classes = tuple(
            PriorityClass(pc.name, pc.priority, pc.preemptible, {"cpu": 0.2})
            if pc.name == "low"
            else pc
            for pc in classes
        )
    _same(dataclasses.replace(snap, nodes=nodes, jobs=jobs, priority_classes=classes))


def _fields(job) -> dict:
    return {
        f: getattr(job, f) for f in job.__dataclass_fields__ if job.__dataclass_fields__[f].init
    }


@pytest.mark.slow
@_settings(1500)
@given(st.integers(min_value=0, max_value=2**40))
def test_larger_worlds_match_reference(seed: int) -> None:
    _same(random_world(seed, Knobs(max_nodes=12, max_jobs=60)))


def _bulk_world(seed: int):
    """Long runs of identical jobs, so the vectorised paths (bulk fill, evicted batches,
    run wins) are the ones exercised."""
    import dataclasses

    from armada_core.scheduling import Job, Node, Queue, Resources, SchedulingConfig, Snapshot

    from .helpers import PRIORITY_CLASSES

    rng = random.Random(seed)
    nodes = tuple(
        Node(f"n{i:03d}", Resources(cpu=rng.choice([4000, 8000, 16000]), memory=64))
        for i in range(rng.randint(5, 30))
    )
    queues = tuple(Queue(n, rng.choice([1.0, 2.0])) for n in ["A", "B", "C"][: rng.randint(1, 3)])
    shapes = [Resources(cpu=1000, memory=1), Resources(cpu=2000, memory=4), Resources(cpu=500)]
    jobs = []
    k = 0
    free = {n.id: n.capacity["cpu"] for n in nodes}
    for q in queues:
        for _ in range(rng.randint(1, 3)):
            shape = rng.choice(shapes)
            pc = rng.choice(["low", "low", "mid", "np"])
            for _ in range(rng.randint(50, 400)):
                k += 1
                job = Job(f"j{k:05d}", q.name, pc, shape, submit_time=float(k // 7))
                if rng.random() < 0.3:
                    spot = [n for n in nodes if free[n.id] >= shape["cpu"]]
                    if spot:
                        where = rng.choice(spot)
                        free[where.id] -= shape["cpu"]
                        job = dataclasses.replace(job, node=where.id, start_time=0.0)
                jobs.append(job)
    config = SchedulingConfig(
        protected_fraction=rng.choice([None, 1.0]),
        max_jobs_per_cycle=rng.choice([None, None, 150]),
        max_fraction_per_cycle=rng.choice([{}, {}, {"cpu": 0.6}]),
        usage_half_life=rng.choice([None, 60.0]),
    )
    classes = PRIORITY_CLASSES
    if rng.random() < 0.3:
        classes = tuple(
            dataclasses.replace(pc, max_fraction_per_queue={"cpu": 0.4}) if pc.name == "low" else pc
            for pc in PRIORITY_CLASSES
        )
    queues = tuple(dataclasses.replace(q, decayed_usage=rng.choice([0.0, 0.3])) for q in queues)
    return _lifetime_limits(
        Snapshot(queues, classes, nodes, tuple(jobs), config, usage_elapsed=30.0), seed
    )


def _lifetime_limits(snap, seed: int, force: bool = False):
    """In some bulk worlds (every one with ``force``): the overshoot and budget options, and
    lifetimes that change along a queue's runs of identical jobs (runs must not mix them)."""
    rng = random.Random(seed ^ 0xB0D)
    if rng.random() < 0.4 and not force:
        return snap
    config = replace(
        snap.config,
        non_preemptible_overshoot=rng.choice([None, 0.0, 0.2]),
        excess_flow_budget=rng.choice([None, 20.0, 300.0, 3000.0]),
    )
    if force:
        config = replace(config, excess_flow_budget=rng.choice([20.0, 300.0, 3000.0]))
    jobs = []
    life = None
    # A queue that wants little leaves room for the others to go above their fair share.
    light = snap.queues[0].name if force or rng.random() < 0.5 else None
    for j in snap.jobs:
        if j.queue == light and rng.random() < 0.9:
            continue
        if rng.random() < 0.05:
            life = rng.choice([None, 0.0, 60.0, 600.0])
        if j.node is None:
            j = replace(j, lifetime=life)
        elif life and rng.random() < 0.1:
            j = replace(j, lifetime=life, excess_flow=rng.choice([1000, 10000]))
        jobs.append(j)
    return replace(snap, config=config, jobs=tuple(jobs))


@pytest.mark.parametrize("seed", range(12))
def test_long_runs_match_reference(seed: int) -> None:
    _same(_bulk_world(seed))


@pytest.mark.parametrize("seed", range(16))
def test_long_runs_with_lifetime_limits_match_reference(seed: int) -> None:
    """Runs of identical jobs counted against the non-preemptible overshoot and the
    excess-flow budget at once (how many stay within the fair share, how many the budget
    takes) are decided as the reference decides them one job at a time."""
    _same(_lifetime_limits(_bulk_world(seed + 100), seed, force=True))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(12, 60))
def test_more_long_runs_match_reference(seed: int) -> None:
    _same(_bulk_world(seed))


def _rate_and_lookback(snap, seed: int):
    """The same world with random rate limits (bucket levels included) and lookback."""
    rng = random.Random(seed ^ 0x5EED)
    names = [q.name for q in snap.queues]
    config = replace(
        snap.config,
        max_queue_lookback=rng.choice([None, 0, 1, 2, 3, 5, 10]),
        scheduling_rate=rng.choice([None, 0.5, 1.0, 4.0]),
        scheduling_burst=rng.choice([None, 1, 3, 8]),
        queue_scheduling_rate=rng.choice([None, 0.5, 2.0]),
        queue_scheduling_burst=rng.choice([None, 1, 2, 5]),
    )
    return replace(
        snap,
        config=config,
        rate_tokens=rng.choice([None, 0.0, 0.7, 2.5, 100.0]),
        queue_rate_tokens={
            n: rng.choice([0.0, 0.9, 1.0, 3.2]) for n in names if rng.random() < 0.5
        },
    )


@_settings(800)
@given(st.integers(min_value=0, max_value=2**40))
def test_rate_limits_and_lookback_match_reference(seed: int) -> None:
    _same(_rate_and_lookback(random_world(seed), seed))


@_settings(100)
@given(st.integers(min_value=0, max_value=2**40))
def test_rate_limits_and_lookback_on_larger_worlds_match_reference(seed: int) -> None:
    _same(_rate_and_lookback(random_world(seed, Knobs(max_nodes=12, max_jobs=60)), seed))


def _topology_world(seed: int):
    """A fat tree (blocks of racks of nodes, hostname sometimes a level) partly filled by
    running jobs of every class, and many queued gangs of several sizes, classes, maximum
    hops and uniformity labels: placement by domain, the stage-1 shortcut, trials with
    displacement, and held-back gangs all get exercised."""
    from armada_core.scheduling import Job, Node, Queue, Resources, SchedulingConfig, Snapshot

    from .helpers import PRIORITY_CLASSES

    rng = random.Random(seed)
    levels = rng.choice([("block", "rack"), ("block", "rack", "kubernetes.io/hostname"), ("rack",)])
    nodes = []
    for b in range(rng.randint(1, 3)):
        for r in range(rng.randint(1, 3)):
            for k in range(rng.randint(1, 4)):
                labels = {"block": f"b{b}", "rack": f"r{r}", "zone": rng.choice("xy")}
                if rng.random() < 0.05:
                    del labels["rack"]
                cpu = rng.choice([4000, 8000])
                nodes.append(Node(f"n{b}{r}{k}", Resources(cpu=cpu, memory=16), labels))
    queues = tuple(Queue(n, rng.choice([1.0, 2.0])) for n in "ABC"[: rng.randint(1, 3)])
    names = [q.name for q in queues]
    jobs = []
    for n in nodes:
        used = 0
        while rng.random() < 0.6 and used + 2000 <= n.capacity["cpu"]:
            used += 2000
            jobs.append(
                Job(
                    f"r{len(jobs):03d}",
                    rng.choice(names),
                    rng.choice(["low", "low", "mid", "np"]),
                    Resources(cpu=2000, memory=1),
                    node=n.id,
                    start_time=0.0,
                    lifetime=rng.choice([None, 0.0]),
                )
            )
    for g in range(rng.randint(1, 6)):
        size = rng.choice([2, 3, 4, 6])
        pc = rng.choice(["low", "mid", "high"])
        cpu = rng.choice([1000, 2000, 4000])
        hops = rng.choice([None, None, 0, 2, 4])
        label = rng.choice([None, None, None, "zone"])
        minimum = rng.choice([None, None, size - 1])
        for m in range(size):
            big = m == 0 and rng.random() < 0.2
            jobs.append(
                Job(
                    f"g{g}-{m}",
                    rng.choice(names) if m == 0 else jobs[-1].queue,
                    pc,
                    Resources(cpu=cpu * (2 if big else 1), memory=1),
                    submit_time=float(g),
                    gang_id=f"g{g}",
                    gang_cardinality=size,
                    gang_min_cardinality=minimum,
                    gang_uniformity_label=label,
                    gang_max_hops=hops,
                )
            )
    jobs += _topology_pod_groups(random.Random(seed ^ 0x5B6), names)
    config = SchedulingConfig(
        protected_fraction=rng.choice([None, 1.0, float("inf")]), topology_levels=levels
    )
    return Snapshot(queues, PRIORITY_CLASSES, tuple(nodes), tuple(jobs), config, now=10.0)


def _topology_pod_groups(rng: random.Random, names: list[str]) -> list:
    """Queued pod groups for the topology worlds (a generator of their own, so the gangs
    stay as they were): roles of one to three members, a maximum of hops for the group, for
    a role of its own, both or neither (SEMANTICS.md, "Topology per sub-group")."""
    from armada_core.scheduling import Job, Resources

    out = []
    for g in range(rng.randint(0, 2)):
        roles = [(f"role{r}", rng.randint(1, 3)) for r in range(rng.randint(1, 3))]
        total = sum(n for _, n in roles)
        queue = rng.choice(names)
        pc = rng.choice(["low", "mid", "high"])
        label = rng.choice([None, None, "zone"])
        hops = rng.choice([None, None, 0, 2, 4])
        for role, count in roles:
            minimum = rng.randint(1, count)
            own = rng.choice([None, None, 0, 2, 4])
            cpu = rng.choice([1000, 2000, 4000])
            out += [
                Job(
                    f"p{g}-{role}-{k}",
                    queue,
                    pc,
                    Resources(cpu=cpu, memory=1),
                    submit_time=float(g),
                    gang_id=f"p{g}",
                    gang_cardinality=total,
                    gang_uniformity_label=label,
                    gang_max_hops=hops,
                    gang_role=role,
                    gang_role_min=minimum,
                    gang_role_max_hops=own,
                )
                for k in range(count)
            ]
    return out


@_settings(400)
@given(st.integers(min_value=0, max_value=2**40))
def test_topology_worlds_match_reference(seed: int) -> None:
    _same(_topology_world(seed))


def _repeated_pod_groups(seed: int):
    """A topology world with copies of a few pod groups (from any queue): groups that share
    their first role, many of which fail in one cycle, some after others were placed."""
    snap = _topology_world(seed)
    rng = random.Random(seed ^ 0x7E9)
    templates = [_topology_pod_groups(rng, ["A"]) for _ in range(2)]
    names = [q.name for q in snap.queues]
    jobs = list(snap.jobs)
    for copy in range(rng.randint(2, 8)):
        queue = rng.choice(names)
        for j in rng.choice(templates):
            gang = f"c{copy}-{j.gang_id}"
            jobs.append(replace(j, id=f"c{copy}-{j.id}", queue=queue, gang_id=gang))
    return replace(snap, jobs=tuple(jobs))


@_settings(300)
@given(st.integers(min_value=0, max_value=2**40))
def test_repeated_pod_groups_match_reference(seed: int) -> None:
    """A failed first role is remembered for the space epoch (``fast.role_topology``): the
    groups after it fail with the reason the reference finds for each."""
    _same(_repeated_pod_groups(seed))


@_settings(300)
@given(st.integers(min_value=0, max_value=2**40))
def test_role_group_worlds_match_reference(seed: int) -> None:
    """Worlds that always hold elastic pod groups, over cycles in which running members
    end (a role may fall below its minimum) and waiting members get their chance."""
    snap = random_world(seed, Knobs(extras={"roles": 1.0}))
    rng = random.Random(seed ^ 0x5EED)
    for cycle in range(4):
        ref = reference_schedule(snap)
        assert fast_schedule(snap).decisions() == ref.decisions(), f"cycle {cycle}"
        jobs = apply_result(snap, ref, snap.now, rng, finish=0.2)
        jobs = tuple(
            j
            for j in jobs
            if not (j.gang_role is not None and j.node is not None and rng.random() < 0.15)
        )
        snap = replace(snap, jobs=jobs, now=snap.now + 10.0)
