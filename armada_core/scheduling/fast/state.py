"""The one state the phases of a cycle share, grouped into parts, and the records it holds.

Conventions: a job is a row (its index in ``snapshot.jobs``), a queue an index into
``queues.names``, a node an index into ``nodes.records`` (tie-break order), a shape an index
into ``shapes.facts``. Resource vectors are int64 rows in ``dims`` order, so every
comparison is exact.

Each part is filled by the phases named in its docstring and read by those after. Hot loops
bind the part fields they read many times to locals: an attribute chain costs time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, NamedTuple, TypeVar

import numpy as np
from numpy.typing import NDArray

from ..fairness import CostModel
from ..model import Job, Node, PriorityClass, Queue, SchedulingConfig, SchedulingResult, Snapshot
from ..roles import RolePlan
from ..topology import GangTopology, NodeLabels
from .free_space import BoolArray, FloatArray, FreeSpace, IntArray, ScanMemo

#: Kinds of items in a queue's order; among items of equal class priority they come in this
#: order (evicted gangs, then evicted members above a gang's minimum, then queued work).
EVICTED, EXTRA, QUEUED = 0, 1, 2

#: How deep a placement went: (stage - 1, level); (0, 0.0) without displacement.
Rank = tuple[int, float]
#: A queue's entry in the heap of progressive filling: (-class priority of its head, its key
#: with the head added, queue, queue); the last two break ties by name (queues are indexed
#: in name order).
HeapEntry = tuple[int, float, int, int]
#: A gang's shape as its remembered failures are keyed: shape, members, minimum, label and
#: what the failure was about.
GangShapeKey = tuple[int | str | None, ...]

T = TypeVar("T")


class Item:
    """A gang (queued, or the core of an evicted one) or one evicted member above a gang's
    minimum: what a queue's order holds besides single jobs."""

    __slots__ = (
        "allowed",
        "class_priority",
        "core",
        "failed",
        "kind",
        "late",
        "members",
        "minimum",
        "parent",
        "total",
        "uniformity_label",
    )

    def __init__(
        self,
        kind: int,
        members: list[int],
        minimum: int,
        uniformity_label: str | None,
        class_priority: int,
        total: list[int],
        parent: Item | None = None,
    ):
        self.kind = kind
        self.members = members  # rows, in the gang's order
        self.minimum = minimum  # members that must be placed for the gang to run
        self.uniformity_label = uniformity_label  # None when not uniform
        self.class_priority = class_priority  # lowest of the members: the item's urgency
        self.total = total  # summed requests (a list of ints: it feeds the queue key)
        self.parent = parent  # an extra's core: if the core fails, the extra is preempted
        self.failed = False
        # A queued role group: its first ``core`` members (every role's minimum) go all or
        # nothing, the rest as far as room allows (0: not a role group).
        self.core = 0
        # A queued member of a running role group, placed alone on the ``allowed`` nodes
        # (a node mask; None: anywhere).
        self.late = False
        self.allowed: BoolArray | None = None


class Shape:
    """Per-cycle facts about one job shape (requests, constraints, class): jobs of one shape
    are interchangeable for placement, so everything here is computed once per shape."""

    __slots__ = (
        "candidates",
        "charged",
        "class_known",
        "class_name",
        "class_priority",
        "constrained",
        "failed_at",
        "free_exhausted_at",
        "no_room_reason",
        "node_mask",
        "partitions",
        "preemptible",
        "request",
        "request_tuple",
        "scan_memo",
        "static_reason",
        "weighted_request",
    )

    def __init__(self, request: IntArray, class_name: str, pc: PriorityClass | None):
        self.request = request
        self.request_tuple: tuple[int, ...] = tuple(request.tolist())  # for plain Python sums
        # Its dimensions that charge a queue, with their amounts (most are zero).
        self.charged = tuple((d, v) for d, v in enumerate(self.request_tuple) if v)
        self.class_name = class_name
        self.class_known = pc is not None  # queued jobs of an unknown class are failed
        self.class_priority = pc.priority if pc is not None else 0
        self.preemptible = pc.preemptible if pc is not None else False
        # Static constraints, computed on first use (``nodes.static_constraints``): candidate
        # nodes, the node mask when constrained, index partitions to scan, a reason if
        # nothing can fit. ``candidates`` is None until then.
        self.candidates: IntArray | None = None
        self.node_mask: BoolArray | None = None
        self.constrained = False
        self.partitions: list[int] = []
        self.static_reason: str | None = None
        # Remembered failure (space epoch, reason): the shape fits nowhere until something
        # is preempted, since free space only shrinks in between.
        self.failed_at: tuple[int, str] | None = None
        # Why a single job of this shape found no room (``nodes.no_room``), built on first use.
        self.no_room_reason: str | None = None
        # ``FreeSpace.grow_epoch`` at which nothing more fits without displacing anything.
        self.free_exhausted_at = -1
        self.scan_memo = ScanMemo()  # ``FreeSpace.best_fit`` resume points for this shape
        # The request weighed for the excess-flow budget (``fairness.weighted_request``).
        self.weighted_request: float | None = None

    def static_candidates(self) -> IntArray:
        """The candidate nodes, once ``nodes.static_constraints`` has computed them."""
        assert self.candidates is not None
        return self.candidates


@dataclass(slots=True, eq=False)
class Jobs:
    """Per-job columns, by row (``inputs.index_inputs``; role groups change a few:
    ``elastic.apply_roles``)."""

    #: The snapshot's jobs.
    records: Sequence[Job]
    #: Shape index of each job: jobs are handled by shape, so most work is per shape.
    shape: IntArray = field(init=False)
    #: Class priority: urgency in every order and every displacement level.
    class_priority: IntArray = field(init=False)
    #: Gang id of each row in a gang (in row order), and whether each job is in a gang:
    #: gangs are grouped from these.
    gang_ids: dict[int, str] = field(init=False)
    in_gang: BoolArray = field(init=False)
    #: Whether the job has a lifetime (``Job.lifetime``): only those of a class that is
    #: not preemptible need their start time looked at for eviction.
    has_lifetime: BoolArray = field(init=False)
    #: Queue index, -1 when the queue is unknown.
    queue: IntArray = field(init=False)
    #: Whether the job names a node: evicted single jobs are batched on it.
    is_running: BoolArray = field(init=False)
    #: Node index of each running job, -1 when queued or on an unknown node.
    node: IntArray = field(init=False)
    #: Rows of running jobs on known nodes: they hold space whatever their queue or class.
    running: IntArray = field(init=False)
    #: Start time of each of those rows, 0.0 elsewhere (``running_columns``).
    start: FloatArray = field(init=False)
    #: Running jobs of a known queue and class: only these count towards costs and move.
    accounted: BoolArray = field(init=False)
    #: Rows of queued jobs of a known queue and class: demand, and the work to schedule.
    queued: IntArray = field(init=False)
    #: Whether a running job is an elastic member of a role group (victims take them
    #: first); None without role groups.
    elastic: BoolArray | None = None
    #: Job ids, for the result, and the jobs' own priority and submit time, for the order
    #: (``job_columns.read_columns``).
    ids: list[str] = field(init=False)
    #: The same as an array of objects, to gather many at once in C (read-only).
    id_array: NDArray[Any] = field(init=False)
    #: Breaks in the order of id up to each row (``job_columns.JobColumns.id_breaks``).
    id_breaks: IntArray = field(init=False)
    priority: IntArray = field(init=False)
    submit: FloatArray = field(init=False)
    #: Job.serial of each row: what a cycle reads of a job is kept for the next by it.
    serial: IntArray = field(init=False)


@dataclass(slots=True, eq=False)
class Shapes:
    """Interned job shapes and their facts (``inputs.index_inputs``)."""

    #: Shape keys (requests, selector, tolerations, affinity, avoided node, class), from
    #: which static constraints are computed once per shape.
    keys: list[tuple[Any, ...]]
    facts: list[Shape]
    #: Requests per shape (shapes x dims), gathered per job with ``Jobs.shape``.
    requests: IntArray
    #: Class priority, and whether the class exists, per shape (gathered per job).
    class_priority: IntArray
    class_known: BoolArray


class StaticFit(NamedTuple):
    """A shape's static constraints on a set of nodes (``nodes.static_constraints``)."""

    candidates: IntArray
    node_mask: BoolArray | None
    constrained: bool
    partitions: list[int]
    static_reason: str | None


class NodeIndex:
    """What a cycle derives from the nodes alone: their tie-break order, capacity, cordons,
    label columns and index partitions. The next cycle reuses it while its snapshot holds
    the very same node objects (frozen, so unchanged): a cluster's nodes mostly are, and
    ordering and reading 10,000 of them took a part of every cycle. Never changed in place
    (its arrays are read-only)."""

    __slots__ = (
        "capacity",
        "cordoned",
        "key",
        "labels",
        "partition",
        "partitions",
        "records",
        "rows",
        "static",
    )

    def __init__(
        self, key: tuple[Any, ...], records: list[Node], capacity: IntArray, cordoned: BoolArray
    ) -> None:
        self.key = key  # holds the node objects: their ids cannot be reused while kept
        self.records = records
        self.rows = {n.id: k for k, n in enumerate(records)}  # node id -> row
        capacity.flags.writeable = False
        cordoned.flags.writeable = False
        self.capacity = capacity
        self.cordoned = cordoned
        self.labels = NodeLabels(records)
        # Built when a cycle first places anything (``inputs.index_for_placing``).
        self.partitions: dict[int, tuple[Any, frozenset[str]]] = {}
        self.partition: IntArray | None = None
        # Shape key -> its static constraints on these nodes (``nodes.static_constraints``).
        self.static: dict[tuple[Any, ...], StaticFit] = {}


@dataclass(slots=True, eq=False)
class Nodes:
    """The nodes and their free space (``inputs``; ``eviction.load_nodes`` fills the space)."""

    #: In tie-break order (topology, gang uniformity labels, then id): node indices follow.
    records: list[Node]
    #: Their labels as columns, and the topology domains built from them.
    labels: NodeLabels
    #: Capacity per node (nodes x dims); cordoned nodes take nothing new and count nowhere.
    capacity: IntArray
    cordoned: BoolArray
    #: Capacity of uncordoned nodes: the denominator of every cost and per-cycle fraction.
    totals: list[int]
    #: Where the above came from, shared with later cycles.
    index: NodeIndex
    #: Index partition -> (taints, resources present): a shape scans only those it can use.
    partitions: dict[int, tuple[Any, frozenset[str]]] = field(init=False)
    #: Free space per displacement level, and the best-fit index.
    space: FreeSpace = field(init=False)


@dataclass(slots=True, eq=False)
class CostColumns:
    """``CostModel`` in numpy form (dimensions the cluster has, their totals and
    multipliers), so that many candidate costs come out with the same float operations."""

    counted: BoolArray
    totals: FloatArray
    multipliers: FloatArray
    #: Whether any dimension counts (else every cost is 0).
    any_counted: bool
    #: (dimension, multiplier, total) of the counted dimensions, for one cost in Python.
    terms: list[tuple[int, float, float]]


@dataclass(slots=True, eq=False)
class Queues:
    """Queues, their fairness (``queues.weigh_queues``) and what they hold
    (``queues.charge_holders``, then placing)."""

    #: Queue names sorted: queue indices follow them, and a name is the last tie-break.
    names: list[str]
    by_name: dict[str, Queue]
    #: Weight (1 / priority factor) per queue: keys divide by it.
    weight: list[float] = field(init=False)
    #: Decayed usage a queue carries on top of its cost.
    usage_offset: list[float] = field(init=False)
    #: Plain fair share per queue (0 when inactive): the excess-flow budget is charged above it.
    fair_share: list[float] = field(init=False)
    #: What each queue holds plus its evicted jobs not yet back: the basis of its fraction
    #: of fair share when victims are chosen.
    usage: list[list[int]] = field(init=False)
    #: What each queue holds now: its cost, and so its key across queues.
    allocation: list[list[int]] = field(init=False)
    #: What each (queue, class) holds, for per-queue class caps.
    allocation_by_class: dict[tuple[int, str], list[int]] = field(init=False)


@dataclass(slots=True, eq=False)
class Limits:
    """What the limits allow and what this cycle has taken of them (``limits.allowances``;
    the lifetime limits from ``queues.weigh_queues`` and ``queues.charge_holders``)."""

    #: New jobs this cycle: their total requests, count, and count per queue (per-cycle and
    #: rate limits, and the rate tokens taken).
    new_total: list[int] = field(init=False)
    new_count: int = 0
    new_by_queue: list[int] = field(init=False)
    #: New jobs the rate limits let through this cycle, globally and per queue (None: no
    #: limit).
    global_allowance: int | None = None
    queue_allowance: list[int | None] = field(init=False)
    #: Whether any of the above (or a per-cycle limit) applies this cycle at all.
    counted: bool = False
    #: Cost each queue's infinite-lifetime jobs may reach, and what they hold; None without
    #: ``non_preemptible_overshoot``.
    infinite_limit: list[float] | None = None
    infinite_allocation: list[list[int]] | None = None
    #: The excess-flow budget (thousandths of a resource-minute; None: no budget), and
    #: what each queue's running and newly placed jobs hold of it.
    budget: int | None = None
    budget_used: list[int] = field(init=False)


@dataclass(slots=True, eq=False)
class Evictions:
    """Which running jobs were evicted and which may give way (``eviction.py``), and the
    victim groups displacement reads (``victims.py``), kept up to date as jobs move."""

    #: Priority at or below which a running job holding its node gives way to urgency
    #: (+inf: never).
    hold: FloatArray
    #: Evicted running jobs: they go back to their own node or are preempted.
    evicted: BoolArray
    #: Running gang members -> the whole gang, which is preempted as one.
    unit_of: dict[int, list[int]] = field(default_factory=dict)
    #: Rows of held jobs that may give way to urgency (finite ``hold``).
    displaceable: IntArray = field(init=False)
    #: Displaceable jobs per node, built at the first urgency preemption.
    displaceable_by_node: dict[int, list[int]] | None = None
    #: Evicted jobs per node, built when one first gives way to a job of a higher class.
    evicted_by_node: dict[int, list[int]] | None = None
    #: Evicted jobs placed back or preempted, so no longer victims.
    settled: BoolArray = field(init=False)
    #: Per class priority, per victim group (``victims.victim_group``): evicted jobs not
    #: yet back, per node (built on first use, then kept up to date).
    evicted_victims: dict[int, dict[int, IntArray]] = field(default_factory=dict)
    #: Per (hold, victim group): displaceable jobs per node, valid while built at the
    #: current ``held_version`` (rollbacks bump it, since they bring preempted jobs back).
    held_version: int = 0
    held_victims: tuple[int, dict[tuple[float, int], IntArray]] | None = None


@dataclass(slots=True, eq=False)
class TopologyDomains:
    """A gang's topology levels (``topology.gang_topology``), each level's domain per node
    (-1: none) and each domain's node rows."""

    topology: GangTopology
    domain_of: list[IntArray]
    rows: list[list[IntArray]]


@dataclass(slots=True, eq=False)
class Gangs:
    """Gangs as items of queue orders (``eviction.py``, ``order.py``), and what placing
    remembers about gang shapes."""

    #: Gangs and evicted gang extras, referred to from queue orders as ``-1 - index``.
    items: list[Item] = field(default_factory=list)
    #: Gang shape -> (space epoch, reason) of its last failure; reason None: no domain
    #: narrower than the cluster held the topology gang.
    failures: dict[GangShapeKey, tuple[int, str | None]] = field(default_factory=dict)
    #: (Uniformity label, maximum hops) -> the gang's topology domains (built on first use).
    topologies: dict[tuple[str | None, int | None], TopologyDomains] = field(default_factory=dict)
    #: Shapes of a role's members -> the nodes admitting any of them (static per cycle,
    #: asked for every domain check of every role group).
    candidates: dict[frozenset[int], IntArray] = field(default_factory=dict)


@dataclass(slots=True, eq=False)
class QueueOrder:
    """Each queue's items in the order it offers them (``order.order_queues``), and how far
    placing has taken them."""

    #: Per queue, its items in order: a row, or ``-1 - k`` for ``gangs.items[k]``.
    sequence: list[IntArray]
    #: Per queue and position, where the run of interchangeable items starting there ends.
    run_end: list[IntArray]
    #: Per queue and position, the next position that is not an evicted single job.
    evicted_end: list[IntArray]
    #: Per queue, the position of its head.
    position: list[int]


@dataclass(slots=True)
class Journal:
    """What tentative work recorded, to undo it: jobs scheduled (ids), jobs preempted (rows)."""

    scheduled: list[str] = field(default_factory=list)
    preempted: list[int] = field(default_factory=list)


@dataclass(slots=True, eq=False)
class Placing:
    """Progress of placing (``loop.py`` and the modules it calls)."""

    #: Names the free space since it last grew: remembered "fits nowhere" answers
    #: (``Shape.failed_at``, ``Gangs.failures``) hold while it is unchanged, since placing
    #: only takes space. A preemption and the start of tentative work take a new, never
    #: reused, name; undoing tentative work brings back the name it started from, as the
    #: space is again what it was then.
    space_epoch: int = 0
    epochs_named: int = 0
    #: Rows of running jobs preempted so far.
    preempted: set[int] = field(default_factory=set)
    #: While a gang is tried tentatively: what to undo in the result and ``preempted``.
    journal: Journal | None = None
    #: Set when a placement changed other queues' keys: the queue heap is rebuilt.
    heap_stale: bool = False
    #: The heap entry of the queue that just won, when placing already computed it.
    next_entry: HeapEntry | None = None

    def new_space_epoch(self) -> int:
        """Give the free space a new name (``space_epoch``); returns the one it had."""
        before = self.space_epoch
        self.epochs_named += 1
        self.space_epoch = self.epochs_named
        return before


@dataclass(slots=True, eq=False)
class CycleState:
    """Everything the phases of one cycle read and change.

    Built phase by phase from the snapshot (``cycle.prepare``: inputs, fairness, eviction,
    order), then changed by placing. Each part names the phases that set its fields.
    """

    #: The cycle's input; read only.
    snapshot: Snapshot
    #: Decisions as phases make them; ``outcomes.finish`` completes them.
    result: SchedulingResult = field(default_factory=SchedulingResult)
    config: SchedulingConfig = field(init=False)

    # --- inputs (``inputs.py``) -------------------------------------------------------------
    #: Classes by name (unknown names make queued jobs fail), and their names sorted, to
    #: index per-(queue, class) allocation.
    classes: dict[str, PriorityClass] = field(init=False)
    class_names: list[str] = field(init=False)
    #: Whether any class caps a queue's share (``max_fraction_per_queue``): without caps,
    #: evicted jobs go back in batches and one at a time without class checks.
    class_caps: bool = field(init=False)
    #: Resource dimensions in best-fit order: the columns of every resource array.
    dims: tuple[str, ...] = field(init=False)
    #: Dominant-resource cost, shared with the reference so that costs compare exactly.
    costs: CostModel = field(init=False)
    cost_columns: CostColumns = field(init=False)
    #: The role rules' decisions (``roles.plan``); None without role groups.
    roles: RolePlan | None = None
    jobs: Jobs = field(init=False)
    shapes: Shapes = field(init=False)
    nodes: Nodes = field(init=False)
    queues: Queues = field(init=False)

    # --- the phases that follow -------------------------------------------------------------
    limits: Limits = field(default_factory=Limits)
    evictions: Evictions = field(init=False)
    gangs: Gangs = field(default_factory=Gangs)
    order: QueueOrder = field(init=False)
    placing: Placing = field(default_factory=Placing)

    def __post_init__(self) -> None:
        self.config = self.snapshot.config
        self.jobs = Jobs(self.snapshot.jobs)


def sum_requests(target: IntArray, shape: IntArray, n: int, requests: IntArray) -> IntArray:
    """Exact per-target sums of the requests of jobs (given by shape), as an (n, dims) array."""
    s = requests.shape[0]
    if len(target) == 0:
        return np.zeros((n, requests.shape[1]), dtype=np.int64)
    if n * s <= 4_000_000:
        counts = np.bincount(target * s + shape, minlength=n * s).reshape(n, s)
        out: IntArray = counts.astype(np.int64) @ requests
        return out
    out = np.zeros((n, requests.shape[1]), dtype=np.int64)
    np.add.at(out, target, requests[shape])
    return out


def gather(values: Sequence[T], rows: IntArray) -> list[T]:
    """values[rows] for a Python sequence, at C speed."""
    if len(rows) == 0:
        return []
    if len(rows) == 1:
        return [values[int(rows[0])]]
    return list(itemgetter(*rows.tolist())(values))


def gang_sort_key(key: tuple[str, str | None]) -> tuple[str, str]:
    """Sort key of a (queue, gang id) pair of a job known to be in a gang."""
    queue, gang_id = key
    assert gang_id is not None
    return queue, gang_id


def make_item(
    state: CycleState,
    kind: int,
    members: list[int],
    minimum: int,
    uniformity_label: str | None,
    parent: Item | None = None,
) -> Item:
    """An item for ``members``, with its urgency (lowest member class) and total request."""
    jobs = state.jobs
    total = state.shapes.requests[jobs.shape[members]].sum(axis=0).tolist()
    class_priority = int(min(int(jobs.class_priority[i]) for i in members))
    return Item(kind, members, minimum, uniformity_label, class_priority, total, parent)
