"""Eviction (SEMANTICS.md): which running jobs are evicted, and at which priority the others
hold their nodes; the node state placing starts from; the steady-state shortcut.

Evicted jobs keep their node's space reserved (``NodeDb.evicted``, per class priority) until
they are placed back or given up (``putback.py``).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from ..nodedb import INF, scatter_add
from .order import running_order_or_id
from .state import EVICTED, EXTRA, CycleState, new_item, sum_by


def nothing_moves(st: CycleState) -> bool:
    """Decide a steady state in one vectorised step (then only queue costs are reported).

    With nothing queued, evicted jobs compete only for their own nodes. If every node holds
    all its running jobs and no queue exceeds a per-class cap with all of its jobs, each
    evicted job fits back whatever the order of re-placement, so nothing is scheduled or
    preempted, whichever queues are protected. Otherwise the full cycle decides.
    """
    rows = st.running_rows
    if len(rows) != len(st.jobs):
        return False
    shape, req = st.shape_of_job, st.req
    held = sum_by(st.run_node[rows], shape[rows], len(st.nodes), req)
    if (held > st.cap).any():
        return False
    acc = rows[st.accounted[rows]]
    if _over_class_cap(st, acc):
        return False
    costs = sum_by(st.qidx[acc], shape[acc], len(st.qnames), req).tolist()
    for k, name in enumerate(st.qnames):
        st.result.queue_costs[name] = st.costs.cost(costs[k])
    return True


def _over_class_cap(st: CycleState, acc: np.ndarray) -> bool:
    """Whether some queue holds more of a class than the class's per-queue cap allows."""
    shape, req, nq = st.shape_of_job, st.req, len(st.qnames)
    for pc in st.pcs.values():
        if not pc.max_fraction_per_queue:
            continue
        mine = acc[np.array([sh.pc == pc.name for sh in st.shapes], dtype=bool)[shape[acc]]]
        by_queue = sum_by(st.qidx[mine], shape[mine], nq, req).tolist()
        for d, name in enumerate(st.dims):
            if name not in pc.max_fraction_per_queue:
                continue
            limit = pc.max_fraction_per_queue[name] * st.totals[d]
            if any(row[d] > limit for row in by_queue):
                return True
    return False


def evict(st: CycleState, protected: np.ndarray) -> np.ndarray:
    """Evict the preemptible jobs and gangs of unprotected queues; protected preemptible ones
    hold at their class priority, everything else at +inf.

    Evicted gangs go to ``st.complex`` (a core of the gang's minimum, then one item per extra
    member); the evicted single jobs are returned.
    """
    nj = len(st.jobs)
    preemptible = _preemptible(st)
    st.hold = np.full(nj, INF)
    st.evicted_mask = np.zeros(nj, dtype=bool)
    st.unit_of = {}
    running = st.running_rows
    singles = running[~st.in_gang[running]]
    ok = st.accounted[singles] & preemptible[singles]
    prot = protected[np.maximum(st.qidx[singles], 0)]
    evicted = singles[ok & ~prot]
    keep = singles[ok & prot]
    st.hold[keep] = st.job_pcp[keep].astype(np.float64)
    st.evicted_mask[evicted] = True
    gang_running = running[st.in_gang[running]].tolist()
    if gang_running:
        _evict_gangs(st, gang_running, preemptible, protected)
    return evicted


def _preemptible(st: CycleState) -> np.ndarray:
    """Running jobs of a preemptible class, or that have run at least their lifetime."""
    running = st.running_rows
    preemptible = np.zeros(len(st.jobs), dtype=bool)
    if not len(running):
        return preemptible
    by_class = np.array([sh.preemptible for sh in st.shapes], dtype=bool)
    preemptible[running] = by_class[st.shape_of_job[running]]
    now = st.snap.now
    # Only jobs not preemptible by class can become so through their lifetime.
    for i in running[~preemptible[running]].tolist():
        jb = st.jobs[i]
        if (
            jb.lifetime is not None
            and jb.start_time is not None
            and now - jb.start_time >= jb.lifetime
        ):
            preemptible[i] = True
    return preemptible


def _evict_gangs(
    st: CycleState, rows: list[int], preemptible: np.ndarray, protected: np.ndarray
) -> None:
    """Running gangs (same queue and gang id) move as one: preemptible only if every member
    is; held at the lowest member's class priority when protected."""
    jobs = st.jobs
    units: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i in rows:
        units[(jobs[i].queue, st.gang_ids[i])].append(i)
    for key in sorted(units):
        members = units[key]
        members.sort(key=lambda i: running_order_or_id(st, i))
        elastic = st.elastic
        for i in members:
            # An elastic member gives way alone; any other member takes its whole group.
            st.unit_of[i] = [i] if elastic is not None and elastic[i] else members
        if not all(st.accounted[i] and preemptible[i] for i in members):
            continue
        if protected[st.qidx[members[0]]]:
            st.hold[members] = float(min(int(st.job_pcp[i]) for i in members))
            continue
        st.evicted_mask[members] = True
        minimum = max(1, min(jobs[members[0]].min_cardinality, len(members)))
        if elastic is not None and elastic[members].any():
            # A role group: its core is every role's minimum, its extras the elastic members.
            flags = elastic[members]
            members = [i for i, f in zip(members, flags, strict=True) if not f] + [
                i for i, f in zip(members, flags, strict=True) if f
            ]
            minimum = len(members) - int(flags.sum())
        core = new_item(st, EVICTED, members[:minimum], minimum, None)
        st.complex.append(core)
        for extra in members[minimum:]:
            st.complex.append(new_item(st, EXTRA, [extra], 1, None, core))


def load_nodes(st: CycleState) -> np.ndarray:
    """Node state placing starts from: jobs holding their space (displaceable by urgency per
    hold level), evicted jobs reserved per class priority, and the best-fit index.

    Returns the rows of the running jobs that hold their space.
    """
    db, running, nn = st.db, st.running_rows, len(st.nodes)
    shape, req = st.shape_of_job, st.req
    holding = running[~st.evicted_mask[running]]
    db.fixed += sum_by(st.run_node[holding], shape[holding], nn, req)
    finite = holding[np.isfinite(st.hold[holding])]
    for h in np.unique(st.hold[finite]).tolist():
        rows = finite[st.hold[finite] == h]
        arr = db.holds.setdefault(float(h), np.zeros((nn, len(st.dims)), dtype=np.int64))
        scatter_add(arr, st.run_node[rows], req[shape[rows]])
    st.displaceable = finite
    ev = np.flatnonzero(st.evicted_mask)
    db.add_evicted(st.run_node[ev], req[shape[ev]], st.job_pcp[ev])
    db.build_index()
    st.ev_gone = np.zeros(len(st.jobs), dtype=bool)
    return holding
