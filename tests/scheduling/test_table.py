"""Table-driven multi-round scenarios, each run against both implementations.

Expected outcomes are derived by hand from the rules in seed 000 and the tie-breaking documented
in ``armada_core.scheduling.reference``.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from armada_core.scheduling import (
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PriorityClass,
    Queue,
    SchedulingConfig,
    Taint,
)
from armada_core.scheduling import reasons as why

from .helpers import (
    IMPLEMENTATIONS,
    PRIORITY_CLASSES,
    Round,
    Scenario,
    gang,
    job,
    jobs,
    node,
    res,
    run_scenario,
    running,
    tol,
)

ABC = (Queue("A"), Queue("B"), Queue("C"))
ALWAYS_EVICT = SchedulingConfig(protected_fraction=None)
#: Every queue protected: no fair-share preemption, only urgency.
NEVER_EVICT = SchedulingConfig(protected_fraction=float("inf"))
LOW_HIGH = (PriorityClass("low", 0, preemptible=True), PriorityClass("high", 1, preemptible=True))


def aff(*terms: list[tuple[str, str, tuple[str, ...]]]) -> tuple[NodeSelectorTerm, ...]:
    return tuple(
        NodeSelectorTerm(tuple(NodeSelectorRequirement(k, op, v) for k, op, v in term))
        for term in terms
    )


#: A fat tree of blocks of racks: a gang stays within 2 hops in one rack, 4 in one block.
TOPO = SchedulingConfig(topology_levels=("block", "rack"))
TOPO_NEVER_EVICT = replace(NEVER_EVICT, topology_levels=("block", "rack"))
TOPO_NODES = SchedulingConfig(topology_levels=("rack", "kubernetes.io/hostname"))


def tnode(node_id: str, block: str, rack: str, **kw):
    """A node in rack ``rack`` of block ``block``."""
    labels = {"block": block, "rack": rack, **kw.pop("labels", {})}
    return node(node_id, labels=labels, **kw)


def _gang_incomplete():
    members = gang("g", 3)
    return members[:2]


def _gang_too_many():
    return [replace(m, gang_cardinality=2) for m in gang("g", 3)]


def pod_group(gid: str, roles=(("coord", 1, 1), ("worker", 4, 2)), queue: str = "A", **kw):
    """An elastic pod group: per (role, members, minimum), members ``{gid}-{role}{k}``."""
    total = sum(n for _, n, _ in roles)
    return [
        job(
            f"{gid}-{role}{k}",
            queue,
            gang_id=gid,
            gang_cardinality=total,
            gang_role=role,
            gang_role_min=minimum,
            **kw,
        )
        for role, n, minimum in roles
        for k in range(n)
    ]


def _requeued(members, cardinality: int):
    """Members queued again as a new generation of ``cardinality``."""
    return [replace(m, node=None, start_time=None, gang_cardinality=cardinality) for m in members]


def _needless_preemption_scenarios() -> list[Scenario]:
    """Seed 000, "avoid preemption": nothing is preempted that the cycle's decisions do not
    need (upstream's "gang preemption" case)."""
    nodes = [node("n0", cpu=32, mem=64), node("n1", cpu=32, mem=64)]
    gang_c = gang("c", 32, "C")
    urgent = jobs("u", 17, "A", pc="high")
    return [
        Scenario(
            # A's first urgent job strands C's evicted gang (it cannot go back whole): the
            # gang is preempted at once and its space is free, so A's other urgent jobs take
            # it instead of displacing A's own evicted jobs on n0.
            "urgent jobs preempt a whole gang and nothing else",
            nodes,
            [
                Round(jobs("a", 16, "A") + jobs("b", 16, "B"), counts={"A": 16, "B": 16}),
                Round(gang_c, sched={m.id: "n1" for m in gang_c}, pre=set()),
                Round(
                    urgent,
                    sched={u.id: "n1" for u in urgent},
                    pre={m.id for m in gang_c},
                    counts={"A": 33, "B": 16},
                ),
                Round([], sched=set(), pre=set()),
            ],
            queues=ABC,
            config=ALWAYS_EVICT,
            classes=LOW_HIGH,
        ),
        Scenario(
            # Upstream's layout: A and B each on half of a node, the gang on the other
            # halves of both.
            "urgent jobs preempt a whole gang split over two nodes and nothing else",
            nodes,
            [
                Round(
                    running(jobs("a", 16, "A"), "n0")
                    + running(jobs("b", 16, "B"), "n1")
                    + running(gang_c[:16], "n0")
                    + running(gang_c[16:], "n1")
                    + urgent,
                    pre={m.id for m in gang_c},
                    counts={"A": 33, "B": 16},
                ),
            ],
            queues=ABC,
            config=ALWAYS_EVICT,
            classes=LOW_HIGH,
        ),
    ]


def _lifetime_fair_share_scenarios() -> list[Scenario]:
    """Which fair share the lifetime limits read (``lifetime_limits_count_all_queues``): A is
    the only active queue; B exists but has no jobs."""
    overshoot = SchedulingConfig(non_preemptible_overshoot=0.2)
    budget = SchedulingConfig(excess_flow_budget=15.0)
    infinite = [*jobs("i", 6, "A", pc="np"), job("f0", "A", pc="np", lifetime=600.0)]
    finite = [*jobs("f", 6, "A", pc="np", lifetime=600.0), job("p0", "A")]
    return [
        Scenario(
            # Among active queues A's fair share is the whole cluster: no limit bites.
            "non-preemptible overshoot: a queue alone is not limited among active queues",
            [node("n0", cpu=8, mem=64)],
            [Round(infinite, sched={j.id for j in infinite})],
            config=overshoot,
        ),
        Scenario(
            # Over all queues A's fair share is 0.5, though B has no jobs: its jobs of
            # infinite lifetime may cost 0.6, four CPUs of eight; the finite f0 passes. They
            # stay held back while A is alone.
            "non-preemptible overshoot: a queue alone is limited over all queues",
            [node("n0", cpu=8, mem=64)],
            [
                Round(
                    infinite,
                    sched={"i0", "i1", "i2", "i3", "f0"},
                    reasons={
                        "i4": why.NON_PREEMPTIBLE_OVERSHOOT,
                        "i5": why.NON_PREEMPTIBLE_OVERSHOOT,
                    },
                ),
                Round([], sched=set(), pre=set(), reasons={"i4": why.NON_PREEMPTIBLE_OVERSHOOT}),
            ],
            config=replace(overshoot, lifetime_limits_count_all_queues=True),
        ),
        Scenario(
            "excess-flow budget: a queue alone spends none among active queues",
            [node("n0", cpu=8, mem=64)],
            [Round(finite, sched={j.id for j in finite}, excess_flow={})],
            config=budget,
        ),
        Scenario(
            # Over all queues A is above its fair share (half the cluster) from its fifth
            # job: that one takes 10 of the 15 resource-minutes, the sixth does not fit; the
            # preemptible p0 takes nothing. The budget comes back when f4 leaves.
            "excess-flow budget: a queue alone spends it above its share over all queues",
            [node("n0", cpu=8, mem=64)],
            [
                Round(
                    finite,
                    sched={"f0", "f1", "f2", "f3", "f4", "p0"},
                    excess_flow={"f4": 10_000},
                    reasons={"f5": why.EXCESS_FLOW_BUDGET},
                ),
                Round([], finish={"f4"}, sched={"f5"}, pre=set(), excess_flow={"f5": 10_000}),
            ],
            config=replace(budget, lifetime_limits_count_all_queues=True),
        ),
    ]


def _role_scenarios() -> list[Scenario]:
    """Elastic pod groups (SEMANTICS.md, "Elastic pod groups")."""
    g = pod_group("g")
    g5 = pod_group("g", roles=(("coord", 1, 1), ("worker", 5, 2)))
    by = {m.id: m for m in g}
    elastic = "elastic member of gang g (role worker) waits for capacity"
    big = pod_group("g", roles=(("coord", 1, 1), ("worker", 4, 2)))
    big = [replace(m, requests=res(2)) if m.gang_role == "worker" else m for m in big]
    known = (("coord", 1), ("worker", 2))
    return [
        Scenario(
            "role group: minimums first, elastic members as room allows, the rest wait",
            [node("n0")],
            [
                Round(
                    g,
                    sched={"g-coord0", "g-worker0", "g-worker1", "g-worker2"},
                    failed=set(),
                    reasons={"g-worker3": elastic},
                ),
                Round([], sched=set(), pre=set(), reasons={"g-worker3": elastic}),
            ],
        ),
        Scenario(
            "role group: a role's minimum that does not fit leaves the whole group queued",
            [node("n0")],
            [
                Round(
                    big,
                    sched=set(),
                    failed=set(),
                    reasons={m.id: "gang could not be scheduled" for m in big},
                )
            ],
        ),
        Scenario(
            "role group: a role with fewer members than its minimum fails",
            [node("n0")],
            [
                Round(
                    pod_group("g", roles=(("coord", 1, 1), ("worker", 1, 2))),
                    sched=set(),
                    failed={"g-coord0", "g-worker0"},
                    reasons={"g-coord0": "role worker has 1 members, fewer than its minimum 2"},
                )
            ],
        ),
        Scenario(
            "role group: elastic members are placed in a later cycle when room frees",
            [node("n0")],
            [
                Round([job("x0", "B")], sched={"x0"}),
                Round(
                    g,
                    sched={"g-coord0", "g-worker0", "g-worker1"},
                    pre=set(),
                    reasons={"g-worker2": elastic, "g-worker3": elastic},
                ),
                Round(
                    [],
                    finish={"x0"},
                    sched={"g-worker2": "n0"},
                    pre=set(),
                    reasons={"g-worker3": elastic},
                ),
            ],
        ),
        Scenario(
            # Without the rule the node of queue B (furthest above its fair share) would give
            # way; the elastic worker of the same class goes first, alone.
            "role group: urgency preempts an elastic member before anything of its class",
            [node("n0"), node("n1")],
            [
                Round(
                    running(g[:4], "n0")
                    + running(jobs("b", 4, "B"), "n1")
                    + [job("h0", "C", pc="high")],
                    sched={"h0": "n0"},
                    pre={"g-worker2"},
                ),
            ],
            queues=(Queue("A"), Queue("B", priority_factor=2.0), Queue("C")),
            config=NEVER_EVICT,
        ),
        Scenario(
            # Without the rule the group's four members would go back as one and a0, a single
            # job of the same class, would be preempted instead of the elastic worker.
            "role group: fair share takes an elastic member before other jobs of its class",
            [node("n0", cpu=5)],
            [
                Round(
                    [*running([*g[:4], job("a0")], "n0"), job("b0", "B")],
                    sched={"b0": "n0"},
                    pre={"g-worker2"},
                ),
            ],
            config=ALWAYS_EVICT,
        ),
        Scenario(
            "role group: a role below its minimum preempts the group, which starts again",
            [node("n0")],
            [
                Round(g, sched={"g-coord0", "g-worker0", "g-worker1", "g-worker2"}),
                Round(
                    [],
                    finish={"g-worker0", "g-worker1"},
                    sched=set(),
                    pre={"g-coord0", "g-worker2"},
                    reasons={
                        "g-worker3": "role worker has 1 of its minimum 2 members running or "
                        "succeeded"
                    },
                ),
                Round(
                    _requeued([by["g-coord0"], by["g-worker2"], by["g-worker3"]], 3),
                    finish={"g-worker3"},
                    sched={"g-coord0", "g-worker2", "g-worker3"},
                    pre=set(),
                ),
            ],
        ),
        Scenario(
            "role group: a role whose members all ended preempts the group",
            [node("n0")],
            [
                Round(
                    [replace(m, gang_roles=known, gang_cardinality=4) for m in g[:4]],
                    sched={"g-coord0", "g-worker0", "g-worker1", "g-worker2"},
                ),
                Round(
                    [],
                    finish={"g-coord0"},
                    sched=set(),
                    pre={"g-worker0", "g-worker1", "g-worker2"},
                ),
            ],
        ),
        Scenario(
            # A member that succeeded did its part: its role keeps its minimum without it.
            "role group: the coordinator succeeds first, the workers go on",
            [node("n0")],
            [
                Round(
                    [replace(m, gang_roles=known) for m in g],
                    sched={"g-coord0", "g-worker0", "g-worker1", "g-worker2"},
                    reasons={"g-worker3": elastic},
                ),
                Round([], succeed={"g-coord0"}, sched={"g-worker3": "n0"}, pre=set()),
                Round([], succeed={"g-worker0"}, sched=set(), pre=set()),
            ],
        ),
        Scenario(
            "role group: workers succeed, the rest go on below the minimum running",
            [node("n0")],
            [
                Round(
                    g,
                    sched={"g-coord0", "g-worker0", "g-worker1", "g-worker2"},
                    reasons={"g-worker3": elastic},
                ),
                # One worker left running of the minimum 2, with 2 succeeded: no preemption.
                Round([], succeed={"g-worker0", "g-worker1"}, sched={"g-worker3": "n0"}, pre=set()),
                Round([], finish={"g-worker3"}, sched=set(), pre=set()),
            ],
        ),
        Scenario(
            "role group: a worker lost for good below the minimum preempts the group",
            [node("n0")],
            [
                Round(
                    [replace(m, gang_roles=known) for m in g],
                    sched={"g-coord0", "g-worker0", "g-worker1", "g-worker2"},
                    reasons={"g-worker3": elastic},
                ),
                Round([], succeed={"g-worker0"}, sched={"g-worker3": "n0"}, pre=set()),
                # Workers: none running, 1 succeeded, of the minimum 2.
                Round(
                    [],
                    finish={"g-worker1", "g-worker2", "g-worker3"},
                    sched=set(),
                    pre={"g-coord0"},
                ),
            ],
        ),
        Scenario(
            "role group: a group restarted after its coordinator succeeded runs without it",
            [node("n0")],
            [
                Round(
                    [replace(m, gang_roles=known, gang_cardinality=4) for m in g[:4]],
                    sched={"g-coord0", "g-worker0", "g-worker1", "g-worker2"},
                ),
                # Two workers lost (to be retried): 1 of the minimum 2 left, preempted.
                Round(
                    [],
                    succeed={"g-coord0"},
                    finish={"g-worker0", "g-worker1"},
                    sched=set(),
                    pre={"g-worker2"},
                ),
                # The new generation: the coordinator's role is kept by the one that succeeded.
                Round(
                    _requeued(
                        [
                            replace(by[w], gang_roles=known)
                            for w in ("g-worker0", "g-worker1", "g-worker2")
                        ],
                        3,
                    ),
                    sched={"g-worker0", "g-worker1", "g-worker2"},
                    failed=set(),
                ),
            ],
        ),
        Scenario(
            "role group: the uniformity label holds the group and its late members",
            [
                node("n0", labels={"zone": "a"}),
                node("n1", labels={"zone": "b"}),
                node("n2", cpu=1, labels={"zone": "a"}),
            ],
            [
                Round(
                    [replace(m, gang_uniformity_label="zone") for m in g5],
                    sched={"g-coord0", "g-worker0", "g-worker1", "g-worker2", "g-worker3"},
                    reasons={"g-worker4": elastic},
                ),
                Round([], sched=set(), pre=set(), reasons={"g-worker4": elastic}),
                Round(
                    [job("x0", "B", cpu=4)],
                    sched={"x0": "n1"},
                    pre=set(),
                    reasons={"g-worker4": elastic},
                ),
            ],
        ),
        Scenario(
            # The maximum bounds each role: the workers (the larger role, placed first) and
            # their late members stay in one rack although rack r2 has room.
            "role group: topology keeps late members within their role's maximum hops",
            [
                tnode("n0", "b1", "r1", cpu=2, mem=8),
                tnode("n1", "b1", "r1", cpu=2, mem=8),
                tnode("n2", "b1", "r2"),
            ],
            [
                Round(
                    [replace(m, gang_max_hops=2) for m in g5],
                    sched={
                        "g-worker0": "n0",
                        "g-worker1": "n0",
                        "g-coord0": "n1",
                        "g-worker2": "n1",
                    },
                    reasons={"g-worker3": elastic, "g-worker4": elastic},
                ),
                Round([], sched=set(), pre=set(), reasons={"g-worker3": elastic}),
                Round(
                    [],
                    finish={"g-worker0"},
                    sched={"g-worker3": "n0"},
                    pre=set(),
                    reasons={"g-worker4": elastic},
                ),
            ],
            config=TOPO,
        ),
    ]


def _subgroup_scenarios() -> list[Scenario]:
    """Topology per sub-group (SEMANTICS.md, "Topology per sub-group"): a pod group's roles
    each as close as they fit, within their maximum hops, then the group as a whole."""
    racks = [
        tnode("a", "b1", "r1"),
        tnode("b", "b1", "r1"),
        tnode("c", "b1", "r2"),
        tnode("d", "b1", "r2"),
    ]
    whole_nodes = (("coord", 1, 1), ("worker", 2, 2))
    g = pod_group("g", roles=whole_nodes, cpu=4)
    placed = {"g-worker0": "a", "g-worker1": "b", "g-coord0": "c"}
    three = pod_group("g", roles=(("coord", 1, 1), ("worker", 3, 3)), cpu=4)
    return [
        Scenario(
            # No rack holds the group; in the block the two workers share rack r1 (2 hops)
            # and the coordinator goes beside them, instead of the coordinator and one
            # worker in a rack and the other worker 4 hops away.
            "sub-groups: the workers share a rack, the coordinator beside them",
            racks,
            [Round(g, sched=placed), Round([], sched=set(), pre=set())],
            config=TOPO,
        ),
        Scenario(
            # gangMaxHops on a pod group bounds each role: no rack holds the three, but
            # each role fits in one.
            "sub-groups: the group's maximum hops bound each role",
            racks,
            [Round([replace(m, gang_max_hops=2) for m in g], sched=placed)],
            config=TOPO,
        ),
        Scenario(
            "sub-groups: a role's own maximum hops",
            racks,
            [
                Round(
                    [replace(m, gang_role_max_hops=2) if m.gang_role == "worker" else m for m in g],
                    sched=placed,
                )
            ],
            config=TOPO,
        ),
        Scenario(
            # A role's own maximum replaces the group's: the workers may spread over the
            # block, the coordinator alone is 0 hops anyway.
            "sub-groups: a role's maximum replaces the group's",
            racks,
            [
                Round(
                    [
                        replace(m, gang_max_hops=0, gang_role_max_hops=4)
                        if m.gang_role == "worker"
                        else replace(m, gang_max_hops=0)
                        for m in three
                    ],
                    sched={"g-worker0": "a", "g-worker1": "b", "g-worker2": "c", "g-coord0": "d"},
                )
            ],
            config=TOPO,
        ),
        Scenario(
            "sub-groups: a role's maximum no domain meets keeps the group queued",
            racks,
            [
                Round(
                    [
                        replace(m, gang_role_max_hops=2) if m.gang_role == "worker" else m
                        for m in three
                    ]
                    + [job("s", "B", cpu=4)],
                    sched={"s": "a"},
                    reasons={
                        m.id: "gang g: role worker needs 3 members within 2 hops (one rack); "
                        "no rack has room"
                        for m in three
                    },
                ),
                Round([], sched=set(), pre=set(), reasons={"g-coord0": "role worker needs 3"}),
            ],
            config=TOPO,
            queues=ABC,
        ),
        Scenario(
            "sub-groups: a role's maximum narrower than any level",
            racks,
            [
                Round(
                    [replace(m, gang_role_max_hops=1) if m.gang_role == "worker" else m for m in g],
                    sched=set(),
                    reasons={
                        "g-worker0": "gang g: role worker needs 2 members within 1 hops; "
                        "no topology level is that narrow"
                    },
                )
            ],
            config=TOPO,
        ),
        Scenario(
            # With the hostname level two 2-CPU workers share a node (0 hops); the
            # coordinator takes the other node of their rack rather than another rack.
            "sub-groups: each role as close as it fits, then the group",
            [
                node("a", labels={"rack": "r1"}),
                node("b", labels={"rack": "r1"}),
                node("c", labels={"rack": "r2"}),
            ],
            [
                Round(
                    pod_group("g", roles=whole_nodes, cpu=2),
                    sched={"g-worker0": "a", "g-worker1": "a", "g-coord0": "b"},
                )
            ],
            config=TOPO_NODES,
        ),
        Scenario(
            # Zone x has one node per rack: the workers can share a rack only in zone y.
            "sub-groups: a uniformity label and a role's maximum together",
            [
                tnode("a", "b1", "r1", labels={"zone": "x"}),
                tnode("b", "b1", "r1", labels={"zone": "y"}),
                tnode("c", "b1", "r2", labels={"zone": "x"}),
                tnode("d", "b1", "r2", labels={"zone": "y"}),
                tnode("e", "b1", "r1", labels={"zone": "y"}),
            ],
            [
                Round(
                    [
                        replace(m, gang_uniformity_label="zone", gang_max_hops=2)
                        for m in pod_group("g", roles=(("coord", 1, 1), ("worker", 2, 2)), cpu=4)
                    ],
                    sched={"g-worker0": "b", "g-worker1": "e", "g-coord0": "d"},
                )
            ],
            config=TOPO,
        ),
    ]


SCENARIOS: list[Scenario] = [
    # --- basic placement and node constraints -----------------------------------------------
    Scenario("fits", [node("n0")], [Round([job("a0")], sched={"a0": "n0"}, pre=set())]),
    Scenario(
        "too large",
        [node("n0")],
        [Round([job("a0", cpu=5)], sched=set(), reasons={"a0": "even when the node is empty"})],
    ),
    Scenario(
        "best fit prefers the fuller node",
        [node("n0"), node("n1")],
        [Round([*running([job("r0", "B", cpu=2, pc="np")], "n1"), job("a0")], sched={"a0": "n1"})],
    ),
    Scenario(
        "best fit tie goes to the first node id",
        [node("n1"), node("n0")],
        [Round([job("a0")], sched={"a0": "n0"})],
    ),
    Scenario(
        "best fit compares memory after cpu",
        [node("n0"), node("n1")],
        [
            Round(
                running([job("r0", "B", cpu=1, mem=8, pc="np")], "n0")
                + running([job("r1", "B", cpu=1, mem=2, pc="np")], "n1")
                + [job("a0")],
                sched={"a0": "n0"},
            )
        ],
    ),
    Scenario(
        "fill and overflow",
        [node("n0"), node("n1")],
        [
            Round(
                jobs("a", 9),
                sched={f"a{i}" for i in range(8)},
                reasons={"a8": "0 of 2 matching nodes have 1 cpu, 1Gi memory free"},
            )
        ],
    ),
    Scenario(
        "a job without room counts its matching nodes and names its request",
        [
            node("n0", labels={"zone": "a"}),
            node("n1", labels={"zone": "b"}),
            node("n2", labels={"zone": "b"}),
            node("n3", labels={"zone": "b"}, cordoned=True),
        ],
        [
            Round(
                running([job("r1", "B", cpu=4, pc="np")], "n1")
                + running([job("r2", "B", cpu=4, pc="np")], "n2")
                + [
                    job("x", cpu=0.5, mem=1.5, node_selector={"zone": "b"}),
                    job("y", cpu=2, node_selector={"zone": "b"}, avoid_node="n1"),
                    job("z", node_selector={"zone": "c"}),
                    job("a0"),
                ],
                sched={"a0": "n0"},
                pre=set(),
                reasons={
                    # n3 is cordoned, n0 in another zone: two nodes match, both full.
                    "x": "0 of 2 matching nodes have 500m cpu, 1536Mi memory free",
                    "y": "0 of 1 matching node has 2 cpu, 1Gi memory free",
                    # Nothing matches: not a matter of room.
                    "z": why.NO_MATCHING_NODE,
                },
            ),
            # Nothing changed: the same words, so the stored reason is not rewritten.
            Round(
                [],
                sched=set(),
                pre=set(),
                reasons={
                    "x": "0 of 2 matching nodes have 500m cpu, 1536Mi memory free",
                    "y": "0 of 1 matching node has 2 cpu, 1Gi memory free",
                    "z": why.NO_MATCHING_NODE,
                },
            ),
        ],
    ),
    Scenario(
        "a gpu job without room names every resource it requests",
        [node("g0", cpu=8, mem=32, gpu=8), node("g1", cpu=8, mem=32, gpu=8), node("c0")],
        [
            Round(
                running([job("r0", "B", cpu=1, mem=1, gpu=1, pc="np")], "g0")
                + running([job("r1", "B", cpu=1, mem=1, gpu=1, pc="np")], "g1")
                + [job("t", cpu=8, mem=32, gpu=8), *jobs("s", 2, cpu=0.25, mem=0.5)],
                sched={"s0", "s1"},
                pre=set(),
                reasons={
                    "t": "0 of 3 matching nodes have 8 cpu, 32Gi memory, 8 nvidia.com/gpu free"
                },
            )
        ],
    ),
    Scenario(
        "job priority orders the queue",
        [node("n0", cpu=2)],
        [
            Round(
                [job("p5", priority=5), job("p1", priority=1), job("p3", priority=3)],
                sched={"p1", "p3"},
            )
        ],
    ),
    Scenario(
        "class priority comes before job priority",
        [node("n0", cpu=1)],
        [Round([job("a0", priority=0), job("a1", pc="mid", priority=9)], sched={"a1"})],
    ),
    Scenario(
        "submit time orders equal priorities",
        [node("n0", cpu=1)],
        [Round([job("a0", submit=5.0), job("a1", submit=3.0)], sched={"a1"})],
    ),
    Scenario(
        "node selector",
        [node("n0", labels={"zone": "a"}), node("n1", labels={"zone": "b"})],
        [
            Round(
                [job("a0", node_selector={"zone": "b"}), job("a1", node_selector={"zone": "c"})],
                sched={"a0": "n1"},
                reasons={"a1": "no node matches"},
            )
        ],
    ),
    Scenario(
        "taint needs a toleration",
        [node("n0", taints=[Taint("gpu", "true")])],
        [
            Round(
                [job("a0"), job("a1", tolerations=(tol("gpu", "true"),))],
                sched={"a1": "n0"},
                reasons={"a0": "no node matches"},
            )
        ],
    ),
    Scenario(
        "toleration with Exists",
        [node("n0", taints=[Taint("gpu", "x")])],
        [Round([job("a0", tolerations=(tol("gpu", operator="Exists"),))], sched={"a0": "n0"})],
    ),
    Scenario(
        "PreferNoSchedule taint does not block",
        [node("n0", taints=[Taint("spot", "", "PreferNoSchedule")])],
        [Round([job("a0")], sched={"a0": "n0"})],
    ),
    Scenario(
        "NoExecute taint needs a toleration for that effect",
        [node("n0", taints=[Taint("k", "v", "NoExecute")])],
        [
            Round(
                [
                    job("a0", tolerations=(tol("k", "v", effect="NoSchedule"),)),
                    job("a1", tolerations=(tol("k", "v", effect="NoExecute"),)),
                ],
                sched={"a1": "n0"},
            )
        ],
    ),
    Scenario(
        "affinity In and NotIn",
        [node("n0", labels={"zone": "a"}), node("n1", labels={"zone": "b"})],
        [
            Round(
                [
                    job("x", affinity=aff([("zone", "In", ("b",))])),
                    job("y", affinity=aff([("zone", "NotIn", ("a",))])),
                ],
                sched={"x": "n1", "y": "n1"},
            )
        ],
    ),
    Scenario(
        "affinity Exists and DoesNotExist",
        [node("n0", labels={"ssd": "yes"}), node("n1")],
        [
            Round(
                [
                    job("x", affinity=aff([("ssd", "Exists", ())])),
                    job("y", affinity=aff([("ssd", "DoesNotExist", ())])),
                ],
                sched={"x": "n0", "y": "n1"},
            )
        ],
    ),
    Scenario(
        "affinity Gt",
        [node("n0", labels={"cores": "8"}), node("n1", labels={"cores": "16"})],
        [Round([job("x", affinity=aff([("cores", "Gt", ("10",))]))], sched={"x": "n1"})],
    ),
    Scenario(
        "affinity terms are alternatives",
        [node("n0", labels={"zone": "a"}), node("n1", labels={"zone": "b"})],
        [
            Round(
                [job("x", affinity=aff([("zone", "In", ("c",))], [("zone", "In", ("b",))]))],
                sched={"x": "n1"},
            )
        ],
    ),
    Scenario(
        "cordoned node takes no new jobs but keeps its own",
        [node("n0", cordoned=True), node("n1")],
        [
            Round(
                [*running([job("r0", pc="np")], "n0"), job("a0")],
                sched={"a0": "n1"},
                pre=set(),
            )
        ],
    ),
    Scenario(
        "all nodes cordoned",
        [node("n0", cordoned=True)],
        [Round([job("a0")], sched=set(), reasons={"a0": "no node matches"})],
    ),
    Scenario(
        "node avoidance for retries",
        [node("n0"), node("n1")],
        [
            Round(
                [*running([job("r0", "B", cpu=2, pc="np")], "n0"), job("a0", avoid_node="n0")],
                sched={"a0": "n1"},
            )
        ],
    ),
    Scenario(
        "extended resource",
        [node("n0", **{"example.com__fpga": 2}), node("n1")],
        [
            Round(
                [
                    job("x", extra={"example.com__fpga": 1}),
                    job("y", extra={"example.com__fpga": 3}),
                ],
                sched={"x": "n0"},
                reasons={"y": "even when the node is empty"},
            )
        ],
    ),
    Scenario(
        "gpu jobs need gpu nodes and cpu jobs avoid them",
        [node("n0"), node("n1", gpu=2)],
        [Round([job("c"), job("g", gpu=1)], sched={"g": "n1", "c": "n0"})],
    ),
    Scenario(
        "ephemeral storage is a resource like any other",
        [node("n0", ephemeral_storage=10)],
        [
            Round(
                [
                    job("x", extra={"ephemeral_storage": 20}),
                    job("y", extra={"ephemeral_storage": 5}),
                ],
                sched={"y": "n0"},
                reasons={"x": "even when the node is empty"},
            )
        ],
    ),
    # --- fair share by progressive filling ---------------------------------------------------
    Scenario(
        "equal weights split evenly",
        [node("n0")],
        [Round(jobs("a", 4, "A") + jobs("b", 4, "B"), counts={"A": 2, "B": 2})],
    ),
    Scenario(
        "priority factors weight the split",
        [node("n0"), node("n1")],
        [Round(jobs("a", 8, "A") + jobs("b", 8, "B"), counts={"A": 6, "B": 2})],
        queues=(Queue("A", 1.0), Queue("B", 3.0)),
    ),
    Scenario(
        "a queue with little demand leaves the rest to others",
        [node("n0"), node("n1")],
        [
            Round(
                jobs("a", 8, "A") + jobs("b", 8, "B") + jobs("c", 1, "C"),
                counts={"A": 4, "B": 3, "C": 1},
            )
        ],
        queues=ABC,
    ),
    Scenario(
        "gang size counts when choosing the next queue",
        [node("n0")],
        [
            Round(
                gang("g", 3, "A") + jobs("b", 4, "B"),
                sched={"b0", "b1", "b2", "b3"},
                reasons={"g0": "gang could not be scheduled"},
            )
        ],
    ),
    Scenario(
        "dominant resource decides the cost",
        [node("n0", cpu=8, mem=64)],
        [Round(jobs("a", 8, "A", mem=16) + jobs("b", 8, "B", mem=0), counts={"A": 3, "B": 5})],
    ),
    Scenario(
        "resource multipliers change the dominant resource",
        [node("n0", cpu=8, mem=64)],
        [Round(jobs("a", 8, "A", mem=16) + jobs("b", 8, "B", mem=0), counts={"A": 4, "B": 4})],
        config=SchedulingConfig(resource_multipliers={"memory": 0.5}),
    ),
    Scenario(
        "ties go to the first queue name",
        [node("n0", cpu=3)],
        [Round(jobs("b", 2, "B") + jobs("a", 2, "A"), counts={"A": 2, "B": 1})],
    ),
    # --- preemption to fair share ---------------------------------------------------------
    Scenario(
        "preemption to fair share",
        [node("n0")],
        [
            Round(jobs("a", 4, "A"), sched={"a0", "a1", "a2", "a3"}),
            Round(jobs("b", 4, "B"), sched={"b0", "b1"}, pre={"a2", "a3"}),
            Round([], sched=set(), pre=set()),
            Round([job("a2r", "A"), job("a3r", "A")], sched=set(), pre=set()),
        ],
    ),
    Scenario(
        "no preemption when shares are balanced",
        [node("n0")],
        [
            Round(
                running(jobs("a", 2, "A"), "n0")
                + running(jobs("b", 2, "B"), "n0")
                + jobs("bq", 2, "B"),
                sched=set(),
                pre=set(),
            )
        ],
    ),
    Scenario(
        "no preemption when shares are balanced, even evicting everything",
        [node("n0")],
        [
            Round(
                running(jobs("a", 2, "A"), "n0")
                + running(jobs("b", 2, "B"), "n0")
                + jobs("bq", 2, "B"),
                sched=set(),
                pre=set(),
            )
        ],
        config=ALWAYS_EVICT,
    ),
    Scenario(
        "non-preemptible jobs are never preempted",
        [node("n0")],
        [
            Round(
                running(jobs("a", 4, "A", pc="np"), "n0") + jobs("b", 4, "B"),
                sched=set(),
                pre=set(),
            )
        ],
    ),
    Scenario(
        "protected fraction keeps a queue below the threshold",
        [node("n0")],
        [
            Round(
                running(jobs("a", 3, "A"), "n0")
                + running([job("b0", "B")], "n0")
                + jobs("bq", 2, "B"),
                sched=set(),
                pre=set(),
            )
        ],
        config=SchedulingConfig(protected_fraction=2.0),
    ),
    Scenario(
        "protected fraction 1 evicts only the queue above its share",
        [node("n0")],
        [
            Round(
                running(jobs("a", 3, "A"), "n0")
                + running([job("b0", "B")], "n0")
                + jobs("bq", 2, "B"),
                sched={"bq0"},
                pre={"a2"},
            )
        ],
    ),
    Scenario(
        "evicted jobs may only return to their own node",
        [node("n0"), node("n1")],
        [
            Round(
                running([job("a0", "A", cpu=2)], "n0")
                + running([job("c0", "C", cpu=2, pc="np")], "n1")
                + [job("b0", "B", cpu=4)],
                sched={"b0": "n0"},
                pre={"a0"},
            )
        ],
        queues=(Queue("A"), Queue("B", 0.1), Queue("C")),
        config=ALWAYS_EVICT,
    ),
    Scenario(
        "queue weights in preemption",
        [node("n0"), node("n1")],
        [
            Round(jobs("a", 8, "A"), counts={"A": 8}),
            # b0 displaces a3 on n0 (best fit), b1 then displaces a7 on n1.
            Round(jobs("b", 8, "B"), counts={"A": 6, "B": 2}, pre={"a3", "a7"}),
        ],
        queues=(Queue("A", 1.0), Queue("B", 3.0)),
    ),
    Scenario(
        "the queues furthest above fair share lose",
        [node("n0"), node("n1")],
        [
            Round(
                running(jobs("a", 4, "A"), "n0")
                + running([job("a4", "A")], "n1")
                + running(jobs("b", 3, "B"), "n1")
                + jobs("c", 4, "C"),
                counts={"A": 3, "B": 3, "C": 2},
            )
        ],
        queues=ABC,
    ),
    # --- urgency-based preemption ----------------------------------------------------------
    Scenario(
        "urgency preempts a lower class",
        [node("n0")],
        [
            Round(running(jobs("a", 4, "A"), "n0")),
            Round([job("h0", "A", pc="high")], sched={"h0"}, pre={"a3"}),
            Round([job("a3r", "A")], sched=set(), pre=set()),
            Round([], sched=set(), pre=set()),
        ],
    ),
    Scenario(
        "urgency never preempts a higher class",
        [node("n0")],
        [
            Round(
                [*running(jobs("h", 4, "A", pc="high"), "n0"), job("l0", "A")],
                sched=set(),
                pre=set(),
            )
        ],
    ),
    Scenario(
        "equal classes do not preempt each other by urgency",
        [node("n0")],
        [Round([*running(jobs("a", 4, "A"), "n0"), job("l0", "A")], sched=set(), pre=set())],
    ),
    Scenario(
        "non-preemptible class holds against urgency",
        [node("n0")],
        [
            Round(
                [*running(jobs("a", 4, "A", pc="np0"), "n0"), job("h0", "A", pc="high")],
                sched=set(),
                pre=set(),
            )
        ],
    ),
    Scenario(
        "urgency takes the lowest class first",
        [node("n0")],
        [
            Round(
                [
                    *running(jobs("l", 2, "A") + jobs("m", 2, "A", pc="mid"), "n0"),
                    job("h0", "A", pc="high"),
                ],
                sched={"h0"},
                pre={"l1"},
            )
        ],
    ),
    Scenario(
        "an urgent queue goes first and takes evicted space",
        [node("n0")],
        [
            Round(running(jobs("a", 4, "A"), "n0")),
            Round(jobs("h", 4, "B", pc="high"), counts={"B": 4}, pre={"a0", "a1", "a2", "a3"}),
            Round([job("a0r", "A")], sched=set(), pre=set()),
        ],
    ),
    Scenario(
        # Cost alone would let A's queued jobs take B's evicted space, and B's urgent jobs
        # would take it back by urgency next cycle: urgency first keeps the state steady.
        "evicted urgent jobs go back before a poorer queue's less urgent ones",
        [node("n0")],
        [
            Round(running(jobs("h", 3, "B", pc="high"), "n0") + running([job("a0", "A")], "n0")),
            Round(jobs("q", 2, "A"), sched=set(), pre=set()),
            Round([], sched=set(), pre=set()),
        ],
    ),
    Scenario(
        "fair-share displacement is preferred to urgency",
        [node("n0")],
        [
            Round(
                running(jobs("a", 3, "A"), "n0")
                + running([job("b0", "B")], "n0")
                + [job("c0", "C", pc="high")],
                sched={"c0"},
                pre={"a2"},
            )
        ],
        queues=ABC,
    ),
    Scenario(
        "urgent gang preempts lower classes on every node it needs",
        [node("n0"), node("n1")],
        [
            Round(running(jobs("a", 4, "A"), "n0") + running(jobs("b", 4, "A"), "n1")),
            Round(
                gang("g", 2, "A", cpu=4, pc="high"),
                sched={"g0", "g1"},
                pre={f"a{i}" for i in range(4)} | {f"b{i}" for i in range(4)},
            ),
        ],
    ),
    Scenario(
        # A ends at half its fair share if a0 goes, B stays at twice its own: take from B.
        "urgency preempts the queue furthest above its fair share, not the first node",
        [node("n1", cpu=1), node("n2", cpu=1), node("n3", cpu=1)],
        [
            Round(
                running([job("a0", "A")], "n1")
                + running([job("b0", "B")], "n2")
                + running([job("b1", "B")], "n3")
                + [job("a1", "A", pc="high")],
                sched={"a1": "n2"},
                pre={"b0"},
            ),
            Round([], sched=set(), pre=set()),
        ],
        queues=(Queue("A", 0.5), Queue("B", 1.0)),
        config=SchedulingConfig(protected_fraction=0.0),
        classes=LOW_HIGH,
    ),
    Scenario(
        "urgency victims do not follow node order",
        [node("n1", cpu=1), node("n2", cpu=1), node("n3", cpu=1)],
        [
            Round(
                running([job("b0", "B")], "n1")
                + running([job("b1", "B")], "n2")
                + running([job("a0", "A")], "n3")
                + [job("a1", "A", pc="high")],
                sched={"a1": "n1"},
                pre={"b0"},
            ),
        ],
        queues=(Queue("A", 0.5), Queue("B", 1.0)),
        config=SchedulingConfig(protected_fraction=0.0),
        classes=LOW_HIGH,
    ),
    Scenario(
        "urgency among held jobs preempts the queue furthest above its fair share",
        [node("n1", cpu=1), node("n2", cpu=1), node("n3", cpu=1)],
        [
            Round(
                running([job("a0", "A")], "n1")
                + running([job("b0", "B")], "n2")
                + running([job("b1", "B")], "n3")
                + [job("a1", "A", pc="high")],
                sched={"a1": "n2"},
                pre={"b0"},
            ),
            Round([], sched=set(), pre=set()),
        ],
        queues=(Queue("A", 0.5), Queue("B", 1.0)),
        config=NEVER_EVICT,
        classes=LOW_HIGH,
    ),
    Scenario(
        # b0 goes first (B is further above its share) but x still does not fit; once a0
        # is taken b0 is no longer needed and is put back.
        "urgency preempts a minimal set",
        [node("n1", cpu=4)],
        [
            Round(
                [
                    *running([job("a0", "A", cpu=3), job("b0", "B", cpu=1)], "n1"),
                    job("x", "A", cpu=2, pc="high"),
                ],
                sched={"x": "n1"},
                pre={"a0"},
            ),
            Round([], sched=set(), pre=set()),
        ],
        queues=(Queue("A"), Queue("B", 4.0)),
        config=NEVER_EVICT,
        classes=LOW_HIGH,
    ),
    Scenario(
        "urgency preempts a minimal set among protected queues",
        [node("n1", cpu=4), node("n2", cpu=4)],
        [
            Round(
                running([job("a0", "A", cpu=3), job("b0", "B", cpu=1)], "n1")
                + running([job("c0", "C", cpu=4, pc="np")], "n2")
                + [job("x", "A", cpu=2, pc="high")],
                sched={"x": "n1"},
                pre={"a0"},
            ),
            Round([], sched=set(), pre=set()),
        ],
        queues=(Queue("A"), Queue("B", 4.0), Queue("C", 2.0)),
        config=SchedulingConfig(protected_fraction=1.0),
        classes=(*LOW_HIGH, PriorityClass("np", 3, preemptible=False)),
    ),
    # --- gangs ------------------------------------------------------------------------------
    Scenario(
        "gang fits",
        [node("n0"), node("n1")],
        [Round(gang("g", 3, cpu=2), sched={"g0", "g1", "g2"})],
    ),
    Scenario(
        "gang is all or nothing",
        [node("n0"), node("n1")],
        [
            Round(
                [*gang("g", 5, cpu=2), job("s0")],
                sched={"s0"},
                # A gang keeps the member's plain reason: members placed before it took room.
                reasons={f"g{i}": why.gang_failed(why.NO_CAPACITY) for i in range(5)},
            )
        ],
    ),
    Scenario(
        "incomplete gang waits",
        [node("n0")],
        [Round(_gang_incomplete(), sched=set(), reasons={"g0": "gang incomplete: 2 of 3"})],
    ),
    Scenario(
        "gang with more members than its cardinality fails",
        [node("n0")],
        [Round(_gang_too_many(), sched=set(), failed={"g0", "g1", "g2"})],
    ),
    Scenario(
        "gang minimum cardinality schedules what fits and fails the rest",
        [node("n0"), node("n1")],
        [
            Round(
                gang("g", 4, cpu=3, gang_min_cardinality=2), sched={"g0", "g1"}, failed={"g2", "g3"}
            ),
            Round([], sched=set(), pre=set()),
        ],
    ),
    Scenario(
        "gang below its minimum cardinality waits",
        [node("n0")],
        [Round(gang("g", 3, cpu=3, gang_min_cardinality=2), sched=set(), failed=set())],
    ),
    Scenario(
        "gang uniformity picks the rack that fits",
        [
            node("r1a", labels={"rack": "r1"}),
            node("r1b", labels={"rack": "r1"}),
            node("r2a", labels={"rack": "r2"}),
            node("r2b", labels={"rack": "r2"}),
        ],
        [
            Round(
                running([job("x", "B", cpu=2, pc="np")], "r1a")
                + gang("g", 2, cpu=4, gang_uniformity_label="rack"),
                sched={"g0": "r2a", "g1": "r2b"},
            )
        ],
    ),
    Scenario(
        # Evicted jobs first regardless of class would re-place all four, and the urgent job
        # would preempt one by urgency next cycle instead: class priority comes first.
        "a queue's urgent queued job goes before its own less urgent evicted jobs",
        [node("n0")],
        [
            Round(running(jobs("a", 4, "A"), "n0")),
            Round([job("u0", "A", pc="high")], sched={"u0"}, pre={"a3"}),
            Round([], sched=set(), pre=set()),
        ],
        config=ALWAYS_EVICT,
    ),
    Scenario(
        "among equally urgent jobs a queue's evicted ones go before its queued ones",
        [node("n0")],
        [
            Round(running(jobs("a", 4, "A"), "n0"), sched=set(), pre=set()),
            Round([job("b0", "A", priority=-1, submit=-1.0)], sched=set(), pre=set()),
        ],
        config=ALWAYS_EVICT,
    ),
    Scenario(
        "best-fit ties fill one rack before the next, keeping a whole rack for a gang",
        [
            node("n0", labels={"rack": "r1"}),
            node("n1", labels={"rack": "r2"}),
            node("n2", labels={"rack": "r1"}),
            node("n3", labels={"rack": "r2"}),
        ],
        [
            Round(
                jobs("a", 2, "A", cpu=4) + gang("g", 2, "B", cpu=4, gang_uniformity_label="rack"),
                sched={"a0": "n0", "a1": "n2", "g0": "n1", "g1": "n3"},
            )
        ],
    ),
    Scenario(
        "without uniformity labels in the snapshot best-fit ties go by node id",
        [
            node("n0", labels={"rack": "r1"}),
            node("n1", labels={"rack": "r2"}),
            node("n2", labels={"rack": "r1"}),
        ],
        [Round(jobs("a", 2, "A", cpu=4), sched={"a0": "n0", "a1": "n1"})],
    ),
    Scenario(
        "gang uniformity picks the best-fitting rack",
        [
            node("r2a", cpu=8, labels={"rack": "r2"}),
            node("r2b", cpu=8, labels={"rack": "r2"}),
            node("r1a", labels={"rack": "r1"}),
            node("r1b", labels={"rack": "r1"}),
        ],
        [
            Round(
                gang("g", 2, cpu=4, gang_uniformity_label="rack"),
                sched={"g0": "r1a", "g1": "r1b"},
            )
        ],
    ),
    Scenario(
        "gang uniformity with no rack large enough",
        [
            node("r1a", labels={"rack": "r1"}),
            node("r1b", labels={"rack": "r1"}),
            node("r2a", labels={"rack": "r2"}),
            node("x"),
        ],
        [
            Round(
                gang("g", 3, cpu=4, gang_uniformity_label="rack"),
                sched=set(),
                reasons={"g0": "sharing one value of label 'rack'"},
            )
        ],
    ),
    Scenario(
        "gang uniformity with minimum cardinality prefers the rack placing most",
        [node(f"r1{c}", labels={"rack": "r1"}) for c in "ab"]
        + [node(f"r2{c}", labels={"rack": "r2"}) for c in "abc"],
        [
            Round(
                gang("g", 4, cpu=4, gang_min_cardinality=2, gang_uniformity_label="rack"),
                sched={"g0": "r2a", "g1": "r2b", "g2": "r2c"},
                failed={"g3"},
            )
        ],
    ),
    Scenario(
        "gang is evicted and preempted as a unit",
        [node("n0"), node("n1")],
        [
            Round(
                running(gang("g", 2, "A", cpu=4)[:1], "n0")
                + running(gang("g", 2, "A", cpu=4)[1:], "n1")
            ),
            Round([job("b0", "B", cpu=4)], sched={"b0": "n0"}, pre={"g0", "g1"}),
        ],
    ),
    Scenario(
        "elastic gang loses members above its minimum first",
        [node("n0")],
        [
            Round(running(gang("e", 4, "A", gang_min_cardinality=2), "n0")),
            Round(jobs("b", 2, "B"), sched={"b0", "b1"}, pre={"e2", "e3"}),
        ],
    ),
    # --- lifetimes --------------------------------------------------------------------------
    Scenario(
        "past its lifetime a non-preemptible job is preemptible",
        [node("n0")],
        [
            Round(
                running(jobs("a", 4, "A", pc="np", lifetime=10.0), "n0")
                + jobs("b", 4, "B", pc="np"),
                now=50.0,
                sched={"b0", "b1"},
                pre={"a2", "a3"},
            )
        ],
    ),
    Scenario(
        "before its lifetime a non-preemptible job stays",
        [node("n0")],
        [
            Round(
                running(jobs("a", 4, "A", pc="np", lifetime=10.0), "n0")
                + jobs("b", 4, "B", pc="np"),
                now=5.0,
                sched=set(),
                pre=set(),
            )
        ],
    ),
    Scenario(
        "lifetime zero is preemptible from the start",
        [node("n0")],
        [
            Round(
                running(jobs("a", 4, "A", pc="np", lifetime=0.0), "n0")
                + jobs("b", 4, "B", pc="np"),
                now=0.0,
                sched={"b0", "b1"},
                pre={"a2", "a3"},
            )
        ],
    ),
    # --- limits -----------------------------------------------------------------------------
    Scenario(
        "maximum jobs per cycle",
        [node("n0"), node("n1")],
        [
            Round(jobs("a", 5), sched={"a0", "a1", "a2"}, reasons={"a3": "maximum number of jobs"}),
            Round([], sched={"a3", "a4"}),
        ],
        config=SchedulingConfig(max_jobs_per_cycle=3),
    ),
    Scenario(
        "a gang larger than the remaining tokens fails alone",
        [node("n0"), node("n1")],
        [
            Round(
                [job("s0"), *gang("g", 3), job("s1")],
                sched={"s0", "s1"},
                reasons={"g0": "maximum number of jobs"},
            )
        ],
        config=SchedulingConfig(max_jobs_per_cycle=3),
    ),
    Scenario(
        "maximum fraction of the cluster per cycle",
        [node("n0"), node("n1")],
        [
            Round(jobs("a", 8), counts={"A": 4}, reasons={"a4": "maximum resources"}),
            Round([], counts={"A": 8}),
        ],
        config=SchedulingConfig(max_fraction_per_cycle={"cpu": 0.5}),
    ),
    Scenario(
        "per-queue cap for a priority class",
        [node("n0"), node("n1")],
        [
            Round(
                jobs("a", 8) + jobs("m", 2, pc="mid"),
                sched={"m0", "m1", "a0", "a1"},
                reasons={"a2": "limit for priority class 'low'"},
            )
        ],
        classes=(
            PriorityClass("low", 0, True, {"cpu": 0.25}),
            *[pc for pc in PRIORITY_CLASSES if pc.name != "low"],
        ),
    ),
    Scenario(
        "cordoned queue schedules nothing new and keeps what runs",
        [node("n0")],
        [
            Round(
                running(jobs("a", 2, "A"), "n0") + jobs("aq", 2, "A") + [job("b0", "B")],
                sched={"b0"},
                pre=set(),
                reasons={"aq0": "queue is cordoned"},
            )
        ],
        queues=(Queue("A", cordoned=True), Queue("B")),
    ),
    Scenario(
        "re-placed evicted jobs are exempt from per-cycle limits",
        [node("n0")],
        [Round(running(jobs("a", 4), "n0"), sched=set(), pre=set())],
        config=SchedulingConfig(protected_fraction=None, max_jobs_per_cycle=1),
    ),
    # --- decayed usage ------------------------------------------------------------------------
    Scenario(
        "decayed usage favours the queue that used less",
        [node("n0")],
        [Round(jobs("a", 4, "A") + jobs("b", 4, "B"), counts={"B": 4})],
        queues=(Queue("A", decayed_usage=1.0), Queue("B")),
        config=SchedulingConfig(usage_half_life=100.0),
    ),
    Scenario(
        "usage decays with half-lives",
        [node("n0")],
        [Round(jobs("a", 4, "A") + jobs("b", 4, "B"), counts={"A": 2, "B": 2})],
        queues=(Queue("A", decayed_usage=1.0), Queue("B")),
        config=SchedulingConfig(usage_half_life=100.0),
        usage_elapsed=1000.0,
    ),
    Scenario(
        "without a half-life past usage is ignored",
        [node("n0")],
        [Round(jobs("a", 4, "A") + jobs("b", 4, "B"), counts={"A": 2, "B": 2})],
        queues=(Queue("A", decayed_usage=1.0), Queue("B")),
    ),
    # --- lifetimes: non-preemptible overshoot and excess-flow budget ------------------------
    Scenario(
        "non-preemptible overshoot: jobs of infinite lifetime stop at the fair share plus 20%",
        [node("n0", cpu=8, mem=64)],
        [
            # A's fair share is 0.5: its jobs of class np without a lifetime may cost 0.6,
            # four CPUs of eight. A job of finite lifetime and B's preemptible job pass.
            Round(
                [
                    *jobs("a", 6, "A", pc="np"),
                    job("f0", "A", pc="np", lifetime=600.0),
                    job("b0", "B"),
                ],
                sched={"a0", "a1", "a2", "a3", "f0", "b0"},
                reasons={
                    "a4": "would exceed its fair share by more than non_preemptible_overshoot",
                    "a5": "non_preemptible_overshoot",
                },
            ),
            # B has left: A's fair share is the whole cluster.
            Round([], finish={"b0"}, sched={"a4", "a5"}, pre=set()),
        ],
        config=SchedulingConfig(non_preemptible_overshoot=0.2),
    ),
    Scenario(
        "non-preemptible overshoot: a gang is checked whole, a smaller job behind it passes",
        [node("n0", cpu=8, mem=64)],
        [
            Round(
                running(jobs("r", 2, "A", pc="np"), "n0")
                + running([job("b0", "B")], "n0")
                + gang("g", 3, "A", pc="np")
                + [job("s0", "A", pc="np")],
                sched={"s0"},
                pre=set(),
                reasons={f"g{i}": why.NON_PREEMPTIBLE_OVERSHOOT for i in range(3)},
            )
        ],
        config=SchedulingConfig(non_preemptible_overshoot=0.0),
    ),
    Scenario(
        "excess-flow budget: finite lifetimes above the fair share take from it until they leave",
        [node("n0", cpu=8, mem=64)],
        [
            # Ten minutes of one CPU: 10 resource-minutes each, once A is above half the
            # cluster. The fifth job takes 10 of the 15; the sixth does not fit.
            Round(
                [*jobs("a", 6, "A", pc="np", lifetime=600.0), job("b0", "B")],
                sched={"a0", "a1", "a2", "a3", "a4", "b0"},
                excess_flow={"a4": 10_000},
                reasons={"a5": why.EXCESS_FLOW_BUDGET},
            ),
            # a4 has left: its 10 resource-minutes are back for a5.
            Round([], finish={"a4"}, sched={"a5"}, pre=set(), excess_flow={"a5": 10_000}),
            # Used up again: lifetime 0 and preemptible classes take nothing.
            Round(
                [
                    job("a6", "A", pc="np", lifetime=600.0),
                    job("z0", "A", pc="np", lifetime=0.0),
                    job("p0", "A"),
                ],
                sched={"z0", "p0"},
                pre=set(),
                excess_flow={},
                reasons={"a6": "excess-flow budget"},
            ),
        ],
        config=SchedulingConfig(excess_flow_budget=15.0),
    ),
    Scenario(
        "excess-flow budget: requests are weighed relative to one CPU",
        [node("n0", cpu=8, mem=64, gpu=8)],
        [
            # 1 CPU + 4 x 2 GPUs for a minute: 9 resource-minutes, once above the fair share.
            Round(
                running([job("b0", "B")], "n0") + jobs("a", 4, "A", gpu=2, pc="np", lifetime=60.0),
                sched={"a0", "a1", "a2"},
                pre=set(),
                excess_flow={"a2": 9_000},
                reasons={"a3": why.EXCESS_FLOW_BUDGET},
            )
        ],
        config=SchedulingConfig(
            excess_flow_budget=10.0, excess_flow_weights={"nvidia.com/gpu": 4.0}
        ),
    ),
    Scenario(
        "excess-flow budget: a gang above the fair share needs it for every member",
        [node("n0", cpu=8, mem=64)],
        [
            # Three 2-CPU jobs for ten minutes would need 60 resource-minutes of the 50; the
            # single job behind keeps A within its fair share and takes nothing.
            Round(
                running([job("b0", "B")], "n0")
                + gang("g", 3, "A", cpu=2, pc="np", lifetime=600.0)
                + [job("s0", "A", pc="np", lifetime=600.0)],
                sched={"s0"},
                pre=set(),
                excess_flow={},
                reasons={f"g{i}": why.EXCESS_FLOW_BUDGET for i in range(3)},
            ),
        ],
        config=SchedulingConfig(excess_flow_budget=50.0),
    ),
    # --- rate limits and lookback ----------------------------------------------------------
    Scenario(
        "global rate limit: a full bucket lets its burst through, then what has refilled",
        [node("n0", cpu=16)],
        [
            Round(
                jobs("a", 3, "A") + jobs("b", 2, "B"),
                sched={"a0", "b0", "a1"},
                reasons={"a2": "global scheduling rate limit", "b1": "global scheduling rate"},
            ),
            Round(
                [], rate_tokens=1.5, sched={"b1"}, pre=set(), reasons={"a2": "(scheduling_rate)"}
            ),
            Round([], rate_tokens=0.5, sched=set(), pre=set(), reasons={"a2": "global"}),
        ],
        config=SchedulingConfig(scheduling_rate=1.0, scheduling_burst=3),
    ),
    Scenario(
        "per-queue rate limit: each queue has its own bucket",
        [node("n0", cpu=16)],
        [
            Round(
                jobs("a", 3, "A") + jobs("b", 3, "B"),
                sched={"a0", "a1", "b0", "b1"},
                reasons={"a2": "queue's scheduling rate limit", "b2": "queue_scheduling_rate"},
            ),
            # A's bucket holds half a token; B's is absent: full again.
            Round(
                [],
                queue_rate_tokens={"A": 0.5},
                sched={"b2"},
                pre=set(),
                reasons={"a2": "queue's scheduling rate limit"},
            ),
        ],
        config=SchedulingConfig(queue_scheduling_rate=0.1, queue_scheduling_burst=2),
    ),
    Scenario(
        "rate limits: evicted jobs placed back are exempt",
        [node("n0", cpu=16)],
        [
            Round(jobs("a", 2, "A"), sched={"a0", "a1"}),
            # Every running job is evicted and re-placed, with no tokens left for new ones.
            Round(
                [job("a2", "A"), job("b0", "B")],
                rate_tokens=0.0,
                queue_rate_tokens={"A": 0.0, "B": 0.0},
                sched=set(),
                pre=set(),
                counts={"A": 2},
                reasons={"a2": "global scheduling rate limit", "b0": "global"},
            ),
        ],
        config=SchedulingConfig(
            protected_fraction=None,
            scheduling_rate=1.0,
            scheduling_burst=2,
            queue_scheduling_rate=1.0,
            queue_scheduling_burst=2,
        ),
    ),
    Scenario(
        "global rate limit: a gang larger than the tokens left waits whole",
        [node("n0", cpu=16)],
        [
            Round(
                [job("a0", "A"), *gang("g", 3, "B"), job("b0", "B")],
                sched={"a0", "b0"},
                reasons={"g0": "global scheduling rate", "g1": "global", "g2": "global"},
            ),
            Round([], rate_tokens=3.0, sched={"g0", "g1", "g2"}, pre=set()),
        ],
        config=SchedulingConfig(scheduling_rate=1.0, scheduling_burst=3),
    ),
    Scenario(
        "per-queue rate limit: a gang larger than the queue's tokens waits whole",
        [node("n0", cpu=16)],
        [
            Round(
                [job("a0", "A"), *gang("g", 2, "A"), job("b0", "B")],
                sched={"a0", "b0"},
                reasons={"g0": "queue's scheduling rate", "g1": "queue's scheduling rate"},
            ),
            Round([], sched={"g0", "g1"}, pre=set()),
        ],
        config=SchedulingConfig(queue_scheduling_rate=1.0, queue_scheduling_burst=2),
    ),
    Scenario(
        "lookback: jobs beyond a queue's first N queued jobs are not attempted",
        [node("n0")],
        [
            Round(
                [job("x0", "A", cpu=8), job("x1", "A", cpu=8), job("a0", "A"), job("b0", "B")],
                sched={"b0"},
                reasons={
                    "x0": "even when the node is empty",
                    "x1": "even when the node is empty",
                    "a0": "beyond the queue's lookback of 2 jobs this cycle",
                },
            ),
            Round([], sched=set(), pre=set(), reasons={"a0": "lookback of 2 jobs"}),
        ],
        config=SchedulingConfig(max_queue_lookback=2),
    ),
    Scenario(
        "lookback: queue order decides, a gang starting within is whole, running jobs do not count",
        [node("n0", cpu=16)],
        [
            Round(jobs("r", 2, "A"), sched={"r0", "r1"}),
            Round(
                [*gang("g", 2, "A"), job("a0", "A"), job("h0", "A", pc="mid")],
                sched={"h0", "g0", "g1"},
                pre=set(),
                reasons={"a0": "beyond the queue's lookback of 2 jobs"},
            ),
            Round([], sched={"a0"}, pre=set()),
        ],
        config=SchedulingConfig(protected_fraction=None, max_queue_lookback=2),
    ),
    # --- bookkeeping ------------------------------------------------------------------------
    # --- topology-aware gangs --------------------------------------------------------------
    Scenario(
        # Best fit alone would take the fuller nodes c and d, one per rack of block b2.
        "topology: one rack before a fuller block",
        [
            tnode("a", "b1", "r1"),
            tnode("b", "b1", "r1"),
            tnode("c", "b2", "r2"),
            tnode("d", "b2", "r3"),
        ],
        [
            Round(
                running([job("x", "B", cpu=2, pc="np")], "c")
                + running([job("y", "B", cpu=2, pc="np")], "d")
                + gang("g", 2, cpu=2),
                sched={"g0": "a", "g1": "a"},
            ),
            Round([], sched=set(), pre=set()),
        ],
        config=TOPO,
    ),
    Scenario(
        # No rack holds two; block b1 does. The unlabelled node z comes first in node
        # order and would take a member without topology; it is only in the cluster level.
        "topology: one block before anywhere",
        [
            tnode("a", "b1", "r1"),
            tnode("b", "b1", "r2"),
            tnode("c", "b2", "r3"),
            node("z"),
        ],
        [Round(gang("g", 2, cpu=4), sched={"g0": "a", "g1": "b"})],
        config=TOPO,
    ),
    Scenario(
        "topology: without a maximum a gang no block holds goes anywhere",
        [tnode("a", "b1", "r1"), tnode("b", "b2", "r2"), tnode("c", "b3", "r3")],
        [Round(gang("g", 3, cpu=4), sched={"g0": "a", "g1": "b", "g2": "c"})],
        config=TOPO,
    ),
    Scenario(
        "topology: maximum hops respected, in a block",
        [
            tnode("a", "b1", "r1"),
            tnode("b", "b1", "r2"),
            tnode("c", "b2", "r3"),
            tnode("d", "b2", "r4"),
            tnode("e", "b2", "r4"),
        ],
        [
            Round(
                gang("g", 3, cpu=4, gang_max_hops=4) + gang("h", 2, "A", cpu=4, gang_max_hops=5),
                sched={"g0": "c", "g1": "d", "g2": "e", "h0": "a", "h1": "b"},
            ),
            Round([], sched=set(), pre=set()),
        ],
        config=TOPO,
    ),
    Scenario(
        "topology: maximum hops unmet keeps the gang queued",
        [
            tnode("a", "b1", "r1"),
            tnode("b", "b1", "r1"),
            tnode("c", "b1", "r2"),
            tnode("d", "b1", "r2"),
        ],
        [
            Round(
                gang("g", 3, cpu=4, gang_max_hops=3)
                + gang("h", 2, "B", cpu=4, gang_max_hops=1)
                + [job("s", "C", cpu=4)],
                sched={"s": "a"},
                reasons={
                    "g0": "gang of 3 needs members within 3 hops (one rack); no rack has room",
                    "g2": "gang of 3 needs members within 3 hops (one rack); no rack has room",
                    "h0": "gang of 2 needs members within 1 hops; no topology level is that narrow",
                },
            ),
        ],
        config=TOPO,
        queues=ABC,
    ),
    Scenario(
        # Rack r1 is named in both blocks: the two nodes are in different racks.
        "topology: racks are named within their block",
        [
            node("a", labels={"topology/block": "b1", "topology/rack": "r1"}),
            node("b", labels={"topology/block": "b2", "topology/rack": "r1"}),
        ],
        [
            Round(
                gang("g", 2, cpu=4, gang_max_hops=2),
                sched=set(),
                reasons={
                    "g1": "gang of 2 needs members within 2 hops (one topology/rack); "
                    "no rack has room"
                },
            )
        ],
        config=SchedulingConfig(topology_levels=("topology/block", "topology/rack")),
    ),
    Scenario(
        # Both racks fit and are as free: the smaller key (block, then rack) wins.
        "topology: equal racks go by block then rack name",
        [
            tnode("a", "b2", "r1"),
            tnode("b", "b2", "r1"),
            tnode("c", "b1", "r9"),
            tnode("d", "b1", "r9"),
        ],
        [Round(gang("g", 2, cpu=4), sched={"g0": "c", "g1": "d"})],
        config=TOPO,
    ),
    Scenario(
        # Rack r1 holds more free resources once the gang is in: the fuller rack r2 wins.
        "topology: the fullest rack that fits wins",
        [
            tnode("a", "b1", "r1"),
            tnode("b", "b1", "r1"),
            tnode("c", "b1", "r2"),
            tnode("d", "b1", "r2"),
        ],
        [
            Round(
                running([job("x", "B", cpu=1, pc="np")], "d") + gang("g", 2, cpu=3),
                sched={"g0": "d", "g1": "c"},
            )
        ],
        config=TOPO,
    ),
    Scenario(
        # Each rack is split by zone: only r2's zone x holds both members.
        "topology: a uniformity label splits each domain by its value",
        [
            tnode("a", "b1", "r1", labels={"zone": "x"}),
            tnode("b", "b1", "r1", labels={"zone": "y"}),
            tnode("c", "b1", "r2", labels={"zone": "x"}),
            tnode("d", "b1", "r2", labels={"zone": "x"}),
        ],
        [
            Round(
                gang("g", 2, cpu=4, gang_uniformity_label="zone")
                + gang("h", 2, "B", cpu=4, gang_uniformity_label="zone"),
                sched={"g0": "c", "g1": "d"},
                reasons={"h0": "sharing one value of label 'zone'"},
            )
        ],
        config=TOPO,
    ),
    Scenario(
        "topology: a uniformity label and maximum hops together",
        [
            tnode("a", "b1", "r1", labels={"zone": "x"}),
            tnode("b", "b1", "r2", labels={"zone": "x"}),
            tnode("c", "b1", "r2", labels={"zone": "y"}),
        ],
        [
            Round(
                gang("g", 2, cpu=4, gang_uniformity_label="zone", gang_max_hops=4)
                + gang("h", 2, "B", cpu=4, gang_uniformity_label="zone", gang_max_hops=2),
                sched={"g0": "a", "g1": "b"},
                reasons={"h0": "within 2 hops (one rack); no rack has room"},
            )
        ],
        config=TOPO,
    ),
    Scenario(
        # Rack r1 would need urgency preemption; block b1 holds the gang on free nodes.
        "topology: closeness alone never costs a preemption",
        [
            tnode("a", "b1", "r1"),
            tnode("b", "b1", "r1"),
            tnode("c", "b1", "r2"),
            tnode("d", "b1", "r3"),
        ],
        [
            Round(
                running([job("x", "B", cpu=4)], "a")
                + running([job("y", "B", cpu=4)], "b")
                + gang("g", 2, cpu=4, pc="high"),
                sched={"g0": "c", "g1": "d"},
                pre=set(),
            )
        ],
        config=TOPO_NEVER_EVICT,
    ),
    Scenario(
        "topology: urgency preemption for a gang stays within its maximum hops",
        [
            tnode("a", "b1", "r1"),
            tnode("b", "b1", "r1"),
            tnode("c", "b1", "r2"),
            tnode("d", "b1", "r3"),
        ],
        [
            Round(
                running([job("x", "B", cpu=4)], "a")
                + running([job("y", "B", cpu=4)], "b")
                + gang("g", 2, cpu=4, pc="high", gang_max_hops=2),
                sched={"g0": "a", "g1": "b"},
                pre={"x", "y"},
            ),
            Round([], sched=set(), pre=set()),
        ],
        config=TOPO_NEVER_EVICT,
    ),
    Scenario(
        # Rack r1 cannot be emptied (z does not give way): nothing is preempted for a
        # placement that would not meet the maximum.
        "topology: no preemption when the maximum cannot be met",
        [
            tnode("a", "b1", "r1"),
            tnode("b", "b1", "r1"),
            tnode("c", "b1", "r2"),
            tnode("d", "b1", "r3"),
        ],
        [
            Round(
                running([job("x", "B", cpu=4)], "a")
                + running([job("z", "B", cpu=4, pc="np")], "b")
                + running([job("y", "B", cpu=4)], "c")
                + gang("g", 2, cpu=4, pc="high", gang_max_hops=2),
                sched=set(),
                pre=set(),
                reasons={"g0": "within 2 hops (one rack); no rack has room"},
            )
        ],
        config=TOPO_NEVER_EVICT,
    ),
    Scenario(
        # Fair share: B's x is back on c before A's gang comes; the gang takes rack r1
        # from B's evicted jobs.
        "topology: fair-share preemption for a gang stays within its maximum hops",
        [
            tnode("a", "b1", "r1"),
            tnode("b", "b1", "r1"),
            tnode("c", "b1", "r2"),
            tnode("d", "b1", "r3"),
        ],
        [
            Round(
                running([job("x", "B", cpu=4)], "c")
                + running([job("y", "B", cpu=4)], "a")
                + running([job("z", "B", cpu=4)], "b")
                + running([job("w", "B", cpu=4)], "d")
                + gang("g", 2, cpu=4, gang_max_hops=2),
                sched={"g0": "a", "g1": "b"},
                pre={"y", "z"},
            )
        ],
        config=replace(ALWAYS_EVICT, topology_levels=("block", "rack")),
    ),
    Scenario(
        "topology: an elastic gang places the most members, then keeps close",
        [
            tnode("a", "b1", "r1"),
            tnode("b", "b1", "r1"),
            tnode("c", "b1", "r1"),
            tnode("d", "b2", "r2"),
        ],
        [
            Round(
                gang("g", 4, cpu=4, gang_min_cardinality=2),
                sched={"g0": "a", "g1": "b", "g2": "c", "g3": "d"},
            ),
            Round(
                gang("h", 4, "B", cpu=4, gang_min_cardinality=2, gang_max_hops=2),
                finish={"g0", "g1", "g2", "g3"},
                sched={"h0": "a", "h1": "b", "h2": "c"},
                failed={"h3"},
            ),
        ],
        config=TOPO,
    ),
    Scenario(
        # With the hostname level a gang that fits on one node is 0 hops: best fit alone
        # would put one member on the fuller node a.
        "topology: the node itself is the narrowest level when hostname is one",
        [
            node("a", labels={"rack": "r1"}),
            node("b", labels={"rack": "r1"}),
        ],
        [
            Round(
                running([job("x", "B", cpu=3, pc="np")], "a")
                + gang("g", 2, cpu=1)
                + gang("h", 2, "B", cpu=2, gang_max_hops=0),
                sched={"g0": "b", "g1": "b"},
                reasons={"h0": "within 0 hops (one node); no node has room"},
            )
        ],
        config=TOPO_NODES,
    ),
    Scenario(
        "topology: a gang of one is placed like a single job",
        [tnode("a", "b1", "r1"), tnode("b", "b1", "r2", cpu=2)],
        [Round(gang("g", 1, cpu=2, gang_max_hops=0), sched={"g0": "b"})],
        config=TOPO,
    ),
    Scenario(
        "topology: without levels maximum hops change nothing",
        [tnode("a", "b1", "r1"), tnode("b", "b2", "r2")],
        [Round(gang("g", 2, cpu=4, gang_max_hops=2), sched={"g0": "a", "g1": "b"})],
    ),
    Scenario(
        "topology and excess-flow budget: a gang in one rack takes its charge from the budget",
        [
            tnode("a", "b1", "r1"),
            tnode("b", "b1", "r1"),
            tnode("c", "b2", "r2"),
            tnode("d", "b2", "r3"),
        ],
        [
            # A's fair share is half of 16 CPUs; with r and the gang it holds 9: above it.
            # Only rack r1 holds two 4-CPU members; each takes 10 minutes x 4 CPUs.
            Round(
                running([job("x", "B", pc="np")], "c")
                + running([job("r", "A", pc="np")], "d")
                + gang("g", 2, "A", cpu=4, pc="np", lifetime=600.0, gang_max_hops=2),
                sched={"g0": "a", "g1": "b"},
                pre=set(),
                excess_flow={"g0": 40_000, "g1": 40_000},
            ),
            # The gang's 80 of the 90 resource-minutes are in use: a gang of two 1-CPU
            # members (20) that rack r2 would hold stays queued.
            Round(
                gang("h", 2, "A", pc="np", lifetime=600.0, gang_max_hops=2),
                sched=set(),
                pre=set(),
                excess_flow={},
                reasons={"h0": why.EXCESS_FLOW_BUDGET, "h1": why.EXCESS_FLOW_BUDGET},
            ),
            # The gang has left: A is back within its fair share and h takes nothing; racks
            # r2 and r3 are equally full, r2 has the smaller key.
            Round(
                [],
                finish={"g0", "g1"},
                sched={"h0": "c", "h1": "c"},
                pre=set(),
                excess_flow={},
            ),
        ],
        config=replace(TOPO, excess_flow_budget=90.0),
    ),
    Scenario(
        "topology and non-preemptible overshoot: a gang one rack holds is held back",
        [
            tnode("a", "b1", "r1"),
            tnode("b", "b1", "r1"),
            tnode("c", "b2", "r2"),
            tnode("d", "b2", "r3"),
        ],
        [
            # A's jobs of infinite lifetime may cost half of 16 CPUs: with r's 2 the gang g
            # (8) would exceed it, though rack r1 holds it. The finite gang h goes to r1
            # (the only rack holding two 2-CPU members), and the infinite gang s (2 CPUs,
            # within the limit) to the fullest rack that holds it, r3.
            Round(
                running([job("x", "B", pc="np")], "c")
                + running([job("r", "A", cpu=2, pc="np")], "d")
                + gang("g", 2, "A", cpu=4, pc="np")
                + gang("h", 2, "A", cpu=2, pc="np", lifetime=600.0)
                + gang("s", 2, "A", pc="np", gang_max_hops=2),
                sched={"h0": "a", "h1": "a", "s0": "d", "s1": "d"},
                pre=set(),
                reasons={"g0": why.NON_PREEMPTIBLE_OVERSHOOT, "g1": why.NON_PREEMPTIBLE_OVERSHOOT},
            ),
            # B has left: A's fair share is the whole cluster, and g goes where it fits (no
            # rack or block has room for both members any more).
            Round([], finish={"x"}, sched={"g0": "b", "g1": "c"}, pre=set()),
        ],
        config=replace(TOPO, non_preemptible_overshoot=0.0),
    ),
    Scenario(
        "unknown queue or class fails the job",
        [node("n0")],
        [Round([job("z", "Z"), job("p", pc="nope"), job("a0")], sched={"a0"}, failed={"z", "p"})],
    ),
    Scenario(
        "a running job on an unknown node is left alone",
        [node("n0")],
        [Round([*running([job("ghost", "A")], "gone"), job("a0")], sched={"a0"}, pre=set())],
    ),
    Scenario(
        "finished jobs make room next round",
        [node("n0")],
        [
            Round(jobs("a", 6), counts={"A": 4}),
            Round([], finish={"a0", "a1"}, sched={"a4", "a5"}, pre=set()),
        ],
    ),
    *_needless_preemption_scenarios(),
    *_lifetime_fair_share_scenarios(),
    *_role_scenarios(),
    *_subgroup_scenarios(),
]


def test_enough_scenarios() -> None:
    assert len(SCENARIOS) >= 60
    assert len({s.name for s in SCENARIOS}) == len(SCENARIOS)


@pytest.mark.parametrize("impl", sorted(IMPLEMENTATIONS))
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name.replace(" ", "-"))
def test_scenario(scenario: Scenario, impl: str) -> None:
    run_scenario(scenario, IMPLEMENTATIONS[impl])


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name.replace(" ", "-"))
def test_implementations_agree(scenario: Scenario) -> None:
    ref = run_scenario(scenario, IMPLEMENTATIONS["reference"])
    fast = run_scenario(scenario, IMPLEMENTATIONS["fast"])
    assert [r.decisions() for r in ref] == [f.decisions() for f in fast]
