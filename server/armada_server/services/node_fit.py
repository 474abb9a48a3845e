"""Refusing at submission the jobs that fit no node, even an empty one.

Upstream Armada refuses a job that no node could ever hold; so does the server, against the
nodes its live executors report (those that synced within `lease_timeout`) as the scheduler
sees them: allocatable resources, labels, taints and pool, matched by the scheduler's own rules
(`armada_core.scheduling.constraints.node_admits`). Cordons do not count: a cordon is lifted,
and the job waits meanwhile. A gang (or pod group) is refused when the nodes that can hold its
members cannot hold as many as it needs at once, or, with a uniformity label, when the nodes of
no one value of the label can. That is a necessary condition (each shape of member counted on
its own), so no gang that could be placed is refused.

The check costs a few comparisons per request whatever the cluster's size: nodes are grouped
by type (what the matching reads: resources, taints, pool and the labels the request's jobs
name), and jobs by the scheduler's shape (`Job.shape_id`); each shape is matched against each
type once.

With no executor connected yet (or none of a job's pool), nothing is known: the job is accepted
and the response says so. The server setting `accept_jobs_that_fit_no_node` accepts jobs that
fit no node as well (for clusters that scale up), and says so in the response too.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta

from google.protobuf.timestamp_pb2 import Timestamp
from sqlalchemy import bindparam, select

from armada_core import scheduling as s
from armada_core.api import submit_pb2
from armada_core.jobs import annotations as ann
from armada_core.scheduling.constraints import node_admits
from armada_core.scheduling.model import CPU, DEFAULT_RESOURCE_ORDER, MEMORY
from armada_core.scheduling.reasons import quantity
from armada_server.errors import InvalidArgument
from armada_server.scheduling.snapshot import node_view, spec_view
from armada_server.storage import schema as t
from armada_server.storage.base import Transactions
from armada_server.storage.bulk import fetch
from armada_server.storage.nodes import decode_nodes

REFRESH_SECONDS = 1.0
#: The server setting that accepts jobs fitting no node (named in notes).
SETTING = "accept_jobs_that_fit_no_node"
#: Copies of a job that requests nothing: any node holds as many as a gang can have.
_UNBOUNDED = 1 << 40

# A node type: resources, labels and taints.
_TypeKey = tuple[s.Resources, tuple[tuple[str, str], ...], tuple[s.Taint, ...]]


@dataclass(frozen=True)
class NodeType:
    """Nodes alike for the matching: `node` is one of them (its cordon lifted)."""

    node: s.Node
    count: int


@dataclass
class Cluster:
    """The live executors' nodes by type, read at one time."""

    types: tuple[NodeType, ...]
    pools: frozenset[str]
    _projected: dict[frozenset[str], tuple[NodeType, ...]] = field(default_factory=dict)

    @staticmethod
    def of(executors: Iterable[tuple[str, str, bytes]]) -> Cluster:
        """From (executor id, pool, nodes as stored) of each live executor."""
        counts: dict[_TypeKey, NodeType] = {}
        pools = set()
        for executor, pool, data in executors:
            pools.add(pool)
            for n in decode_nodes(data):
                node = replace(node_view(executor, pool, n), cordoned=False)
                key = (node.capacity, tuple(sorted(node.labels.items())), node.taints)
                found = counts.get(key)
                counts[key] = NodeType(node, 1 + (found.count if found else 0))
        return Cluster(tuple(counts.values()), frozenset(pools))

    def types_for(self, label_keys: frozenset[str]) -> tuple[NodeType, ...]:
        """The types when only `label_keys` (and the pool) are read of labels: nodes that
        differ only in other labels (their host names) are one type."""
        found = self._projected.get(label_keys)
        if found is None:
            keep = label_keys | {ann.POOL}
            merged: dict[_TypeKey, NodeType] = {}
            for nt in self.types:
                labels = {k: v for k, v in nt.node.labels.items() if k in keep}
                key = (nt.node.capacity, tuple(sorted(labels.items())), nt.node.taints)
                before = merged.get(key)
                merged[key] = NodeType(
                    replace(nt.node, labels=labels), nt.count + (before.count if before else 0)
                )
            found = self._projected[label_keys] = tuple(merged.values())
        return found


def _copies(capacity: s.Resources, requests: s.Resources) -> int:
    """How many copies of `requests` an empty node of `capacity` holds."""
    asked = [(capacity.get(k), v) for k, v in requests.items() if v > 0]
    return min((have // want for have, want in asked), default=_UNBOUNDED)


@dataclass(frozen=True)
class ShapeFit:
    """Where one shape of job can go: the node types that admit it, and how many copies an
    empty node of each holds (0: too small)."""

    job: s.Job
    matching: tuple[NodeType, ...]
    copies: tuple[int, ...]

    @staticmethod
    def of(job: s.Job, types: Sequence[NodeType]) -> ShapeFit:
        matching = tuple(nt for nt in types if node_admits(job, nt.node))
        return ShapeFit(
            job, matching, tuple(_copies(nt.node.capacity, job.requests) for nt in matching)
        )

    @property
    def fits(self) -> bool:
        return any(self.copies)

    def holds(self, where: Callable[[NodeType], bool] = lambda _: True) -> int:
        """How many copies the matching nodes (those `where` keeps) hold at once, empty."""
        return sum(
            nt.count * c for nt, c in zip(self.matching, self.copies, strict=True) if where(nt)
        )

    def largest(self) -> s.Node:
        """The matching node with the most of what the job requests (in best-fit order)."""
        dims = _dims(self.job.requests)
        return max(self.matching, key=lambda nt: [nt.node.capacity.get(d) for d in dims]).node


def _dims(requests: s.Resources) -> list[str]:
    order = {d: i for i, d in enumerate(DEFAULT_RESOURCE_ORDER)}
    return sorted(requests, key=lambda d: (order.get(d, len(order)), d))


def _amounts(values: s.Resources, dims: Iterable[str]) -> str:
    """`cpu 4, memory 16Gi`: each resource and its amount, as Kubernetes writes it."""
    return ", ".join(f"{d} {quantity(d, values.get(d))}" for d in dims)


def _largest(fit: ShapeFit) -> str:
    """The largest matching node: its cpu, memory and what else the job requests."""
    requested = [d for d in _dims(fit.job.requests) if d not in (CPU, MEMORY)]
    return f"largest matching node: {_amounts(fit.largest().capacity, [CPU, MEMORY, *requested])}"


def _single_problem(fit: ShapeFit) -> str:
    job = fit.job
    if not fit.matching:
        pool = job.node_selector.get(ann.POOL)
        where = f" of pool {pool!r}" if pool else ""
        return f"no node{where} matches its node selector, affinity and tolerations"
    node = fit.largest()
    lacking = [d for d in _dims(job.requests) if job.requests.get(d) > node.capacity.get(d)]
    return f"requests {_amounts(job.requests, lacking)} but no node can hold it ({_largest(fit)})"


@dataclass
class Verdict:
    """What a request's new jobs meet: (item index, problem) for those that fit no node, in
    item order, and notes for jobs that could not be checked."""

    unfit: list[tuple[int, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def settled(self) -> bool:
        """Every job fits (nothing that a node joining since the last read could change)."""
        return not (self.unfit or self.notes)


def _items(indexes: Sequence[int]) -> str:
    first = f"job_request_items[{indexes[0]}]"
    more = len(indexes) - 1
    return f"{first} (and {more} more like it)" if more else first


def judge(cluster: Cluster, jobs: Sequence[tuple[int, s.Job]]) -> Verdict:
    """Which of `jobs` (each with its item's index) fit no node of `cluster`."""
    verdict = Verdict()
    if not cluster.types:
        verdict.notes.append(
            "no executor has connected yet, so whether the jobs fit a node could not be "
            "checked; they wait until one connects"
        )
        return verdict
    unknown: dict[str, list[int]] = defaultdict(list)
    known: list[tuple[int, s.Job]] = []
    for index, job in jobs:
        pool = job.node_selector.get(ann.POOL)
        if pool is not None and pool not in cluster.pools:
            unknown[pool].append(index)
        else:
            known.append((index, job))
    for pool, indexes in sorted(unknown.items()):
        verdict.notes.append(
            f"no executor of pool {pool!r} has connected, so whether {_items(indexes)} "
            "fit a node could not be checked; they wait until one connects"
        )
    types = cluster.types_for(_label_keys(job for _, job in known))
    fits: dict[int, ShapeFit] = {}
    gangs: dict[str, list[tuple[int, s.Job]]] = defaultdict(list)
    for index, job in known:
        fit = fits.get(job.shape_id)
        if fit is None:
            fit = fits[job.shape_id] = ShapeFit.of(job, types)
        if not fit.fits:
            verdict.unfit.append((index, _single_problem(fit)))
        elif job.gang_id is not None and job.gang_cardinality > 1:
            gangs[job.gang_id].append((index, job))
    for gang_id, members in gangs.items():
        problem = _gang_problem(gang_id, members, fits)
        if problem is not None:
            verdict.unfit.append(problem)
    verdict.unfit.sort()
    return verdict


def _label_keys(jobs: Iterable[s.Job]) -> frozenset[str]:
    """The node labels the matching of `jobs` reads."""
    keys: set[str] = set()
    for job in jobs:
        keys.update(job.node_selector)
        keys.update(r.key for term in job.affinity for r in term.match_expressions)
        if job.gang_uniformity_label:
            keys.add(job.gang_uniformity_label)
    return frozenset(keys)


def _needed(members: Sequence[tuple[int, s.Job]]) -> dict[int, int]:
    """Per shape, how many of the gang's members of that shape must be placed at once, at
    least: its minimum (each role's, for a pod group), less the members that may be of
    other shapes (those of the request, and those the request does not carry)."""
    first = members[0][1]
    elsewhere = first.gang_cardinality - len(members)
    by_role: dict[str | None, list[s.Job]] = defaultdict(list)
    for _, job in members:
        by_role[job.gang_role].append(job)
    need: dict[int, int] = defaultdict(int)
    for role, jobs in by_role.items():
        minimum = (jobs[0].gang_role_min or 0) if role is not None else first.min_cardinality
        for shape in {j.shape_id for j in jobs}:
            others = sum(1 for j in jobs if j.shape_id != shape)
            need[shape] += max(0, minimum - elsewhere - others)
    return need


def _gang_problem(
    gang_id: str, members: Sequence[tuple[int, s.Job]], fits: dict[int, ShapeFit]
) -> tuple[int, str] | None:
    """(item index, problem) when the nodes cannot hold the members the gang needs."""
    need = {shape: n for shape, n in _needed(members).items() if n > 0}
    label = members[0][1].gang_uniformity_label
    first: dict[int, int] = {}
    for index, job in members:
        first.setdefault(job.shape_id, index)
    for shape, n in sorted(need.items(), key=lambda sn: first[sn[0]]):
        fit = fits[shape]
        held = fit.holds()
        if held < n:
            return first[shape], (
                f"gang {gang_id!r} needs {n} members requesting "
                f"{_amounts(fit.job.requests, _dims(fit.job.requests))} each at once, but the "
                f"nodes that can hold one hold at most {held} ({_largest(fit)})"
            )
    if label is None or not need:
        return None
    return _uniform_problem(gang_id, label, need, fits, first)


def _labelled(label: str, value: str, nt: NodeType) -> bool:
    return nt.node.labels.get(label) == value


def _uniform_problem(
    gang_id: str,
    label: str,
    need: dict[int, int],
    fits: dict[int, ShapeFit],
    first: dict[int, int],
) -> tuple[int, str] | None:
    """(item index, problem) when the nodes of no one value of `label` hold what the gang
    needs; else None."""
    values = sorted(
        {v for fit in fits.values() for nt in fit.matching if (v := nt.node.labels.get(label))}
    )
    shape = min(need, key=lambda sh: first[sh])
    best: tuple[int, str] | None = None
    for value in values:
        on_value = functools.partial(_labelled, label, value)
        held = {sh: fits[sh].holds(on_value) for sh in need}
        if all(held[sh] >= n for sh, n in need.items()):
            return None
        if best is None or held[shape] > best[0]:
            best = (held[shape], value)
    fit = fits[shape]
    wanted = (
        f"gang {gang_id!r} needs {need[shape]} members requesting "
        f"{_amounts(fit.job.requests, _dims(fit.job.requests))} each on nodes sharing one "
        f"value of label {label!r}"
    )
    if best is None:
        return first[shape], f"{wanted}, but no node that can hold one has that label"
    return first[shape], (
        f"{wanted}, but the nodes of any one value hold too few (at most {best[0]}, "
        f"{label}={best[1]})"
    )


# A spec without what its view does not read -> its view, across requests: orchestrators
# send the same job again and again, a request of one job each time.
_VIEWS: dict[bytes, s.Job] = {}
_VIEWS_KEPT = 4096


def _views(specs: Sequence[tuple[int, submit_pb2.Job]]) -> list[tuple[int, s.Job]]:
    """The scheduler's view of each spec, converted once per distinct spec: jobs mostly
    differ only in their ids, client ids, job sets and creation times, which the view does
    not read (nor does `judge` read the view's id)."""
    views = _VIEWS
    out: list[tuple[int, s.Job]] = []
    last: submit_pb2.Job | None = None
    view: s.Job | None = None
    for index, spec in specs:
        # Jobs made from items alike share one spec object (storage's AlikeJobs).
        if spec is not last or view is None:
            key = _key(spec)
            view = views.get(key)
            if view is None:
                if len(views) >= _VIEWS_KEPT:
                    views.clear()
                view = views[key] = spec_view(spec)
            last = spec
        out.append((index, view))
    return out


def _key(spec: submit_pb2.Job) -> bytes:
    """`spec` serialised without its id, client id, job set and creation time."""
    job_id, client_id, job_set = spec.id, spec.client_id, spec.job_set_id
    created = Timestamp()
    stamped = spec.HasField("created")
    if stamped:
        created.CopyFrom(spec.created)
        spec.ClearField("created")
    spec.id = spec.client_id = spec.job_set_id = ""
    try:
        return spec.SerializeToString(deterministic=True)
    finally:
        spec.id, spec.client_id, spec.job_set_id = job_id, client_id, job_set
        if stamped:
            spec.created.CopyFrom(created)


# The live executors' nodes (built once: with no executor connected, every check reads them).
_LIVE_NODES = (
    select(t.executors.c.id, t.executors.c.pool, t.executors.c.nodes)
    .where(t.executors.c.last_seen >= bindparam("cutoff"))
    .order_by(t.executors.c.id)
)


class NodeFit:
    """The live executors' nodes by type, cached for `refresh` seconds (read again before a
    job is refused or said unchecked, so a node that just joined is never missed), and the
    check."""

    def __init__(
        self,
        transactions: Transactions,
        *,
        executor_timeout: float,
        refresh: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._tx = transactions
        self.executor_timeout = executor_timeout
        self.refresh = REFRESH_SECONDS if refresh is None else refresh
        self.clock = clock
        self._lock = threading.Lock()
        self._read_at = -float("inf")
        self._reads = 0  # reads of the executors' nodes so far
        self._cluster = Cluster((), frozenset())

    def cluster(self, *, fresh: bool = False) -> Cluster:
        """The nodes by type (blocking: call off the event loop). Read again when older
        than `refresh`, when `fresh`, or when no executor was connected."""
        with self._lock:
            stale = self.clock() - self._read_at >= self.refresh
            if fresh or stale or not self._cluster.types:
                self._cluster = self._read()
                self._read_at = self.clock()
                self._reads += 1
            return self._cluster

    def _read(self) -> Cluster:
        cutoff = self._tx.clock() - timedelta(seconds=self.executor_timeout)
        with self._tx.read() as conn:
            rows = fetch(conn, _LIVE_NODES, {"cutoff": cutoff})
        return Cluster.of((executor, pool, nodes) for executor, pool, nodes in rows)

    def check(self, specs: Sequence[tuple[int, submit_pb2.Job]], *, accept: bool) -> list[str]:
        """Notes for the response about `specs` (the new jobs of a request, with their items'
        indexes). Raises InvalidArgument naming the first job that fits no node, unless
        `accept`: then each (with the jobs like it) gets a note."""
        jobs = _views(specs)
        reads = self._reads
        verdict = judge(self.cluster(), jobs)
        if not verdict.settled and self._reads == reads:
            # Not read for this check: perhaps a node (or an executor) joined since the
            # last read. (With no executor connected every check reads, once.)
            verdict = judge(self.cluster(fresh=True), jobs)
        if verdict.unfit and not accept:
            index, problem = verdict.unfit[0]
            raise InvalidArgument(
                f"job_request_items[{index}]: {problem} (the server setting {SETTING} accepts "
                "such jobs, for a cluster that adds nodes)"
            )
        by_problem: dict[str, list[int]] = defaultdict(list)
        for index, problem in verdict.unfit:
            by_problem[problem].append(index)
        accepted = [
            f"{_items(indexes)}: {problem}; accepted ({SETTING}): it waits until a node that "
            "can hold it joins"
            for problem, indexes in by_problem.items()
        ]
        return verdict.notes + accepted
