"""Random small snapshots that exercise every scheduling rule, within node capacity."""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from armada_core.scheduling import (
    Job,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PriorityClass,
    Queue,
    Resources,
    SchedulingConfig,
    Snapshot,
    Taint,
    Toleration,
)

QUEUE_NAMES = ["A", "B", "C", "D"]
GPU = "nvidia.com/gpu"


@dataclass
class Knobs:
    """Which features a random world may use."""

    gangs: bool = True
    constraints: bool = True
    limits: bool = True
    lifetimes: bool = True
    decay: bool = True
    cordons: bool = True
    urgency: bool = True
    class_limits: bool = True
    topology: bool = True  # sometimes topology levels, block labels and gangs' maximum hops
    roles: bool = True  # sometimes elastic pod groups (roles with minimums)
    single_class: bool = False  # every job in the preemptible class "low"
    unit_jobs: bool = False  # every job requests exactly one CPU and one memory unit
    max_nodes: int = 6
    max_jobs: int = 24
    extras: dict = field(default_factory=dict)


def classes(rng: random.Random, knobs: Knobs) -> tuple[PriorityClass, ...]:
    low_cap = {"cpu": rng.choice([0.3, 0.5])} if knobs.class_limits and rng.random() < 0.15 else {}
    out = [
        PriorityClass("low", 0, True, low_cap),
        PriorityClass("np", 3, False),
    ]
    if knobs.urgency:
        out += [PriorityClass("mid", 1, True), PriorityClass("high", 2, True)]
    return tuple(out)


def random_nodes(rng: random.Random, knobs: Knobs) -> list[Node]:
    nodes = []
    for i in range(rng.randint(1, knobs.max_nodes)):
        cap = {"cpu": rng.choice([2, 4, 4, 8]) * 1000, "memory": rng.choice([4, 8, 16])}
        labels = {"rack": f"r{rng.randint(0, 2)}"} if rng.random() < 0.8 else {}
        taints: tuple[Taint, ...] = ()
        if knobs.constraints and rng.random() < 0.25:
            cap[GPU] = rng.choice([1, 2, 4])
            taints = (Taint("gpu", "true"),)
        if knobs.constraints and rng.random() < 0.5:
            labels["zone"] = rng.choice(["a", "b"])
        cordoned = knobs.cordons and rng.random() < 0.08
        nodes.append(Node(f"n{i:02d}", Resources(cap), labels, taints, cordoned))
    return nodes


SHAPES = [
    {"cpu": 1000, "memory": 1},
    {"cpu": 1000, "memory": 1},
    {"cpu": 2000, "memory": 2},
    {"cpu": 500, "memory": 4},
    {"cpu": 4000, "memory": 2},
    {"cpu": 1000, "memory": 1, GPU: 1},
]


def random_job(
    rng: random.Random, job_id: str, queues: list[str], pcs: tuple[PriorityClass, ...], knobs: Knobs
) -> Job:
    req = dict(SHAPES[0] if knobs.unit_jobs else rng.choice(SHAPES))
    kw: dict = {}
    if GPU in req or (knobs.constraints and rng.random() < 0.1):
        kw["tolerations"] = (Toleration("gpu", "Equal", "true"),)
    if knobs.constraints and rng.random() < 0.1:
        kw["node_selector"] = {"zone": rng.choice(["a", "b"])}
    if knobs.constraints and rng.random() < 0.07:
        kw["affinity"] = (
            NodeSelectorTerm((NodeSelectorRequirement("rack", "In", (rng.choice(["r0", "r1"]),)),)),
        )
    if knobs.constraints and rng.random() < 0.05:
        kw["avoid_node"] = "n00"
    return Job(
        job_id,
        rng.choice(queues),
        "low" if knobs.single_class else rng.choice(pcs).name,
        Resources(req),
        priority=rng.choice([0, 0, 1]),
        submit_time=float(rng.randint(0, 6)),
        **kw,
    )


def random_config(rng: random.Random, knobs: Knobs) -> SchedulingConfig:
    return SchedulingConfig(
        protected_fraction=rng.choice(knobs.extras.get("protected", [None, 0.5, 1.0, 1.0, 2.0])),
        max_jobs_per_cycle=(rng.choice([None, None, 2, 5]) if knobs.limits else None),
        max_fraction_per_cycle=({"cpu": 0.5} if knobs.limits and rng.random() < 0.15 else {}),
        resource_multipliers=({"memory": 0.5} if rng.random() < 0.2 else {}),
        usage_half_life=(100.0 if knobs.decay and rng.random() < 0.2 else None),
        # Drawn last, so that the rest of a world does not depend on them.
        non_preemptible_overshoot=(
            rng.choice([0.0, 0.2, 1.0]) if knobs.limits and rng.random() < 0.25 else None
        ),
        excess_flow_budget=(
            rng.choice([0.0, 0.5, 5.0, 50.0, 500.0])
            if knobs.limits and rng.random() < 0.3
            else None
        ),
        excess_flow_weights=(
            {"memory": rng.choice([0.0, 0.25]), GPU: 4.0} if rng.random() < 0.3 else {}
        ),
    )


def with_lifetimes(snap: Snapshot, seed: int) -> Snapshot:
    """Lifetimes on some queued jobs and gangs, and excess-flow charges on some running jobs
    of finite lifetime (as if placed above their fair share), from a generator of their own
    so that the rest of the world is as before."""
    if snap.config.non_preemptible_overshoot is None and snap.config.excess_flow_budget is None:
        return snap
    rng = random.Random(seed ^ 0xF10)
    gang_life = {}
    jobs = []
    for j in snap.jobs:
        if j.node is None and j.gang_id is not None:
            if j.gang_id not in gang_life:
                gang_life[j.gang_id] = rng.choice([None, 0.0, 30.0, 600.0, 600.0])
            j = replace(j, lifetime=gang_life[j.gang_id])
        elif j.node is None and j.lifetime is None and rng.random() < 0.2:
            j = replace(j, lifetime=rng.choice([30.0, 600.0]))
        elif j.node is not None and j.lifetime and rng.random() < 0.3:
            j = replace(j, excess_flow=rng.choice([100, 2000, 40000]))
        jobs.append(j)
    return replace(snap, jobs=tuple(jobs))


def place_running(
    rng: random.Random,
    nodes: list[Node],
    jobs: list[Job],
    now: float,
    free: dict[str, dict[str, int]],
) -> list[Job]:
    """Put some jobs on nodes where they fit, so the start state respects capacity."""
    out = []
    for j in jobs:
        order = list(nodes)
        rng.shuffle(order)
        for n in order:
            if all(free[n.id].get(k, 0) >= v for k, v in j.requests.items()):
                for k, v in j.requests.items():
                    free[n.id][k] -= v
                start = now - rng.choice([0.0, 5.0, 50.0])
                out.append(replace(j, node=n.id, start_time=start))
                break
    return out


def random_world(seed: int, knobs: Knobs | None = None) -> Snapshot:
    rng = random.Random(seed)
    knobs = knobs or Knobs()
    pcs = classes(rng, knobs)
    nodes = random_nodes(rng, knobs)
    names = QUEUE_NAMES[: rng.randint(1, 4)]
    queues = tuple(
        Queue(
            n,
            priority_factor=rng.choice(knobs.extras.get("factors", [1.0, 1.0, 2.0, 3.0])),
            cordoned=knobs.cordons and rng.random() < 0.08,
            decayed_usage=rng.choice([0.0, 0.0, 0.5]) if knobs.decay else 0.0,
        )
        for n in names
    )
    now = 100.0
    counter = 0

    def new_id() -> str:
        nonlocal counter
        counter += 1
        return f"j{counter:03d}"

    candidates: list[Job] = []
    for _ in range(rng.randint(0, knobs.max_jobs)):
        j = random_job(rng, new_id(), names, pcs, knobs)
        if knobs.lifetimes and rng.random() < 0.15:
            j = replace(j, lifetime=rng.choice([0.0, 10.0, 1000.0]))
        candidates.append(j)
    # Running gangs: members placed together or not at all.
    free = {n.id: dict(n.capacity) for n in nodes}
    gang_jobs: list[Job] = []
    if knobs.gangs:
        for g in range(rng.randint(0, 2)):
            size = rng.randint(2, 3)
            minimum = rng.choice([None, None, 1, 2])
            base = random_job(rng, "x", names, pcs, knobs)
            members = [
                replace(
                    base,
                    id=new_id(),
                    gang_id=f"rg{g}",
                    gang_cardinality=size,
                    gang_min_cardinality=minimum,
                )
                for _ in range(size)
            ]
            trial = {k: dict(v) for k, v in free.items()}
            placed = place_running(rng, nodes, members, now, trial)
            if len(placed) == size:
                gang_jobs += placed
                free = trial
    n_running = rng.randint(0, len(candidates))
    running = place_running(rng, nodes, candidates[:n_running], now, free)
    queued = candidates[n_running:]
    if knobs.gangs:
        for g in range(rng.randint(0, 3)):
            size = rng.randint(2, 4)
            base = random_job(rng, "x", names, pcs, knobs)
            minimum = rng.choice([None, None, 1, size - 1])
            label = rng.choice([None, None, "rack"])
            count = size if rng.random() < 0.9 else size - 1
            for _ in range(count):
                queued.append(
                    replace(
                        base,
                        id=new_id(),
                        gang_id=f"qg{g}",
                        gang_cardinality=size,
                        gang_min_cardinality=minimum,
                        gang_uniformity_label=label,
                    )
                )
    if knobs.constraints and rng.random() < 0.05:
        queued.append(Job(new_id(), "Z", "low", Resources({"cpu": 1000})))
    snap = Snapshot(
        queues,
        pcs,
        tuple(nodes),
        tuple(running + gang_jobs + queued),
        random_config(rng, knobs),
        now=now,
        usage_elapsed=rng.choice([0.0, 100.0]),
    )
    snap = with_lifetimes(snap, seed)
    if knobs.topology:
        snap = with_topology(snap, random.Random(seed ^ 0x70B0))
    if knobs.gangs and knobs.roles:
        snap = with_roles(snap, random.Random(seed ^ 0x201E), knobs)
    return snap


def with_roles(snap: Snapshot, rng: random.Random, knobs: Knobs) -> Snapshot:
    """Sometimes elastic pod groups: roles with a minimum and members of their own shape,
    queued whole, or partly running (some roles at or above their minimum, some below it),
    with a uniformity label or a maximum of hops, for the group or a role of its own. A
    separate generator, so that worlds without role groups stay as they were."""
    if rng.random() >= knobs.extras.get("roles", 0.35):
        return snap
    names = [q.name for q in snap.queues]
    pcs = snap.priority_classes
    free = {n.id: dict(n.capacity) for n in snap.nodes}
    for j in snap.jobs:
        if j.node is not None:
            for k, v in j.requests.items():
                free[j.node][k] = free[j.node].get(k, 0) - v
    jobs = list(snap.jobs)
    levels = snap.config.topology_levels
    for g in range(rng.randint(1, 2)):
        gid = f"pg{g}"
        queue = rng.choice(names)
        label = rng.choice([None, None, "rack"])
        hops = rng.choice([None, None, 2, 4]) if levels else None
        roles = []
        pc = rng.choice(pcs).name  # members of a gang share their class (submission checks)
        for r in range(rng.randint(1, 3)):
            count = rng.randint(1, 4)
            minimum = rng.randint(1, count) if rng.random() < 0.95 else count + 1
            base = random_job(rng, "x", names, pcs, knobs)
            roles.append((f"role{r}", count, minimum, base))
        total = sum(c for _, c, _, _ in roles)
        # A role's own maximum, from a generator of its own (the worlds stay as they were).
        own = random.Random(f"{gid}-{len(jobs)}-{total}")
        role_hops = {
            name: own.choice([None, None, 0, 2, 4]) if levels else None for name, *_ in roles
        }
        known = tuple((name, m) for name, _, m, _ in roles) if rng.random() < 0.3 else ()
        # Members that succeeded in earlier cycles (they keep their role's minimum).
        done = (
            tuple((name, rng.randint(0, m)) for name, _, m, _ in roles)
            if rng.random() < 0.3
            else ()
        )
        members = [
            replace(
                base,
                id=f"{gid}-{name}-{k}",
                queue=queue,
                priority_class=pc,
                gang_id=gid,
                gang_cardinality=total,
                gang_min_cardinality=None,
                gang_uniformity_label=label,
                gang_max_hops=hops,
                gang_role=name,
                gang_role_min=minimum,
                gang_role_max_hops=role_hops[name],
                gang_roles=known,
                gang_succeeded=done,
                submit_time=float(rng.randint(0, 50)),
            )
            for name, count, minimum, base in roles
            for k in range(count)
        ]
        if rng.random() < 0.5:
            # Partly running: each member runs with some probability where it fits.
            chosen = [m for m in members if rng.random() < 0.7]
            placed = place_running(rng, list(snap.nodes), chosen, snap.now, free)
            ids = {m.id for m in placed}
            members = placed + [m for m in members if m.id not in ids and rng.random() < 0.8]
        jobs += members
    return replace(snap, jobs=tuple(jobs))


TOPOLOGIES = [
    ("block", "rack"),
    ("rack",),
    ("block", "rack", "kubernetes.io/hostname"),
    ("rack", "kubernetes.io/hostname"),
]


def with_topology(snap: Snapshot, rng: random.Random) -> Snapshot:
    """Sometimes topology levels, with block labels over the racks (rack names reused across
    blocks, some nodes without a block) and queued gangs with a maximum of hops. A separate
    generator, so that worlds without topology stay as they were."""
    if rng.random() >= 0.4:
        return snap
    levels = rng.choice(TOPOLOGIES)
    blocks = {r: rng.choice(["b0", "b1"]) for r in ("r0", "r1", "r2")}
    nodes = []
    for n in snap.nodes:
        labels = dict(n.labels)
        if "rack" in labels and rng.random() < 0.9:
            labels["block"] = blocks[labels["rack"]] if rng.random() < 0.8 else "b2"
        nodes.append(replace(n, labels=labels))
    hops: dict[str, int | None] = {}
    jobs = []
    for j in snap.jobs:
        if j.node is None and j.gang_id is not None:
            if j.gang_id not in hops:
                hops[j.gang_id] = rng.choice([None, None, 0, 1, 2, 4, 6])
                if rng.random() < 0.3:
                    # A leader of another size: gangs of mixed shapes are tried member by
                    # member.
                    bigger = {k: v * 2 for k, v in j.requests.items()}
                    j = replace(j, requests=Resources(bigger))
            j = replace(j, gang_max_hops=hops[j.gang_id])
        jobs.append(j)
    config = replace(snap.config, topology_levels=levels)
    return replace(snap, nodes=tuple(nodes), jobs=tuple(jobs), config=config)


def apply_result(
    snap: Snapshot, result, now: float, rng: random.Random | None = None, finish: float = 0.0
) -> tuple[Job, ...]:
    """The next cycle's jobs: scheduled run, preempted and failed go, some running finish."""
    out = []
    for j in snap.jobs:
        if j.id in result.preempted or j.id in result.failed:
            continue
        if j.id in result.scheduled:
            charge = result.excess_flow.get(j.id, 0)
            j = replace(j, node=result.scheduled[j.id], start_time=now, excess_flow=charge)
        elif j.node is not None and j.gang_id is None and rng is not None and rng.random() < finish:
            continue
        out.append(j)
    return tuple(out)
