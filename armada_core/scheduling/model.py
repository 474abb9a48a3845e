"""Immutable inputs and outputs of one scheduling cycle.

Quantities are integers (milli-CPU for ``cpu``, base units such as bytes for everything else)
so that both scheduler implementations compare resources exactly.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Generic, TypeVar

CPU = "cpu"
MEMORY = "memory"
GPU = "nvidia.com/gpu"
EPHEMERAL_STORAGE = "ephemeral-storage"

#: Best-fit compares free resources in this order; other resources follow, sorted by name.
DEFAULT_RESOURCE_ORDER: tuple[str, ...] = (CPU, MEMORY, GPU, EPHEMERAL_STORAGE)

_SUFFIXES: dict[str, Fraction] = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
_QUANTITY = re.compile(
    r"^([+-]?[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?)$"
)


# Exponents beyond this are refused: "1e99999999" would take minutes to expand exactly.
MAX_EXPONENT = 30


def parse_quantity(value: str | int | float, *, milli: bool = False) -> int:
    """Parse a Kubernetes quantity ("500m", "4Gi", "1e3") into an integer.

    With ``milli`` the result is in thousandths (how CPU is stored). Fractions are rounded up,
    as Kubernetes does, so that a request is never under-counted.
    """
    if isinstance(value, str):
        return _parse_text(value, milli)  # memoised: real workloads repeat a few quantities
    if isinstance(value, bool):
        raise ValueError(f"invalid quantity {value!r}")
    if isinstance(value, int):
        amount = Fraction(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"invalid quantity {value!r}")
        amount = Fraction(value)
    else:
        raise ValueError(f"invalid quantity {value!r}")
    return _finish(amount, value, milli)


@functools.lru_cache(maxsize=4096)
def _parse_text(value: str, milli: bool) -> int:
    text = value.strip()
    match = _QUANTITY.match(text)
    if match is None:
        raise ValueError(f"invalid quantity {value!r}")
    number, suffix = match.groups()
    exponent = number.lower().partition("e")[2]
    if exponent and abs(int(exponent)) > MAX_EXPONENT:
        raise ValueError(f"invalid quantity {value!r}: exponent beyond {MAX_EXPONENT}")
    # "1e3" is an exponent, but "1E" alone would be exa: the regex already prefers the
    # exponent form when digits follow the E.
    return _finish(Fraction(number) * _SUFFIXES[suffix], value, milli)


def _finish(amount: Fraction, value: object, milli: bool) -> int:
    if amount < 0:
        raise ValueError(f"negative quantity {value!r}")
    if milli:
        amount *= 1000
    return math.ceil(amount)


class Resources(Mapping[str, int]):
    """An immutable, hashable resource vector; absent resources are zero."""

    __slots__ = ("_hash", "_items", "_map")

    def __init__(self, values: Mapping[str, int] | Iterable[tuple[str, int]] = (), **kw: int):
        data = dict(values)
        data.update(kw)
        for name, qty in data.items():
            if not isinstance(qty, int) or isinstance(qty, bool):
                raise TypeError(f"resource {name!r} must be an integer quantity, got {qty!r}")
            if qty < 0:
                raise ValueError(f"resource {name!r} must not be negative")
        self._items = tuple(sorted((k, v) for k, v in data.items() if v != 0))
        self._map = dict(self._items)
        self._hash = hash(self._items)

    @classmethod
    def from_k8s(cls, values: Mapping[str, str | int | float]) -> Resources:
        """Map a pod's resource list onto the model (CPU to milli-CPU, the rest to base units)."""
        return cls({k: parse_quantity(v, milli=(k == CPU)) for k, v in values.items()})

    def __getitem__(self, key: str) -> int:
        return self._map[key]

    def get(self, key: str, default: Any = 0) -> Any:  # absent resources read as zero
        return self._map.get(key, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._map)

    def __len__(self) -> int:
        return len(self._map)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Resources):
            return self._items == other._items
        if isinstance(other, Mapping):
            return self._map == {k: v for k, v in other.items() if v != 0}
        return NotImplemented

    def __add__(self, other: Mapping[str, int]) -> Resources:
        out = dict(self._map)
        for k, v in other.items():
            out[k] = out.get(k, 0) + v
        return Resources(out)

    def __repr__(self) -> str:
        return f"Resources({self._map!r})"

    @property
    def items_tuple(self) -> tuple[tuple[str, int], ...]:
        return self._items


def resources(**values: str | int) -> Resources:
    """Convenience constructor taking Kubernetes quantities: ``resources(cpu="1", memory="4Gi")``.

    Keyword names cannot contain "/" or "-", so ``gpu`` and ``ephemeral_storage`` are accepted
    as aliases for ``nvidia.com/gpu`` and ``ephemeral-storage``.
    """
    aliases = {"gpu": GPU, "ephemeral_storage": EPHEMERAL_STORAGE}
    return Resources.from_k8s({aliases.get(k, k): v for k, v in values.items()})


# --- Kubernetes scheduling constraints ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"  # NoSchedule | PreferNoSchedule | NoExecute


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""  # empty key with operator Exists tolerates every taint
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # empty matches every effect


NODE_SELECTOR_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist | Gt | Lt
    values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # Refused here, where one job is converted, rather than while matching nodes, where
        # it would stop the whole cycle.
        if self.operator not in NODE_SELECTOR_OPERATORS:
            raise ValueError(
                f"node selector operator {self.operator!r} is not one of "
                f"{', '.join(sorted(NODE_SELECTOR_OPERATORS))}"
            )


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Requirements that must all hold; the terms of an affinity are alternatives."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()


# --- cluster and queue configuration ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PriorityClass:
    name: str
    priority: int
    #: isFairSharePreemptible: evicted at the start of each cycle and urgency-preemptible.
    preemptible: bool = False
    #: Per queue cap, as a fraction of the cluster, on resources held by jobs of this class.
    max_fraction_per_queue: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Queue:
    name: str
    priority_factor: float = 1.0
    cordoned: bool = False
    #: Decayed usage (DRF cost units) carried from earlier cycles; used only with a half-life.
    decayed_usage: float = 0.0

    @property
    def weight(self) -> float:
        return 1.0 / self.priority_factor


@dataclass(frozen=True, slots=True)
class Node:
    id: str
    capacity: Resources
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    cordoned: bool = False


@dataclass(frozen=True, slots=True)
class Job:
    id: str
    queue: str
    priority_class: str
    requests: Resources = field(default_factory=Resources)
    #: Lower numbers are scheduled first, as in Armada.
    priority: int = 0
    submit_time: float = 0.0
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    #: Required node affinity: the job fits a node matching any one term.
    affinity: tuple[NodeSelectorTerm, ...] = ()
    #: Node the job must not be placed on (retries avoiding the node that failed them).
    avoid_node: str | None = None
    gang_id: str | None = None
    gang_cardinality: int = 1
    gang_min_cardinality: int | None = None
    gang_uniformity_label: str | None = None
    #: Most hops allowed between any two members (``SchedulingConfig.topology_levels``);
    #: None: as close as the gang fits. Members of a gang agree on it.
    gang_max_hops: int | None = None
    #: Elastic pod groups (SEMANTICS.md, "Elastic pod groups"): the member's role in its
    #: gang and that role's minimum; a role's maximum is the members submitted with it.
    gang_role: str | None = None
    gang_role_min: int | None = None
    #: Most hops allowed between any two members of the member's role (SEMANTICS.md,
    #: "Topology per sub-group"); None: the gang's ``gang_max_hops``, which in a pod group
    #: bounds each role, not the group as a whole. Members of a role agree on it.
    gang_role_max_hops: int | None = None
    #: Roles of the member's group (name, minimum) that the caller knows of beyond those its
    #: members in the snapshot carry: a role whose members all ended still counts as below
    #: its minimum. The caller keeps them (the server in the leader's memory).
    gang_roles: tuple[tuple[str, int], ...] = ()
    #: Members of the member's group that SUCCEEDED, per role (name, count): they did their
    #: part, so they count towards their role's minimum beside the running ones. The
    #: snapshot holds only queued and running jobs, so the caller tells (the server reads
    #: them from storage); members of a group agree, else the largest count counts.
    gang_succeeded: tuple[tuple[str, int], ...] = ()
    #: Seconds after its start at which the job becomes fair-share preemptible.
    lifetime: float | None = None
    start_time: float | None = None
    #: Node the job runs on; None for a queued job.
    node: str | None = None
    #: What this running job holds of its queue's excess-flow budget, in thousandths of a
    #: resource-minute: the charge ``SchedulingResult.excess_flow`` gave it when it was
    #: placed. The scheduler is pure, so the caller carries it while the job runs; the
    #: budget comes back when the job leaves.
    excess_flow: int = 0
    #: Interned id of everything that decides where the job can go (see ``shape_key``).
    shape_id: int = field(init=False, repr=False, compare=False, default=-1)
    #: Interned id of the shape, queue, and whether the job runs and is in a gang
    #: (``kind_key``): a cycle reads these of every job, in one pass over this one field.
    kind_id: int = field(init=False, repr=False, compare=False, default=-1)
    #: This object's number, never given to another (``next_serial``). A job is immutable,
    #: so what a cycle read of it holds as long as the object lives: later cycles find the
    #: columns they read by it (``fast/job_columns.py``). Whatever makes a Job without its
    #: ``__init__`` gives it a new one.
    serial: int = field(init=False, repr=False, compare=False, default=-1)

    def __post_init__(self) -> None:
        if not isinstance(self.requests, Resources):
            object.__setattr__(self, "requests", Resources(self.requests))
        object.__setattr__(self, "shape_id", intern_shape(shape_key(self)))
        object.__setattr__(self, "kind_id", intern_kind(kind_key(self)))
        object.__setattr__(self, "serial", next_serial())

    @property
    def min_cardinality(self) -> int:
        if self.gang_min_cardinality is None:
            return self.gang_cardinality
        return self.gang_min_cardinality

    @property
    def is_running(self) -> bool:
        return self.node is not None


def shape_key(job: Job) -> tuple[Any, ...]:
    """Everything about a job that decides which nodes it fits; equal keys place alike."""
    return (
        job.requests,
        tuple(sorted(job.node_selector.items())),
        job.tolerations,
        job.affinity,
        job.avoid_node,
        job.priority_class,
    )


#: A new serial (``Job.serial``): a count's next is atomic, so threads never share one.
next_serial = itertools.count().__next__

K = TypeVar("K", bound=tuple[Any, ...])


class _Interned(Generic[K]):
    """Gives each distinct key a small integer, so cycles can group jobs by it cheaply.

    The table only grows; it holds one entry per distinct key ever seen, which stays small
    for real workloads (shapes and kinds repeat across millions of jobs). Jobs are made on
    several threads (submissions, the scheduling loop): a new key takes a lock, else two
    keys could take one number; a key is listed before its number is published.
    """

    __slots__ = ("ids", "keys", "lock")

    def __init__(self) -> None:
        self.ids: dict[K, int] = {}
        self.keys: list[K] = []
        self.lock = threading.Lock()

    def intern(self, key: K) -> int:
        found = self.ids.get(key)
        if found is None:
            with self.lock:
                found = self.ids.get(key)
                if found is None:
                    self.keys.append(key)
                    found = self.ids[key] = len(self.keys) - 1
        return found


_SHAPES: _Interned[tuple[Any, ...]] = _Interned()
#: The shape id of a shape key.
intern_shape = _SHAPES.intern


def shape_of(shape_id: int) -> tuple[Any, ...]:
    return _SHAPES.keys[shape_id]


#: A job's kind: (shape id, queue, running, in a gang, with a lifetime).
KindKey = tuple[int, str, bool, bool, bool]


def kind_key(job: Job) -> KindKey:
    """What a cycle groups every job by, beside its id, priority and times. No per-job value
    (an id, a priority, a time) is part of it, so kinds stay few: shapes x queues x 8."""
    return (
        job.shape_id,
        job.queue,
        job.node is not None,
        job.gang_id is not None,
        job.lifetime is not None,
    )


_KINDS: _Interned[KindKey] = _Interned()
#: The kind id of a kind key.
intern_kind = _KINDS.intern


def kinds_of(kind_ids: list[int]) -> list[KindKey]:
    """The keys of interned kinds."""
    keys = _KINDS.keys
    return [keys[k] for k in kind_ids]


@dataclass(frozen=True, slots=True)
class SchedulingConfig:
    """The scheduler's options. Each field's `doc` (``field(metadata={"doc": ...})``) is its
    documentation for users, written for the server's config file (YAML: `null` for None):
    the server's `scheduling:` block is derived from these fields
    (``armada_server.config.SchedulingSettings``) and the options table of
    docs/configuration.md is generated from them (scripts/generate_config_docs.py)."""

    # None: the resources present in the snapshot, in DEFAULT_RESOURCE_ORDER then by name.
    resource_names: tuple[str, ...] | None = field(
        default=None,
        metadata={
            "doc": "The order in which best fit compares free resources: list the scarce "
            "resource first to pack it tightest; resources not listed follow. Names unique. "
            "`null`: `cpu`, `memory`, `nvidia.com/gpu`, `ephemeral-storage`, then the others by "
            "name."
        },
    )
    resource_multipliers: Mapping[str, float] = field(
        default_factory=dict,
        metadata={
            "doc": "Fair-share cost multiplier per resource: a queue's dominant share is the "
            "largest of held × multiplier / cluster total; 0 leaves a resource out of "
            "fairness. Each a number at least 0; a resource not listed counts 1."
        },
    )
    protected_fraction: float | None = field(
        default=1.0,
        metadata={
            "doc": "Queues at or below this fraction of their fair share keep their running "
            "jobs; each cycle, the preemptible jobs of queues above it are evicted and placed "
            "again by fair share. A number at least 0; `null`: no queue is protected."
        },
    )
    max_jobs_per_cycle: int | None = field(
        default=None,
        metadata={
            "doc": "New jobs leased per cycle; evicted jobs placed back on their node do not "
            "count, and a gang that would cross the cap waits whole. A whole number at least "
            "0; `null`: no cap."
        },
    )
    max_fraction_per_cycle: Mapping[str, float] = field(
        default_factory=dict,
        metadata={
            "doc": "Per resource, the fraction of the cluster that new jobs may take in one "
            "cycle, each between 0 and 1. Empty: no cap."
        },
    )
    usage_half_life: float | None = field(
        default=None,
        metadata={
            "doc": "Seconds: fairness is on each queue's usage with its past usage, which is "
            "halved every this many seconds. A number above 0; `null`: fairness on what queues "
            "hold now."
        },
    )
    max_queue_lookback: int | None = field(
        default=None,
        metadata={
            "doc": "Queued jobs of each queue considered per cycle, in the queue's order (a "
            "gang starting within them is considered whole). A whole number at least 1; `null`: "
            "every queued job."
        },
    )
    # The global bucket's level at ``now`` travels in ``Snapshot.rate_tokens``.
    scheduling_rate: float | None = field(
        default=None,
        metadata={
            "doc": "New jobs leased per second, all queues together: a token bucket (evicted "
            "jobs placed back on their node take no token). A number above 0; `null`: no limit."
        },
    )
    scheduling_burst: int | None = field(
        default=None,
        metadata={
            "doc": "The global bucket's size (it starts full). A whole number at least 1; "
            "`null`: the rate rounded up."
        },
    )
    # Each queue's bucket level at ``now`` travels in ``Snapshot.queue_rate_tokens``.
    queue_scheduling_rate: float | None = field(
        default=None,
        metadata={
            "doc": "New jobs leased per second by each queue: one token bucket per queue, "
            "with the same rate and size for every queue. A number above 0; `null`: no limit."
        },
    )
    queue_scheduling_burst: int | None = field(
        default=None,
        metadata={
            "doc": "Each queue's bucket size. A whole number at least 1; `null`: the rate "
            "rounded up."
        },
    )
    # SEMANTICS.md, "Topology".
    topology_levels: tuple[str, ...] = field(
        default=(),
        metadata={
            "doc": "Node labels naming the levels of the network's topology, widest first "
            "(e.g. `topology/block`, `topology/rack`; `kubernetes.io/hostname` may come last "
            "for the node itself). Gangs are placed in the narrowest domain that holds them, "
            "within their `gangMaxHops` (a pod group's roles each, within their own limit). "
            "Labels unique. Empty: no topology."
        },
    )
    # Infinite lifetime: a class that is not preemptible and no ``lifetime``.
    non_preemptible_overshoot: float | None = field(
        default=None,
        metadata={
            "doc": "A queue's jobs of infinite lifetime (never preempted) may cost at most its "
            "fair share times (1 + this), e.g. 0.2: 20% above it. A number at least 0; `null`: "
            "no limit."
        },
    )
    excess_flow_budget: float | None = field(
        default=None,
        metadata={
            "doc": "Resource-minutes each queue may hold above its fair share with jobs of "
            "finite lifetime: each such job charges its lifetime × weighted requests until it "
            "leaves. A number at least 0; `null`: no limit."
        },
    )
    excess_flow_weights: Mapping[str, float] = field(
        default_factory=dict,
        metadata={
            "doc": "What one unit of each resource (a core, a GiB of a byte resource, a "
            "device) weighs in the excess-flow budget, relative to one CPU core. Each a number "
            "at least 0; `cpu` 1 and every other resource 0 unless given."
        },
    )
    # SEMANTICS.md, "Lifetimes": which fair share the two limits above measure against.
    lifetime_limits_count_all_queues: bool = field(
        default=False,
        metadata={
            "doc": "Which fair share `non_preemptible_overshoot` and `excess_flow_budget` "
            "measure a queue against. `false`: its weight over the weights of the queues with "
            "queued or running jobs, as upstream Armada does, so a queue alone in the cluster "
            "meets neither limit. `true`: its weight over the weights of every queue, seed "
            "004's fair share, so a queue alone holds at most its share plus the overshoot "
            "with jobs that are never preempted, and spends its budget above its share with "
            "jobs of finite lifetime."
        },
    )


@dataclass(frozen=True, slots=True, eq=False)
class KnownSerials:
    """Each of `jobs`' ``Job.serial``, from a caller that keeps them between cycles (a busy
    cluster's running jobs are mostly the last cycle's, and reading each one's serial was
    the one walk a cycle made over every job). Read for that very tuple only: a snapshot
    made with other jobs reads its own."""

    jobs: tuple[Job, ...]
    serials: Any  # a numpy array of int64, one per job


@dataclass(frozen=True, slots=True)
class Snapshot:
    queues: tuple[Queue, ...]
    priority_classes: tuple[PriorityClass, ...]
    nodes: tuple[Node, ...]
    jobs: tuple[Job, ...]
    config: SchedulingConfig = field(default_factory=SchedulingConfig)
    #: Current time, for job lifetimes.
    now: float = 0.0
    #: Seconds since each queue's ``decayed_usage`` was recorded.
    usage_elapsed: float = 0.0
    #: Tokens in the global rate-limit bucket at ``now``; None: a full bucket. The scheduler
    #: is a pure function, so the caller carries the bucket between cycles (``ratelimit``).
    rate_tokens: float | None = None
    #: Tokens in each queue's bucket at ``now``; a queue absent has a full bucket.
    queue_rate_tokens: Mapping[str, float] = field(default_factory=dict)
    #: The jobs' serials, when the caller has them (``KnownSerials``).
    serials: KnownSerials | None = field(default=None, compare=False, repr=False)


class Reasons(Mapping[str, str]):
    """Why each job was left queued, recorded by reason: a cycle leaves most of a million
    queued jobs unscheduled for a handful of reasons, and the server writes them one reason
    at a time, so building a million-entry dict (and regrouping it) would cost more than the
    cycle's decisions. Read as a mapping of job id to reason; a job is recorded at most once
    per cycle (checked by the scheduler's invariant tests)."""

    __slots__ = ("_flat", "_groups")

    def __init__(self, items: Mapping[str, str] | None = None) -> None:
        self._groups: dict[str, list[str]] = {}
        self._flat: dict[str, str] | None = None
        for job_id, reason in (items or {}).items():
            self[job_id] = reason

    def __setitem__(self, job_id: str, reason: str) -> None:
        self.add_many([job_id], reason)

    def add_many(self, job_ids: Iterable[str], reason: str) -> None:
        group = self._groups.get(reason)
        if group is None:
            group = self._groups[reason] = []
        group.extend(job_ids)
        self._flat = None

    def groups(self) -> Mapping[str, list[str]]:
        """Job ids by reason, in the order recorded."""
        return self._groups

    def _by_job(self) -> dict[str, str]:
        if self._flat is None:
            flat: dict[str, str] = {}
            for reason, ids in self._groups.items():
                flat.update(dict.fromkeys(ids, reason))
            self._flat = flat
        return self._flat

    def __getitem__(self, job_id: str) -> str:
        return self._by_job()[job_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_job())

    def __len__(self) -> int:
        return len(self._by_job())

    def __repr__(self) -> str:
        return f"Reasons({self._by_job()!r})"


@dataclass(frozen=True, slots=True)
class QueueFigures:
    """Where an active queue stood as the cycle weighed it (``fairness.queue_figures``):
    the figures reports show are these, not a second computation beside the cycle."""

    #: 1 / priority factor.
    weight: float
    #: Its weight over the active queues' total weight.
    fair_share: float
    #: Fair share capped at demand, what it cannot use handed to the others by weight.
    adjusted_fair_share: float
    #: DRF cost of what it held when the cycle began (its actual share).
    share: float
    #: DRF cost of what it held plus what it had queued.
    demand: float
    #: What it held when the cycle began, per resource (the cycle's dimensions).
    held: Mapping[str, int]
    #: Decayed usage carried from earlier cycles (0 without ``usage_half_life``).
    decayed_usage: float
    #: Cost its past usage added to its progressive-filling key this cycle.
    usage_offset: float


@dataclass(slots=True)
class SchedulingResult:
    #: Queued jobs to start, with their node.
    scheduled: dict[str, str] = field(default_factory=dict)
    #: Running jobs to stop.
    preempted: set[str] = field(default_factory=set)
    #: Why some of ``preempted`` go, when more than "preempted by the scheduler" is known
    #: (members of a pod group with a role below its minimum). Decided by ``roles.plan``,
    #: which both implementations share, so ``decisions`` leaves it out.
    preempt_reasons: dict[str, str] = field(default_factory=dict)
    #: Queued jobs that can never run as submitted (or gang members above what was placed).
    failed: dict[str, str] = field(default_factory=dict)
    #: Why each queued job left queued was not scheduled this cycle.
    unscheduled: Reasons = field(default_factory=Reasons)
    #: DRF cost of every queue once the decisions are applied (input to decayed usage).
    queue_costs: dict[str, float] = field(default_factory=dict)
    #: Rate-limit tokens taken per queue: its new jobs scheduled (queues with none absent).
    rate_consumed: dict[str, int] = field(default_factory=dict)
    #: Scheduled jobs charged to their queue's excess-flow budget, with the charge (thousandths
    #: of a resource-minute); the caller gives it back as ``Job.excess_flow`` while they run.
    excess_flow: dict[str, int] = field(default_factory=dict)
    #: How the cycle weighed each active queue (queues with queued or running jobs).
    queue_figures: dict[str, QueueFigures] = field(default_factory=dict)
    #: The capacity the cycle's costs are shares of, per resource (its cost model's totals).
    capacity: dict[str, int] = field(default_factory=dict)

    def decisions(self) -> tuple[Any, ...]:
        """Everything two implementations must agree on, in comparable form."""
        return (
            dict(sorted(self.scheduled.items())),
            sorted(self.preempted),
            dict(sorted(self.failed.items())),
            dict(sorted(self.unscheduled.items())),
            dict(sorted(self.queue_costs.items())),
            dict(sorted(self.rate_consumed.items())),
            dict(sorted(self.excess_flow.items())),
            dict(sorted(self.queue_figures.items())),
            dict(sorted(self.capacity.items())),
        )
