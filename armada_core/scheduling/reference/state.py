"""The cycle's state: what every phase reads, and the one place they record what they decide.

``CycleState`` holds the cycle's inputs (fixed once built: resources, classes, queues, nodes
in order, cluster totals, the fairness of each queue) and what the phases update: each
node's held and evicted jobs, each queue's allocation, the per-cycle counters and the result
being built. A gang is tried on the live state; ``save`` and ``restore`` take it back when
the attempt fails or was only a trial (SEMANTICS.md, "Placing").

Resource vectors are plain lists in ``dims`` order. They are never changed in place (``add``
and ``sub`` build new ones), so a saved copy of a mapping of them is a true copy.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from ..constraints import node_order
from ..fairness import CostModel, budget_charge, infinite_lifetime, resource_dims, weighted_request
from ..model import Job, Node, PriorityClass, Queue, SchedulingResult, Snapshot
from ..roles import RolePlan

INF = float("inf")

#: Kinds of work item in a queue, in the order they are taken among equal class priority.
EVICTED = 0  # an evicted gang (or its members up to the gang's minimum)
EXTRA = 1  # one evicted gang member above the gang's minimum
QUEUED = 2


def add(a: list[int], b: list[int]) -> list[int]:
    return [x + y for x, y in zip(a, b, strict=True)]


def sub(a: list[int], b: list[int]) -> list[int]:
    return [x - y for x, y in zip(a, b, strict=True)]


def fits(free: list[int], req: list[int]) -> bool:
    return all(f >= r for f, r in zip(free, req, strict=True))


def capacity_of(node: Node, dims: tuple[str, ...]) -> list[int]:
    return [node.capacity.get(d, 0) for d in dims]


#: Jobs holding their space on a node: job id -> (requests, hold priority). INF cannot be
#: displaced.
Held = dict[str, tuple[list[int], float]]
#: Evicted jobs not yet back on a node: job id -> (requests, class priority).
Evicted = dict[str, tuple[list[int], int]]


@dataclass(slots=True)
class Item:
    """One unit of a queue's work, placed all or nothing: a gang, a single job, or one
    evicted member above its gang's minimum."""

    kind: int
    queue: str
    members: list[Job]
    class_priority: int  # lowest class priority among members
    total: list[int]
    parent: Item | None = None  # the evicted core an EXTRA member belongs to
    failed: bool = False
    #: A queued role group: its first ``core`` members (every role's minimum) are placed all
    #: or nothing, the rest as far as room allows (0: not a role group).
    core: int = 0
    #: A queued member of a running role group, placed alone on ``allowed`` (None: anywhere).
    late: bool = False
    allowed: set[int] | None = None


@dataclass(slots=True)
class NodeState:
    """One node as the cycle sees it: who holds space on it, who was evicted from it."""

    node: Node
    index: int
    capacity: list[int]
    held: Held = field(default_factory=dict)
    evicted: Evicted = field(default_factory=dict)

    # Free resources at the three stages of placing a queued job (SEMANTICS.md, "Placing").

    def free(self) -> list[int]:
        """Stage 1, no displacement: capacity - held - evicted not yet back."""
        free = list(self.capacity)
        for vec, _ in self.held.values():
            free = sub(free, vec)
        for vec, _ in self.evicted.values():
            free = sub(free, vec)
        return free

    def free_evicted_giving_way(self, level: float) -> list[int]:
        """Stage 2, fair share: free if evicted jobs of class priority <= level give way."""
        free = list(self.capacity)
        for vec, _ in self.held.values():
            free = sub(free, vec)
        for vec, pcp in self.evicted.values():
            if pcp > level:
                free = sub(free, vec)
        return free

    def free_held_giving_way(self, level: float) -> list[int]:
        """Stage 3, urgency: free if every evicted job, and held jobs of hold priority <=
        level, give way. At -INF: capacity minus everything now holding space."""
        free = list(self.capacity)
        for vec, hold in self.held.values():
            if hold > level:
                free = sub(free, vec)
        return free


@dataclass(slots=True)
class Saved:
    """What a gang attempt may change, copied before it (see ``CycleState.save``)."""

    nodes: list[tuple[Held, Evicted]]
    alloc: defaultdict[str, list[int]]
    alloc_by_class: defaultdict[tuple[str, str], list[int]]
    alloc_infinite: defaultdict[str, list[int]]
    new_total: list[int]
    new_count: int
    new_by_queue: dict[str, int]
    scheduled: dict[str, str]
    preempted: set[str]


@dataclass(slots=True, kw_only=True)
class CycleState:
    """Everything one cycle reads and decides; every phase is a function over it."""

    # --- inputs, fixed for the cycle ---------------------------------------------------
    snapshot: Snapshot
    dims: tuple[str, ...]
    classes: dict[str, PriorityClass]
    queues: dict[str, Queue]
    #: Node id -> position in node order (the index into ``nodes``).
    node_index: dict[str, int]
    #: Capacity of the nodes that are not cordoned.
    totals: list[int]
    costs: CostModel
    #: Weight and usage offset of each active queue (set by ``queues.weigh_queues``).
    weights: dict[str, float] = field(default_factory=dict)
    offsets: dict[str, float] = field(default_factory=dict)
    #: Plain fair share of each active queue, and the cost its infinite-lifetime jobs may
    #: reach (with ``non_preemptible_overshoot``).
    fair: dict[str, float] = field(default_factory=dict)
    infinite_limit: dict[str, float] = field(default_factory=dict)
    #: Excess-flow budget each queue's running jobs hold (``Job.excess_flow``), then what
    #: jobs placed this cycle took; thousandths of a resource-minute.
    budget_used: dict[str, int] = field(default_factory=dict)
    #: Running jobs by id, and each one's running gang, preempted as a unit (set by eviction).
    running: dict[str, Job] = field(default_factory=dict)
    gang_of: dict[str, list[Job]] = field(default_factory=dict)
    #: The role rules' decisions (``roles.plan``); None without role groups.
    roles: RolePlan | None = None

    # --- updated by the phases -----------------------------------------------------------
    nodes: list[NodeState]
    #: Requests of what each queue holds, in total and per class (an absent queue holds 0).
    alloc: defaultdict[str, list[int]]
    alloc_by_class: defaultdict[tuple[str, str], list[int]]
    #: Requests of each queue's jobs of infinite lifetime (``non_preemptible_overshoot``).
    alloc_infinite: defaultdict[str, list[int]]
    #: New jobs scheduled this cycle and their total (what per-cycle limits count).
    new_total: list[int]
    new_count: int = 0
    #: New jobs scheduled per queue (what the rate limits count).
    new_by_queue: dict[str, int] = field(default_factory=dict)
    result: SchedulingResult = field(default_factory=SchedulingResult)

    @classmethod
    def build(cls, snapshot: Snapshot) -> CycleState:
        """Inputs and units: resource dimensions, nodes in order, cluster totals."""
        dims = resource_dims(snapshot)
        gang_labels = (j.gang_uniformity_label for j in snapshot.jobs if j.gang_id is not None)
        nodes = node_order(snapshot.nodes, gang_labels, snapshot.config.topology_levels)
        totals = [0] * len(dims)
        for n in nodes:
            if not n.cordoned:
                totals = add(totals, capacity_of(n, dims))
        width = len(dims)
        return cls(
            snapshot=snapshot,
            dims=dims,
            classes={pc.name: pc for pc in snapshot.priority_classes},
            queues={q.name: q for q in snapshot.queues},
            node_index={n.id: i for i, n in enumerate(nodes)},
            totals=totals,
            costs=CostModel.build(dims, totals, snapshot.config.resource_multipliers),
            nodes=[NodeState(n, i, capacity_of(n, dims)) for i, n in enumerate(nodes)],
            alloc=defaultdict(lambda: [0] * width),
            alloc_by_class=defaultdict(lambda: [0] * width),
            alloc_infinite=defaultdict(lambda: [0] * width),
            new_total=[0] * width,
        )

    # --- reading --------------------------------------------------------------------------

    def zeros(self) -> list[int]:
        return [0] * len(self.dims)

    def vec(self, job: Job) -> list[int]:
        """The job's requests in ``dims`` order."""
        return [job.requests.get(d, 0) for d in self.dims]

    def priority(self, job: Job) -> int:
        """The job's class priority (the class must be known)."""
        return self.classes[job.priority_class].priority

    def accounted(self, job: Job) -> bool:
        """Whether the job counts towards its queue: known queue and class."""
        return job.queue in self.queues and job.priority_class in self.classes

    def infinite(self, job: Job) -> bool:
        """Never taken back once running: class not preemptible, no finite lifetime."""
        return infinite_lifetime(self.classes[job.priority_class].preemptible, job.lifetime)

    def charge(self, job: Job) -> int:
        """What the job takes from the excess-flow budget if placed above fair share."""
        weighted = weighted_request(
            self.dims, self.vec(job), self.snapshot.config.excess_flow_weights
        )
        return budget_charge(self.classes[job.priority_class].preemptible, job.lifetime, weighted)

    def node_of(self, job: Job) -> NodeState:
        """The node a running job runs on."""
        assert job.node is not None
        return self.nodes[self.node_index[job.node]]

    def item(self, kind: int, queue: str, members: list[Job], parent: Item | None = None) -> Item:
        total = self.zeros()
        for j in members:
            total = add(total, self.vec(j))
        class_priority = min(self.priority(j) for j in members)
        return Item(kind, queue, members, class_priority, total, parent)

    # --- updating -------------------------------------------------------------------------

    def account(self, job: Job, vec: list[int], sign: int) -> None:
        """Add (sign +1) or remove (-1) the job's requests from its queue's allocation."""
        delta = vec if sign > 0 else [-v for v in vec]
        self.alloc[job.queue] = add(self.alloc[job.queue], delta)
        key = (job.queue, job.priority_class)
        self.alloc_by_class[key] = add(self.alloc_by_class[key], delta)
        if self.infinite(job):
            self.alloc_infinite[job.queue] = add(self.alloc_infinite[job.queue], delta)

    def save(self) -> Saved:
        """Copy what a gang attempt may change. ``restore`` hands the copies back to the
        live state, so each is restored at most once."""
        result = self.result
        return Saved(
            nodes=[(dict(ns.held), dict(ns.evicted)) for ns in self.nodes],
            alloc=self.alloc.copy(),
            alloc_by_class=self.alloc_by_class.copy(),
            alloc_infinite=self.alloc_infinite.copy(),
            new_total=list(self.new_total),
            new_count=self.new_count,
            new_by_queue=dict(self.new_by_queue),
            scheduled=dict(result.scheduled),
            preempted=set(result.preempted),
        )

    def restore(self, saved: Saved) -> None:
        """Take the state back to ``saved``; reasons recorded since (failed, unscheduled) stay."""
        for ns, (held, evicted) in zip(self.nodes, saved.nodes, strict=True):
            ns.held = held
            ns.evicted = evicted
        self.alloc = saved.alloc
        self.alloc_by_class = saved.alloc_by_class
        self.alloc_infinite = saved.alloc_infinite
        self.new_total = saved.new_total
        self.new_count = saved.new_count
        self.new_by_queue = saved.new_by_queue
        self.result.scheduled = saved.scheduled
        self.result.preempted = saved.preempted
