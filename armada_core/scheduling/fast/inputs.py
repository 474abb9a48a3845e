"""Inputs and units (SEMANTICS.md): the snapshot indexed as numpy arrays.

Jobs are grouped by interned shape, so requests, classes and constraints are looked at once
per shape; per-job facts are columns gathered once per cycle.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from operator import attrgetter
from typing import Any

import numpy as np

from .. import reasons
from ..constraints import node_order
from ..fairness import CostModel
from ..model import DEFAULT_RESOURCE_ORDER, Node, Snapshot, kinds_of, shape_of
from .elastic import apply_roles
from .free_space import FreeSpace, IntArray
from .job_columns import read_columns
from .running_columns import running_columns
from .state import (
    CostColumns,
    CycleState,
    NodeIndex,
    Nodes,
    Queues,
    Shape,
    Shapes,
    gather,
)


def index_inputs(state: CycleState) -> None:
    """Index classes, queues, shapes, nodes and jobs; fail queued jobs that can never run.

    Only what the steady-state check needs: the rest (``index_for_placing``) waits until
    the cycle is known to place anything.
    """
    snapshot = state.snapshot
    state.classes = {pc.name: pc for pc in snapshot.priority_classes}
    by_name = {q.name: q for q in snapshot.queues}
    state.queues = Queues(sorted(by_name), by_name)
    state.class_names = sorted(state.classes)
    state.class_caps = any(pc.max_fraction_per_queue for pc in state.classes.values())
    columns = read_columns(state.jobs.records, snapshot.serials)
    state.jobs.priority, state.jobs.submit = columns.priority, columns.submit
    state.jobs.ids, state.jobs.id_array = columns.id_list, columns.ids
    state.jobs.id_breaks = columns.id_breaks
    state.jobs.serial = columns.serial
    _index_kinds(state, columns.kind)
    _index_gangs(state)
    _index_nodes(state)
    _index_jobs(state)


def index_for_placing(state: CycleState) -> None:
    """The node index partitioned by taints and the resources nodes have (a shape scans
    only the partitions it tolerates and whose nodes have what it requests)."""
    nodes = state.nodes
    if nodes.index.partition is None:
        partitions, partition = _partition(state)
        partition.flags.writeable = False
        nodes.index.partitions, nodes.index.partition = partitions, partition
    nodes.partitions = nodes.index.partitions
    nodes.space = FreeSpace(nodes.capacity, nodes.index.partition, ~nodes.cordoned)


def _partition(state: CycleState) -> tuple[dict[int, tuple[Any, frozenset[str]]], IntArray]:
    """Each uncordoned node's partition (-1 for cordoned ones), and what each partition is."""
    nodes = state.nodes
    part_keys: dict[tuple[Any, frozenset[str]], int] = {}
    part_list = [-1] * len(nodes.records)
    present = (nodes.capacity > 0).tolist()
    dim_sets: dict[tuple[bool, ...], frozenset[str]] = {}
    for i, n in enumerate(nodes.records):
        if n.cordoned:
            continue
        flags = tuple(present[i])
        dims_present = dim_sets.get(flags)
        if dims_present is None:
            dims_present = frozenset(d for d, f in zip(state.dims, flags, strict=True) if f)
            dim_sets[flags] = dims_present
        part_list[i] = part_keys.setdefault((n.taints, dims_present), len(part_keys))
    return {v: k for k, v in part_keys.items()}, np.array(part_list, dtype=np.int64)


def _resource_dims(snapshot: Snapshot, shape_keys: list[tuple[Any, ...]]) -> tuple[str, ...]:
    """Resource dimensions: the configured (or default) order, then any other seen, sorted."""
    names = set(_node_resources(snapshot.nodes))
    for key in shape_keys:
        names.update(key[0])
    order = snapshot.config.resource_names
    known = list(order) if order is not None else [n for n in DEFAULT_RESOURCE_ORDER if n in names]
    return tuple(known + sorted(names - set(known)))


#: The last cycle's nodes and the resources they have (the nodes are immutable: the same
#: objects have the same resources, and walking a cluster's every node each cycle is not free).
_last_resources: tuple[tuple[Node, ...], frozenset[str]] | None = None


def _node_resources(nodes: Sequence[Node]) -> frozenset[str]:
    global _last_resources
    last = _last_resources
    if last is not None and _same_objects(last[0], nodes):
        return last[1]
    names = frozenset(name for node in nodes for name in node.capacity)
    _last_resources = (tuple(nodes), names)
    return names


def _same_objects(kept: Sequence[Node], nodes: Sequence[Node]) -> bool:
    """Whether `nodes` are the very objects kept (nodes are immutable: nothing changed)."""
    return len(kept) == len(nodes) and all(map(operator.is_, kept, nodes))


def _number(ids: IntArray) -> tuple[IntArray, IntArray]:
    """The distinct interned ids, sorted, and each element's index among them."""
    top = int(ids.max()) + 1 if len(ids) else 0
    if top <= 4 * len(ids) + 4096:
        # Interned ids are small integers: a lookup table numbers them without a sort.
        present = np.zeros(top, dtype=bool)
        present[ids] = True
        uniq = np.flatnonzero(present)
        number = np.zeros(top, dtype=np.int64)
        number[uniq] = np.arange(len(uniq))
        return uniq, number[ids]
    uniq, local = np.unique(ids, return_inverse=True)
    return uniq, local.reshape(-1)


def _index_kinds(state: CycleState, kind_ids: IntArray) -> None:
    """From every job's kind (``Job.kind_id``), its shape, queue, and whether it runs and is
    in a gang: these come per kind, so no other field is read of every job here."""
    jobs = state.jobs
    uniq, kind = _number(kind_ids)
    kinds = kinds_of(uniq.tolist())
    shape_uniq, shape_of_kind = np.unique(
        np.array([k[0] for k in kinds], dtype=np.int64), return_inverse=True
    )
    jobs.shape = shape_of_kind.reshape(-1)[kind]
    where = {name: q for q, name in enumerate(state.queues.names)}
    jobs.queue = np.array([where.get(k[1], -1) for k in kinds], dtype=np.int64)[kind]
    jobs.is_running = np.array([k[2] for k in kinds], dtype=bool)[kind]
    jobs.in_gang = np.array([k[3] for k in kinds], dtype=bool)[kind]
    jobs.has_lifetime = np.array([k[4] for k in kinds], dtype=bool)[kind]
    keys = [shape_of(s) for s in shape_uniq.tolist()]
    state.dims = dims = _resource_dims(state.snapshot, keys)
    facts = []
    requests = np.zeros((len(keys), len(dims)), dtype=np.int64)
    for k, key in enumerate(keys):
        row = np.array([key[0].get(d, 0) for d in dims], dtype=np.int64)
        facts.append(Shape(row, key[5], state.classes.get(key[5])))
        requests[k] = row
    state.shapes = Shapes(
        keys,
        facts,
        requests,
        np.array([f.class_priority for f in facts], dtype=np.int64),
        np.array([f.class_known for f in facts], dtype=bool),
    )


def _index_gangs(state: CycleState) -> None:
    jobs = state.jobs
    rows = np.flatnonzero(jobs.in_gang)
    ids = map(attrgetter("gang_id"), gather(jobs.records, rows))
    jobs.gang_ids = dict(zip(rows.tolist(), ids, strict=True))


#: The last cycle's node index (one: a scheduler schedules one cluster).
_last_index: NodeIndex | None = None


def _node_index(state: CycleState, labels: set[str | None]) -> NodeIndex:
    global _last_index
    nodes = state.snapshot.nodes
    key = (tuple(nodes), frozenset(labels), tuple(state.config.topology_levels), state.dims)
    last = _last_index
    if last is not None and _same_objects(last.key[0], nodes) and last.key[1:] == key[1:]:
        return last
    records = node_order(nodes, labels, state.config.topology_levels)
    capacity = np.array(
        [[n.capacity.get(d, 0) for d in state.dims] for n in records], dtype=np.int64
    ).reshape(len(records), len(state.dims))
    cordoned = np.array([n.cordoned for n in records], dtype=bool)
    _last_index = made = NodeIndex(key, records, capacity, cordoned)
    return made


def _index_nodes(state: CycleState) -> None:
    """Nodes in tie-break order, their capacity, and the cluster totals costs divide by."""
    records = state.jobs.records
    in_gang = np.flatnonzero(state.jobs.in_gang).tolist()
    labels = {records[i].gang_uniformity_label for i in in_gang}
    index = _node_index(state, labels)
    capacity, cordoned = index.capacity, index.cordoned
    total = capacity[~cordoned].sum(axis=0) if len(index.records) else capacity.sum(axis=0)
    totals = [int(t) for t in total.tolist()]
    state.nodes = Nodes(index.records, index.labels, capacity, cordoned, totals, index)
    state.costs = costs = CostModel.build(state.dims, totals, state.config.resource_multipliers)
    counted = np.array([t > 0 for t in totals], dtype=bool)
    state.cost_columns = CostColumns(
        counted,
        np.array(totals, dtype=np.float64)[counted],
        np.array(costs.multipliers, dtype=np.float64)[counted],
        bool(counted.any()),
        [
            (d, m, float(t))
            for d, (m, t) in enumerate(zip(costs.multipliers, totals, strict=True))
            if t > 0
        ],
    )


def _index_jobs(state: CycleState) -> None:
    """Node and class of every job; queued jobs of an unknown queue or class fail."""
    jobs = state.jobs
    records, nj = jobs.records, len(jobs.records)
    queue = jobs.queue
    known_class = state.shapes.class_known[jobs.shape]
    jobs.class_priority = state.shapes.class_priority[jobs.shape]
    running = np.flatnonzero(jobs.is_running)
    read = running_columns(records, running, jobs.serial, state.nodes.index)
    jobs.node = np.full(nj, -1, dtype=np.int64)
    jobs.node[running] = read.node
    known = read.node >= 0
    jobs.running = running = running[known]
    jobs.start = np.zeros(nj, dtype=np.float64)
    jobs.start[running] = read.start[known]
    jobs.accounted = np.zeros(nj, dtype=bool)
    jobs.accounted[running] = (queue[running] >= 0) & known_class[running]
    queued = np.flatnonzero(~jobs.is_running)
    bad_queue = queued[queue[queued] < 0]
    bad_class = queued[(queue[queued] >= 0) & ~known_class[queued]]
    for i in sorted(bad_queue.tolist() + bad_class.tolist(), key=lambda i: records[i].id):
        state.result.failed[records[i].id] = (
            reasons.UNKNOWN_QUEUE if queue[i] < 0 else reasons.UNKNOWN_PRIORITY_CLASS
        )
    jobs.queued = queued[(queue[queued] >= 0) & known_class[queued]]
    gang_rows = list(jobs.gang_ids)
    if gang_rows and any(records[i].gang_role is not None for i in gang_rows):
        apply_roles(state, gang_rows)
