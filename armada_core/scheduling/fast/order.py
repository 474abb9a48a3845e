"""Order and Lookback (SEMANTICS.md): each queue's items in the order the queue offers them.

A queue's order is sorted once per cycle with numpy and cut into runs of interchangeable
items (identical queued shapes, evicted single jobs of one class priority), which placing
takes many at a time.
"""

from __future__ import annotations

from collections import defaultdict
from operator import attrgetter
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .. import reasons
from ..model import Job
from ..roles import RunningKey, has_roles
from .elastic import late_member_item, role_group_item
from .free_space import FloatArray, IntArray
from .outcomes import leave_queued
from .state import EVICTED, QUEUED, CycleState, QueueOrder, gang_sort_key, make_item

#: A queued job's place in its queue: -class priority, priority, submit time, id.
QueuedKey = tuple[int, int, float, str]


def queued_order(state: CycleState, i: int) -> QueuedKey:
    """A queued job's place in its queue (and a gang member's place in its gang)."""
    j = state.jobs.records[i]
    return (-int(state.jobs.class_priority[i]), j.priority, j.submit_time, j.id)


def running_order(state: CycleState, i: int) -> RunningKey:
    """A running job's place in its queue; urgency victims are taken latest first."""
    return _running_key(state.jobs.records[i], int(state.jobs.class_priority[i]))


def _running_key(j: Job, class_priority: int) -> RunningKey:
    start = j.start_time if j.start_time is not None else 0.0
    return (-class_priority, j.priority, start, j.submit_time, j.id)


def running_orders_or_ids(state: CycleState, rows: list[int]) -> dict[int, RunningKey]:
    """Each row's ``running_order``, or the id alone for a job of an unknown class (it never
    moves): the columns read once for all the rows, not an array element at a time."""
    jobs = state.jobs
    at = np.array(rows, dtype=np.int64)
    priority = jobs.class_priority[at].tolist()
    known = state.shapes.class_known[jobs.shape[at]].tolist()
    keys: dict[int, RunningKey] = {}
    for i, class_priority, class_known in zip(rows, priority, known, strict=True):
        j = jobs.records[i]
        keys[i] = _running_key(j, class_priority) if class_known else (0, 0, 0.0, 0.0, j.id)
    return keys


def queued_work(state: CycleState) -> IntArray:
    """Queued jobs of cordoned queues wait; complete queued gangs become items (too many
    members fail, too few wait). Returns the queued single jobs."""
    jobs, queues = state.jobs, state.queues
    queued = jobs.queued
    cordoned = np.array([queues.by_name[n].cordoned for n in queues.names], dtype=bool)
    if len(queued) and cordoned.any():
        for i in queued[cordoned[jobs.queue[queued]]].tolist():
            state.result.unscheduled[jobs.ids[i]] = reasons.QUEUE_CORDONED
        queued = queued[~cordoned[jobs.queue[queued]]]
    gangs = queued[jobs.in_gang[queued]]
    if not len(gangs):
        return queued
    _queued_gangs(state, gangs.tolist())
    return queued[~jobs.in_gang[queued]]


def _queued_gangs(state: CycleState, rows: list[int]) -> None:
    jobs, result, items = state.jobs, state.result, state.gangs.items
    records, ids = jobs.records, jobs.ids
    gangs: dict[tuple[str, str | None], list[int]] = defaultdict(list)
    late = state.roles.late if state.roles is not None else {}
    for i in rows:
        if late and ids[i] in late:
            items.append(late_member_item(state, i, late[ids[i]]))
            continue
        gangs[(records[i].queue, jobs.gang_ids[i])].append(i)
    for key in sorted(gangs, key=gang_sort_key):
        members = gangs[key]
        members.sort(key=lambda i: queued_order(state, i))
        first = records[members[0]]
        cardinality = first.gang_cardinality
        if len(members) > cardinality:
            for i in members:
                result.failed[ids[i]] = reasons.GANG_TOO_MANY
            continue
        if len(members) < cardinality:
            for i in members:
                result.unscheduled[ids[i]] = reasons.gang_incomplete(len(members), cardinality)
            continue
        minimum = max(1, min(first.min_cardinality, len(members)))
        if state.roles is not None and has_roles([records[i] for i in members]):
            group = role_group_item(state, members)
            if group is not None:
                items.append(group)
            continue
        items.append(make_item(state, QUEUED, members, minimum, first.gang_uniformity_label))


def order_queues(state: CycleState, evicted: IntArray, queued: IntArray) -> None:
    """Sort every queue's items (evicted singles, ``gangs.items``, queued singles), apply the
    lookback, and cut each queue's sequence into runs."""
    nq = len(state.queues.names)
    items = state.gangs.items
    empty = np.zeros(0, dtype=np.int64)
    state.order = QueueOrder([empty] * nq, [empty] * nq, [empty] * nq, [0] * nq)
    anchors = np.concatenate(
        [evicted, np.array([c.members[0] for c in items], dtype=np.int64), queued]
    ).astype(np.int64)
    if not len(anchors):
        return
    kinds = np.concatenate(
        [
            np.full(len(evicted), EVICTED, dtype=np.int64),
            np.array([c.kind for c in items], dtype=np.int64),
            np.full(len(queued), QUEUED, dtype=np.int64),
        ]
    )
    codes = np.concatenate([evicted, -1 - np.arange(len(items), dtype=np.int64), queued]).astype(
        np.int64
    )
    queue_of = state.jobs.queue[anchors]
    order = stable_order(
        _sort_columns(state, anchors, kinds), state.jobs.id_array, anchors, state.jobs.id_breaks
    )
    if state.config.max_queue_lookback is not None:
        sizes = np.concatenate(
            [
                np.zeros(len(evicted), dtype=np.int64),
                np.array(
                    [len(c.members) if c.kind == QUEUED else 0 for c in items], dtype=np.int64
                ),
                np.ones(len(queued), dtype=np.int64),
            ]
        )
        order = _lookback(state, order, queue_of, sizes, codes)
        if len(order) == 0:
            return
    _cut_runs(state, codes[order], queue_of[order])


def _sort_columns(
    state: CycleState, anchors: IntArray, kinds: IntArray
) -> list[IntArray | FloatArray]:
    """Sort columns per item (by its anchor, the first member): queue, class priority, kind,
    priority, start time (queued: 0), submit time; the id breaks ties."""
    jobs = state.jobs
    return [
        jobs.queue[anchors],
        -jobs.class_priority[anchors],
        kinds,
        jobs.priority[anchors],
        np.where(kinds == QUEUED, 0.0, jobs.start[anchors]),
        jobs.submit[anchors],
    ]


def stable_order(
    columns: list[IntArray | FloatArray],
    ids: NDArray[Any],
    anchor: IntArray,
    id_breaks: IntArray | None = None,
) -> IntArray:
    """Positions ordered by the columns (first is primary), ties broken by the id of each
    position's anchor job (``ids``: the jobs' ids as an array of objects). With
    ``id_breaks`` (``JobColumns.id_breaks``), tied anchors already in order of id by their
    rows are not compared."""
    if len(anchor) == 0:
        return np.arange(0)
    order: IntArray = np.lexsort(columns[::-1])
    if len(order) < 2:
        return order
    same = np.ones(len(order) - 1, dtype=bool)
    for c in columns:
        v = c[order]
        same &= v[1:] == v[:-1]
    tied = np.flatnonzero(same)
    if not len(tied):
        return order
    # Groups of equal numeric keys (jobs submitted in one request share their time) go by
    # id, as the reference orders them. The sort is stable, so a group is in order of row
    # and, in a server that holds its jobs in order of id, mostly in order of id too: only
    # the groups with a pair out of order are sorted.
    first, second = anchor[order[tied]], anchor[order[tied + 1]]
    if id_breaks is not None:
        unknown = ~((first < second) & (id_breaks[first] == id_breaks[second]))
        tied, first, second = tied[unknown], first[unknown], second[unknown]
    wrong = tied[~(ids[second] > ids[first])]
    if not len(wrong):
        return order
    edges = np.diff(np.concatenate(([0], same.astype(np.int8), [0])))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    out = order.copy()
    for g in np.unique(np.searchsorted(starts, wrong, side="right") - 1).tolist():
        s, e = int(starts[g]), int(ends[g])
        group = out[s : e + 1]
        rows = anchor[group]
        if id_breaks is not None and id_breaks[rows.min()] == id_breaks[rows.max()]:
            out[s : e + 1] = group[rows.argsort(kind="stable")]  # rows in order of id
        else:
            out[s : e + 1] = group[ids[rows].argsort(kind="stable")]
    return out


def _lookback(
    state: CycleState, order: IntArray, queue_of: IntArray, sizes: IntArray, codes: IntArray
) -> IntArray:
    """Drop the queued items that start beyond the queue's first ``max_queue_lookback``
    queued jobs (``order`` is grouped by queue), giving their jobs the lookback reason."""
    lookback = state.config.max_queue_lookback
    assert lookback is not None
    sz = sizes[order]
    q = queue_of[order]
    before = np.cumsum(sz) - sz
    starts = np.flatnonzero(np.concatenate(([True], q[1:] != q[:-1])))
    lengths = np.diff(np.concatenate((starts, [len(q)])))
    before -= np.repeat(before[starts], lengths)
    beyond = (sz > 0) & (before >= lookback)
    if not beyond.any():
        return order
    reason = reasons.queue_lookback(lookback)
    dropped = codes[order[beyond]]
    leave_queued(state, dropped[dropped >= 0], reason)
    for c in dropped[dropped < 0].tolist():
        leave_queued(state, np.array(state.gangs.items[-1 - c].members), reason)
    return order[~beyond]


def _cut_runs(state: CycleState, codes: IntArray, queue_of: IntArray) -> None:
    """Per queue: its sequence, where each run ends, and where each batch of evicted single
    jobs ends. A run is identical queued shapes, or evicted singles of one class priority."""
    jobs, order, limits = state.jobs, state.order, state.limits
    single = codes >= 0
    safe = np.where(single, codes, 0)
    running = jobs.is_running[safe] & single
    run_class = np.empty(len(codes), dtype=np.int64)
    run_class[:] = 2 * jobs.shape[safe]
    run_class[running] = 2 * jobs.class_priority[safe[running]] + 1 + 2 * 10**9
    run_class[~single] = -1 - np.arange(int((~single).sum()))
    life = None
    if limits.infinite_limit is not None or limits.budget is not None:
        # The lifetime limits count a run as jobs of one lifetime: runs do not mix them.
        lifetimes = map(attrgetter("lifetime"), jobs.records)
        every = np.fromiter((np.inf if t is None else t for t in lifetimes), dtype=np.float64)
        life = np.where(single & ~running, every[safe], 0.0)
    bounds = np.flatnonzero(np.diff(queue_of)) + 1
    for q_start, q_end in zip(
        np.concatenate(([0], bounds)).tolist(),
        np.concatenate((bounds, [len(codes)])).tolist(),
        strict=True,
    ):
        q = int(queue_of[q_start])
        sequence = codes[q_start:q_end]
        c = run_class[q_start:q_end]
        differs = c[1:] != c[:-1]
        if life is not None:
            lf = life[q_start:q_end]
            differs |= lf[1:] != lf[:-1]
        change = np.flatnonzero(differs) + 1
        ends = np.concatenate((change, [len(sequence)]))
        order.sequence[q] = sequence
        order.run_end[q] = np.repeat(ends, np.diff(np.concatenate(([0], ends))))
        evicted = (sequence >= 0) & jobs.is_running[np.where(sequence >= 0, sequence, 0)]
        idx = np.where(evicted, len(sequence), np.arange(len(sequence)))
        order.evicted_end[q] = np.minimum.accumulate(idx[::-1])[::-1]
