"""Inputs and units (SEMANTICS.md): the snapshot indexed as numpy arrays.

Jobs are grouped by interned shape, so requests, classes and constraints are looked at once
per shape; per-job facts are columns gathered once per cycle.
"""

from __future__ import annotations

import operator
from collections import defaultdict
from itertools import repeat
from operator import attrgetter

import numpy as np

from .. import reasons
from ..constraints import node_order
from ..fairness import CostModel
from ..model import DEFAULT_RESOURCE_ORDER, Job, Snapshot, shape_of
from ..nodedb import NodeDb
from ..roles import plan
from ..topology import NodeLabels
from .state import CycleState, Shape, pick


def index_inputs(st: CycleState) -> None:
    """Index classes, queues, shapes, nodes and jobs; fail queued jobs that can never run.

    Only what the steady-state check needs: the rest (``index_for_placing``) waits until
    the cycle is known to place anything.
    """
    snap = st.snap
    st.pcs = {pc.name: pc for pc in snap.priority_classes}
    st.queues = {q.name: q for q in snap.queues}
    st.qnames = sorted(st.queues)
    st.class_names = sorted(st.pcs)
    _index_shapes(st)
    _index_gangs(st)
    _index_nodes(st)
    _index_jobs(st)


def index_for_placing(st: CycleState) -> None:
    """Job ids, and the node index partitioned by taints and the resources nodes have (a
    shape scans only the partitions it tolerates and whose nodes have what it requests)."""
    st.ids = list(map(attrgetter("id"), st.jobs))
    part_keys: dict[tuple, int] = {}
    part_list = [-1] * len(st.nodes)
    present = (st.cap > 0).tolist()
    dim_sets: dict[tuple, frozenset] = {}
    for i, n in enumerate(st.nodes):
        if n.cordoned:
            continue
        flags = tuple(present[i])
        dims_present = dim_sets.get(flags)
        if dims_present is None:
            dims_present = frozenset(d for d, f in zip(st.dims, flags, strict=True) if f)
            dim_sets[flags] = dims_present
        part_list[i] = part_keys.setdefault((n.taints, dims_present), len(part_keys))
    partition = np.array(part_list, dtype=np.int64)
    st.part_info = {v: k for k, v in part_keys.items()}
    st.db = NodeDb(st.cap, partition, ~st.cordoned)


def _dims(snapshot: Snapshot, shape_keys: list[tuple]) -> tuple[str, ...]:
    """Resource dimensions: the configured (or default) order, then any other seen, sorted."""
    names: set[str] = set()
    for node in snapshot.nodes:
        names.update(node.capacity)
    for key in shape_keys:
        names.update(key[0])
    order = snapshot.config.resource_names
    known = list(order) if order is not None else [n for n in DEFAULT_RESOURCE_ORDER if n in names]
    return tuple(known + sorted(names - set(known)))


def _index_shapes(st: CycleState) -> None:
    jobs = st.jobs
    shape_ids = np.fromiter(map(attrgetter("shape_id"), jobs), dtype=np.int64, count=len(jobs))
    top = int(shape_ids.max()) + 1 if len(shape_ids) else 0
    if top <= 4 * len(shape_ids) + 4096:
        # Interned ids are small integers: a lookup table numbers them without a sort.
        present = np.zeros(top, dtype=bool)
        present[shape_ids] = True
        uniq = np.flatnonzero(present)
        number = np.zeros(top, dtype=np.int64)
        number[uniq] = np.arange(len(uniq))
        st.shape_of_job = number[shape_ids]
    else:
        uniq, local = np.unique(shape_ids, return_inverse=True)
        st.shape_of_job = local.reshape(-1)
    keys = [shape_of(int(s)) for s in uniq.tolist()]
    st.shape_keys = keys
    st.dims = dims = _dims(st.snap, keys)
    st.shapes = []
    req = np.zeros((len(keys), len(dims)), dtype=np.int64)
    for k, key in enumerate(keys):
        row = np.array([key[0].get(d, 0) for d in dims], dtype=np.int64)
        sh = Shape(row, key[5], st.pcs.get(key[5]))
        req[k] = row
        st.shapes.append(sh)
    st.req = req
    st.shape_pcp = np.array([sh.pcp for sh in st.shapes], dtype=np.int64)
    st.shape_known = np.array([sh.pc_known for sh in st.shapes], dtype=bool)


def _index_gangs(st: CycleState) -> None:
    st.gang_ids = list(map(attrgetter("gang_id"), st.jobs))
    st.in_gang = np.fromiter(
        map(operator.is_not, st.gang_ids, repeat(None)), dtype=bool, count=len(st.jobs)
    )


def _index_nodes(st: CycleState) -> None:
    """Nodes in tie-break order, their capacity, and the cluster totals costs divide by."""
    jobs = st.jobs
    labels = {jobs[i].gang_uniformity_label for i in np.flatnonzero(st.in_gang).tolist()}
    st.nodes = nodes = node_order(st.snap.nodes, labels, st.cfg.topology_levels)
    st.node_labels = NodeLabels(nodes)
    nn, nd = len(nodes), len(st.dims)
    st.cap = np.array(
        [[n.capacity.get(d, 0) for d in st.dims] for n in nodes], dtype=np.int64
    ).reshape(nn, nd)
    st.cordoned = np.array([n.cordoned for n in nodes], dtype=bool)
    totals = st.cap[~st.cordoned].sum(axis=0) if nn else np.zeros(nd, dtype=np.int64)
    st.totals = [int(t) for t in totals.tolist()]
    st.costs = CostModel.build(st.dims, st.totals, st.cfg.resource_multipliers)
    st.cost_cols = np.array([t > 0 for t in st.totals], dtype=bool)
    st.cost_tot = np.array(st.totals, dtype=np.float64)[st.cost_cols]
    st.cost_mult = np.array(st.costs.multipliers, dtype=np.float64)[st.cost_cols]


def _index_jobs(st: CycleState) -> None:
    """Queue, node and class of every job; queued jobs of an unknown queue or class fail."""
    jobs, nj = st.jobs, len(st.jobs)
    lookup: defaultdict[str, int] = defaultdict(
        lambda: -1, {name: k for k, name in enumerate(st.qnames)}
    )
    st.qidx = qidx = np.fromiter(
        map(lookup.__getitem__, map(attrgetter("queue"), jobs)), dtype=np.int64, count=nj
    )
    node_names = list(map(attrgetter("node"), jobs))
    st.is_running = np.fromiter(
        map(operator.is_not, node_names, repeat(None)), dtype=bool, count=nj
    )
    known_pc = st.shape_known[st.shape_of_job]
    st.job_pcp = st.shape_pcp[st.shape_of_job]
    running = np.flatnonzero(st.is_running)
    st.run_node = np.full(nj, -1, dtype=np.int64)
    if len(running):
        where: defaultdict[str | None, int] = defaultdict(
            lambda: -1, {n.id: i for i, n in enumerate(st.nodes)}
        )
        st.run_node[running] = list(map(where.__getitem__, pick(node_names, running)))
    st.running_rows = running = running[st.run_node[running] >= 0]
    st.accounted = np.zeros(nj, dtype=bool)
    st.accounted[running] = (qidx[running] >= 0) & known_pc[running]
    queued = np.flatnonzero(~st.is_running)
    bad_queue = queued[qidx[queued] < 0]
    bad_pc = queued[(qidx[queued] >= 0) & ~known_pc[queued]]
    for i in sorted(bad_queue.tolist() + bad_pc.tolist(), key=lambda i: jobs[i].id):
        st.result.failed[jobs[i].id] = (
            reasons.UNKNOWN_QUEUE if qidx[i] < 0 else reasons.UNKNOWN_PRIORITY_CLASS
        )
    st.queued = queued[(qidx[queued] >= 0) & known_pc[queued]]
    gang_rows = np.flatnonzero(st.in_gang).tolist()
    if gang_rows and any(jobs[i].gang_role is not None for i in gang_rows):
        _apply_roles(st, gang_rows)


def _apply_roles(st: CycleState, gang_rows: list[int]) -> None:
    """Role groups (SEMANTICS.md, "Elastic pod groups"): a group with a role below its
    minimum has its running members preempted and its queued ones wait, all out of the
    cycle (as jobs on unknown nodes are); the running members above their role's minimum
    are marked elastic."""
    jobs = st.jobs
    keys = {(jobs[i].queue, st.gang_ids[i]) for i in gang_rows if jobs[i].gang_role is not None}
    rows = [i for i in gang_rows if (jobs[i].queue, st.gang_ids[i]) in keys]
    run = [i for i in rows if st.accounted[i]]
    waiting = [i for i in rows if not st.is_running[i]]
    valid = np.zeros(len(jobs), dtype=bool)
    valid[st.queued] = True
    node_index = {n.id: k for k, n in enumerate(st.nodes)}
    pcs = st.pcs

    def order(j: Job) -> tuple:
        start = j.start_time if j.start_time is not None else 0.0
        return (-pcs[j.priority_class].priority, j.priority, start, j.submit_time, j.id)

    st.roles = plan(
        [jobs[i] for i in run],
        [jobs[i] for i in waiting if valid[i]],
        st.nodes,
        node_index,
        st.cfg.topology_levels,
        order,
    )
    row_of = {jobs[i].id: i for i in rows}
    gone = np.array([row_of[j] for j in st.roles.preempt], dtype=np.int64)
    if len(gone):
        st.preempted.update(gone.tolist())
        st.result.preempt_reasons.update(st.roles.preempt_reasons)
        st.accounted[gone] = False
        st.run_node[gone] = -1
        st.running_rows = st.running_rows[~np.isin(st.running_rows, gone)]
    if st.roles.waiting:
        out = np.array([row_of[j] for j in st.roles.waiting], dtype=np.int64)
        for job_id, why in st.roles.waiting.items():
            st.result.unscheduled[job_id] = why
        st.queued = st.queued[~np.isin(st.queued, out)]
    st.elastic = np.zeros(len(jobs), dtype=bool)
    if st.roles.elastic:
        st.elastic[[row_of[j] for j in st.roles.elastic]] = True
