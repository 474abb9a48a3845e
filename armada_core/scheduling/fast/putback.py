"""Placing evicted jobs (SEMANTICS.md, Placing): every member back on its own node, all or
nothing, if the node's capacity minus everything now holding space fits it and the queue's
class cap allows; otherwise the job (gang) is preempted. Exempt from per-cycle limits.

Evicted jobs go back in vectorised batches: until a queued job is placed they cannot take
each other's space, so only which of them come before the next other event matters.
"""

from __future__ import annotations

import numpy as np

from ..nodedb import scatter_add
from .limits import class_limit
from .queues import add_class, keys, use, wins
from .state import CycleState, Item
from .victims import victim_code

#: Evicted jobs looked at per step, so that a step costs O(1) amortised.
_WINDOW = 4096


def evicted_batch(st: CycleState, window: int = _WINDOW) -> tuple[int, int]:
    """Re-place, across all queues, every evicted job that comes before the next other event.

    Returns how many went back and how many were looked at (0 back: something did not fit,
    the caller goes one item at a time).
    """
    spans, barrier, scanned = _spans(st, window)
    picked = _before(st, spans, barrier)
    if not picked:
        return 0, scanned
    rows = np.concatenate([r for _, r, _ in picked])
    nodes = st.run_node[rows]
    reqs = st.req[st.shape_of_job[rows]]
    db = st.db
    need = np.zeros((db.n, db.d), dtype=np.int64)
    scatter_add(need, nodes, reqs)
    touched = need.any(axis=1)
    if not (db.fixed[touched] + need[touched] <= db.cap[touched]).all():
        return 0, scanned
    pcps = st.job_pcp[rows]
    ev_done(st, rows)
    for pcp in np.unique(pcps).tolist():
        sel = pcps == pcp
        db.replace_evicted(nodes[sel], reqs[sel], int(pcp))
    for q, mine, total in picked:
        st.alloc[q] = [a + b for a, b in zip(st.alloc[q], total.tolist(), strict=True)]
        shapes = st.shape_of_job[mine]
        for sid in np.unique(shapes).tolist():
            vec = (st.req[sid] * int((shapes == sid).sum())).tolist()
            add_class(st, q, st.shapes[sid].pc, vec)
        st.pos[q] += len(mine)
    return len(rows), scanned


def _spans(st: CycleState, window: int) -> tuple[list[tuple], tuple | None, int]:
    """Per queue, the evicted singles at its head (up to ``window``) with their cumulative
    requests; and the key of the earliest other event (the barrier) across queues."""
    barrier: tuple | None = None
    spans = []
    scanned = 0
    for q in range(len(st.qnames)):
        seq = st.seq[q]
        p0 = st.pos[q]
        if p0 >= len(seq):
            continue
        cut = min(int(st.next_barrier[q][p0]), p0 + window)
        rows = seq[p0:cut]
        cum = None
        if len(rows):
            cum = np.cumsum(st.req[st.shape_of_job[rows]], axis=0)
            scanned += len(rows)
        if cut < len(seq):
            key = _event_key(st, q, int(seq[cut]), cum)
            if barrier is None or key < barrier:
                barrier = key
        if len(rows):
            spans.append((q, p0, rows, cum))
    return spans, barrier, scanned


def _event_key(st: CycleState, q: int, code: int, cum: np.ndarray | None) -> tuple:
    """The heap key the item ``code`` will have once the evicted jobs before it are back."""
    if code < 0:
        item = st.complex[-1 - code]
        pcp, total = item.pcp, np.asarray(item.total, dtype=np.int64)
    else:
        pcp, total = int(st.job_pcp[code]), st.req[st.shape_of_job[code]]
    extra = total if cum is None else cum[-1] + total
    return (-pcp, float(keys(st, q, extra[None, :])[0]), q)


def _before(st: CycleState, spans: list[tuple], barrier: tuple | None) -> list[tuple]:
    """Per queue, the evicted singles whose keys come before the barrier, and their total."""
    picked = []
    for q, _start, rows, cum in spans:
        neg = -st.job_pcp[rows]
        ks = keys(st, q, cum)
        if barrier is None:
            count = len(rows)
        else:
            b0, b1, b2 = barrier
            before = (neg < b0) | ((neg == b0) & ((ks < b1) | ((ks == b1) & (q < b2))))
            bad = np.flatnonzero(~before)
            count = int(bad[0]) if len(bad) else len(rows)
        if count:
            picked.append((q, rows[:count], cum[count - 1]))
    return picked


def evicted_run(st: CycleState, q: int, neg_p: int, bound: tuple | None, pos: int) -> int:
    """Re-place the run of evicted singles at the queue's head, as many as the queue wins;
    one at a time when a class cap applies or they do not all fit. Returns how many."""
    end = min(int(st.seg_end[q][pos]), pos + _WINDOW)
    rows = st.seq[q][pos:end]
    shapes = st.shape_of_job[rows]
    limited = any(st.pcs[st.shapes[s].pc].max_fraction_per_queue for s in set(shapes.tolist()))
    if limited:
        evicted_one(st, q, int(rows[0]))
        return 1
    reqs = st.req[shapes]
    k = max(1, wins(st, q, neg_p, bound, reqs))
    rows, reqs, shapes = rows[:k], reqs[:k], shapes[:k]
    nodes = st.run_node[rows]
    db = st.db
    if k == 1:
        n = int(nodes[0])
        fits = bool((db.fixed[n] + reqs[0] <= db.cap[n]).all())
    else:
        touched, inverse = np.unique(nodes, return_inverse=True)
        need = np.zeros((len(touched), db.d), dtype=np.int64)
        scatter_add(need, inverse.reshape(-1), reqs)
        fits = bool((db.fixed[touched] + need <= db.cap[touched]).all())
    if not fits:
        evicted_one(st, q, int(rows[0]))
        return 1
    db.replace_evicted(nodes, reqs, int(st.job_pcp[rows[0]]))
    ev_done(st, rows)
    total = reqs.sum(axis=0).tolist()
    st.alloc[q] = [a + b for a, b in zip(st.alloc[q], total, strict=True)]
    for s in np.unique(shapes).tolist():
        sel = reqs[shapes == s].sum(axis=0).tolist()
        add_class(st, q, st.shapes[s].pc, sel)
    return k


def evicted_one(st: CycleState, q: int, i: int) -> None:
    evicted_members(st, q, [i], None)


def evicted_complex(st: CycleState, q: int, item: Item) -> None:
    evicted_members(st, q, item.members, item)


def evicted_members(st: CycleState, q: int, members: list[int], item: Item | None) -> None:
    """All members back on their nodes, or all preempted (an extra also when its core was)."""
    if _fits_back(st, q, members, item):
        _put_back(st, q, members)
        return
    if item is not None:
        item.failed = True
    db = st.db
    for i in members:
        s = st.shape_of_job[i]
        db.drop_evicted(int(st.run_node[i]), st.req[s], int(st.job_pcp[i]))
        ev_done(st, np.array([i]))
        use(st, q, st.shapes[s].req_t, -1)
        st.preempted.add(i)


def _fits_back(st: CycleState, q: int, members: list[int], item: Item | None) -> bool:
    if item is not None and item.parent is not None and item.parent.failed:
        return False
    if class_limit(st, q, members) is not None:
        return False
    db = st.db
    extra: dict[int, np.ndarray] = {}
    for i in members:
        n = int(st.run_node[i])
        r = st.req[st.shape_of_job[i]]
        have = extra.get(n, np.zeros(db.d, dtype=np.int64))
        if not (db.fixed[n] + have + r <= db.cap[n]).all():
            return False
        extra[n] = have + r
    return True


def _put_back(st: CycleState, q: int, members: list[int]) -> None:
    for i in members:
        n = int(st.run_node[i])
        s = st.shape_of_job[i]
        sh = st.shapes[s]
        st.db.replace_evicted(np.array([n]), st.req[s][None, :], int(st.job_pcp[i]))
        ev_done(st, np.array([i]))
        st.alloc[q] = [a + b for a, b in zip(st.alloc[q], sh.req_t, strict=True)]
        add_class(st, q, sh.pc, list(sh.req_t))


def ev_done(st: CycleState, rows: np.ndarray) -> None:
    """Evicted jobs re-placed or dropped: no longer victims of displacement."""
    st.ev_gone[rows] = True
    if not st.ev_groups:
        return
    if len(rows) == 1:
        i = int(rows[0])
        groups = st.ev_groups.get(int(st.job_pcp[i]))
        if groups is not None:
            code = int(victim_code(st, rows)[0])
            groups[code][int(st.run_node[i])] -= st.req[st.shape_of_job[i]]
        return
    pcps = st.job_pcp[rows]
    for pcp in np.unique(pcps).tolist():
        groups = st.ev_groups.get(int(pcp))
        if groups is None:
            continue
        sel = rows[pcps == pcp]
        qs = victim_code(st, sel)
        for q in np.unique(qs).tolist():
            mine = sel[qs == q]
            scatter_add(groups[q], st.run_node[mine], st.req[st.shape_of_job[mine]], -1)
