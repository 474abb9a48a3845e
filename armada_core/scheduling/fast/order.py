"""Order and Lookback (SEMANTICS.md): each queue's items in the order the queue offers them.

A queue's order is sorted once per cycle with numpy and cut into runs of interchangeable
items (identical queued shapes, evicted single jobs of one class priority), which placing
takes many at a time.
"""

from __future__ import annotations

from collections import defaultdict
from operator import attrgetter

import numpy as np

from .. import reasons
from ..roles import arrange, has_roles, short_role
from .outcomes import fail_rows
from .state import EVICTED, QUEUED, CycleState, new_item, pick


def queued_order(st: CycleState, i: int) -> tuple:
    """A queued job's place in its queue (and a gang member's place in its gang)."""
    j = st.jobs[i]
    return (-int(st.job_pcp[i]), j.priority, j.submit_time, j.id)


def running_order(st: CycleState, i: int) -> tuple:
    """A running job's place in its queue; urgency victims are taken latest first."""
    j = st.jobs[i]
    start = j.start_time if j.start_time is not None else 0.0
    return (-int(st.job_pcp[i]), j.priority, start, j.submit_time, j.id)


def running_order_or_id(st: CycleState, i: int) -> tuple:
    """``running_order``, or the id alone for a job of an unknown class (it never moves)."""
    if st.shapes[st.shape_of_job[i]].pc_known:
        return running_order(st, i)
    return (0, 0, 0.0, 0.0, st.jobs[i].id)


def queued_work(st: CycleState) -> np.ndarray:
    """Queued jobs of cordoned queues wait; complete queued gangs become items (too many
    members fail, too few wait). Returns the queued single jobs."""
    vq = st.queued
    cordoned = np.array([st.queues[n].cordoned for n in st.qnames], dtype=bool)
    if len(vq) and cordoned.any():
        for i in vq[cordoned[st.qidx[vq]]].tolist():
            st.result.unscheduled[st.ids[i]] = reasons.QUEUE_CORDONED
        vq = vq[~cordoned[st.qidx[vq]]]
    gangs = vq[st.in_gang[vq]]
    if not len(gangs):
        return vq
    _queued_gangs(st, gangs.tolist())
    return vq[~st.in_gang[vq]]


def _queued_gangs(st: CycleState, rows: list[int]) -> None:
    jobs, ids, result = st.jobs, st.ids, st.result
    gangs: dict[tuple[str, str], list[int]] = defaultdict(list)
    late = st.roles.late if st.roles is not None else {}
    for i in rows:
        if late and ids[i] in late:
            _late_member(st, i, late[ids[i]])
            continue
        gangs[(jobs[i].queue, st.gang_ids[i])].append(i)
    for key in sorted(gangs):
        members = gangs[key]
        members.sort(key=lambda i: queued_order(st, i))
        first = jobs[members[0]]
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
        if st.roles is not None and has_roles([jobs[i] for i in members]):
            _role_group(st, members)
            continue
        st.complex.append(new_item(st, QUEUED, members, minimum, first.gang_uniformity_label))


def _late_member(st: CycleState, i: int, allowed: frozenset[int] | None) -> None:
    """A queued member of a running role group: an item of its own, placed near the
    running members."""
    item = new_item(st, QUEUED, [i], 1, None)
    item.late = True
    if allowed is not None:
        item.allowed = np.zeros(len(st.nodes), dtype=bool)
        item.allowed[list(allowed)] = True
    st.complex.append(item)


def _role_group(st: CycleState, members: list[int]) -> None:
    """A complete queued role group: its members in placing order (minimums first), or
    failed when a role has fewer members than its minimum."""
    jobs = st.jobs
    group = [jobs[i] for i in members]
    short = short_role(group)
    if short is not None:
        for i in members:
            st.result.failed[st.ids[i]] = short
        return
    ordered, core = arrange(group)
    row = {id(j): i for j, i in zip(group, members, strict=True)}
    rows = [row[id(j)] for j in ordered]
    item = new_item(st, QUEUED, rows, core, group[0].gang_uniformity_label)
    item.core = core
    st.complex.append(item)


def order_queues(st: CycleState, evicted: np.ndarray, queued: np.ndarray) -> None:
    """Sort every queue's items (evicted singles, ``st.complex``, queued singles), apply the
    lookback, and cut each queue's sequence into runs."""
    nq = len(st.qnames)
    empty = np.zeros(0, dtype=np.int64)
    st.seq, st.seg_end, st.next_barrier = [empty] * nq, [empty] * nq, [empty] * nq
    st.pos = [0] * nq
    anchors = np.concatenate(
        [evicted, np.array([c.members[0] for c in st.complex], dtype=np.int64), queued]
    ).astype(np.int64)
    if not len(anchors):
        return
    kinds = np.concatenate(
        [
            np.full(len(evicted), EVICTED, dtype=np.int64),
            np.array([c.kind for c in st.complex], dtype=np.int64),
            np.full(len(queued), QUEUED, dtype=np.int64),
        ]
    )
    items = -1 - np.arange(len(st.complex), dtype=np.int64)
    codes = np.concatenate([evicted, items, queued]).astype(np.int64)
    qcol = st.qidx[anchors]
    order = stable_order(_columns(st, anchors, kinds), st.ids, anchors)
    if st.cfg.max_queue_lookback is not None:
        sizes = np.concatenate(
            [
                np.zeros(len(evicted), dtype=np.int64),
                np.array(
                    [len(c.members) if c.kind == QUEUED else 0 for c in st.complex],
                    dtype=np.int64,
                ),
                np.ones(len(queued), dtype=np.int64),
            ]
        )
        order = _lookback(st, order, qcol, sizes, codes)
        if len(order) == 0:
            return
    _cut_runs(st, codes[order], qcol[order])


def _columns(st: CycleState, anchors: np.ndarray, kinds: np.ndarray) -> list[np.ndarray]:
    """Sort columns per item (by its anchor, the first member): queue, class priority, kind,
    priority, start time (queued: 0), submit time; the id breaks ties."""
    jobs, nj = st.jobs, len(st.jobs)
    priority = np.fromiter(map(attrgetter("priority"), jobs), dtype=np.int64, count=nj)
    submit = np.fromiter(map(attrgetter("submit_time"), jobs), dtype=np.float64, count=nj)
    start_t = np.zeros(nj, dtype=np.float64)
    running = st.running_rows
    if len(running):
        starts = map(attrgetter("start_time"), pick(jobs, running))
        start_t[running] = [0.0 if t is None else t for t in starts]
    return [
        st.qidx[anchors],
        -st.job_pcp[anchors],
        kinds,
        priority[anchors],
        np.where(kinds == QUEUED, 0.0, start_t[anchors]),
        submit[anchors],
    ]


def stable_order(columns: list[np.ndarray], ids: list[str], anchor: np.ndarray) -> np.ndarray:
    """Positions ordered by the columns (first is primary), ties broken by the id of each
    position's anchor job."""
    rows = np.arange(len(anchor))
    if len(rows) == 0:
        return rows
    keys = [c[rows] for c in reversed(columns)]
    order = rows[np.lexsort(keys)]
    if len(order) < 2:
        return order
    same = np.ones(len(order) - 1, dtype=bool)
    for c in columns:
        v = c[order]
        same &= v[1:] == v[:-1]
    if not same.any():
        return order
    out = order.copy()
    # Groups of equal numeric keys: sort each by id, as the reference does.
    starts = np.flatnonzero(np.diff(np.concatenate(([0], same.astype(np.int8), [0]))) == 1)
    ends = np.flatnonzero(np.diff(np.concatenate(([0], same.astype(np.int8), [0]))) == -1)
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        group = out[s : e + 1].tolist()
        group.sort(key=lambda i: ids[int(anchor[i])])
        out[s : e + 1] = group
    return out


def _lookback(
    st: CycleState, order: np.ndarray, qcol: np.ndarray, sizes: np.ndarray, codes: np.ndarray
) -> np.ndarray:
    """Drop the queued items that start beyond the queue's first ``max_queue_lookback``
    queued jobs (``order`` is grouped by queue), giving their jobs the lookback reason."""
    lookback = st.cfg.max_queue_lookback
    assert lookback is not None
    sz = sizes[order]
    q = qcol[order]
    before = np.cumsum(sz) - sz
    starts = np.flatnonzero(np.concatenate(([True], q[1:] != q[:-1])))
    lengths = np.diff(np.concatenate((starts, [len(q)])))
    before -= np.repeat(before[starts], lengths)
    beyond = (sz > 0) & (before >= lookback)
    if not beyond.any():
        return order
    reason = reasons.queue_lookback(lookback)
    dropped = codes[order[beyond]]
    fail_rows(st, dropped[dropped >= 0], reason)
    for c in dropped[dropped < 0].tolist():
        fail_rows(st, np.array(st.complex[-1 - c].members), reason)
    return order[~beyond]


def _cut_runs(st: CycleState, codes: np.ndarray, qs: np.ndarray) -> None:
    """Per queue: its sequence, where each run ends, and where each batch of evicted single
    jobs ends. A run is identical queued shapes, or evicted singles of one class priority."""
    single = codes >= 0
    safe = np.where(single, codes, 0)
    run_flag = st.is_running[safe] & single
    cls = np.empty(len(codes), dtype=np.int64)
    cls[:] = 2 * st.shape_of_job[safe]
    cls[run_flag] = 2 * st.job_pcp[safe[run_flag]] + 1 + 2 * 10**9
    cls[~single] = -1 - np.arange(int((~single).sum()))
    life = None
    if st.infinite_limit is not None or st.budget is not None:
        # The lifetime limits count a run as jobs of one lifetime: runs do not mix them.
        lifetimes = map(attrgetter("lifetime"), st.jobs)
        every = np.fromiter((np.inf if t is None else t for t in lifetimes), dtype=np.float64)
        life = np.where(single & ~run_flag, every[safe], 0.0)
    bounds = np.flatnonzero(np.diff(qs)) + 1
    for q_start, q_end in zip(
        np.concatenate(([0], bounds)).tolist(),
        np.concatenate((bounds, [len(codes)])).tolist(),
        strict=True,
    ):
        q = int(qs[q_start])
        seq = codes[q_start:q_end]
        c = cls[q_start:q_end]
        differs = c[1:] != c[:-1]
        if life is not None:
            lf = life[q_start:q_end]
            differs |= lf[1:] != lf[:-1]
        change = np.flatnonzero(differs) + 1
        ends = np.concatenate((change, [len(seq)]))
        st.seq[q] = seq
        st.seg_end[q] = np.repeat(ends, np.diff(np.concatenate(([0], ends))))
        ev = (seq >= 0) & st.is_running[np.where(seq >= 0, seq, 0)]
        idx = np.where(ev, len(seq), np.arange(len(seq)))
        st.next_barrier[q] = np.minimum.accumulate(idx[::-1])[::-1]
