"""The one state the phases of a cycle share, and the records it is made of.

Conventions: a job is a row (its index in ``snapshot.jobs``), a queue an index into
``qnames``, a node an index into ``nodes`` (tie-break order), a shape an index into
``shapes``. Resource vectors are int64 rows in ``dims`` order, so every comparison is exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import numpy as np

from ..fairness import CostModel
from ..model import (
    Job,
    Node,
    PriorityClass,
    Queue,
    SchedulingConfig,
    SchedulingResult,
    Snapshot,
)
from ..nodedb import NodeDb
from ..roles import RolePlan
from ..topology import NodeLabels

#: Kinds of items in a queue's order; among items of equal class priority they come in this
#: order (evicted gangs, then evicted members above a gang's minimum, then queued work).
EVICTED, EXTRA, QUEUED = 0, 1, 2


class Item:
    """A gang (queued, or the core of an evicted one) or one evicted member above a gang's
    minimum: what a queue's order holds besides single jobs."""

    __slots__ = (
        "allowed",
        "core",
        "failed",
        "kind",
        "label",
        "late",
        "members",
        "minimum",
        "parent",
        "pcp",
        "total",
    )

    def __init__(
        self,
        kind: int,
        members: list[int],
        minimum: int,
        label: str | None,
        pcp: int,
        total: list[int],
        parent: Item | None = None,
    ):
        self.kind = kind
        self.members = members  # rows, in the gang's order
        self.minimum = minimum  # members that must be placed for the gang to run
        self.label = label  # gang uniformity label, None when not uniform
        self.pcp = pcp  # lowest class priority of the members: the item's urgency
        self.total = total  # summed requests (a list of ints: it feeds the queue key)
        self.parent = parent  # an extra's core: if the core fails, the extra is preempted
        self.failed = False
        # A queued role group: its first ``core`` members (every role's minimum) go all or
        # nothing, the rest as far as room allows (0: not a role group).
        self.core = 0
        # A queued member of a running role group, placed alone on the ``allowed`` nodes
        # (a node mask; None: anywhere).
        self.late = False
        self.allowed: np.ndarray | None = None


class Shape:
    """Per-cycle facts about one job shape (requests, constraints, class): jobs of one shape
    are interchangeable for placement, so everything here is computed once per shape."""

    __slots__ = (
        "a_exhausted",
        "cands",
        "constrained",
        "fail",
        "mask",
        "memo",
        "no_room",
        "parts",
        "pc",
        "pc_known",
        "pcp",
        "preemptible",
        "req",
        "req_t",
        "static_reason",
        "weighted",
    )

    def __init__(self, req: np.ndarray, pc_name: str, pc: PriorityClass | None):
        self.req = req
        self.req_t: tuple[int, ...] = tuple(req.tolist())  # for pure-Python arithmetic
        self.pc = pc_name
        self.pc_known = pc is not None  # queued jobs of an unknown class are failed
        self.pcp = pc.priority if pc is not None else 0
        self.preemptible = pc.preemptible if pc is not None else False
        # Static constraints, computed on first use (``nodes.static``): candidate nodes, the
        # node mask when constrained, index partitions to scan, a reason if nothing can fit.
        self.cands: np.ndarray | None = None
        self.mask: np.ndarray | None = None
        self.constrained = False
        self.parts: list[int] = []
        self.static_reason: str | None = None
        # Remembered failure (shrink epoch, reason): the shape fits nowhere until something
        # is preempted, since free space only shrinks in between.
        self.fail: tuple[int, str] | None = None
        # Why a single job of this shape found no room (``nodes.no_room``), built on first use.
        self.no_room: str | None = None
        # Grow epoch at which nothing more fits without displacing anything.
        self.a_exhausted = -1
        self.memo: dict = {}  # ``NodeDb.best_free`` resume points for this shape
        # The request weighed for the excess-flow budget (``fairness.weighted_request``).
        self.weighted: float | None = None


@dataclass(slots=True, eq=False)
class CycleState:
    """Everything the phases of one cycle read and change.

    Built phase by phase from the snapshot (``cycle.prepare``: inputs, fairness, eviction,
    order), then changed by placing. Each section names the phase that sets its fields.
    """

    #: The cycle's input; read only.
    snap: Snapshot
    #: Decisions as phases make them; ``outcomes.finish`` completes them.
    result: SchedulingResult = field(default_factory=SchedulingResult)

    # --- inputs (``inputs.py``) -------------------------------------------------------------
    #: The snapshot's configuration and jobs, read by every phase.
    cfg: SchedulingConfig = field(init=False)
    jobs: Sequence[Job] = field(init=False)
    #: Job ids by row, for the result (only built when the cycle is not decided at once).
    ids: list[str] = field(init=False)
    #: Classes and queues by name: unknown names make queued jobs fail.
    pcs: dict[str, PriorityClass] = field(init=False)
    queues: dict[str, Queue] = field(init=False)
    #: Queue names sorted: queue indices follow them, and a name is the last tie-break.
    qnames: list[str] = field(init=False)
    #: Class names sorted, to index per-(queue, class) allocation.
    class_names: list[str] = field(init=False)
    #: Interned shape keys (requests, selector, tolerations, affinity, avoided node, class),
    #: from which static constraints are computed once per shape.
    shape_keys: list[tuple[Any, ...]] = field(init=False)
    #: Per-shape facts and caches (``Shape``).
    shapes: list[Shape] = field(init=False)
    #: Shape of each job: jobs are handled by shape, so most work is per shape, not per job.
    shape_of_job: np.ndarray = field(init=False)
    #: Requests per shape (shapes x dims), gathered per job with ``shape_of_job``.
    req: np.ndarray = field(init=False)
    #: Class priority, and whether the class exists, per shape (gathered per job).
    shape_pcp: np.ndarray = field(init=False)
    shape_known: np.ndarray = field(init=False)
    #: Resource dimensions in best-fit order: the columns of every resource array.
    dims: tuple[str, ...] = field(init=False)
    #: Nodes in tie-break order (gang uniformity labels, then id): node indices follow it.
    nodes: list[Node] = field(init=False)
    #: Their labels as columns, and the topology domains built from them.
    node_labels: NodeLabels = field(init=False)
    #: Capacity per node (nodes x dims); cordoned nodes take nothing new and count nowhere.
    cap: np.ndarray = field(init=False)
    cordoned: np.ndarray = field(init=False)
    #: Capacity of uncordoned nodes: the denominator of every cost and per-cycle fraction.
    totals: list[int] = field(init=False)
    #: Dominant-resource cost, shared with the reference so that costs compare exactly.
    costs: CostModel = field(init=False)
    #: ``costs`` in numpy form (dimensions the cluster has, their totals and multipliers),
    #: so that many candidate costs come out with the same float operations at once.
    cost_cols: np.ndarray = field(init=False)
    cost_tot: np.ndarray = field(init=False)
    cost_mult: np.ndarray = field(init=False)
    #: Gang id by row, and whether the row is in a gang (gangs are grouped from these).
    gang_ids: list[str | None] = field(init=False)
    in_gang: np.ndarray = field(init=False)
    #: Queue index by row, -1 when the queue is unknown.
    qidx: np.ndarray = field(init=False)
    #: Whether the job runs (names a node): evicted single jobs are batched on it.
    is_running: np.ndarray = field(init=False)
    #: Node index of each running job, -1 when queued or on an unknown node.
    run_node: np.ndarray = field(init=False)
    #: Class priority by row: urgency in every order and every displacement level.
    job_pcp: np.ndarray = field(init=False)
    #: Running jobs on known nodes: they hold space whatever their queue or class.
    running_rows: np.ndarray = field(init=False)
    #: Running jobs of a known queue and class: only these count towards costs and move.
    accounted: np.ndarray = field(init=False)
    #: Queued jobs of a known queue and class: demand, and the work to schedule.
    queued: np.ndarray = field(init=False)
    #: The role rules' decisions (``roles.plan``) and, per row, whether a running job is an
    #: elastic member of a role group (victims order them first); None without role groups.
    roles: RolePlan | None = None
    elastic: np.ndarray | None = None
    #: Free resources per displacement level, and the best-fit index.
    db: NodeDb = field(init=False)
    #: Index partition -> (taints, resources present): a shape scans only those it can use.
    part_info: dict[int, tuple[Any, frozenset[str]]] = field(init=False)

    # --- fairness (``queues.fair_share``) ---------------------------------------------------
    #: Weight (1 / priority factor) per queue: keys divide by it.
    q_weight: list[float] = field(init=False)
    #: Decayed usage a queue carries on top of its cost.
    q_offset: list[float] = field(init=False)
    #: Per queue, what it holds plus its evicted jobs not yet back: the basis of its fraction
    #: of fair share when victims are chosen.
    usage: list[list[int]] = field(init=False)
    #: Plain fair share per queue (0 when inactive): the excess-flow budget is charged above it.
    fair: list[float] = field(init=False)
    #: Cost each queue's infinite-lifetime jobs may reach; None without
    #: ``non_preemptible_overshoot``.
    infinite_limit: list[float] | None = None

    # --- eviction (``eviction.py``) ---------------------------------------------------------
    #: Priority at or below which a running job holding its node gives way to urgency
    #: (+inf: never).
    hold: np.ndarray = field(init=False)
    #: Running gang members -> the whole gang, which is preempted as one.
    unit_of: dict[int, list[int]] = field(init=False)
    #: Evicted running jobs: they go back to their own node or are preempted.
    evicted_mask: np.ndarray = field(init=False)
    #: Held jobs that may give way to urgency (finite ``hold``).
    displaceable: np.ndarray = field(init=False)
    #: Displaceable jobs per node, built at the first urgency preemption.
    by_node: dict[int, list[int]] | None = None
    #: Gangs and evicted gang extras, referred to from queue orders as ``-1 - index``.
    complex: list[Item] = field(default_factory=list)
    #: Evicted jobs re-placed or dropped, so no longer victims.
    ev_gone: np.ndarray = field(init=False)
    #: Per class priority, per queue: evicted jobs not yet back, per node (built on first use
    #: by victim choice, then kept up to date).
    ev_groups: dict[int, dict[int, np.ndarray]] = field(default_factory=dict)
    #: Per (hold, queue): displaceable jobs per node, valid while built at the current
    #: ``hold_epoch`` (rollbacks bump it, since they bring preempted jobs back).
    hold_epoch: int = 0
    hold_groups: tuple[int, dict[tuple[float, int], np.ndarray]] | None = None

    # --- queue allocation and limits (``queues.py``, ``limits.py``) -------------------------
    #: What each queue holds now: its cost, and so its key across queues.
    alloc: list[list[int]] = field(init=False)
    #: What each (queue, class) holds, for per-queue class caps.
    alloc_class: dict[tuple[int, str], list[int]] = field(init=False)
    #: What each queue's infinite-lifetime jobs hold (None without the overshoot option).
    alloc_infinite: list[list[int]] | None = None
    #: The excess-flow budget (thousandths of a resource-minute; None: no budget), what each
    #: queue's running and newly placed jobs hold of it, and each shape's weighted request.
    budget: int | None = None
    budget_used: list[int] = field(init=False)
    #: New jobs this cycle: their total requests, count, and count per queue (per-cycle and
    #: rate limits, and the rate tokens taken).
    new_total: list[int] = field(init=False)
    new_count: int = 0
    new_by_q: list[int] = field(init=False)
    #: New jobs the rate limits let through this cycle, globally and per queue (None: no
    #: limit).
    rate_global: int | None = None
    q_rate: list[int | None] = field(init=False)

    # --- order (``order.py``) ---------------------------------------------------------------
    #: Per queue, its items in order: a row, or ``-1 - k`` for ``complex[k]``.
    seq: list[np.ndarray] = field(init=False)
    #: Per queue and position, where the run of interchangeable items starting there ends.
    seg_end: list[np.ndarray] = field(init=False)
    #: Per queue and position, the next position that is not an evicted single job.
    next_barrier: list[np.ndarray] = field(init=False)
    #: Per queue, the position of its head.
    pos: list[int] = field(init=False)

    # --- placing (``loop.py`` and the modules it calls) ---------------------------------------
    #: Names the free space since it last grew: remembered "fits nowhere" answers
    #: (``Shape.fail``, ``gang_cache``) hold while it is unchanged, since placing only takes
    #: space. A preemption and the start of tentative work take a new, never reused, name;
    #: undoing tentative work brings back the name it started from, as the space is again
    #: what it was then.
    shrink_epoch: int = 0
    epochs_named: int = 0
    #: Gang shape -> (shrink epoch, reason) of its last failure; reason None: no domain
    #: narrower than the cluster held the topology gang.
    gang_cache: dict[tuple[Any, ...], tuple[int, str | None]] = field(default_factory=dict)
    #: (Uniformity label, maximum hops) -> the gang's topology levels, each level's domain
    #: per node (-1: none) and node rows per domain (built on first use).
    topo_cache: dict[tuple[str | None, int | None], Any] = field(default_factory=dict)
    #: Rows of running jobs preempted so far.
    preempted: set[int] = field(default_factory=set)
    #: While a gang is tried tentatively: what to undo in ``result`` and ``preempted``.
    journal: list[tuple[str, Any]] | None = None
    #: Set when a placement changed other queues' keys: the queue heap is rebuilt.
    rebuild: bool = False

    def __post_init__(self) -> None:
        self.cfg = self.snap.config
        self.jobs = self.snap.jobs

    def new_epoch(self) -> int:
        """Give the free space a new name (``shrink_epoch``); returns the one it had."""
        before = self.shrink_epoch
        self.epochs_named += 1
        self.shrink_epoch = self.epochs_named
        return before


def sum_by(target: np.ndarray, shape: np.ndarray, n: int, req: np.ndarray) -> np.ndarray:
    """Exact per-target sums of the requests of jobs (given by shape), as an (n, dims) array."""
    s = req.shape[0]
    if len(target) == 0:
        return np.zeros((n, req.shape[1]), dtype=np.int64)
    if n * s <= 4_000_000:
        counts = np.bincount(target * s + shape, minlength=n * s).reshape(n, s)
        return counts.astype(np.int64) @ req
    out = np.zeros((n, req.shape[1]), dtype=np.int64)
    np.add.at(out, target, req[shape])
    return out


def pick(values: list, rows: np.ndarray) -> list:
    """values[rows] for a Python list, at C speed."""
    if len(rows) == 0:
        return []
    if len(rows) == 1:
        return [values[int(rows[0])]]
    return list(itemgetter(*rows.tolist())(values))


def new_item(
    st: CycleState,
    kind: int,
    members: list[int],
    minimum: int,
    label: str | None,
    parent: Item | None = None,
) -> Item:
    """An item for ``members``, with its urgency (lowest member class) and total request."""
    total = st.req[st.shape_of_job[members]].sum(axis=0).tolist()
    pcp = int(min(int(st.job_pcp[i]) for i in members))
    return Item(kind, members, minimum, label, pcp, total, parent)
